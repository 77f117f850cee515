"""Validate: the registry of rule codes, their explanations, the rule sets of the metadata
file and of the console return, and what validation is told of the project (``context``,
``probe``). Pure: a parsed document in, findings out.

May import: ``runs``, ``fs``, ``models``, ``journal`` and the shared top-level modules.
"""
