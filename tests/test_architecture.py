"""The package layout is the architecture: this test reads every module's imports and holds
them to the layer table below.

Every import counts: at the top of a module, inside a function, and under ``TYPE_CHECKING``
(a type-only import still couples two modules, and a deferred one still closes a cycle).
``from postflightd.x import y`` where ``y`` is a module of package ``x`` counts as importing
that module; otherwise it counts as importing the package ``x`` (its ``__init__``). Importing
``x.y`` also counts as importing each package on the way (``x``), whose ``__init__`` runs
first, unless the importer is inside it (its own packages have begun already). The root
package (``postflightd/__init__.py``, named ``__init__`` here) is a module of layer 0 like any
other.

An import by name (``importlib.import_module``, ``__import__``) counts as well: a literal
name, a name bound only to literals (a loop over a tuple of them, a constant tuple or dict of
them), or an f-string whose literal start is inside the package (counted as importing every
module under that start). One whose name cannot be read so is refused.

The checks are pure functions over ``{module: [Import, ...]}`` so that the tests at the end
can feed them a small made-up module set and watch them fail.
"""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = "postflightd"
SOURCE = Path(__file__).resolve().parent.parent / "src" / PACKAGE

# The declared layering, bottom to top. A module may import from its own unit and from units
# of lower layers; never from a unit of its own layer or above. A unit is a package (all the
# modules under it) or a top-level module. The units of one layer are siblings: none imports
# another (``serve`` never imports ``daemon``, ``hooks`` never ``reporters``), so each can
# change without the others. The shared top-level modules of layer 0 are the one exception:
# they form one unit and may import each other (without cycles); the root package's
# ``__init__`` is one of them. ``daemon.watch`` sits below the rest of ``daemon`` (and below
# ``serve``, which watches files too); the longest matching unit wins.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("__init__", "errors", "inert", "durations", "timestamps", "logs", "words", "concurrency"),
    ("fs", "models", "journal"),
    ("runs",),
    ("rules",),
    ("postflight",),
    ("config",),
    ("project",),
    ("pipeline",),
    ("stats",),
    ("daemon.watch",),
    # What the commands run, each on its own: the daemon, the stop hooks, the terminal's
    # reporters, the dashboard, the MCP server.
    ("daemon", "hooks", "reporters", "serve", "mcp_server"),
    ("commands",),
    ("cli",),
    ("__main__",),
)
SHARED = LAYERS[0]
# The root package's own module: ``postflightd/__init__.py``.
ROOT = "__init__"
# Imports the layering would allow but a unit refuses anyway: postflight is pure (documents
# in, documents out) and never touches the file layer.
FORBIDDEN: Mapping[str, tuple[str, ...]] = {"postflight": ("fs", "project", "pipeline")}
# The phrase a package docstring may use for all of layer 0 in its "May import:" line.
SHARED_PHRASE = "the shared top-level modules"

MAX_TOP_LEVEL_MODULES = 15
MAX_LINES = 500
# A module over MAX_LINES lines says, in its docstring, why it is not split.
WHOLE_MARKER = "Why this module stays whole"


@dataclass(frozen=True)
class Import:
    """One import statement's target, as a module name inside the package, and where it is.

    ``through``: for a package whose ``__init__`` runs only on the way to a module under it,
    that module (empty for an import the statement names).
    """

    target: str
    line: int
    through: str = ""


