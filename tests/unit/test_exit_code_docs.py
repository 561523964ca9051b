"""The exit codes as documented (the README's table, docs/service.md's ``submit`` table and the
table of ``faithjudge/exit_codes.py``) agree with ``ExitCode`` and with what ``submit`` does."""

from __future__ import annotations

import re
from pathlib import Path

import faithjudge.exit_codes
import pytest
from faithjudge.cli.submit import job_exit_code
from faithjudge.exit_codes import ExitCode
from faithjudge_client.bodies import BatchStatus

ROOT = Path(__file__).resolve().parents[2]
_ROW = re.compile(r"^\| (\d+) \| (.*) \|$")
_COMMAND = re.compile(r"`{1,2}([a-z][a-z-]*(?: [a-z]+)?)`{1,2}:")


def _markdown_table(path: Path, header: str) -> dict[int, str]:
    """The rows ``| code | meaning |`` of the table right after the line ``header``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = lines.index(header)
    rows: dict[int, str] = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        match = _ROW.match(line)
        assert match is not None, f"{path.name}: not a code row: {line}"
        code = int(match.group(1))
        assert code not in rows, f"{path.name}: code {code} listed twice"
        rows[code] = match.group(2)
    return rows


def readme_table() -> dict[int, str]:
    return _markdown_table(ROOT / "README.md", "| code | meaning |")


def submit_table() -> dict[int, str]:
    return _markdown_table(ROOT / "docs" / "service.md", "| code | `submit` |")


def module_table() -> dict[int, tuple[str, str]]:
    """``code -> (name, meaning)`` of the reStructuredText table in the module docstring."""
    doc = faithjudge.exit_codes.__doc__ or ""
    rows: dict[int, tuple[str, str]] = {}
    current: int | None = None
    for line in doc.splitlines():
        match = re.match(r"^(\d+)\s+([A-Z_]+)\s+(.*)$", line)
        if match:
            current = int(match.group(1))
            rows[current] = (match.group(2), match.group(3))
        elif current is not None and line.startswith(" " * 26) and line.strip():
            name, meaning = rows[current]
            rows[current] = (name, f"{meaning} {line.strip()}")
        elif line.startswith("===="):
            continue
    return rows


def _commands(meaning: str) -> set[str]:
    """The commands a row names as ``command:`` (``gate:``, ``kb check:``)."""
    return set(_COMMAND.findall(meaning))


def test_every_table_lists_exactly_the_exit_codes() -> None:
    codes = {code.value for code in ExitCode}
    assert set(readme_table()) == codes
    assert {code: name for code, (name, _) in module_table().items()} == {
        code.value: code.name for code in ExitCode
    }


@pytest.mark.parametrize("code", [ExitCode.CHECK_FAILED, ExitCode.COVERAGE_FAILED])
def test_the_commands_of_a_command_specific_code_agree(code: ExitCode) -> None:
    readme = _commands(readme_table()[code])
    assert readme, readme_table()[code]
    assert readme == _commands(module_table()[code][1])


def test_submit_documents_the_codes_it_can_exit_with() -> None:
    table = submit_table()
    assert set(table) <= {code.value for code in ExitCode}
    # submit checks no quality: it never exits 1 or 2
    assert set(table) == {0, 3, 4, 5}


def _ended(status: str, counts: dict[str, int] | None = None) -> BatchStatus:
    return BatchStatus.model_validate(
        {
            "id": "b_1",
            "status": status,
            "created_at": "2026-01-01T12:00:00Z",
            "updated_at": "2026-01-01T12:00:09Z",
            "total": 1,
            "done": 1,
            "pending": 0,
            "counts": counts or {"valid": 0, "invalid": 3},
            "failure_stages": {"schema": 3},
            "progress": 1.0,
            "rejected": 0,
        }
    )


@pytest.mark.parametrize(
    ("status", "counts", "word", "in_readme"),
    [
        ("cancelled", None, "cancelled", True),
        ("failed", None, "failed", False),
        ("completed", {"valid": 0, "invalid": 3}, "not one grade is valid", True),
        ("completed", {"valid": 2, "invalid": 1}, "completed", False),
    ],
)
def test_submit_s_code_for_an_ended_batch_is_the_documented_one(
    status: str, counts: dict[str, int] | None, word: str, in_readme: bool
) -> None:
    code, _ = job_exit_code(_ended(status, counts))
    assert word in submit_table()[code], (status, code)
    if in_readme:
        assert word in readme_table()[code], (status, code)
