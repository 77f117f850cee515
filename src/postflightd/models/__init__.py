"""What agents write, as pydantic models: the metadata file and the console return.

May import: the shared top-level modules only.
"""