def module_name(path: Path, root: Path = SOURCE) -> str:
    """``postflightd/fs/atomic.py`` -> ``fs.atomic``; a package's ``__init__`` -> the package;
    the root package's -> ``__init__`` (ROOT)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def read_sources(root: Path = SOURCE) -> dict[str, Path]:
    return {module_name(path, root): path for path in sorted(root.rglob("*.py"))}


def _inside(dotted: str) -> str | None:
    """``postflightd.fs.atomic`` -> ``fs.atomic``; ``postflightd`` -> ROOT; None outside."""
    if dotted == PACKAGE:
        return ROOT
    if dotted.startswith(PACKAGE + "."):
        return dotted[len(PACKAGE) + 1 :]
    return None


def imports_of(
    name: str, tree: ast.Module, known: Iterable[str], is_package: bool = False
) -> list[Import]:
    """Every import of a module of the package in ``tree``, wherever it stands.

    ``known`` is the set of module names (without the ``postflightd.`` prefix) so that
    ``from postflightd.fs import atomic`` resolves to the module ``fs.atomic``.
    """
    modules = set(known)
    found: list[Import] = []

    own_package = name if is_package else name.rpartition(".")[0]
    if name == ROOT:
        own_package = ""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _inside(alias.name)
                if target:
                    found.append(Import(target, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = own_package.split(".") if own_package else []
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join([*base_parts, *([node.module] if node.module else [])])
            else:
                resolved = _inside(node.module or "")
                if resolved is None:
                    continue
                base = "" if resolved == ROOT else resolved
            for alias in node.names:
                sub = f"{base}.{alias.name}" if base else alias.name
                if sub in modules and sub != ROOT:
                    found.append(Import(sub, node.lineno))
                else:
                    found.append(Import(base or ROOT, node.lineno))
    found += dynamic_imports(tree, modules)[0]
    # The packages on the way to each target run their __init__ first.
    for imp in list(found):
        parts = imp.target.split(".")
        for n in range(1, len(parts)):
            package = ".".join(parts[:n])
            if package in modules and not (name == package or name.startswith(package + ".")):
                found.append(Import(package, imp.line, imp.target))
    return sorted(
        {i for i in found if i.target != name}, key=lambda i: (i.line, i.target, i.through)
    )


#: The calls that import a module by name.
DYNAMIC_CALLS = frozenset({"import_module", "__import__"})


def dynamic_imports(tree: ast.Module, known: Iterable[str]) -> tuple[list[Import], list[str]]:
    """The imports by name in ``tree`` that can be read (as Imports of the package's modules;
    a name outside the package is none), and a description of each one that cannot."""
    modules = set(known)
    callees = set(DYNAMIC_CALLS)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "importlib":
            callees |= {a.asname for a in node.names if a.name == "import_module" and a.asname}
    literals = _literal_bindings(tree)
    found: list[Import] = []
    unresolved: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        callee = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if callee not in callees:
            continue
        if not node.args:
            unresolved.append(f"line {node.lineno}: {ast.unparse(node)}")
            continue
        names = _names_of(node.args[0], literals)
        targets: list[str] | None = [] if names is not None else None
        for text, is_prefix in names or ():
            if targets is None:
                break
            if not is_prefix:
                inside = _inside(text)
                if inside is not None:
                    targets.append(inside)
            elif text.startswith(PACKAGE + "."):
                start = text[len(PACKAGE) + 1 :]
                under = sorted(m for m in modules if m.startswith(start) and m != ROOT)
                targets = targets + under if under else None
            elif (PACKAGE + ".").startswith(text) or PACKAGE.startswith(text.rstrip(".")):
                targets = None  # may name any module of the package
        if targets is None:
            unresolved.append(f"line {node.lineno}: {ast.unparse(node)}")
        else:
            found += [Import(t, node.lineno) for t in targets]
    return found, unresolved


def _strings(node: ast.expr) -> tuple[str, ...] | None:
    """The strings of a literal string, tuple, list or set of them, or a dict's values."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return (node.value,)
    items: list[ast.expr | None]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        items = list(node.elts)
    elif isinstance(node, ast.Dict):
        items = list(node.values)
    else:
        return None
    out: list[str] = []
    for item in items:
        if not (isinstance(item, ast.Constant) and isinstance(item.value, str)):
            return None
        out.append(item.value)
    return tuple(out)


