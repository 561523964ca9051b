"""The built wheel installs two packages, ``faithjudge`` and ``faithjudge_client``, and nothing
that can collide with a user's repository.

A wheel whose top-level packages were ``service`` and ``clients`` broke ``faithjudge --help``
inside a model-training repository with its own ``service/`` package. These tests build the real
wheel with the project's own backend, read its RECORD, install it without dependencies into a
target folder and run its console script from a folder holding its own ``service/`` and
``clients/`` packages, with that folder on ``PYTHONPATH`` as a user's checkout would be: after
the target, and before it (where such a repository shadowed the old wheel's packages). Both come
ahead of the editable install of the checkout, so what runs is the wheel: its code and its
assets under ``faithjudge/_assets``.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import orjson
import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "demo.jsonl"
PACKAGES = {
    "faithjudge": ROOT / "service" / "faithjudge",
    "faithjudge_client": ROOT / "clients" / "faithjudge_client",
}
ASSETS = ("schemas", "prompts", "knowledge_base")
SCRIPTS = {"faithjudge", "faithjudge-sidecar"}
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
DIST_INFO = f"faithjudge-{VERSION}.dist-info"


@dataclass(frozen=True)
class Installed:
    wheel: Path
    target: Path

    @property
    def script(self) -> Path:
        return self.target / "bin" / "faithjudge"


def _run(command: list[str | Path], **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(c) for c in command], capture_output=True, text=True, timeout=300, **kwargs
    )
    assert done.returncode == 0, (
        f"{command} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    )
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    # The backend comes from the dev extra, so building needs neither an index nor isolation.
    assert importlib.util.find_spec("hatchling"), (
        "no hatchling: install the dev extra (make install)"
    )
    base = tmp_path_factory.mktemp("wheel")
    dist, target = base / "dist", base / "target"
    pip = [sys.executable, "-m", "pip"]
    _run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--quiet", "-w", dist, ROOT])
    (wheel,) = dist.glob("faithjudge-*.whl")
    _run([*pip, "install", "--no-deps", "--no-compile", "--quiet", "--target", target, wheel])
    return Installed(wheel, target)


def _record(lines: str) -> list[str]:
    return [row[0] for row in csv.reader(io.StringIO(lines)) if row]


def _source_files(root: Path) -> set[str]:
    return {
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }


def test_the_wheel_holds_only_the_two_packages_and_their_assets(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as wheel:
        (record_name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/RECORD")]
        files = _record(wheel.read(record_name).decode())
        entry_points = wheel.read(record_name.replace("RECORD", "entry_points.txt")).decode()
    tops = {PurePosixPath(f).parts[0] for f in files}
    assert tops == {"faithjudge", "faithjudge_client", DIST_INFO}, tops
    for package, source in PACKAGES.items():
        shipped = {f.removeprefix(f"{package}/") for f in files if f.startswith(f"{package}/")}
        missing = {f for f in _source_files(source) if f not in shipped}
        assert not missing, f"{package} lacks {sorted(missing)[:10]}"
    for kind in ASSETS:
        prefix = f"faithjudge/_assets/{kind}/"
        shipped = {f.removeprefix(prefix) for f in files if f.startswith(prefix)}
        assert shipped and shipped == _source_files(ROOT / kind), kind
    assert "faithjudge = faithjudge.cli.main:main" in entry_points
    assert "faithjudge-sidecar = faithjudge.sidecar.cli:main" in entry_points


def test_the_install_adds_the_packages_and_the_console_scripts_only(installed: Installed) -> None:
    (record,) = installed.target.glob("faithjudge-*.dist-info/RECORD")
    entries = _record(record.read_text())
    scripts = {PurePosixPath(e).name for e in entries if e.startswith("../")}
    assert scripts == SCRIPTS
    tops = {PurePosixPath(e).parts[0] for e in entries if not e.startswith("../")}
    assert tops == {"faithjudge", "faithjudge_client", DIST_INFO}, tops
    assert {p.name for p in installed.target.iterdir()} == {*tops, "bin"}
    assert {p.name for p in (installed.target / "bin").iterdir()} == SCRIPTS


@pytest.fixture
def user_repository(tmp_path: Path) -> Path:
    """A training repository with its own ``service`` and ``clients`` packages."""
    repo = tmp_path / "training-repo"
    for package in ("service", "clients"):
        (repo / package).mkdir(parents=True)
        (repo / package / "__init__.py").write_text(f'"""The repository\'s own {package}."""\n')
    (repo / "service" / "train.py").write_text("EPOCHS = 3\n")
    return repo


