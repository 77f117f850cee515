"""``postflightd mcp``: the stdio MCP server an agent asks about its own metadata file before
it writes it (docs/mcp.md).

Read-only: the tools are ``commands.mcp``'s (the code of ``scan``, ``status``, ``rules`` and
``schema``), handed in; this package is the protocol, on the official MCP Python SDK, the
``[mcp]`` extra: nothing else in postflightd imports it.

May import: ``daemon.watch``, ``stats``, ``pipeline``, ``project``, ``config``, ``postflight``,
``rules``, ``runs``, ``fs``, ``models``, ``journal`` and the shared top-level modules.
"""
