"""Which metadata files changed: inotify on Linux, watchdog's observer elsewhere, or polling.

May import: ``project`` and everything below it.
"""
