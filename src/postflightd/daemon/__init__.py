"""``postflightd watch``: the loop, one watched root's work, healing, and its supervision
(systemd notifications, the journal pruner, heap trimming). ``watch/`` finds out which files
changed.

May import: ``daemon.watch``, ``stats``, ``pipeline``, ``project``, ``config``, ``postflight``,
``rules``, ``runs``, ``fs``, ``models``, ``journal`` and the shared top-level modules.
"""
