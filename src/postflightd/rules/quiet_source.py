"""The quiet check's source, written from the rules' conditions (``rules.conditions``).

``quiet_source`` takes every condition a rule set declares and the clean shape of its document
(``models.metadata_fields.SHAPE``), and writes one function that asks them all of a clean
document, straight-line, without building a finding: each condition's ``return`` expression,
its arguments replaced by the fields they read. A field the shape requires is read by index
(``metadata["session_id"]``), an optional one with ``get``, and only where its object is
there; each artifact's fields inside one loop over the list; each read once, just before the
first condition that needs it. The function returns False at the first condition that holds.

Run by the test that keeps the generated function current (``tests/rules/test_quiet.py``,
rewritten with ``POSTFLIGHTD_UPDATE_CORE_SCHEMA=1``), never at run time.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from postflightd.rules.conditions import Condition, registered

#: ``{path}`` in an expression of ``names``: the value of that field.
_FIELD_MARK: Final = re.compile(r"\{([^{}]+)\}")


def expression_of(found: Condition) -> ast.expr:
    """The expression the condition's function returns (its body: a docstring at most, then
    one ``return``)."""
    source = textwrap.dedent(inspect.getsource(found.predicate))
    function = ast.parse(source).body[0]
    if not isinstance(function, ast.FunctionDef):
        raise TypeError(f"{found.codes}: a condition is a plain function")
    body = function.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        raise TypeError(f"{found.codes}: a condition's body is one return of an expression")
    return body[0].value


def arguments_of(found: Condition) -> list[str]:
    return list(inspect.signature(found.predicate).parameters)


class _Renamed(ast.NodeTransformer):
    def __init__(self, names: Mapping[str, str]) -> None:
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.names:
            return ast.copy_location(ast.Name(self.names[node.id], node.ctx), node)
        return node


def _local(path: str) -> str:
    """The local variable holding a field: ``metadata.session_id`` -> ``metadata_session_id``;
    each item's (``artifacts[].path``) ``artifacts_path``; the items before it
    (``artifacts[<].path``) ``artifacts_path_before``."""
    before = "[<]" in path
    name = path.replace("[<]", "").replace("[]", "").replace(".", "_")
    return f"{name}_before" if before else name


@dataclass
class _Writer:
    shape: Mapping[str, Mapping[str, tuple[str, bool]]]
    names: Mapping[str, str]
    params: Sequence[str]
    lines: list[str] = field(default_factory=list)
    done: set[str] = field(default_factory=set)
    #: what was emitted inside the loop (read anew for each item, forgotten after it)
    in_loop: set[str] = field(default_factory=set)
    #: the locals a clean document always gives a value (never None), and those of them
    #: always true (text, never blank)
    present: set[str] = field(default_factory=set)
    true: set[str] = field(default_factory=set)
    #: the locals read only once: their read is written where it is used instead, so that it
    #: runs only when the condition gets that far
    once: set[str] = field(default_factory=set)
    inlined: dict[str, str] = field(default_factory=dict)
    #: every local assigned, in the loop or not
    assigned: set[str] = field(default_factory=set)
    #: every name the conditions' tests use (counted to find those used once)
    uses: list[str] = field(default_factory=list)
    #: the list being looped over (``artifacts``), and its item's variable
    loop: str | None = None
    #: what the loop must add to each set of earlier items' fields: (set, item's field)
    carried: list[tuple[str, str]] = field(default_factory=list)

    #: the local of the optional object the current block has asked is there
    guard: str | None = None

    def emit(self, line: str) -> None:
        depth = 1 + (self.loop is not None) + (self.guard is not None)
        self.lines.append("    " * depth + line)

    def value(self, name: str) -> str:
        """The local holding ``name`` (a field path or a key of ``names``), emitted if not yet."""
        if name in self.params:
            return name
        if name in self.names:
            local = name
            if local not in self.done:
                text = _FIELD_MARK.sub(lambda m: self.value(m.group(1)), self.names[name])
                self.assign(local, text)
            return local
        return self.field(name)

    def field(self, path: str) -> str:
        local = _local(path)
        if local in self.done:
            return local
        parent, _, key = path.rpartition(".")
        if not parent:
            holder, kind = "doc", ""
        elif parent.endswith("[]"):
            holder, kind = "item", parent.removeprefix(".")
            if self.loop != parent[:-2]:
                raise ValueError(f"{path}: an item's field outside the loop over {parent[:-2]}")
        elif parent.endswith("[<]"):
            raise ValueError(f"{path}: the earlier items' field is declared before the loop")
        else:
            holder, kind = self.field(parent), parent
        field_kind, required = self.shape[kind][key]
        read = f"{holder}[{key!r}]" if required else f"{holder}.get({key!r})"
        optional_holder = holder not in ("doc", "item", self.guard) and not self._required(parent)
        if required and not optional_holder:
            self.present.add(local)
            if field_kind == "text":
                self.true.add(local)
        if optional_holder:
            read = f"({read} if {holder} is not None else None)"
        self.assign(local, read)
        return local

    def assign(self, local: str, text: str) -> None:
        if local in self.once:
            self.inlined[local] = text
        else:
            self.emit(f"{local} = {text}")
        self.emitted(local)

    def emitted(self, local: str) -> None:
        self.done.add(local)
        self.assigned.add(local)
        if self.loop or self.guard:
            self.in_loop.add(local)

    def _required(self, path: str) -> bool:
        """Whether a clean document always has the object at ``path``."""
        parent, _, key = path.rpartition(".")
        if parent and not self._required(parent):
            return False
        return self.shape[parent][key][1]

    def check(self, found: Condition) -> None:
        """Emit the condition's test; one that reads only fields of one optional object, and
        cannot hold without it, under a test that the object is there (no read of its fields
        then runs for a document without it, the usual case)."""
        holder = self._holder_needed(found)
        if holder is None:
            self._check(found)
            return
        self.emit(f"if {self.field(holder)} is not None:")
        self.guard = self.field(holder)
        self._check(found)
        self.guard = None
        self.done -= self.in_loop
        self.in_loop.clear()

    def _holder_needed(self, found: Condition) -> str | None:
        """The optional object all the condition's arguments are fields of, when the
        condition cannot hold with all of them absent; else None."""
        reads = [found.reads.get(argument) for argument in arguments_of(found)]
        if self.loop is not None or not all(r and "[" not in r and "." in r for r in reads):
            return None
        holders = {r.rpartition(".")[0] for r in reads if r}
        holder = holders.pop()
        if holders or self._required(holder):
            return None
        absent = _Absent(arguments_of(found)).visit(expression_of(found))
        settled = _Folded(set(), set()).visit(absent)
        return holder if isinstance(settled, ast.Constant) and settled.value is False else None

    def _check(self, found: Condition) -> None:
        renamed: dict[str, str] = {}
        for argument in arguments_of(found):
            read = found.reads.get(argument)
            if read is not None and "[<]" in read:
                renamed[argument] = _local(read)
            else:
                renamed[argument] = self.value(read or argument)
        test = _Folded(self.present, self.true).visit(_Renamed(renamed).visit(expression_of(found)))
        test = _Inlined(self.inlined).visit(test)
        if local_uses := [n.id for n in ast.walk(test) if isinstance(n, ast.Name)]:
            self.uses.extend(local_uses)
        if isinstance(test, ast.Constant) and not test.value:
            self.emit(f"# {found.codes}: never on a clean document")
            return
        if (
            isinstance(test, ast.Call)
            and isinstance(test.func, ast.Name)
            and test.func.id == "bool"
            and len(test.args) == 1
            and not test.keywords
        ):
            test = test.args[0]  # ``if`` asks the truth of the value itself: no call needed
        self.emit(f"if {ast.unparse(test)}:  # {found.codes}")
        self.emit("    return False")


def _fields_read(found: Condition, names: Mapping[str, str]) -> list[str]:
    """The fields the condition reads: through its arguments, and the names they are."""
    fields: list[str] = []
    pending = [found.reads.get(argument, argument) for argument in arguments_of(found)]
    while pending:
        name = pending.pop()
        if name in names:
            pending.extend(_FIELD_MARK.findall(names[name]))
        elif "." in name or name in ("started_at", "artifacts", "errors") or "[" in name:
            fields.append(name)
    return fields


class _Absent(ast.NodeTransformer):
    """Each of ``arguments`` None."""

    def __init__(self, arguments: Sequence[str]) -> None:
        self.arguments = arguments

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id not in self.arguments:
            return node
        return ast.copy_location(ast.Constant(None), node)


class _Inlined(ast.NodeTransformer):
    def __init__(self, inlined: Mapping[str, str]) -> None:
        self.inlined = inlined

    def visit_Name(self, node: ast.Name) -> ast.AST:
        text = self.inlined.get(node.id)
        if text is None:
            return node
        return ast.parse(text, mode="eval").body


class _Folded(ast.NodeTransformer):
    """What a clean document settles, settled in the source: a field it always has is never
    None, its text is never blank (so true); ``and`` and ``or`` lose what that settles."""

    def __init__(self, present: set[str], true: set[str]) -> None:
        self.present = present
        self.true = true

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        if (
            isinstance(node.left, ast.Constant)
            and node.left.value is None
            and len(node.ops) == 1
            and isinstance(node.ops[0], ast.Is | ast.IsNot)
            and isinstance(node.comparators[0], ast.Constant)
            and node.comparators[0].value is None
        ):
            return ast.Constant(isinstance(node.ops[0], ast.Is))
        if (
            isinstance(node.left, ast.Name)
            and node.left.id in self.present
            and len(node.ops) == 1
            and isinstance(node.ops[0], ast.Is | ast.IsNot)
            and isinstance(node.comparators[0], ast.Constant)
            and node.comparators[0].value is None
        ):
            return ast.Constant(isinstance(node.ops[0], ast.IsNot))
        return node

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        settles = isinstance(node.op, ast.Or)  # the value that decides: True for or
        values: list[ast.expr] = []
        for given in node.values:
            value = given
            if isinstance(given, ast.Name) and given.id in self.true:
                value = ast.Constant(True)
            if isinstance(value, ast.Constant) and isinstance(value.value, bool):
                if value.value is settles:
                    return ast.Constant(settles)
                continue
            values.append(value)
        if not values:
            return ast.Constant(not settles)
        return values[0] if len(values) == 1 else ast.BoolOp(node.op, values)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.Not) and isinstance(node.operand, ast.Constant):
            return ast.Constant(not node.operand.value)
        return node


def _list_of(found: Condition, names: Mapping[str, str]) -> str | None:
    """The list whose items the condition is asked of, or None for the document's."""
    lists = {read.partition("[")[0] for read in _fields_read(found, names) if "[" in read}
    if len(lists) > 1:
        raise ValueError(f"{found.codes}: a condition reads the items of one list at most")
    return next(iter(lists), None)