def _literal_bindings(tree: ast.Module) -> dict[str, tuple[str, ...] | None]:
    """Each name the module binds -> the strings it can hold, or None when one of its
    bindings is not a literal (or a loop over one)."""
    bindings: dict[str, tuple[str, ...] | None] = {}

    def bind(target: ast.expr, value: tuple[str, ...] | None) -> None:
        if isinstance(target, ast.Name):
            before = bindings.get(target.id, ())
            bindings[target.id] = None if before is None or value is None else before + value
        else:
            for sub in ast.walk(target):
                if isinstance(sub, ast.Name):
                    bindings[sub.id] = None

    def iterated(node: ast.expr) -> tuple[str, ...] | None:
        if isinstance(node, ast.Name):
            return bindings.get(node.id)
        return _strings(node)

    # Assignments first, so that a loop over a constant defined anywhere reads it.
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                bind(target, _strings(node.value))
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            bind(node.target, _strings(node.value))
        elif isinstance(node, (ast.AugAssign, ast.NamedExpr)):
            bind(node.target, None)
        elif isinstance(node, ast.arg):
            bindings[node.arg] = None
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    bind(item.optional_vars, None)
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            bind(node.target, iterated(node.iter))
    return bindings


def _names_of(
    node: ast.expr, literals: Mapping[str, tuple[str, ...] | None]
) -> list[tuple[str, bool]] | None:
    """What an import by name may import: ``(name, False)`` for a whole name, ``(start,
    True)`` for an f-string's literal start; None when it cannot be read."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [(node.value, False)]
    if isinstance(node, ast.JoinedStr):
        start = ""
        for part in node.values:
            if not (isinstance(part, ast.Constant) and isinstance(part.value, str)):
                return [(start, True)]
            start += part.value
        return [(start, False)]
    if isinstance(node, ast.Name):
        values = literals.get(node.id)
        return None if values is None else [(v, False) for v in values]
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        values = literals.get(node.value.id)
        return None if values is None else [(v, False) for v in values]
    return None


def import_graph(root: Path = SOURCE) -> dict[str, list[Import]]:
    sources = read_sources(root)
    graph: dict[str, list[Import]] = {}
    for name, path in sources.items():
        tree = ast.parse(path.read_text("utf-8"), str(path))
        graph[name] = imports_of(name, tree, sources, is_package=path.name == "__init__.py")
    return graph


# -- the checks, pure -------------------------------------------------------------------------


def unit_of(module: str) -> str:
    """The unit of LAYERS a module belongs to (the longest matching prefix)."""
    best = ""
    for layer in LAYERS:
        for unit in layer:
            if (module == unit or module.startswith(unit + ".")) and len(unit) > len(best):
                best = unit
    if not best:
        raise KeyError(f"module {module!r} is in no layer of the table: add it to LAYERS")
    return best


def layer_of(unit: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if unit in layer)


def find_cycles(graph: Mapping[str, Iterable[Import]]) -> list[list[str]]:
    """Each strongly connected set of more than one module, as one cycle through it
    (``[a, b, c, a]``), in a stable order."""
    edges = {
        m: sorted({i.target for i in imports if i.target in graph}) for m, imports in graph.items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(start: str) -> None:
        # Tarjan's algorithm without recursion: (node, iterator over its successors).
        work = [(start, iter(edges[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(edges[succ])))
                    advanced = True
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))

    for module in sorted(edges):
        if module not in index:
            connect(module)
    return [_cycle_through(component, edges) for component in sorted(components)]


def _cycle_through(component: list[str], edges: Mapping[str, list[str]]) -> list[str]:
    """A shortest cycle from the component's first module back to itself (breadth first)."""
    members = set(component)
    start = component[0]
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for succ in edges[node]:
                if succ not in members:
                    continue
                if succ == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [start, *reversed(path[:-1]), start] if node != start else [start, start]
                if succ not in came_from:
                    came_from[succ] = node
                    following.append(succ)
        frontier = following
    raise AssertionError(f"no cycle through {component}")  # unreachable for a real component


def describe_cycle(cycle: list[str], graph: Mapping[str, Iterable[Import]]) -> str:
    steps = []
    for here, there in itertools.pairwise(cycle):
        line = min(i.line for i in graph[here] if i.target == there)
        steps.append(f"{here} (line {line}) imports {there}")
    return "cycle " + " -> ".join(cycle) + ": " + "; ".join(steps)


