"""This process's child processes, read from /proc (the leak check compares them)."""

from __future__ import annotations

import os


def child_processes() -> set[tuple[int, str]]:
    """This process's child processes (pid, command name), zombies included (unwaited)."""
    me = os.getpid()
    children: set[tuple[int, str]] = set()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return children  # no /proc: processes are not checked on this system
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read().decode("utf-8", "replace")
        except OSError:
            continue  # gone meanwhile
        name, _, rest = stat.partition(" (")[2].rpartition(") ")
        fields = rest.split()
        if len(fields) > 1 and fields[1] == str(me):
            children.add((int(entry), f"{name} ({fields[0]})"))
    return children
