"""The layer map of docs/ARCHITECTURE.md, enforced module by module.

The "may import" table of ``docs/ARCHITECTURE.md`` is the data: one row per module or package
(its path in the first column), and in the last column the modules and packages it may import,
as dotted names in backticks. Every module of ``service/faithjudge/``,
``clients/faithjudge_client/`` and ``benchmarks/`` matches its most specific row (a module's own
row before its package's), and each of its imports of ``faithjudge``, ``faithjudge_client``,
``benchmarks`` or ``tests`` must be its own row's, one of its enclosing packages (they ran
before it), or named in that last column. A column that says "the standard library only"
refuses third-party imports as well, but for the installed packages it names.

Every import counts: at module level, inside functions, and under ``if TYPE_CHECKING:`` (never
run, but type checkers follow it, and it becomes a real import the day it is moved out). So
does every lazy ``"package.module:object"`` reference passed to a call (how the registries of
``faithjudge_client.registry`` take their entries): it is an import put off to first use, and
must name a module that exists. On top of the table, no module may reach itself through its
imports (file-level cycles) and no package through its modules' imports (package-level cycles);
type-checking imports are edges of both graphs, lazy references are not (see ``graph_of``).
"""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from faithjudge_client.registry import _REF as REFERENCE_FORM

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
# the most specific root first: a path is read against the first root that holds it
ROOTS = (ROOT / "service", ROOT / "clients", ROOT)
TOPS = ("faithjudge", "faithjudge_client", "benchmarks")
UNMAPPED = ("tests",)  # first-party, not walked: imported only where a row names it

_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")

IMPORT, TYPING, REFERENCE = "import", "typing", "reference"
_HOW = {
    IMPORT: "imports {}",
    TYPING: "imports {} (under if TYPE_CHECKING:)",
    REFERENCE: "refers to {} (a lazy registry reference)",
}


@dataclass(frozen=True, slots=True)
class Import:
    source: str  # the importing module
    target: str  # the imported module (or package), resolved to one that exists
    site: str  # ``path:line``
    kind: str = IMPORT  # IMPORT, TYPING or REFERENCE

    def __str__(self) -> str:
        return f"{self.site}: {self.source} " + _HOW[self.kind].format(self.target)


@dataclass(frozen=True, slots=True)
class Row:
    key: str  # dotted name of the module or package
    package: bool  # a folder: the row covers every module under it
    allowed: tuple[str, ...]  # first-party modules and packages
    stdlib_only: bool  # third-party imports refused, but for ``third_party``
    where: str  # ``ARCHITECTURE.md:line``, for messages
    third_party: tuple[str, ...] = ()  # installed packages a standard-library row names

    def covers(self, module: str) -> bool:
        return module == self.key or (self.package and module.startswith(self.key + "."))

    def allows(self, module: str, target: str) -> bool:
        if self.covers(target) or module.startswith(target + "."):
            return True
        return any(target == ok or target.startswith(ok + ".") for ok in self.allowed)


# --- the modules and their imports ---------------------------------------------------------------


