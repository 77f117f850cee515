"""Each rule's condition, declared once beside the rule and read by the rule itself.

A rule of the metadata file asks one thing of the document: is the duration negative, is a
session of another form, is an artifact listed twice. That question is a small function,
*the condition*, whose body is one ``return`` of an expression over named values, registered
here by ``@condition``; the rule calls it, then words what it found. The registration says
which field of the document each named value reads (``duration="metadata.duration_seconds"``).

From these declarations ``rules.quiet_source`` writes the quiet check (``rules.metadata``'s
``_quiet``): every condition's expression, inlined, over the fields of a clean document, in
one straight-line function that builds no finding. A scan mostly meets clean documents that
no rule flags; asking each rule through its own function for those costs a clean file about
two thirds more instructions, the generated function costs what a hand-written one did.

No import beyond the standard library: the rules import this at start-up.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final, TypeVar

__all__ = ["CONDITIONS", "Condition", "codes_of", "condition", "registered"]

Predicate = TypeVar("Predicate", bound=Callable[..., bool])


class Condition:
    """One rule's condition: the codes its rule gives when it holds, the function that asks
    it, which document field each of its arguments reads, and, for a condition no clean
    document can meet, why (the quiet check then leaves it out).

    A plain class: the rules' modules register about thirty at start-up, which every command
    that validates pays, and making a dataclass or a named tuple class costs more than all
    of them (0.4 to 1 ms).
    """

    __slots__ = ("codes", "never_clean", "predicate", "reads")

    def __init__(
        self,
        codes: str,
        predicate: Callable[..., bool],
        reads: Mapping[str, str],
        never_clean: str | None = None,
    ) -> None:
        self.codes = codes
        self.predicate = predicate
        self.reads = reads
        self.never_clean = never_clean


#: Every condition, in the order the rules' modules declare them.
CONDITIONS: Final[list[Condition]] = []


def condition(
    codes: str, *, never_clean: str | None = None, **reads: str
) -> Callable[[Predicate], Predicate]:
    """Register the decorated function as the condition of the rule giving ``codes``
    (``"PF406"``, or a range ``"PF501-PF503"``). Each keyword names an argument and the field it
    reads (``"metadata.duration_seconds"``, ``"artifacts[].path"`` for each artifact's);
    the other arguments are what the quiet check is given (``rules.quiet_source``)."""

    def register(predicate: Predicate) -> Predicate:
        CONDITIONS.append(Condition(codes, predicate, dict(reads), never_clean))
        return predicate

    return register


def codes_of(found: Condition) -> list[str]:
    """The codes ``found`` stands for, a range spelt out."""
    first, _, last = found.codes.partition("-")
    if not last:
        return [first]
    return [f"PF{n}" for n in range(int(first[2:]), int(last[2:]) + 1)]


def registered(module: str) -> list[Condition]:
    """The conditions the module named ``module`` declares."""
    return [c for c in CONDITIONS if getattr(c.predicate, "__module__", None) == module]
