"""Agent runtimes' stop hooks: read the runtime's input, post-flight, answer in its protocol.

May import: ``daemon.watch``, ``stats``, ``pipeline``, ``project``, ``config``, ``postflight``,
``rules``, ``runs``, ``fs``, ``models``, ``journal`` and the shared top-level modules.
"""
