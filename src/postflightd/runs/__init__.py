"""Follow the run: which operation a run performs, its timeout, when it is stuck, what
changed between two sightings of it, and what ``status`` shows of it. Pure: the clock is an
argument.

May import: ``fs``, ``models``, ``journal`` and the shared top-level modules.
"""
