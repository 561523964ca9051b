"""``faithjudge score`` never destroys or buries data in its output, nor loops on its input.

Results are appended to the output and a run resumes from what it holds, so the output must be
a results file of the same input: not the input itself (the run would read its own results for
ever), not a file holding other data (appending buries it; cutting it off destroys it), not a
device or a folder, and not the results of another input (its lines would be skipped).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from faithjudge.cli.main import app
from faithjudge.exit_codes import ExitCode
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "demo.jsonl"


def _score(source: Path, out: Path | str, tmp_path: Path) -> tuple[int, str]:
    result = CliRunner().invoke(
        app,
        ["score", str(source), "-o", str(out), "--data-dir", str(tmp_path / "d"), "--no-progress"],
    )
    return result.exit_code, result.output


def test_the_input_as_output_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    same = tmp_path / "same.jsonl"
    same.write_bytes(DEMO.read_bytes())
    code, output = _score(same, same, tmp_path)
    assert code == ExitCode.UNEVALUABLE
    assert "is the input file" in output
    assert same.read_bytes() == DEMO.read_bytes()


def test_an_output_holding_other_data_is_refused_and_kept(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"my notes\nmore notes")
    code, output = _score(DEMO, notes, tmp_path)
    assert code == ExitCode.UNEVALUABLE
    assert "line 1 is not a result line" in output
    assert notes.read_bytes() == b"my notes\nmore notes"


def test_a_blank_line_in_the_results_is_passed_over_not_a_reason_to_rescore(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out.jsonl"
    assert _score(DEMO, out, tmp_path)[0] == ExitCode.OK
    lines = out.read_bytes().splitlines(keepends=True)
    out.write_bytes(b"".join(lines[:3]) + b"\n" + b"".join(lines[3:]))
    code, output = _score(DEMO, out, tmp_path)
    assert code == ExitCode.OK, output
    assert out.read_bytes() == b"".join(lines[:3]) + b"\n" + b"".join(lines[3:])


def test_resuming_into_the_results_of_another_input_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    assert _score(DEMO, out, tmp_path)[0] == ExitCode.OK
    before = out.read_bytes()
    other = tmp_path / "other.jsonl"
    other.write_bytes(DEMO.read_bytes().replace(b'"demo-001"', b'"other-001"'))
    code, output = _score(other, out, tmp_path)
    assert code == ExitCode.UNEVALUABLE
    assert "holds results of another input" in output and "other-001" in output
    assert out.read_bytes() == before


@pytest.mark.parametrize("target", ["folder", "/dev/null", "/dev/full"])
def test_an_output_that_is_not_a_regular_file_is_refused(tmp_path: Path, target: str) -> None:
    if target == "folder":
        target = str(tmp_path)
    elif not Path(target).exists():
        pytest.skip(f"{target} does not exist here")
    code, output = _score(DEMO, target, tmp_path)
    assert code == ExitCode.UNEVALUABLE
    assert "is not a regular file" in output
