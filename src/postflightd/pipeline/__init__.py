"""The pipeline every command runs: read and validate (``check``), post-flight under the lock
(``apply``, ``group_commit``), record (``records``), clean up (``cleanup``); and the
pipeline's results (``results``).

May import: ``project``, ``config``, ``postflight``, ``rules``, ``runs``, ``fs``, ``models``,
``journal`` and the shared top-level modules.
"""