def quiet_source(
    conditions: Sequence[Condition],
    shape: Mapping[str, Mapping[str, tuple[str, bool]]],
    names: Mapping[str, str],
    params: Sequence[str],
    returns: str,
    header: str,
) -> str:
    """The quiet check's source: ``header`` (the ``def`` line and docstring) and the body.

    ``names`` gives the arguments that read no field, as expressions over ``params`` (the
    function's own), other names and fields (``{metadata.agent_type}``); the function returns
    ``returns`` when no condition holds."""
    asked = [c for c in conditions if c.never_clean is None]
    first = _write(asked, shape, names, params, returns, set())
    counts = Counter(first.uses)
    # A read used once, by one test, moves into it; what the lines or the result use stays.
    kept = Counter(re.findall(r"\w+", "\n".join(first.lines)))
    once = {
        local
        for local in first.assigned
        if counts[local] == 1 and kept[local] == 2 and local != returns
    }
    lines = _hoisted(_write(asked, shape, names, params, returns, once).lines)
    return header + "\n".join(lines) + "\n"


#: A member of a module's class (``Status.IMPLEMENTED``): a global and an attribute to look up.
_MEMBER: Final = re.compile(r"\b([A-Z][a-z]\w*)\.([A-Z][A-Z0-9_]*)\b")


