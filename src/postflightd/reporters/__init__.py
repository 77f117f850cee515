"""One registry of reporters per kind of result; its keys are the command's ``--format`` choices."""
