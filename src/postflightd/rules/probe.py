"""What validation is told of an artifact path (relative to the project root) on disk:
``ArtifactState``, and the ``ArtifactProbe`` that answers it.

Data only, as ``rules.context``: reading the project answers it
(``project.artifacts.artifact_probe``), the rules ask it. Apart from ``TaskContext``: every
project opened makes a probe, and a stop with nothing to do then needs neither the task's
record nor its class (a dataclass is 4.5 million instructions to make at start-up).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum


class ArtifactState(Enum):
    OK = "ok"
    MISSING = "missing"
    EMPTY = "empty"
    NOT_A_FILE = "not_a_file"
    OUTSIDE = "outside"
    #: a path the system cannot be asked about: the OS cannot encode it (a lone surrogate).
    UNNAMEABLE = "unnameable"


#: Answers what an artifact path (relative to the project root) is on disk.
ArtifactProbe = Callable[[str], ArtifactState]
