"""One module per command: each takes typed arguments and returns an exit code, running the
pipeline (or the daemon, the report, a hook) and handing the result to its reporters. Each
owns its command line too: ``add_arguments(parser)`` and ``run(args)`` (``cli.COMMANDS``
lists the commands).

May import: ``serve``, ``mcp_server``, ``reporters``, ``hooks``, ``daemon``, ``daemon.watch``,
``stats``, ``pipeline``, ``project``, ``config``, ``postflight``, ``rules``, ``runs``, ``fs``,
``models``, ``journal`` and the shared top-level modules.
"""