def upward_imports(graph: Mapping[str, Iterable[Import]]) -> list[str]:
    """Every import of a unit at the module's own layer or above, and every forbidden one."""
    problems = []
    for module in sorted(graph):
        unit = unit_of(module)
        for imp in graph[module]:
            if imp.through:
                # A package's __init__ run on the way to a module under it: the import of that
                # module is the one judged. (``serve`` reaching ``daemon.watch`` runs
                # ``daemon/__init__.py``, which runs no code:
                # test_a_package_above_a_lower_unit_runs_no_code.)
                continue
            target_unit = unit_of(imp.target)
            where = f"{module} (line {imp.line}) imports {imp.target}"
            if target_unit in FORBIDDEN.get(unit, ()):
                problems.append(f"{where}: {unit} never imports {target_unit}")
            elif target_unit == unit or (unit in SHARED and target_unit in SHARED):
                continue
            elif unit.startswith(target_unit + "."):
                # daemon.watch importing daemon's own modules: the package above it
                problems.append(f"{where}: {unit} sits below the rest of {target_unit}")
            elif layer_of(target_unit) == layer_of(unit):
                problems.append(
                    f"{where}: {target_unit} and {unit} are siblings (layer"
                    f" {layer_of(unit)}): neither imports the other"
                )
            elif layer_of(target_unit) > layer_of(unit):
                problems.append(
                    f"{where}: {target_unit} (layer {layer_of(target_unit)}) is not below"
                    f" {unit} (layer {layer_of(unit)})"
                )
    return problems


def allowed_below(unit: str) -> set[str]:
    """The units a package's modules may import, besides their own: every lower layer."""
    return {
        other
        for layer in LAYERS[: layer_of(unit)]
        for other in layer
        if other not in FORBIDDEN.get(unit, ())
    }


def may_import_line(docstring: str | None) -> str | None:
    """The text of the "May import:" paragraph, up to the next blank line."""
    lines = (docstring or "").splitlines()
    for i, line in enumerate(lines):
        if line.startswith("May import:"):
            paragraph = []
            for more in lines[i:]:
                if not more.strip():
                    break
                paragraph.append(more.strip())
            return " ".join(paragraph)
    return None


def named_in(may_import: str) -> set[str]:
    names = set(re.findall(r"``([a-z_.]+)``", may_import))
    if SHARED_PHRASE in may_import:
        names |= set(SHARED)
    return names


def may_import_problems(package: str, docstring: str | None) -> list[str]:
    where = f"{PACKAGE}/__init__.py" if package == ROOT else f"{package}/__init__.py"
    text = may_import_line(docstring)
    if text is None:
        return [f"{where}: its docstring has no line starting 'May import:'"]
    named = named_in(text)
    unit = unit_of(package)
    # A shared module may import the other shared ones (the root package is one).
    expected = allowed_below(unit) | (set(SHARED) if unit in SHARED else set())
    problems = []
    if missing := sorted(expected - named):
        problems.append(f"{where}: 'May import:' does not name {missing}")
    if extra := sorted(named - expected):
        problems.append(f"{where}: 'May import:' names {extra}, not below it")
    return problems


# -- the checks, on the real package ----------------------------------------------------------


@pytest.fixture(scope="module")
def graph() -> dict[str, list[Import]]:
    return import_graph()


def test_no_import_cycle(graph: dict[str, list[Import]]) -> None:
    cycles = find_cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(describe_cycle(c, graph) for c in cycles)


def test_no_import_from_above(graph: dict[str, list[Import]]) -> None:
    problems = upward_imports(graph)
    assert not problems, "imports against the layering:\n" + "\n".join(problems)


def test_every_package_says_what_it_may_import() -> None:
    problems = []
    for init in sorted(SOURCE.rglob("__init__.py")):
        package = module_name(init)
        docstring = ast.get_docstring(ast.parse(init.read_text("utf-8")))
        problems += may_import_problems(package, docstring)
    assert not problems, "\n".join(problems)


