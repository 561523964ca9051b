"""The code finds its data assets when installed as a wheel, not only in a checkout.

A wheel carries schemas, prompts and the knowledge base (lexicons included) under
``service/_assets`` (pyproject's force-include). This test rebuilds that layout in a temporary
folder without the repository on ``sys.path`` and scores the demo file there with the default
evaluator, so a module that reaches for ``<repo>/knowledge_base`` directly fails here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[2]


def _install_like_a_wheel(site: Path) -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    wheel = config["tool"]["hatch"]["build"]["targets"]["wheel"]
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in wheel["packages"]:
        shutil.copytree(ROOT / package, site / package, ignore=ignore)
    for source, target in wheel["force-include"].items():
        shutil.copytree(ROOT / source, site / target, ignore=ignore)


def test_scores_the_demo_from_an_installed_layout(tmp_path: Path) -> None:
    site = tmp_path / "site"
    _install_like_a_wheel(site)
    work = tmp_path / "work"
    work.mkdir()
    output = work / "results.jsonl"
    env = {**os.environ, "PYTHONPATH": str(site), "FAITHJUDGE_DATA_DIR": str(work / "data")}
    env.pop("FAITHJUDGE_EVALUATOR", None)
    demo = ROOT / "examples" / "demo.jsonl"
    cli = "from faithjudge.cli.main import app; app()"
    command = [sys.executable, "-c", cli, "score", str(demo), "-o", str(output), "--no-progress"]
    done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    results = [orjson.loads(line) for line in output.read_bytes().splitlines()]
    assert len(results) == len(demo.read_bytes().splitlines())
    assert all(r["provenance"]["evaluator"].startswith("lexicon") for r in results)
    check = [sys.executable, "-c", "import faithjudge.assets as a; print(a.asset_dir('schemas'))"]
    where = subprocess.run(check, cwd=work, env=env, capture_output=True, text=True, timeout=60)
    assert Path(where.stdout.strip()).is_relative_to(site / "service" / "_assets")
