"""The journal: what postflightd observed, in an embedded SQLite database, and its schema.

May import: the shared top-level modules only.
"""