def test_every_import_by_name_can_be_read() -> None:
    """An import by name the test cannot read could break the layering unseen: refused."""
    sources = read_sources()
    problems = []
    for name, path in sources.items():
        tree = ast.parse(path.read_text("utf-8"), str(path))
        problems += [f"{name} {u}" for u in dynamic_imports(tree, sources)[1]]
    assert not problems, (
        "imports by a name this test cannot read (write the name as a literal, a constant"
        " tuple or dict of literals, or an f-string starting with the package):\n"
        + "\n".join(problems)
    )


def test_top_level_stays_small() -> None:
    modules = sorted(p.name for p in SOURCE.glob("*.py"))
    assert len(modules) < MAX_TOP_LEVEL_MODULES, (
        f"{len(modules)} modules at the top of src/{PACKAGE}/ (fewer than"
        f" {MAX_TOP_LEVEL_MODULES} wanted): {modules}"
    )


def test_long_modules_say_why_they_stay_whole() -> None:
    problems = []
    for name, path in read_sources().items():
        lines = len(path.read_text("utf-8").splitlines())
        if lines <= MAX_LINES:
            continue
        docstring = ast.get_docstring(ast.parse(path.read_text("utf-8"))) or ""
        if WHOLE_MARKER not in " ".join(docstring.split()):
            problems.append(
                f"{name} has {lines} lines (over {MAX_LINES}) and its docstring does not say"
                f" '{WHOLE_MARKER} ...'"
            )
    assert not problems, "\n".join(problems)


def test_every_module_is_in_a_layer(graph: dict[str, list[Import]]) -> None:
    for module in graph:
        unit_of(module)


def test_a_package_above_a_lower_unit_runs_no_code() -> None:
    """Importing ``daemon.watch`` runs ``daemon/__init__.py`` first: that file is a docstring
    alone, so that a sibling of ``daemon`` (``serve``) reaching ``daemon.watch`` gets nothing
    of ``daemon`` with it."""
    units = {unit for layer in LAYERS for unit in layer}
    problems = []
    for unit in sorted(units):
        package = unit.rpartition(".")[0]
        if not package:
            continue
        init = SOURCE.joinpath(*package.split("."), "__init__.py")
        body = ast.parse(init.read_text("utf-8")).body
        if ast.get_docstring(ast.Module(body, [])) is not None:
            body = body[1:]
        if body:
            problems.append(
                f"{package}/__init__.py runs code (line {body[0].lineno}), and every import of"
                f" {unit}, a layer below it, runs it too: keep it a docstring"
            )
    assert not problems, "\n".join(problems)


# -- the checker itself, on made-up module sets ------------------------------------------------


def fake(edges: Mapping[str, Iterable[str]]) -> dict[str, list[Import]]:
    return {m: [Import(t, n + 1) for n, t in enumerate(ts)] for m, ts in edges.items()}


def test_a_planted_cycle_is_found_and_named() -> None:
    graph = fake(
        {
            "fs.atomic": ["fs.locks"],
            "fs.locks": ["fs.faults"],
            "fs.faults": ["fs.atomic", "errors"],
            "errors": [],
            "models.metadata": ["errors"],
        }
    )
    cycles = find_cycles(graph)
    assert cycles == [["fs.atomic", "fs.locks", "fs.faults", "fs.atomic"]]
    message = describe_cycle(cycles[0], graph)
    assert "fs.faults (line 1) imports fs.atomic" in message
    assert "fs.atomic (line 1) imports fs.locks" in message


def test_two_modules_importing_each_other_are_a_cycle() -> None:
    graph = fake({"daemon.watch.a": ["daemon.watch.b"], "daemon.watch.b": ["daemon.watch.a"]})
    assert find_cycles(graph) == [["daemon.watch.a", "daemon.watch.b", "daemon.watch.a"]]


def test_no_cycle_in_a_layered_set() -> None:
    graph = fake({"cli": ["commands.scan"], "commands.scan": ["fs.atomic"], "fs.atomic": []})
    assert find_cycles(graph) == []


