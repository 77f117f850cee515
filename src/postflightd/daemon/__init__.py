"""``postflightd watch``: the loop, one watched root's work, healing, and its supervision
(systemd notifications, the journal pruner, heap trimming). ``watch/`` finds out which files
changed.

May import: ``pipeline`` and everything below it.
"""