def _hoisted(lines: list[str]) -> list[str]:
    """``lines`` with each class member they name more than once read once, into a local,
    first thing: the conditions compare the status with ``Status.IMPLEMENTED`` in three
    rules, and an enumeration's member is looked up at about 110 ns each time (a local: 16)."""
    code = [line.partition("  #")[0] for line in lines]
    counts = Counter(m.group(0) for line in code for m in _MEMBER.finditer(line))
    taken = set(re.findall(r"\w+", "\n".join(code)))
    hoisted: dict[str, str] = {}
    for member, count in counts.items():
        local = member.replace(".", "_").lower()
        if count > 1 and local not in taken:
            hoisted[member] = local
    if not hoisted:
        return lines
    out = [f"    {local} = {member}" for member, local in hoisted.items()]
    for line, part in zip(lines, code, strict=True):
        rest = line[len(part) :]
        out.append(_MEMBER.sub(lambda m: hoisted.get(m.group(0), m.group(0)), part) + rest)
    return out


def _write(
    asked: Sequence[Condition],
    shape: Mapping[str, Mapping[str, tuple[str, bool]]],
    names: Mapping[str, str],
    params: Sequence[str],
    returns: str,
    once: set[str],
) -> _Writer:
    writer = _Writer(shape, names, params, once=once)
    # The document's conditions in the order of their codes, then each list's in one loop.
    for found in sorted((c for c in asked if _list_of(c, names) is None), key=lambda c: c.codes):
        writer.check(found)
    lists: dict[str, list[Condition]] = {}
    for found in asked:
        name = _list_of(found, names)
        if name is not None:
            lists.setdefault(name, []).append(found)
    for name, inside in lists.items():
        carried: dict[str, str] = {}
        for found in inside:
            for read in found.reads.values():
                if "[<]" in read:
                    carried[_local(read)] = read.replace("[<]", "[]")
        for local in carried:
            writer.emit(f"{local}: set[object] = set()")
        writer.emit(f"for item in {writer.field(name)}:")
        writer.loop = name
        for found in inside:
            writer.check(found)
        for local, read in carried.items():
            writer.emit(f"{local}.add({writer.field(read)})")
        writer.loop = None
        writer.done -= writer.in_loop
        writer.in_loop.clear()
    writer.emit(f"return {writer.value(returns)}")
    return writer


