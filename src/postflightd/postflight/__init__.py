"""Postflight, pure: an outcome applied to state.json's document, state.json's text with its
formatting kept, TODO.md's sections read and edited, errors.json's records.

May import: ``rules``, ``runs``, ``models`` and the shared top-level modules.
"""
