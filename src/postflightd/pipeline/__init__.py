"""The pipeline every command runs: read and validate (``check``), post-flight under the lock
(``apply``, ``group_commit``), record (``records``), clean up (``cleanup``).

May import: ``journal``, ``postflight``, ``project``, ``config``, ``rules``, ``runs``,
``models``, ``fs`` and the shared top-level modules.
"""
