"""The figures of ``postflightd report``: journal rows into runs (``runs``), runs into figures
(``figures``), and where the rows come from (``source``).

May import: ``pipeline``, ``project``, ``config``, ``postflight``, ``rules``, ``runs``, ``fs``,
``models``, ``journal`` and the shared top-level modules.
"""
