"""``postflightd report``: journal rows into runs, runs into figures.

May import: ``journal``, ``config``, ``rules``, ``runs``, ``models`` and the shared top-level
modules.
"""
