"""One module per command: each takes typed arguments and returns an exit code."""
