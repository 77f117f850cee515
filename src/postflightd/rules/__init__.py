"""Validate: the registry of rule codes, their explanations, and the rule sets of the
metadata file and of the console return. Pure: a parsed document in, findings out.

May import: ``models``, ``runs`` and the shared top-level modules.
"""