def _module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_file(roots: Sequence[Path], dotted: str) -> Path | None:
    for root in roots:
        base = root.joinpath(*dotted.split("."))
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the nodes inside ``if TYPE_CHECKING:`` bodies (their ``else`` does run)."""
    guarded: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        test = node.test
        name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
        if name == "TYPE_CHECKING":
            guarded.update(id(inner) for stmt in node.body for inner in ast.walk(stmt))
    return guarded


def _constant_strings(tree: ast.Module) -> dict[str, str]:
    """The module-level names bound once to a string known from the source alone.

    Registrations build their references from such constants (``f"{_BUILTIN}:openai"``), so a
    reference is read through them; a name bound twice is dropped, being no longer one string.
    """
    known: dict[str, str] = {}
    seen: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            targets, value_node = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value_node = [stmt.target], stmt.value
        else:
            continue
        for target in targets:
            if not isinstance(target, ast.Name):
                continue
            value = _static_string(value_node, known)
            if target.id in seen or value is None:
                known.pop(target.id, None)
            else:
                known[target.id] = value
            seen.add(target.id)
    return known


def _static_string(node: ast.expr, known: dict[str, str]) -> str | None:
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.Name):
        return known.get(node.id)
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            inner = value.value if isinstance(value, ast.FormattedValue) else value
            if isinstance(value, ast.FormattedValue) and (
                value.conversion != -1 or value.format_spec
            ):
                return None
            text = _static_string(inner, known)
            if text is None:
                return None
            parts.append(text)
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _static_string(node.left, known), _static_string(node.right, known)
        return None if left is None or right is None else left + right
    return None


def _registry_refs(tree: ast.Module, tops: Sequence[str]) -> Iterator[tuple[str, int]]:
    """(module, line) for every lazy ``"package.module:object"`` reference passed to a call.

    A reference is an import that happens later (``Registry`` resolves it on first use), so it
    is held to the same row as an import written out.
    """
    known = _constant_strings(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        for argument in (*node.args, *(keyword.value for keyword in node.keywords)):
            for inner in ast.walk(argument):
                if not isinstance(inner, ast.expr):
                    continue
                text = _static_string(inner, known)
                # the very form the registry resolves, so no reference it takes goes unseen
                if text is not None and REFERENCE_FORM.match(text):
                    target = text.partition(":")[0]
                    if target.split(".")[0] in tops:
                        yield target, node.lineno


def _raw_imports(
    module: str, path: Path, roots: Sequence[Path], tops: Sequence[str]
) -> Iterator[tuple[str, int, str]]:
    """(imported name, line, kind) for every import of ``path`` and every reference in it.

    ``from pkg import mod`` imports the module ``pkg.mod`` (the package ran already);
    ``from pkg import name`` imports ``pkg`` itself. The kind is ``import``, ``typing`` (under
    ``if TYPE_CHECKING:``) or ``reference`` (a lazy registry reference).
    """
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    guarded = _type_checking_only(tree)
    for node in ast.walk(tree):
        kind = TYPING if id(node) in guarded else IMPORT
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno, kind
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            names_only = False
            for alias in node.names:
                if _module_file(roots, f"{target}.{alias.name}") is not None:
                    yield f"{target}.{alias.name}", node.lineno, kind
                else:
                    names_only = True
            if names_only:
                yield target, node.lineno, kind
    for name, line in dict.fromkeys(_registry_refs(tree, tops)):
        yield name, line, REFERENCE


def collect_imports(
    base: Path, roots: Sequence[Path], tops: Sequence[str], unmapped: Sequence[str] = ()
) -> tuple[dict[str, Path], list[Import], list[Import]]:
    """The modules under ``roots``/``tops``, their first-party imports and their others.

    ``unmapped`` names first-party packages that are not walked (they have no rows, so only a
    row that names them lets a module import them). A first-party name that is not a module
    itself (``import pkg.mod.attr``) is resolved to the nearest module that holds it.
    """
    modules: dict[str, Path] = {}
    for root in roots:
        for top in tops:
            for path in sorted((root / top).rglob("*.py")):
                modules[_module_name(root, path)] = path
    first = (*tops, *unmapped)
    first_party: list[Import] = []
    others: list[Import] = []
    for module, path in modules.items():
        for name, line, kind in _raw_imports(module, path, roots, first):
            site = f"{path.relative_to(base)}:{line}"
            if name.split(".")[0] not in first:
                others.append(Import(module, name, site, kind))
                continue
            target = name
            # a reference names a module exactly; one that names none is kept as written, to
            # be reported (it would fail only when first used)
            while (
                kind != REFERENCE
                and target not in modules
                and _module_file(roots, target) is None
                and "." in target
            ):
                target = target.rsplit(".", 1)[0]
            first_party.append(Import(module, target, site, kind))
    return modules, first_party, others


# --- the table -----------------------------------------------------------------------------------


def read_table(text: str, base: Path, roots: Sequence[Path], source: str) -> list[Row]:
    """The rows of the table whose last column is "may import"; a malformed row fails here."""
    rows: list[Row] = []
    lines = text.splitlines()
    header = next(
        (
            n
            for n, line in enumerate(lines)
            if line.startswith("|") and line.rstrip("| ").lower().endswith("may import")
        ),
        None,
    )
    assert header is not None, f"{source}: no table with a 'may import' column"
    for n in range(header + 2, len(lines)):
        line = lines[n]
        if not line.startswith("|"):
            break
        where = f"{source}:{n + 1}"
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        paths = re.findall(r"`([^`]+)`", cells[0])
        assert len(paths) == 1, f"{where}: the first column must name one path, got {cells[0]!r}"
        rows.append(_row(paths[0], cells[-1], base, roots, where))
    assert rows, f"{source}: the 'may import' table has no rows"
    return rows


def _row(path_text: str, allowed_cell: str, base: Path, roots: Sequence[Path], where: str) -> Row:
    path = base / path_text
    root = next((r for r in roots if path.is_relative_to(r)), None)
    assert root is not None and path.exists(), (
        f"{where}: {path_text} is not a module or folder of {', '.join(str(r) for r in roots)}"
    )
    package = path.is_dir()
    key = ".".join(path.relative_to(root).parts) if package else _module_name(root, path)
    allowed: list[str] = []
    third_party: list[str] = []
    for name in re.findall(r"`([^`]+)`", allowed_cell):
        top = name.split(".")[0]
        if any((r / top).is_dir() or (r / f"{top}.py").is_file() for r in roots):
            assert _DOTTED.fullmatch(name) and _module_file(roots, name) is not None, (
                f"{where}: may-import entry `{name}` is not a module or package"
            )
            allowed.append(name)
        else:
            # not ours: a third-party package, which must be one that is installed
            assert _DOTTED.fullmatch(name) and importlib.util.find_spec(top) is not None, (
                f"{where}: may-import entry `{name}` is neither ours nor an installed package"
            )
            third_party.append(name)
    stdlib_only = "standard library only" in allowed_cell.lower()
    return Row(key, package, tuple(allowed), stdlib_only, where, tuple(third_party))


def row_of(rows: Sequence[Row], module: str) -> Row | None:
    """The most specific row that covers ``module``."""
    matching = [row for row in rows if row.covers(module)]
    return max(matching, key=lambda row: len(row.key), default=None)


def layer_violations(
    rows: Sequence[Row], modules: dict[str, Path], first_party: list[Import], others: list[Import]
) -> list[str]:
    problems = [
        f"{module} has no row in the table" for module in modules if not row_of(rows, module)
    ]
    for imp in first_party:
        row = row_of(rows, imp.source)
        if row is not None and not row.allows(imp.source, imp.target):
            problems.append(f"{imp}, which its row ({row.key}, {row.where}) does not allow")
    walked = {module.split(".")[0] for module in modules}
    problems.extend(
        f"{imp}, which is no module"
        for imp in first_party
        if imp.kind == REFERENCE
        and imp.target.split(".")[0] in walked
        and imp.target not in modules
    )
    stdlib = sys.stdlib_module_names
    for imp in others:
        row = row_of(rows, imp.source)
        if row is None or not row.stdlib_only or imp.target.split(".")[0] in stdlib:
            continue
        if not any(imp.target == ok or imp.target.startswith(ok + ".") for ok in row.third_party):
            problems.append(f"{imp}, but its row ({row.where}) allows the standard library only")
    return problems


# --- cycles --------------------------------------------------------------------------------------

Graph = dict[str, dict[str, list[str]]]
"""importer -> imported -> the import sites."""


def graph_of(imports: Sequence[Import], depth: int = 0) -> Graph:
    """The import graph of modules, or of packages (the first ``depth`` name parts) if given.

    Imports under ``if TYPE_CHECKING:`` are edges: mypy, pyright and ``typing.get_type_hints``
    follow them, and a circle through one turns into an ImportError the day it is moved out.
    A lazy registry reference is not: it points along the layers, and exists precisely so that
    a module can name the one that imports it (``jobs/interface.py`` its SQL store) without a
    circle; the table still holds it to its row.
    """
    graph: Graph = defaultdict(lambda: defaultdict(list))
    for imp in imports:
        if imp.kind == REFERENCE:
            continue
        source, target = imp.source, imp.target
        if depth:
            source = ".".join(source.split(".")[:depth])
            target = ".".join(target.split(".")[:depth])
        if source != target:
            site = imp.site if imp.kind == IMPORT else f"{imp.site} (TYPE_CHECKING)"
            graph[source][target].append(site)
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, {}):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def describe(component: Sequence[str], graph: Graph) -> str:
    members = set(component)
    return "\n".join(
        f"  {a} imports {b} at {', '.join(graph[a][b][:3])}"
        for a in component
        for b in sorted(graph.get(a, {}))
        if b in members
    )


# --- the real tree against the real table --------------------------------------------------------


@pytest.fixture(scope="module")
def tree() -> tuple[dict[str, Path], list[Import], list[Import]]:
    return collect_imports(ROOT, ROOTS, TOPS, UNMAPPED)


@pytest.fixture(scope="module")
def table() -> list[Row]:
    return read_table(ARCHITECTURE.read_text(encoding="utf-8"), ROOT, ROOTS, "ARCHITECTURE.md")


def test_the_table_is_the_one_read(
    table: list[Row], tree: tuple[dict[str, Path], list[Import], list[Import]]
) -> None:
    modules, first_party, _ = tree
    rows = {module: row_of(table, module) for module in modules}
    # a row that exists, read with its column, and an edge it allows that the walk saw
    transport = rows["faithjudge.transport.resilience"]
    assert transport is not None and transport.key == "faithjudge.transport" and transport.package
    assert "faithjudge.errors" in transport.allowed
    pipeline = rows["faithjudge.pipeline.scorer"]
    assert pipeline is not None and pipeline.key == "faithjudge.pipeline.scorer"
    assert pipeline.allows("faithjudge.pipeline.scorer", "faithjudge.transport.resilience")
    assert "faithjudge.transport.resilience" in {
        i.target for i in first_party if i.source == "faithjudge.pipeline.scorer"
    }
    # the most specific row wins: the client's wire contracts have their own
    lines, sdk = rows["faithjudge_client.lines"], rows["faithjudge_client.client"]
    assert lines is not None and lines.key == "faithjudge_client.lines"
    assert sdk is not None and sdk.key == "faithjudge_client"
    # the benchmarks are mapped too, with the fakes of the tests they drive
    bench, common = rows["benchmarks.generation_speed"], rows["benchmarks._common"]
    assert bench is not None and bench.key == "benchmarks" and bench.package
    assert common is not None and common.key == "benchmarks._common"
    edges = {(i.source, i.target, i.kind) for i in first_party}
    assert ("benchmarks.generation_speed", "tests.fakes.tiny_vlm", IMPORT) in edges
    # and the walk reads type-checking imports and the registries' lazy references
    assert ("faithjudge.judges", "faithjudge.judges.builtin", REFERENCE) in edges
    assert {i.kind for i in first_party if i.source.startswith("faithjudge.")} == {
        IMPORT,
        TYPING,
        REFERENCE,
    }


def test_every_import_is_one_its_row_allows(
    table: list[Row], tree: tuple[dict[str, Path], list[Import], list[Import]]
) -> None:
    problems = layer_violations(table, *tree)
    assert not problems, "imports outside the layer map of docs/ARCHITECTURE.md:\n" + "\n".join(
        problems
    )


def test_no_file_level_import_cycle(
    tree: tuple[dict[str, Path], list[Import], list[Import]],
) -> None:
    graph = graph_of(tree[1])
    found = cycles(graph)
    assert not found, "file-level import cycles:\n" + "\n\n".join(describe(c, graph) for c in found)


def test_no_package_level_import_cycle(
    tree: tuple[dict[str, Path], list[Import], list[Import]],
) -> None:
    graph = graph_of(tree[1], depth=2)
    assert "faithjudge.transport" in graph["faithjudge.pipeline"]
    found = cycles(graph)
    assert not found, "package-level import cycles:\n" + "\n\n".join(
        describe(c, graph) for c in found
    )


def test_the_client_imports_nothing_of_the_service(
    table: list[Row], tree: tuple[dict[str, Path], list[Import], list[Import]]
) -> None:
    _, first_party, _ = tree
    client_imports = [i for i in first_party if i.source.split(".")[0] == "faithjudge_client"]
    assert client_imports, "the walk saw no import of clients/faithjudge_client/"
    reaching = [
        f"{i.site} imports {i.target}"
        for i in client_imports
        if i.target.split(".")[0] == "faithjudge"
    ]
    assert not reaching, "the SDK reaches into the service:\n" + "\n".join(reaching)
    # nor may its rows let it
    client_rows = [row for row in table if row.key.split(".")[0] == "faithjudge_client"]
    assert {row.key for row in client_rows} >= {"faithjudge_client", "faithjudge_client.lines"}
    allowing = [
        row.where for row in client_rows for a in row.allowed if a.startswith("faithjudge.")
    ]
    assert not allowing, f"rows letting the SDK import the service: {allowing}"


def test_nothing_imports_the_benchmarks_or_the_tests(
    table: list[Row], tree: tuple[dict[str, Path], list[Import], list[Import]]
) -> None:
    _, first_party, _ = tree
    reaching = [
        str(i)
        for i in first_party
        if i.source.split(".")[0] in ("faithjudge", "faithjudge_client")
        and i.target.split(".")[0] in ("benchmarks", *UNMAPPED)
    ]
    assert not reaching, "the package reaches into benchmarks/ or tests/:\n" + "\n".join(reaching)
    allowing = [
        row.where
        for row in table
        if row.key.split(".")[0] != "benchmarks"
        for a in row.allowed
        if a.split(".")[0] in ("benchmarks", *UNMAPPED)
    ]
    assert not allowing, f"rows letting the package import benchmarks/ or tests/: {allowing}"


_SCORER = ("faithjudge.pipeline.scorer", "faithjudge.judges")


@pytest.mark.parametrize(
    ("module", "forbidden"),
    [
        ("faithjudge.reports.gate", _SCORER),
        ("faithjudge.agreement", _SCORER),
        ("faithjudge.audits", _SCORER),
        ("faithjudge.sidecar.cli", (*_SCORER, "faithjudge.pipeline.runtime", "faithjudge.runners")),
    ],
)
def test_a_module_loads_nothing_above_its_layer(module: str, forbidden: tuple[str, ...]) -> None:
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        capture_output=True,
        text=True,
        check=True,
    )
    # ``import time: self [us] | cumulative | imported package`` (nesting shown by indent)
    loaded = {
        line.rsplit("|", 1)[1].strip()
        for line in run.stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }
    assert module in loaded, run.stderr[-2000:]
    pulled = sorted(m for m in loaded if any(m == f or m.startswith(f + ".") for f in forbidden))
    assert not pulled, f"import {module} loads {', '.join(pulled)}"


# --- the checker itself, on a small synthetic tree and table -------------------------------------

TOY_TABLE = """\
# Layers