def test_an_upward_import_is_named_with_both_layers() -> None:
    graph = fake({"fs.atomic": ["project.meta_file"], "project.meta_file": ["fs.atomic"]})
    assert upward_imports(graph) == [
        "fs.atomic (line 1) imports project.meta_file: project (layer 6) is not below fs (layer 1)"
    ]


def test_same_layer_and_forbidden_imports_are_refused() -> None:
    graph = fake(
        {
            "fs.atomic": ["models.metadata"],
            "postflight.transform": ["fs.directory", "rules.findings"],
            "daemon.watch.inotify": ["daemon.notes", "project.metafiles"],
            "errors": ["logs"],
        }
    )
    assert upward_imports(graph) == [
        "daemon.watch.inotify (line 1) imports daemon.notes: daemon.watch sits below the rest"
        " of daemon",
        "fs.atomic (line 1) imports models.metadata: models and fs are siblings (layer 1):"
        " neither imports the other",
        "postflight.transform (line 1) imports fs.directory: postflight never imports fs",
    ]


def test_siblings_never_import_each_other() -> None:
    """The daemon, the hooks, the reporters, the dashboard and the MCP server are siblings:
    one importing another is refused, whichever way; each may import what is below them all
    (``serve`` may watch files through ``daemon.watch``)."""
    pairs = [
        ("serve", "daemon"),
        ("daemon", "serve"),
        ("hooks", "reporters"),
        ("reporters", "hooks"),
        ("mcp_server", "serve"),
        ("reporters", "daemon"),
    ]
    for importer, imported in pairs:
        assert layer_of(importer) == layer_of(imported), (importer, imported)
        graph = fake({f"{importer}.a": [f"{imported}.b"]})
        assert upward_imports(graph) == [
            f"{importer}.a (line 1) imports {imported}.b: {imported} and {importer} are"
            f" siblings (layer {layer_of(importer)}): neither imports the other"
        ]
    assert upward_imports(fake({"serve.a": ["daemon.watch.dirty", "stats.b"]})) == []


def test_a_package_on_the_way_is_judged_by_what_it_leads_to() -> None:
    """``serve`` importing ``daemon.watch.dirty`` runs ``daemon``'s __init__ on the way: allowed;
    importing ``daemon.loop`` is refused once, for ``daemon.loop``."""
    known = ["daemon", "daemon.watch", "daemon.watch.dirty", "daemon.loop", "serve", "serve.live"]
    tree = ast.parse(
        "from postflightd.daemon.watch.dirty import DirtySet\n"
        "from postflightd.daemon.loop import Daemon\n"
    )
    imports = imports_of("serve.live", tree, known)
    assert Import("daemon", 1, "daemon.watch.dirty") in imports
    assert upward_imports({"serve.live": imports}) == [
        "serve.live (line 2) imports daemon.loop: daemon and serve are siblings (layer 10):"
        " neither imports the other"
    ]


def test_may_import_must_name_exactly_the_lower_layers() -> None:
    good = (
        "Runs.\n\nMay import: ``fs``, ``models``, ``journal`` and the shared top-level modules.\n"
    )
    assert may_import_problems("runs", good) == []
    assert may_import_problems("runs", "Runs.\n") == [
        "runs/__init__.py: its docstring has no line starting 'May import:'"
    ]
    short = "May import: ``models`` and the shared top-level modules."
    assert may_import_problems("runs", short) == [
        "runs/__init__.py: 'May import:' does not name ['fs', 'journal']"
    ]
    wide = (
        "May import: ``fs``, ``models``, ``journal``, ``rules``\nand the shared top-level modules."
    )
    assert may_import_problems("runs", wide) == [
        "runs/__init__.py: 'May import:' names ['rules'], not below it"
    ]


