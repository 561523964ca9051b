"""The lexicon speed benchmark's same-run reference: another revision measured beside this tree.

Only the mechanism is checked (never a speed): the reference revision is checked out, run with
this interpreter, read back and removed again.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest

from benchmarks import lexicon_speed
from benchmarks._common import REPO_ROOT


def _worktrees() -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "worktree", "list", "--porcelain"],
        capture_output=True,
        text=True,
        check=True,
    )
    return [line for line in out.stdout.splitlines() if line.startswith("worktree ")]


def test_reference_revision_is_measured_alternately_and_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not (REPO_ROOT / ".git").exists():
        pytest.skip("needs a git checkout of the project")
    written: dict[str, Any] = {}

    def write_result(name: str, payload: dict[str, Any]) -> Path:
        written[name] = payload
        path = tmp_path / f"{name}.json"
        path.write_bytes(orjson.dumps(payload))
        return path

    monkeypatch.setattr(lexicon_speed, "write_result", write_result)
    monkeypatch.setattr(lexicon_speed, "_pin_one_core", lambda: None)  # keep pytest's CPUs
    before = _worktrees()
    payload = lexicon_speed.main(
        ["--items", "12", "--repeats", "1", "--reference", "HEAD", "--rounds", "2"]
    )
    assert written["lexicon_speed"] is payload
    assert payload["metric_statuses_last_run"] == {"valid": 36}
    assert payload["repeats"] == 2 and len(payload["seconds_all"]) == 2
    reference = payload["reference"]
    head = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    assert reference["rev"] == "HEAD" and reference["commit"] == head
    assert len(reference["items_per_cpu_s_rounds"]) == 2
    assert len(reference["this_tree_items_per_cpu_s_rounds"]) == 2
    assert reference["ratio_cpu"] > 0 and reference["ratio_wall"] > 0
    assert reference["this_tree_best_items_per_cpu_s"] >= max(
        reference["this_tree_items_per_cpu_s_rounds"]
    )
    assert reference["ratio_best_cpu"] == pytest.approx(
        reference["this_tree_best_items_per_cpu_s"] / reference["best_items_per_cpu_s"], rel=1e-2
    )
    assert _worktrees() == before  # the checkout is gone again


def test_an_unknown_reference_revision_fails_before_measuring(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if not (REPO_ROOT / ".git").exists():
        pytest.skip("needs a git checkout of the project")
    monkeypatch.setattr(lexicon_speed, "_pin_one_core", lambda: None)
    monkeypatch.setattr(lexicon_speed, "write_result", lambda *_: pytest.fail("wrote a result"))
    before = _worktrees()
    with pytest.raises(SystemExit, match="--reference no-such-rev: git could not check it out"):
        lexicon_speed.main(["--items", "3", "--repeats", "1", "--reference", "no-such-rev"])
    assert _worktrees() == before