| module or package | what it is | may import |
|---|---|---|
| `src/app/low/` | the bottom | the standard library only |
| `src/app/mid.py` | between | `app.low` |
| `src/app/high/` | the top | `app.mid`, `app.low.core` |
| `src/app/high/special.py` | a module with a narrower row | `app.low.core` |
| `src/app/__init__.py` | the package | nothing |

After the table.
"""


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    return _tree(
        tmp_path,
        {
            "src/app/__init__.py": "",
            "src/app/low/__init__.py": "",
            "src/app/low/core.py": "import json\n",
            "src/app/low/extra.py": "from . import core\n",
            "src/app/mid.py": "from app.low import extra\n",
            "src/app/high/__init__.py": "from .view import show\n",
            "src/app/high/view.py": (
                "from ..low import core\nfrom app import mid\n\ndef show():\n    return core\n"
            ),
            "src/app/high/special.py": "import app.low.core\n",
        },
    )


def _check(base: Path, table: str = TOY_TABLE) -> tuple[list[str], list[list[str]]]:
    roots = (base / "src",)
    modules, first_party, others = collect_imports(base, roots, ("app",))
    rows = read_table(table, base, roots, "MAP.md")
    return layer_violations(rows, modules, first_party, others), cycles(graph_of(first_party))


def test_checker_passes_a_tree_that_keeps_its_map(toy: Path) -> None:
    problems, found = _check(toy)
    assert problems == [] and found == []
    _, first_party, _ = collect_imports(toy, (toy / "src",), ("app",))
    edges = {(i.source, i.target) for i in first_party}
    # relative imports, ``from pkg import module`` and ``import a.b.c`` all resolve to modules
    assert ("app.high.view", "app.low.core") in edges
    assert ("app.high.view", "app.mid") in edges
    assert ("app.high", "app.high.view") in edges
    assert ("app.high.special", "app.low.core") in edges
    assert ("app.low.extra", "app.low.core") in edges


def test_checker_fails_on_a_new_upward_import(toy: Path) -> None:
    late = "import json\n\ndef late():\n    from app.mid import x\n"
    (toy / "src/app/low/core.py").write_text(late)
    problems, _ = _check(toy)
    assert len(problems) == 1
    assert problems[0].startswith("src/app/low/core.py:4: app.low.core imports app.mid")
    assert "MAP.md:5" in problems[0]


def test_checker_matches_the_most_specific_row(toy: Path) -> None:
    # ``app.mid`` is allowed to the package ``app.high`` but not to its narrower row
    (toy / "src/app/high/special.py").write_text("import app.low.core\nfrom app import mid\n")
    problems, _ = _check(toy)
    assert problems == [
        "src/app/high/special.py:2: app.high.special imports app.mid, which its row "
        "(app.high.special, MAP.md:8) does not allow"
    ]


def test_checker_refuses_third_party_where_the_row_says_standard_library_only(toy: Path) -> None:
    (toy / "src/app/low/core.py").write_text("import json\nimport numpy\n")
    problems, _ = _check(toy)
    assert len(problems) == 1 and "imports numpy" in problems[0]
    assert "standard library only" in problems[0]


def test_checker_fails_on_an_upward_import_under_type_checking(toy: Path) -> None:
    # never run, still an edge: type checkers follow it, and it closes circles through
    # high.view (which imports low.core and mid, both leading back to low.core)
    guarded = "import typing\nif typing.TYPE_CHECKING:\n    from app.high import view\n"
    (toy / "src/app/low/core.py").write_text(guarded)
    problems, found = _check(toy)
    assert problems == [
        "src/app/low/core.py:3: app.low.core imports app.high.view (under if TYPE_CHECKING:), "
        "which its row (app.low, MAP.md:5) does not allow"
    ]
    assert found == [["app.high.view", "app.low.core", "app.low.extra", "app.mid"]]
    _, first_party, _ = collect_imports(toy, (toy / "src",), ("app",))
    text = describe(found[0], graph_of(first_party))
    assert "app.low.core imports app.high.view at src/app/low/core.py:3 (TYPE_CHECKING)" in text
    # its ``else`` runs, and is an import like any other
    flipped = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    pass\nelse:\n"
    (toy / "src/app/low/core.py").write_text(flipped + "    import app.high.view\n")
    problems, _ = _check(toy)
    assert problems == [
        "src/app/low/core.py:5: app.low.core imports app.high.view, "
        "which its row (app.low, MAP.md:5) does not allow"
    ]


def test_checker_refuses_a_third_party_type_import_unless_the_row_names_it(toy: Path) -> None:
    guarded = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pydantic import X\n"
    (toy / "src/app/low/core.py").write_text(guarded)
    problems, _ = _check(toy)
    assert problems == [
        "src/app/low/core.py:3: app.low.core imports pydantic (under if TYPE_CHECKING:), "
        "but its row (MAP.md:5) allows the standard library only"
    ]
    naming = TOY_TABLE.replace(
        "| the standard library only |", "| the standard library only, and `pydantic` |"
    )
    assert _check(toy, naming) == ([], [])
    misspelt = naming.replace("`pydantic`", "`pydantik`")
    with pytest.raises(AssertionError, match=r"MAP.md:5: may-import entry `pydantik` is neither"):
        _check(toy, misspelt)


_REGISTERING = """\
_HIGH = "app.high"
_SHOW = f"{_HIGH}.view:show"
_UNUSED = "app.mid:not_passed_to_a_call"


