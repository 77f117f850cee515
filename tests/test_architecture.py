"""The package layout is the architecture: this test reads every module's imports and holds
them to the layer table below.

Every import counts: at the top of a module, inside a function, and under ``TYPE_CHECKING``
(a type-only import still couples two modules, and a deferred one still closes a cycle).
``from postflightd.x import y`` where ``y`` is a module of package ``x`` counts as importing
that module; otherwise it counts as importing the package ``x`` (its ``__init__``).

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
# modules under it) or a top-level module. The shared top-level modules of layer 0 form one
# unit: they may import each other (without cycles). ``daemon.watch`` sits below the rest of
# ``daemon``; the longest matching unit wins.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "inert", "durations", "timestamps", "logs", "words", "records"),
    ("fs", "models", "journal"),
    ("runs",),
    ("rules",),
    ("postflight",),
    ("config",),
    ("project",),
    ("pipeline",),
    ("report",),
    ("daemon.watch",),
    ("daemon",),
    ("hooks",),
    ("reporters",),
    ("serve",),
    ("commands",),
    ("cli",),
    ("__main__",),
)
SHARED = LAYERS[0]
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
    """One import statement's target, as a module name inside the package, and where it is."""

    target: str
    line: int


def module_name(path: Path, root: Path = SOURCE) -> str:
    """``postflightd/fs/atomic.py`` -> ``fs.atomic``; a package's ``__init__`` -> the package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def read_sources(root: Path = SOURCE) -> dict[str, Path]:
    return {module_name(path, root): path for path in sorted(root.rglob("*.py"))}


def imports_of(
    name: str, tree: ast.Module, known: Iterable[str], is_package: bool = False
) -> list[Import]:
    """Every import of a module of the package in ``tree``, wherever it stands.

    ``known`` is the set of module names (without the ``postflightd.`` prefix) so that
    ``from postflightd.fs import atomic`` resolves to the module ``fs.atomic``.
    """
    modules = set(known)
    found: list[Import] = []

    def inside(dotted: str) -> str | None:
        if dotted == PACKAGE:
            return ""
        if dotted.startswith(PACKAGE + "."):
            return dotted[len(PACKAGE) + 1 :]
        return None

    own_package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = inside(alias.name)
                if target:
                    found.append(Import(target, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = own_package.split(".") if own_package else []
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join([*base_parts, *([node.module] if node.module else [])])
            else:
                resolved = inside(node.module or "")
                if resolved is None:
                    continue
                base = resolved
            for alias in node.names:
                sub = f"{base}.{alias.name}" if base else alias.name
                if sub in modules:
                    found.append(Import(sub, node.lineno))
                elif base:
                    found.append(Import(base, node.lineno))
    return sorted({i for i in found if i.target != name}, key=lambda i: (i.line, i.target))


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
        if not module:
            continue  # the root package: the version and the project URL
        unit = unit_of(module)
        for imp in graph[module]:
            if imp.target == "":
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
            elif layer_of(target_unit) >= layer_of(unit):
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
    text = may_import_line(docstring)
    if text is None:
        return [f"{package}/__init__.py: its docstring has no line starting 'May import:'"]
    named = named_in(text)
    expected = allowed_below(unit_of(package))
    problems = []
    if missing := sorted(expected - named):
        problems.append(f"{package}/__init__.py: 'May import:' does not name {missing}")
    if extra := sorted(named - expected):
        problems.append(f"{package}/__init__.py: 'May import:' names {extra}, not below it")
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
        if not package:
            continue  # the root package only holds the version and the project URL
        docstring = ast.get_docstring(ast.parse(init.read_text("utf-8")))
        problems += may_import_problems(package, docstring)
    assert not problems, "\n".join(problems)


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
        if module:
            unit_of(module)


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
    graph = fake({"fs.atomic": ["project.metadata"], "project.metadata": ["fs.atomic"]})
    assert upward_imports(graph) == [
        "fs.atomic (line 1) imports project.metadata: project (layer 6) is not below fs (layer 1)"
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
        "fs.atomic (line 1) imports models.metadata: models (layer 1) is not below fs (layer 1)",
        "postflight.transform (line 1) imports fs.directory: postflight never imports fs",
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
    assert found == [
        ("fs.atomic", 1),
        ("fs.directory", 2),
        ("errors", 3),
        ("models.metadata", 4),
        ("project.metafiles", 7),
        ("rules", 9),
    ]
