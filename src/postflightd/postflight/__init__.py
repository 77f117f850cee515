"""Postflight, pure: an outcome applied to state.json's document, state.json's text with its
formatting kept, TODO.md's sections read and edited, errors.json's records. Documents in,
documents out: never the file layer, never reading a project, never the pipeline.

May import: ``rules``, ``runs``, ``models``, ``journal`` and the shared top-level modules.
"""