def test_from_package_import_module_counts_as_the_module() -> None:
    tree = ast.parse(
        "from postflightd.fs import atomic\n"
        "from postflightd.fs.directory import open_dir\n"
        "from postflightd import errors\n"
        "import postflightd.models.metadata\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from postflightd.project import metafiles\n"
        "def later():\n"
        "    from postflightd.rules import LINK\n"
    )
    known = ["fs", "fs.atomic", "fs.directory", "errors", "models.metadata", "project.metafiles"]
    found = [(i.target, i.line) for i in imports_of("pipeline.apply", tree, known)]
    # The package fs runs its __init__ first: an import of it too.
    assert found == [
        ("fs", 1),
        ("fs.atomic", 1),
        ("fs", 2),
        ("fs.directory", 2),
        ("errors", 3),
        ("models.metadata", 4),
        ("project.metafiles", 7),
        ("rules", 9),
    ]


def test_the_root_package_is_imported_like_any_module() -> None:
    tree = ast.parse("from postflightd import __version__\nimport postflightd\n")
    found = [(i.target, i.line) for i in imports_of("errors", tree, [ROOT, "errors"])]
    assert found == [(ROOT, 1), (ROOT, 2)]
    assert upward_imports(fake({ROOT: ["cli"], "cli": [ROOT]})) == [
        "__init__ (line 1) imports cli: cli (layer 12) is not below __init__ (layer 0)"
    ]


def test_a_package_s_own_modules_do_not_import_it_by_being_inside() -> None:
    tree = ast.parse("from postflightd.daemon.watch import dirty\n")
    known = ["daemon", "daemon.watch", "daemon.watch.dirty", "daemon.watch.observer"]
    found = [i.target for i in imports_of("daemon.watch.observer", tree, known)]
    assert found == ["daemon.watch.dirty"]
    found = [i.target for i in imports_of("daemon.loop", tree, known)]
    assert found == ["daemon.watch", "daemon.watch.dirty"]


def _package(root: Path, files: Mapping[str, str]) -> Path:
    """A made-up package ``postflightd`` under ``root``: path -> source."""
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, "utf-8")
    return root


def test_a_cycle_through_a_package_s_init_is_found(tmp_path: Path) -> None:
    """``rules/__init__.py`` imports a module that, through ``runs``, imports one of rules'
    modules: that import runs rules' ``__init__`` first, so it closes a cycle."""
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "rules/__init__.py": "from postflightd.rules.metadata import validate\n",
            "rules/metadata.py": "from postflightd.runs import lifecycle\n",
            "rules/findings.py": "",
            "runs/__init__.py": "",
            "runs/lifecycle.py": "\nfrom postflightd.rules.findings import RULES\n",
        },
    )
    graph = import_graph(root)
    cycles = find_cycles(graph)
    assert cycles == [["rules", "rules.metadata", "runs.lifecycle", "rules"]]
    assert "runs.lifecycle (line 2) imports rules" in describe_cycle(cycles[0], graph)


def test_imports_by_name_are_read_or_refused() -> None:
    tree = ast.parse(
        "import importlib\n"
        "from importlib import import_module as load\n"
        "WEB = ('starlette', 'postflightd.serve.app')\n"
        "KINDS = {'a': 'postflightd.fs.atomic'}\n"
        "def f(name, kind):\n"
        "    importlib.import_module('postflightd.rules.findings')\n"
        "    load(f'postflightd.reporters.{name}')\n"
        "    for module in WEB:\n"
        "        importlib.import_module(module)\n"
        "    __import__(KINDS[kind])\n"
        "    importlib.import_module(name)\n"
        "    load(f'{name}.scan')\n"
        "    importlib.import_module('starlette')\n"
    )
    known = ["rules.findings", "reporters", "reporters.scan", "reporters.style", "serve.app"]
    found, unresolved = dynamic_imports(tree, [*known, "fs", "fs.atomic"])
    assert sorted((i.line, i.target) for i in found) == [
        (6, "rules.findings"),
        (7, "reporters.scan"),
        (7, "reporters.style"),
        (9, "serve.app"),
        (10, "fs.atomic"),
    ]
    assert unresolved == [
        "line 11: importlib.import_module(name)",
        "line 12: load(f'{name}.scan')",
    ]
