"""What agents write, as data: the metadata file and the console return as pydantic models,
the metadata file's words that need no model (``terms``: statuses, artifact types, known
fields), the names of the files in a task directory and how their bytes read as JSON
(``files``), and the TODO.md link format (``todo_link``). Pure: no I/O.

May import: the shared top-level modules only.
"""
