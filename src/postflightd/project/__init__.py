"""Read: finding a project root, listing its metadata files, reading each file, state.json
and the artifacts, and setting a project up (``init``).

May import: ``config``, ``rules``, ``runs``, ``models``, ``fs`` and the shared top-level
modules.
"""
