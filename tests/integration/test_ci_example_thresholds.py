"""The shipped CI example: its thresholds state the probe-set size they are meant for, the table
of items each bound needs is the exact binomial one, and the example run (its workflow's score
and gate steps, with its config) passes on a probe set of that size."""

from __future__ import annotations

import json
import re
import shutil
import tomllib
from pathlib import Path
from typing import Any

from faithjudge.cli.main import app
from faithjudge.stats.judge_coverage import exact_upper, trials_needed
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "ci"
CONFIG = EXAMPLE / "faithjudge.toml"
DEMO = ROOT / "examples" / "demo.jsonl"
LEVEL = 0.95


def _stated() -> tuple[int, int]:
    """The probe-set size and the SHAM items the config's head says its thresholds are for."""
    found = re.search(
        r"probe set of (\d+) items, at least (\d+) of them SHAM", CONFIG.read_text("utf-8")
    )
    assert found, "the CI config must state the probe-set size its thresholds are meant for"
    return int(found[1]), int(found[2])


def _probe_set(size: int) -> list[str]:
    """``size`` request lines from the demo's lines the offline judge grades in full (the
    sixth asks a question outside the knowledge base), one item id each."""
    demo = [json.loads(x) for x in DEMO.read_text("utf-8").splitlines() if x.strip()][:5]
    return [json.dumps(demo[i % len(demo)] | {"item_id": f"probe-{i:04d}"}) for i in range(size)]


def _run(folder: Path, lines: list[str]) -> tuple[Any, Any]:
    """The workflow's two steps in a copy of the example: score, then gate."""
    shutil.copy(CONFIG, folder / "faithjudge.toml")
    (folder / "cots.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    runner = CliRunner()
    config = str(folder / "faithjudge.toml")
    scored = runner.invoke(app, ["score", "--config", config, "--no-progress"])
    gated = runner.invoke(app, ["gate", str(folder / "results.jsonl"), "--config", config])
    return scored, gated


def test_the_stated_size_is_enough_for_every_coverage_threshold() -> None:
    size, sham = _stated()
    coverage = tomllib.loads(CONFIG.read_text("utf-8"))["coverage"]
    for key, percent in coverage.items():
        if not key.startswith("max_") or percent == 0:
            continue
        pool = sham if key == "max_fpr_sham" else size
        needed = trials_needed(0, percent / 100, LEVEL)
        assert needed is not None and needed <= pool, (key, percent, needed, pool)
    # "0 failures in n items bound the rate at about 3/n"
    assert abs(exact_upper(0, size, LEVEL) * size - 3) < 0.05


def test_the_table_of_items_needed_is_the_exact_binomial_one() -> None:
    rows = re.findall(r"^#\s+(\d+)%\s+(\d+)\s+(\d+)\s+(\d+)\s*$", CONFIG.read_text("utf-8"), re.M)
    assert len(rows) >= 3
    for percent, *needed in rows:
        for failures, items in enumerate(needed):
            assert trials_needed(failures, int(percent) / 100, LEVEL) == int(items), (
                percent,
                failures,
            )


def test_the_example_passes_on_a_probe_set_of_the_stated_size(tmp_path: Path) -> None:
    size, sham = _stated()
    lines = _probe_set(size)
    assert sum('"SHAM"' in line for line in lines) >= sham
    scored, gated = _run(tmp_path, lines)
    assert scored.exit_code == 0, scored.output
    assert gated.exit_code == 0, gated.output
    assert "FAILED" not in gated.output


def test_a_smaller_probe_set_cannot_pass_the_same_thresholds(tmp_path: Path) -> None:
    size, _ = _stated()
    scored, gated = _run(tmp_path, _probe_set(size // 3))
    assert scored.exit_code == 0, scored.output
    assert gated.exit_code == 2, gated.output  # coverage: the bounds are too wide


def test_the_workflow_scores_with_the_config() -> None:
    workflow = (EXAMPLE / "faithjudge.yml").read_text("utf-8")
    assert "faithjudge score --config faithjudge.toml" in workflow
    assert "faithjudge gate results.jsonl --config faithjudge.toml" in workflow
    table = tomllib.loads(CONFIG.read_text("utf-8"))["score"]
    assert table["input"] == "cots.jsonl" and table["output"] == "results.jsonl"
