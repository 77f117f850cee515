"""This process's child processes and open file descriptors, read from /proc (the leak check
compares them before and after each test)."""

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


def open_descriptors() -> dict[int, str]:
    """This process's open file descriptors and what each refers to (``/proc/self/fd``'s
    links: a path, ``pipe:[...]``, ``socket:[...]``, ``anon_inode:inotify``)."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return {}  # no /proc: descriptors are not checked on this system
    out: dict[int, str] = {}
    for name in names:
        try:
            out[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue  # the descriptor listdir itself used, closed by now
    return out
