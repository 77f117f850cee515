"""What every benchmark prints first: the machine its figures were measured on."""

from __future__ import annotations

import contextlib
import os
import platform
from pathlib import Path


def describe() -> str:
    """OS, CPU model, CPU count (and how many this process may use), Python."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (
        f"{platform.system()} {platform.release()} {platform.machine()}; {cpu}; "
        f"{os.cpu_count()} CPUs ({usable} usable); Python {platform.python_version()} "
        f"({platform.python_implementation()})"
    )
