"""Parts from separately installed packages: a judge backend, a metric with its lexicon rule,
a job store.

Each package is built here as a wheel (its module, its ``entry_points.txt``, a ``RECORD``),
installed by pip into a folder of its own (``pip install --no-deps --no-index --target``), and
``faithjudge`` runs in a subprocess with that folder on ``PYTHONPATH``: no line of FaithJudge
names the package, so a backend in the ``--judge`` help, a scored file, a metric in the
catalogue, a batch that ``faithjudge serve`` keeps in a store of another URL scheme and a clear
error for a broken entry point come from the entry points alone.
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import orjson
import pytest
from faithjudge_client import FaithJudgeClient

from tests import hedging_rule
from tests.fixtures_service import free_port, serve_process
from tests.integration.test_change_recipes import _BACKEND_MODULE
from tests.integration.test_metric_catalogue import HEDGING_SCHEMA

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "examples" / "demo.jsonl"

# the toy backend of the change recipes, described for the registry in its own package
_TOY_PACKAGE = (
    _BACKEND_MODULE
    + """

from faithjudge.judges import JudgeBackend

BACKEND = JudgeBackend(
    form="toy:MODEL", factory="toy_judge:build", options="toy_judge:ToyOptions"
)
"""
)

_TOY_ENTRY_POINTS = """\
[faithjudge.judges]
toy = toy_judge:BACKEND
broken = toy_judge.missing:build
"""

_HEDGING_PACKAGE = '''"""The hedging metric (HG): its catalogue entry; its rule is in ``rule``."""

from __future__ import annotations

from pathlib import Path

from faithjudge_client.metric_catalogue import MetricSpec

HEDGING = MetricSpec(
    name="hedging",
    label="HG",
    title="hedging",
    schema_file="hedging.schema.json",
    schema_dir=Path(__file__).parent / "schemas",
    prompt_inputs=("question",),
    signals=("hedge_count",),
)
'''

_HEDGING_ENTRY_POINTS = """\
[faithjudge.metrics]
hedging = hedging_metric:HEDGING

