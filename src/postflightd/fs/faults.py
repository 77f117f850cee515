"""Test hooks in the write path: a crash or a fault at a named point, chosen by environment.

Every step of a write that a crash could interrupt carries a label (``state:after-replace``,
``delete:after-rename`` ...). The crash and fault tests set an environment variable naming one
label and run a real process; in production none of these variables is set and both hooks
return at once.
"""

from __future__ import annotations

import errno
import os
import signal
from typing import Final

CRASH_ENV: Final = "POSTFLIGHTD_CRASH_AT"
STOP_ENV: Final = "POSTFLIGHTD_STOP_AT"
FAULT_ENV: Final = "POSTFLIGHTD_FAULT_AT"
FAULT_WHILE_ENV: Final = "POSTFLIGHTD_FAULT_WHILE"


def crash_point(label: str) -> None:
    """Test hook: die by SIGKILL here when ``$POSTFLIGHTD_CRASH_AT`` names this point.

    ``$POSTFLIGHTD_STOP_AT`` stops the process (SIGSTOP) there instead, every time it passes,
    so a test can run another command at exactly that instant and SIGCONT it after.
    """
    if os.environ.get(CRASH_ENV) == label:
        os.kill(os.getpid(), signal.SIGKILL)
    if os.environ.get(STOP_ENV) == label:
        os.kill(os.getpid(), signal.SIGSTOP)


def fault_point(label: str) -> None:
    """Test hook: raise an ``OSError`` here when ``$POSTFLIGHTD_FAULT_AT`` names this point.

    ``POSTFLIGHTD_FAULT_AT=todo:write=ENOSPC,errors:replace=EIO`` (errno names; EIO when none
    is given). With ``$POSTFLIGHTD_FAULT_WHILE=PATH`` the fault fires only while PATH exists,
    so a test can end a simulated full disk under a running daemon.
    """
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    for item in spec.split(","):
        name, _, code = item.strip().partition("=")
        if name != label:
            continue
        flag = os.environ.get(FAULT_WHILE_ENV)
        if flag and not os.path.lexists(flag):
            return
        number = getattr(errno, code.strip() or "EIO", errno.EIO)
        raise OSError(number, os.strerror(number))
