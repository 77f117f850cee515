"""The file layer: everything that reads, writes, renames or deletes inside a project.

Directories opened once without following links (``directory``), the project lock and the
daemon's instance lock (``locks``), atomic replacement with fsync and the guarded delete
(``atomic``), the crash litter a killed writer leaves (``litter``), and the test hooks that
crash or fail a write at a named point (``faults``).

May import: the shared top-level modules only.
"""
