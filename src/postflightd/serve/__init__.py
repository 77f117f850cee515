"""``postflightd serve``: the live dashboard in a browser and the Prometheus ``/metrics``.

Read-only: it reads the trees (through the same code as ``status``, handed in by
``commands.serve``) and the journal (read-only connections), and never writes to a project.
Its third-party stack (Starlette, uvicorn, sse-starlette, prometheus-client) is the ``[web]``
extra: nothing else in postflightd imports this package.

May import: ``daemon.watch``, ``stats``, ``pipeline``, ``project``, ``config``, ``postflight``,
``rules``, ``runs``, ``fs``, ``models``, ``journal`` and the shared top-level modules.
"""
