"""Helpers shared by the tests, one module per kind of thing they hold.

``documents`` the sample state.json entries and metadata documents; ``project`` the one
builder of a sample project tree and the writers of files into it; ``waiting`` the polling
wait with a deadline; ``processes`` this process's children; ``paths`` the repository and its
fixtures; ``inprocess_daemon`` the daemon in-process on a fake clock; ``daemon_process``
``postflightd watch`` as a real process. Fixtures live in the conftest.py files, not here.
"""
