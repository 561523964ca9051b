"""The import layers: no package-level cycle, and the transport below the pipeline.

Every ``import`` in ``service/`` and ``clients/`` counts, at module level and inside functions;
imports under ``if TYPE_CHECKING:`` do not (they never run). A module belongs to the package
named by the first two parts of its path (``faithjudge.api.routes`` -> ``faithjudge.api``), and the
graph of those packages must have no cycle. ``service/faithjudge/transport/`` may import the
standard
library, third-party libraries, itself and two leaf modules (``faithjudge.errors``,
``faithjudge.private_files``, which import nothing of FaithJudge): nothing of the pipeline.
"""

from __future__ import annotations

import ast
import graphlib
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOPS = ("faithjudge", "faithjudge_client")
SOURCES = (ROOT / "service", ROOT / "clients")
FIRST_PARTY = {"faithjudge", "faithjudge_client", "benchmarks", "tests"}
TRANSPORT = "faithjudge.transport"
TRANSPORT_MAY_IMPORT = (
    "faithjudge.errors",
    "faithjudge.private_files",
    "faithjudge_client.retry",
    "faithjudge_client.errors",
    TRANSPORT,
)

Edges = dict[tuple[str, str], list[str]]
"""(importing package, imported package) -> the import sites, as ``path:line``."""


def _module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(root: Path, dotted: str) -> bool:
    base = root.joinpath(*dotted.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the nodes inside ``if TYPE_CHECKING:`` bodies (their ``else`` does run)."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        test = node.test
        name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
        if name == "TYPE_CHECKING":
            skipped.update(id(inner) for stmt in node.body for inner in ast.walk(stmt))
    return skipped


def imports_of(root: Path, path: Path) -> Iterator[tuple[str, int]]:
    """(imported module, line) for every import of ``path`` that runs."""
    module = _module_name(root, path)
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    skipped = _type_checking_only(tree)
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            yield target, node.lineno
            for alias in node.names:
                # ``from faithjudge import errors`` imports the module faithjudge.errors
                if _is_module(root, f"{target}.{alias.name}"):
                    yield f"{target}.{alias.name}", node.lineno


def package_of(module: str) -> str:
    return ".".join(module.split(".")[:2])


def package_edges(root: Path, tops: tuple[str, ...]) -> Edges:
    edges: Edges = defaultdict(list)
    for top in tops:
        if not (root / top).is_dir():
            continue
        for path in sorted((root / top).rglob("*.py")):
            source = package_of(_module_name(root, path))
            for target, line in imports_of(root, path):
                if target.split(".")[0] not in tops:
                    continue
                imported = package_of(target)
                site = f"{path.relative_to(root)}:{line}"
                if imported != source and site not in edges[source, imported]:
                    edges[source, imported].append(site)
    return edges


def find_cycle(edges: Edges) -> list[str] | None:
    """One package-level cycle (first node repeated at the end), or None."""
    graph: dict[str, set[str]] = defaultdict(set)
    for source, imported in edges:
        graph[source].add(imported)
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        return list(exc.args[1])
    return None


def describe(cycle: list[str], edges: Edges) -> str:
    # graphlib lists the cycle against the dependency direction: each node is imported by the next
    steps = list(zip(cycle[1:], cycle[:-1], strict=True))
    return "\n".join(
        f"  {a} imports {b} at {', '.join(edges.get((a, b), ['?'])[:3])}" for a, b in steps
    )


def test_no_package_level_import_cycle() -> None:
    edges: Edges = defaultdict(list)
    for source in SOURCES:
        for key, sites in package_edges(source, TOPS).items():
            edges[key].extend(sites)
    # the walk saw the tree: the pipeline reaches the evaluators through the transport
    assert ("faithjudge.pipeline", TRANSPORT) in edges
    assert ("faithjudge.evaluators", TRANSPORT) in edges
    cycle = find_cycle(edges)
    assert cycle is None, "package-level import cycle:\n" + describe(cycle, edges)


def test_transport_imports_nothing_of_the_pipeline() -> None:
    files = sorted((ROOT / "service" / "faithjudge" / "transport").rglob("*.py"))
    assert files, "service/faithjudge/transport/ is missing"
    offending = [
        f"{path.relative_to(ROOT)}:{line} imports {target}"
        for path in files
        for target, line in imports_of(ROOT / "service", path)
        if target.split(".")[0] in FIRST_PARTY
        and not any(target == ok or target.startswith(ok + ".") for ok in TRANSPORT_MAY_IMPORT)
    ]
    assert not offending, "the transport reaches above its layer:\n" + "\n".join(offending)


# --- the checker itself, on a small synthetic tree -------------------------------------------


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
            "app/__init__.py": "",
            "app/low/__init__.py": "",
            "app/low/core.py": "import json\n",
            "app/high/__init__.py": "from .view import show\n",
            "app/high/view.py": "from ..low import core\n\ndef show():\n    return core\n",
        },
    )


def test_checker_resolves_relative_and_package_imports(toy: Path) -> None:
    edges = package_edges(toy, ("app",))
    assert set(edges) == {("app.high", "app.low")}
    assert edges["app.high", "app.low"] == ["app/high/view.py:1"]
    assert find_cycle(edges) is None


def test_checker_finds_a_cycle_through_a_function_level_import(toy: Path) -> None:
    (toy / "app/low/core.py").write_text("def late():\n    from app.high.view import show\n")
    edges = package_edges(toy, ("app",))
    cycle = find_cycle(edges)
    assert cycle is not None and set(cycle) == {"app.high", "app.low"}
    assert "app/low/core.py:2" in describe(cycle, edges)


def test_checker_ignores_type_checking_imports_but_not_their_else(toy: Path) -> None:
    guarded = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from app.high import view\n"
    (toy / "app/low/core.py").write_text(guarded)
    assert find_cycle(package_edges(toy, ("app",))) is None
    (toy / "app/low/core.py").write_text(guarded + "else:\n    import app.high\n")
    assert find_cycle(package_edges(toy, ("app",))) is not None