# --- the metadata file's quiet check --------------------------------------------------------

#: Where the generated function starts and ends in ``rules.metadata``.
BEGIN: Final = "# BEGIN the quiet check"
END: Final = "# END the quiet check."

_METADATA_HEADER: Final = '''def _quiet(
    doc: dict[str, Any],
    status: Status,
    ctx: TaskContext,
    now: datetime,
    probe: ArtifactProbe | None,
) -> datetime | Literal[False] | None:
    """For a clean document (``rules.clean``): when the run started (None: not said) if no
    rule's condition holds, else False.

    Most files of a scan are clean and get no finding at all. Said of a clean document, whose
    every value is of its type and no text blank, each rule's condition
    (``rules.conditions``) comes down to a comparison or two, asked here in one pass without
    building a finding; a document any of them holds for gets False and goes through the
    rules, which word what they find. Written by ``rules.quiet_source`` from the conditions.
    """
'''


def metadata_quiet(
    shape: Mapping[str, Mapping[str, tuple[str, bool]]] | None = None,
) -> str:
    """The source of ``rules.metadata._quiet``, from the conditions of the metadata file's
    rules (``rules.toolkit``'s and ``rules.metadata``'s) over ``shape`` (the models')."""
    from postflightd.models.metadata_fields import SHAPE
    from postflightd.rules import metadata, toolkit

    return quiet_source(
        [*registered(toolkit.__name__), *registered(metadata.__name__)],
        SHAPE if shape is None else shape,
        metadata.QUIET_NAMES,
        ("doc", "status", "ctx", "now", "probe"),
        "started",
        _METADATA_HEADER,
    )


def generated_part(text: str) -> tuple[int, int]:
    """Where the generated function lies in ``text`` (the module's): from the line after the
    BEGIN comment's paragraph to the END comment."""
    begin = text.index(BEGIN)
    start = text.index("\ndef ", begin) + 1
    return start, text.index(END, start)
