"""Read: finding a project root (``root``), listing its metadata files (``metafiles``),
reading each file and its marker (``metadata``), state.json (``state``, ``scan_state``) and
the artifacts (``artifacts``), and setting a project up (``setup``, the pure part of
``init``; ``hook_files``, the stop hook in each agent runtime's own files; ``adoption``, what
the project's workflow already does, looked at before init writes).

May import: ``config``, ``postflight``, ``rules``, ``runs``, ``fs``, ``models``, ``journal`` and
the shared top-level modules.
"""
