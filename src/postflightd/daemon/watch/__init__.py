"""Which metadata files changed: inotify on Linux (``inotify``, ``inotify_tree``), watchdog's
observer elsewhere, or polling (``observer``), all handing their paths to the loop through
``dirty``. Below the rest of ``daemon``: it never imports the loop.

May import: ``stats``, ``pipeline``, ``project``, ``config``, ``postflight``, ``rules``,
``runs``, ``fs``, ``models``, ``journal`` and the shared top-level modules.
"""
