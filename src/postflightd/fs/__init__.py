"""The file layer: everything that reads, writes, renames or deletes inside a project.

Directories opened once without following links, the project lock and the daemon's instance
lock, atomic replacement with fsync, and the crash litter a killed writer leaves.

May import: the shared top-level modules (``errors``, ``inert``, ``logs``) only.
"""
