"""Paths a command cannot use are one line and exit 3, never a traceback, and never data lost.

Outputs that are an input, or twice the same output, are refused before anything is written;
paths the system refuses (a folder under /proc, a missing device) are named in one line.
The commands run as whole processes (``python -m faithjudge.cli.main``), as the console script does.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from faithjudge.exit_codes import ExitCode

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "demo.jsonl"
GATE_CONFIG = str(ROOT / "examples" / "ci" / "faithjudge.toml")


def _run(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "faithjudge.cli.main", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "FAITHJUDGE_DATA_DIR": str(tmp_path / "data")},
        timeout=120,
    )


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    copy = tmp_path / "demo.jsonl"
    copy.write_bytes(DEMO.read_bytes())
    return copy


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["split", "{demo}", "--dev", "{demo}", "--test", "b.jsonl"], "both read and written"),
        (["split", "{demo}", "--dev", "a.jsonl", "--test", "a.jsonl"], "given as two outputs"),
        (["reader-study-requests", "{demo}", "-o", "{demo}"], "both read and written"),
        (["split", "{demo}", "--dev", "/proc/no/a.jsonl", "--test", "b.jsonl"], "/proc/no"),
        (["score", "{demo}", "-o", "o.jsonl", "--data-dir", "/proc/no"], "/proc/no"),
        (["report", "{demo}", "--html", "{demo}"], "both read and written"),
        (["gate", "{demo}", "--config", GATE_CONFIG, "--md", "{demo}"], "both read and written"),
    ],
    ids=[
        "split-onto-input",
        "split-twice",
        "requests-onto-input",
        "split-proc",
        "data-dir-proc",
        "report-onto-input",
        "gate-onto-input",
    ],
)
def test_unusable_paths_are_one_line_and_exit_3(
    demo: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    done = _run(*(a.format(demo=demo) for a in args), tmp_path=tmp_path)
    assert done.returncode == ExitCode.UNEVALUABLE, done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert demo.read_bytes() == DEMO.read_bytes()


def test_a_negative_split_seed_is_a_usage_error_not_a_crash(demo: Path, tmp_path: Path) -> None:
    done = _run("split", str(demo), "--dev", "a.jsonl", "--test", "b.jsonl", "--seed", "-1",
                tmp_path=tmp_path)  # fmt: skip
    assert done.returncode == 3, done.stderr  # a usage error, as on every command
    assert "Traceback" not in done.stderr


def test_the_demo_requests_split_with_the_default_strata(demo: Path, tmp_path: Path) -> None:
    done = _run("split", str(demo), "--dev", "a.jsonl", "--test", "b.jsonl", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = (tmp_path / "a.jsonl").read_bytes().count(b"\n")
    lines += (tmp_path / "b.jsonl").read_bytes().count(b"\n")
    assert lines == 6
    assert "no_baseline" in done.stderr  # the request without a baseline has its own stratum


@pytest.mark.parametrize(
    "args",
    [
        ["score", "--bogus"],
        ["score", "examples/demo.jsonl"],  # no --output
        ["report", "--bogus"],
        ["submit", "--bogus"],
        ["gate", "--bogus"],
        ["no-such-command"],
    ],
)
def test_usage_errors_exit_3_on_every_command(args: list[str]) -> None:
    """A mistyped command line is a "could not run" (3), never click's 2, which ``gate`` uses
    for a coverage failure; the message still names the option."""
    done = subprocess.run(
        [sys.executable, "-m", "faithjudge", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert "Usage" in done.stderr and "Traceback" not in done.stderr


def test_a_bare_command_shows_the_help_and_exits_0() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "faithjudge"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0
    assert "score" in done.stdout + done.stderr
