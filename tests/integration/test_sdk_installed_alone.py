"""``pip install ./clients`` gives a working SDK without the service's stack.

A fresh virtualenv gets ``faithjudge-client`` from ``clients/`` (its build backend and its
dependencies come from the package index: without one the test skips and says so). Its
``pip list`` holds none of the service's heavy dependencies, and its python, importing
``faithjudge_client`` from that virtualenv alone, submits a batch to a real ``faithjudge serve``
(the checkout's, on loopback, SQLite in a temporary data dir, the offline lexicon judge) and
reads every result back. The dependencies ``clients/pyproject.toml`` declares are exactly the
third-party packages the SDK's modules import.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest

from tests.fixtures_service import free_port, serve_process

ROOT = Path(__file__).resolve().parents[2]
CLIENTS = ROOT / "clients"
SERVICE_ONLY = {"fastapi", "sqlalchemy", "pandas", "scipy", "numpy", "openai", "torch"}
QUESTION = "Is there a pleural effusion on the left? (yes or no)"
COT = (
    "<think>\n<step>The left costophrenic angle is blunted by a meniscus-shaped opacity.</step>\n"
    "</think>\n<answer>yes</answer>"
)

# Runs with the fresh virtualenv's python: only the SDK and its dependencies are importable.
CLIENT_SCRIPT = """
import json, sys
import faithjudge_client
from faithjudge_client import Client

with Client(sys.argv[1]) as fj:
    batch = fj.submit(sys.argv[2])
    status = fj.wait(batch.id, timeout=120)
    results = [
        {"item_id": r.item_id, "metrics": sorted(r.metrics)} for r in fj.iter_results(batch.id)
    ]
print(json.dumps({"module": faithjudge_client.__file__, "status": status.status,
                  "results": results}))
"""


def _skip_unless_the_index_answers(python: Path, scratch: Path, failure: str) -> None:
    """Tell an unreachable index (skip) from a broken package (fail)."""
    config = tomllib.loads((CLIENTS / "pyproject.toml").read_text(encoding="utf-8"))
    backend = config["build-system"]["requires"]
    probe = subprocess.run(
        [python, "-m", "pip", "download", "--no-deps", "--quiet", "-d", scratch, *backend],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if probe.returncode != 0:
        reason = probe.stderr.strip()[-500:]
        pytest.skip(
            f"the package index cannot be reached for the build backend {backend}: {reason}"
        )
    pytest.fail(f"pip install {CLIENTS} failed while the index answers:\n{failure}")


def _imported_distributions() -> set[str]:
    """The distributions of the third-party modules the SDK's source imports."""
    tops: set[str] = set()
    for source in (CLIENTS / "faithjudge_client").rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                tops.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                tops.add(node.module.split(".")[0])
    third_party = tops - set(sys.stdlib_module_names) - {"__future__", "faithjudge_client"}
    owners = importlib.metadata.packages_distributions()
    return {_canonical(dist) for top in third_party for dist in owners.get(top, [top])}


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_declared_dependencies_are_what_the_sdk_imports() -> None:
    config = tomllib.loads((CLIENTS / "pyproject.toml").read_text(encoding="utf-8"))
    declared = {
        _canonical(re.split(r"[\s\[<>=!~;]", dep, maxsplit=1)[0])
        for dep in config["project"]["dependencies"]
    }
    assert declared == _imported_distributions()
    assert not declared & SERVICE_ONLY


@pytest.fixture(scope="module")
def sdk_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python of a fresh virtualenv holding ``pip install ./clients`` and nothing else."""
    base = tmp_path_factory.mktemp("sdk")
    venv.create(base / "venv", with_pip=True)
    python = base / "venv" / "bin" / "python"
    install = [python, "-m", "pip", "install", "--quiet", "-c", ROOT / "constraints.txt", CLIENTS]
    done = subprocess.run(install, capture_output=True, text=True, timeout=600, cwd=base)
    if done.returncode != 0:
        _skip_unless_the_index_answers(python, base, done.stdout + done.stderr)
    return python


@pytest.mark.slow
def test_the_sdk_installs_without_the_services_dependencies(sdk_python: Path) -> None:
    listed = subprocess.run(
        [sdk_python, "-m", "pip", "list", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    names = {p["name"].lower().replace("_", "-") for p in json.loads(listed.stdout)}
    assert "faithjudge-client" in names and "httpx" in names
    assert "faithjudge" not in names
    assert not names & SERVICE_ONLY, names & SERVICE_ONLY


@pytest.mark.slow
def test_the_sdk_alone_submits_a_batch_and_reads_its_results(
    sdk_python: Path, tmp_path: Path
) -> None:
    batch = tmp_path / "batch.jsonl"
    ids = [f"sdk-alone-{n}" for n in range(1, 6)]
    lines = [{"item_id": i, "question": QUESTION, "ground_truth": "yes", "cot": COT} for i in ids]
    batch.write_text("".join(json.dumps(line) + "\n" for line in lines))
    port = free_port()
    env = {**os.environ, "FAITHJUDGE_DATA_DIR": str(tmp_path / "data")}
    serve = [sys.executable, "-m", "faithjudge.cli.main", "serve", "--port", str(port)]
    with serve_process(serve, env, port, tmp_path / "serve.log"):
        # Started outside the checkout, with nothing on PYTHONPATH: only the venv's packages.
        client_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        done = subprocess.run(
            [sdk_python, "-c", CLIENT_SCRIPT, f"http://127.0.0.1:{port}", batch],
            capture_output=True,
            text=True,
            timeout=180,
            cwd=tmp_path,
            env=client_env,
        )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert Path(report["module"]).is_relative_to(sdk_python.parents[1])
    assert report["status"] == "completed"
    assert sorted(r["item_id"] for r in report["results"]) == ids
    assert all(r["metrics"] for r in report["results"])
