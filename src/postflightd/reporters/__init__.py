"""One registry of reporters per kind of result; its keys are the command's ``--format``
choices. A reporter gets a result and a stream and writes; it never runs a command.

May import: ``hooks``, ``daemon``, ``daemon.watch``, ``report``, ``pipeline``, ``project``,
``config``, ``postflight``, ``rules``, ``runs``, ``fs``, ``models``, ``journal`` and the shared
top-level modules.
"""