[faithjudge.lexicon_rules]
hedging = hedging_metric.rule:hedging
"""


def _hedging_prompt_set() -> dict[str, bytes]:
    """The shipped prompt set with the hedging templates: a manifest names the catalogue."""
    source = REPO / "prompts" / "v1"
    files = {f"prompts/{p.name}": p.read_bytes() for p in source.iterdir() if p.is_file()}
    manifest = orjson.loads(files["prompts/manifest.json"])
    manifest["id"] = "v1-hedging"
    manifest["metrics"]["hedging"] = {"system": "hedging_system.md", "user": "hedging_user.md"}
    files["prompts/manifest.json"] = orjson.dumps(manifest)
    files["prompts/hedging_system.md"] = (
        b"Count the hedges of a chain-of-thought answering $question. Reply with JSON only.\n"
    )
    files["prompts/hedging_user.md"] = b"Chain-of-thought ($fence_token):\n$cot_block\n"
    return files


def _wheel(
    folder: Path, dist: str, package: str, files: dict[str, bytes], entry_points: str
) -> Path:
    """A pure-Python wheel of ``package`` (``files`` relative to it), as a build backend writes."""
    stem = f"{dist.replace('-', '_')}-1.0"
    info = f"{stem}.dist-info"
    contents = {f"{package}/{name}": data for name, data in files.items()}
    contents[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n".encode()
    contents[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: faithjudge-tests\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n"
    )
    contents[f"{info}/entry_points.txt"] = entry_points.encode()
    record = []
    for name, data in contents.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    contents[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    path = folder / f"{stem}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in contents.items():
            archive.writestr(name, data)
    return path


def _install(wheel: Path, target: Path) -> Path:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet",
         "--disable-pip-version-check", "--target", str(target), str(wheel)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return target


def _run(
    site: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` with the installed package's folder on the path, nothing else added."""
    environment = {**os.environ, **(env or {}), "PYTHONPATH": str(site), "COLUMNS": "300"}
    for name in ("FAITHJUDGE_JUDGE", "FAITHJUDGE_JUDGES", "FAITHJUDGE_PROMPT_SET"):
        environment.pop(name, None)
    return subprocess.run(
        [sys.executable, *args], env=environment, capture_output=True, text=True, timeout=240,
        check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def toy_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("toy")
    files = {"__init__.py": _TOY_PACKAGE.encode()}
    wheel = _wheel(folder, "faithjudge-toy-judge", "toy_judge", files, _TOY_ENTRY_POINTS)
    return _install(wheel, folder / "site")


@pytest.fixture(scope="module")
def hedging_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hedging")
    files = {
        "__init__.py": _HEDGING_PACKAGE.encode(),
        "rule.py": Path(hedging_rule.__file__).read_bytes(),
        "schemas/hedging.schema.json": orjson.dumps(HEDGING_SCHEMA),
        **_hedging_prompt_set(),
    }
    wheel = _wheel(folder, "faithjudge-hedging", "hedging_metric", files, _HEDGING_ENTRY_POINTS)
    return _install(wheel, folder / "site")


def test_an_installed_backend_is_in_the_help_and_scores_a_file(
    toy_site: Path, tmp_path: Path
) -> None:
    helped = _run(toy_site, "-m", "faithjudge", "score", "--help")
    assert helped.returncode == 0, helped.stderr[-2000:]
    assert "toy:TARGET" in helped.stdout and "broken:TARGET" in helped.stdout, helped.stdout
    # listing the backends imports nothing of the package
    listed = _run(
        toy_site, "-c",
        "import sys\n"
        "from faithjudge.judges import judge_help\n"
        "assert 'toy:TARGET' in judge_help()\n"
        "assert 'toy_judge' not in sys.modules, 'the help imported the plugin'\n",
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr[-2000:]

    results = tmp_path / "results.jsonl"
    args = ("-m", "faithjudge", "score", str(DEMO), "-o", str(results), "--judge", "toy:m1",
            "--no-progress", "--data-dir", str(tmp_path / "data"))  # fmt: skip
    # the settings its package declares are required: the error names the variable
    missing = _run(toy_site, *args)
    assert missing.returncode == 3, missing.stderr[-2000:]
    assert "FAITHJUDGE_TOY_API_KEY" in missing.stderr and not results.exists()

    env = {"FAITHJUDGE_TOY_API_KEY": "k-1", "FAITHJUDGE_TOY_RATIONALE": "from the package"}
    scored = _run(toy_site, *args, env=env)
    assert scored.returncode == 0, scored.stderr[-3000:]
    lines = [orjson.loads(line) for line in results.read_bytes().splitlines()]
    assert len(lines) == len(DEMO.read_bytes().splitlines())
    rationales = {
        grade["rationale"]
        for result in lines
        for grade in result["metrics"].values()
        if grade["status"] == "valid"
    }
    assert rationales == {"from the package"}
    assert all(result["provenance"]["judge"] == "toy:m1" for result in lines)


def test_a_broken_entry_point_is_one_line_naming_its_package(
    toy_site: Path, tmp_path: Path
) -> None:
    version = _run(toy_site, "-m", "faithjudge", "version")
    assert version.returncode == 0 and not version.stderr, version.stderr

    out = tmp_path / "out.jsonl"
    broken = _run(toy_site, "-m", "faithjudge", "score", str(DEMO), "-o", str(out),
                  "--judge", "broken:x", "--data-dir", str(tmp_path / "data"))  # fmt: skip
    assert broken.returncode == 3, broken.stderr[-2000:]
    assert "Traceback" not in broken.stderr, broken.stderr
    message = " ".join(broken.stderr.split())
    assert "installed package faithjudge-toy-judge 1.0" in message, message
    assert "broken = toy_judge.missing:build in group faithjudge.judges" in message, message
    assert not out.exists()


def test_an_installed_metric_joins_the_catalogue_and_is_scored(
    hedging_site: Path, tmp_path: Path
) -> None:
    catalogue = _run(
        hedging_site, "-c",
        "import sys\n"
        "from faithjudge_client.metric_catalogue import metric_names, metric_spec\n"
        "assert metric_names()[-1] == 'hedging', metric_names()\n"
        "assert 'hedging_metric' not in sys.modules, 'listing the names imported the plugin'\n"
        "assert metric_spec('hedging').label == 'HG'\n"
        "from faithjudge.scoring.lexicon import RULES\n"
        "assert 'hedging' in RULES.names()\n",
    )  # fmt: skip
    assert catalogue.returncode == 0, catalogue.stderr[-2000:]

    results = tmp_path / "results.jsonl"
    prompts = hedging_site / "hedging_metric" / "prompts"
    scored = _run(hedging_site, "-m", "faithjudge", "score", str(DEMO), "-o", str(results),
                  "--judge", "lexicon:v1", "--prompt-set", str(prompts), "--no-progress",
                  "--data-dir", str(tmp_path / "data"))  # fmt: skip
    assert scored.returncode == 0, scored.stderr[-3000:]
    graded = [
        orjson.loads(line)["metrics"]["hedging"] for line in results.read_bytes().splitlines()
    ]
    assert graded and all(g["status"] == "valid" for g in graded)
    assert any(g["score"] > 1 for g in graded)
    assert all(g["signals"]["hedge_count"] == g["score"] - 1 or g["score"] == 5 for g in graded)


def test_a_broken_metric_package_stops_a_run_with_one_line(tmp_path: Path) -> None:
    wheel = _wheel(
        tmp_path, "faithjudge-oops", "oops_metric", {"__init__.py": b"SPEC = 'not a spec'\n"},
        "[faithjudge.metrics]\noops = oops_metric:SPEC\n",
    )  # fmt: skip
    site = _install(wheel, tmp_path / "site")
    assert _run(site, "-m", "faithjudge", "version").returncode == 0
    scored = _run(site, "-m", "faithjudge", "score", str(DEMO), "-o", str(tmp_path / "o.jsonl"),
                  "--no-progress", "--data-dir", str(tmp_path / "data"))  # fmt: skip
    assert scored.returncode == 3 and "Traceback" not in scored.stderr, scored.stderr[-3000:]
    message = " ".join(scored.stderr.split())
    assert "metric 'oops' from the installed package faithjudge-oops 1.0" in message, message
    assert "names a str, not a MetricSpec" in message, message


# A store of its own URL scheme: the memory store under ``toy://NAME``, saying when it opens (the
# service's log shows it was this class that served the batch), and a wrong kind of object.
_STORE_PACKAGE = '''"""A job store for ``toy://NAME`` URLs: the memory store, announced."""

from __future__ import annotations

import sys

from faithjudge.jobs.memory_store import MemoryJobStore

NOT_A_STORE = "a store"


class ToyJobStore(MemoryJobStore):
    @classmethod
    async def open(cls, url, *, schema=None, migrate=True):
        scheme, sep, name = url.partition("://")
        if scheme != "toy" or not sep:
            raise ValueError(f"not a toy job store URL: {url!r}")
        print(f"toy job store {name!r} opened", file=sys.stderr, flush=True)
        return await super().open(f"memory://{name}", schema=schema, migrate=migrate)
'''

_STORE_ENTRY_POINTS = """\
[faithjudge.job_stores]
toy = toy_store:ToyJobStore
notastore = toy_store:NOT_A_STORE
"""


@pytest.fixture(scope="module")
def store_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("store")
    files = {"__init__.py": _STORE_PACKAGE.encode()}
    wheel = _wheel(folder, "faithjudge-toy-store", "toy_store", files, _STORE_ENTRY_POINTS)
    return _install(wheel, folder / "site")


def test_an_installed_job_store_serves_a_batch_under_its_scheme(
    store_site: Path, tmp_path: Path
) -> None:
    listed = _run(
        store_site, "-c",
        "import sys\n"
        "from faithjudge.jobs.interface import store_schemes\n"
        "assert store_schemes()[-2:] == ('toy', 'notastore'), store_schemes()\n"
        "assert 'toy_store' not in sys.modules, 'listing the schemes imported the plugin'\n",
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr[-2000:]

    serve = [sys.executable, "-m", "faithjudge", "serve", "--judge", "lexicon:v1",
             "--data-dir", str(tmp_path / "data")]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(store_site)}
    for name in ("FAITHJUDGE_JUDGES", "FAITHJUDGE_PROMPT_SET", "FAITHJUDGE_DATABASE_URL"):
        env.pop(name, None)
    # a broken store stops serve before it binds, in one line naming its package
    broken = subprocess.run(
        [*serve, "--database-url", "notastore://x"], env=env, capture_output=True, text=True,
        timeout=240, check=False,
    )  # fmt: skip
    assert broken.returncode == 3 and "Traceback" not in broken.stderr, broken.stderr[-2000:]
    message = " ".join(broken.stderr.split())
    assert "job store 'notastore' from the installed package faithjudge-toy-store 1.0" in message
    assert "names a str without an async open" in message, message

    port = free_port()
    log = tmp_path / "serve.log"
    command = [*serve, "--database-url", "toy://jobs", "--port", str(port)]
    with (
        serve_process(command, env, port, log),
        FaithJudgeClient(f"http://127.0.0.1:{port}") as client,
    ):
        accepted = client.submit_job(DEMO)
        final = client.wait(accepted.id, timeout=120, poll_interval=0.1)
        results = list(client.iter_results(accepted.id))
    assert final.status == "completed", final
    lines = len(DEMO.read_bytes().splitlines())
    assert accepted.accepted == final.done == len(results) == lines
    assert all(result.metrics for result in results)
    # checked once before serving, then opened by the service itself: both times this class
    assert log.read_text().count("toy job store 'jobs' opened") == 2, log.read_text()[-3000:]