def register(name, entry, *, options=None):
    return name, entry, options


register("json", "json:dumps")
"""


@pytest.mark.parametrize(
    ("call", "target"),
    [
        ('register("probe", "app.high.view:show")\n', "app.high.view"),
        ('register("x", "app.low.extra:x", options="app.high.view:Options")\n', "app.high.view"),
        ('register("probe", _SHOW)\n', "app.high.view"),
        ('register("probe", f"{_HIGH}.special:" + "build")\n', "app.high.special"),
    ],
    ids=["literal", "keyword", "constant", "joined"],
)
def test_checker_fails_on_an_upward_registry_reference(toy: Path, call: str, target: str) -> None:
    # the lowest layer naming the top one by reference (nothing imported until first use); a
    # reference-shaped string that no call receives (``_UNUSED``) is none
    (toy / "src/app/low/core.py").write_text(_REGISTERING + call)
    problems, found = _check(toy)
    assert problems == [
        f"src/app/low/core.py:11: app.low.core refers to {target} "
        "(a lazy registry reference), which its row (app.low, MAP.md:5) does not allow"
    ]
    # high.view imports low.core, yet a reference is no circle: it exists to avoid one
    assert found == []


def test_checker_takes_a_reference_its_row_allows_and_refuses_one_to_no_module(
    toy: Path,
) -> None:
    (toy / "src/app/high/view.py").write_text(
        "from ..low import core\nfrom app import mid\n\n"
        'core.register("probe", "app.low.core:register")\n'
    )
    (toy / "src/app/low/core.py").write_text(_REGISTERING)
    assert _check(toy) == ([], [])
    _, first_party, _ = collect_imports(toy, (toy / "src",), ("app",))
    assert Import("app.high.view", "app.low.core", "src/app/high/view.py:4", REFERENCE) in (
        first_party
    )
    (toy / "src/app/low/core.py").write_text(_REGISTERING + 'register("x", "app.low.gone:y")\n')
    problems, _ = _check(toy)
    assert problems == [
        "src/app/low/core.py:11: app.low.core refers to app.low.gone "
        "(a lazy registry reference), which is no module"
    ]


def test_checker_holds_imports_of_an_unmapped_package_to_the_rows(toy: Path) -> None:
    # ``helpers`` is ours but not walked (as the tests are): only a row naming it allows it
    _tree(toy, {"src/helpers/__init__.py": "", "src/helpers/fake.py": ""})
    (toy / "src/app/mid.py").write_text("from app.low import extra\nfrom helpers import fake\n")
    roots = (toy / "src",)
    modules, first_party, others = collect_imports(toy, roots, ("app",), ("helpers",))
    assert "helpers.fake" not in modules
    assert Import("app.mid", "helpers.fake", "src/app/mid.py:2") in first_party
    assert [i for i in others if i.target.startswith("helpers")] == []
    rows = read_table(TOY_TABLE, toy, roots, "MAP.md")
    assert layer_violations(rows, modules, first_party, others) == [
        "src/app/mid.py:2: app.mid imports helpers.fake, which its row (app.mid, MAP.md:6) "
        "does not allow"
    ]
    naming = TOY_TABLE.replace("| `app.low` |", "| `app.low`, `helpers.fake` |")
    rows = read_table(naming, toy, roots, "MAP.md")
    assert layer_violations(rows, modules, first_party, others) == []


def test_checker_fails_on_a_file_level_cycle_inside_one_package(toy: Path) -> None:
    # both modules are in app.low: no package-level cycle, no layer broken, still a cycle
    late = "import json\n\ndef late():\n    from . import extra\n"
    (toy / "src/app/low/core.py").write_text(late)
    problems, found = _check(toy)
    assert problems == []
    assert found == [["app.low.core", "app.low.extra"]]
    _, first_party, _ = collect_imports(toy, (toy / "src",), ("app",))
    assert cycles(graph_of(first_party, depth=2)) == []
    text = describe(found[0], graph_of(first_party))
    assert "app.low.core imports app.low.extra at src/app/low/core.py:4" in text
    assert "app.low.extra imports app.low.core at src/app/low/extra.py:1" in text


def test_checker_fails_on_a_module_without_a_row_and_on_a_row_without_a_module(toy: Path) -> None:
    _tree(toy, {"src/app/loose.py": "import json\n"})
    problems, _ = _check(toy)
    assert problems == ["app.loose has no row in the table"]
    renamed = TOY_TABLE.replace("`src/app/mid.py`", "`src/app/middle.py`")
    with pytest.raises(AssertionError, match=r"MAP.md:6: src/app/middle.py is not a module"):
        _check(toy, renamed)
    misspelt = TOY_TABLE.replace("`app.mid`, ", "`app.midd`, ")
    with pytest.raises(AssertionError, match=r"MAP.md:7: may-import entry `app.midd`"):
        _check(toy, misspelt)
