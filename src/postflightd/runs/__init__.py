"""Follow the run: which operation a run performs, its timeout, when it is stuck, and what
changed between two sightings of it. Pure: the clock is an argument.

May import: ``models`` and the shared top-level modules.
"""