def _env(installed: Installed, repo: Path, *, repository_first: bool = False) -> dict[str, str]:
    # PYTHONPATH entries precede the venv's editable path entries, so the checkout never answers.
    order = [".", str(installed.target)] if repository_first else [str(installed.target), "."]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(order)}
    env["FAITHJUDGE_DATA_DIR"] = str(repo / "faithjudge-data")
    return env


@pytest.mark.parametrize("repository_first", [False, True], ids=["target-first", "repo-first"])
def test_the_console_script_works_beside_a_repositorys_own_service_package(
    installed: Installed, user_repository: Path, repository_first: bool
) -> None:
    env = _env(installed, user_repository, repository_first=repository_first)
    helped = _run([installed.script, "--help"], cwd=user_repository, env=env)
    assert "score" in helped.stdout

    output = user_repository / "out.jsonl"
    scored = [installed.script, "score", DEMO, "-o", output, "--no-progress"]
    _run(scored, cwd=user_repository, env=env)
    results = [orjson.loads(line) for line in output.read_bytes().splitlines()]
    requests = [orjson.loads(line) for line in DEMO.read_bytes().splitlines() if line.strip()]
    assert [r["item_id"] for r in results] == [r["item_id"] for r in requests]
    assert all(r["provenance"]["judge"].startswith("lexicon") for r in results)
    assert all(r["metrics"] for r in results)


def test_imports_resolve_inside_the_install_not_the_checkout(
    installed: Installed, user_repository: Path
) -> None:
    probe = (
        "import faithjudge, faithjudge_client, service.train\n"
        "from faithjudge.assets import asset_dir\n"
        "print(faithjudge.__file__, faithjudge_client.__file__, service.train.__file__,"
        " *(asset_dir(k) for k in ('schemas', 'prompts', 'knowledge_base')), sep='\\n')\n"
    )
    env = _env(installed, user_repository, repository_first=True)
    where = _run([sys.executable, "-c", probe], cwd=user_repository, env=env).stdout.split("\n")
    package, client, users, *assets = (Path(w).resolve() for w in where if w)
    target = installed.target.resolve()
    assert package == target / "faithjudge" / "__init__.py"
    assert client == target / "faithjudge_client" / "__init__.py"
    assert users == user_repository.resolve() / "service" / "train.py"
    assert assets == [target / "faithjudge" / "_assets" / kind for kind in ASSETS]


def test_the_shipped_ci_workflow_runs_verbatim_from_the_wheel(
    installed: Installed, user_repository: Path
) -> None:
    """The example workflow's own run steps, as written, in a training repository that installed
    the wheel: its config at the root and a probe set of the size the config states. Every step
    the workflow runs after its placeholders exits 0, and every file it uploads is there."""
    import yaml

    from tests.integration.test_ci_example_thresholds import CONFIG, _probe_set, _stated

    workflow = yaml.safe_load((ROOT / "examples" / "ci" / "faithjudge.yml").read_text("utf-8"))
    steps = workflow["jobs"]["faithfulness"]["steps"]
    shutil.copy(CONFIG, user_repository / "faithjudge.toml")
    probes = _probe_set(_stated()[0])
    (user_repository / "cots.jsonl").write_text("\n".join(probes) + "\n", encoding="utf-8")
    env = _env(installed, user_repository)
    env["PATH"] = os.pathsep.join([str(installed.target / "bin"), env["PATH"]])
    env["GITHUB_STEP_SUMMARY"] = str(user_repository / "step-summary.md")
    ran = []
    for step in steps:
        run = step.get("run")
        if run is None or step["name"] in ("Install FaithJudge", "Generate CoTs (YOUR script)"):
            continue  # the installation and the user's own code are what this test stands for
        script = re.sub(r"\$\{\{[^}]*\}\}", "", run)  # an unset GitHub variable is empty
        done = subprocess.run(
            ["bash", "-e", "-c", script],
            cwd=user_repository,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"{step['name']}: {done.stdout}\n{done.stderr}"
        ran.append(step["name"])
    assert ran == [
        "Score with the offline judge",
        "Fetch the baseline results (YOUR storage)",  # no baseline URL set: nothing fetched
        "Report",
        "Gate",
        "Step summary",
    ]
    (upload,) = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact")]
    for name in upload["with"]["path"].split():
        assert (user_repository / name).is_file(), name
    summary = (user_repository / "step-summary.md").read_text("utf-8")
    assert summary.startswith("# FaithJudge gate: PASSED")
