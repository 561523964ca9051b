"""One writer per output: a second ``faithjudge score`` into an output another live process is
writing exits 3 and names that process; once the holder is gone (kill -9 included), a run goes
through, and a finished run leaves nothing that blocks the next."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from faithjudge.cli.main import app
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "demo.jsonl"
runner = CliRunner()

HOLDER = """
import sys, time
from pathlib import Path
from faithjudge.output_lock import hold_output
with hold_output(Path(sys.argv[1])):
    print("holding", flush=True)
    time.sleep(120)
"""


def _score(output: Path, tmp_path: Path) -> tuple[int, str]:
    args = ["score", str(DEMO), "-o", str(output), "--no-progress"]
    result = runner.invoke(app, [*args, "--data-dir", str(tmp_path / "data")])
    return result.exit_code, result.output


def test_a_second_writer_is_refused_naming_the_holder(tmp_path: Path) -> None:
    output = tmp_path / "results.jsonl"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(output)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        code, text = _score(output, tmp_path)
        assert code == 3, text
        assert f"process {holder.pid}" in text
        assert not output.exists() or output.read_bytes() == b""  # nothing was written
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
    # the kernel dropped the lock with the killed holder: the run goes through now
    code, text = _score(output, tmp_path)
    assert code == 0, text
    assert len(output.read_bytes().splitlines()) == len(DEMO.read_bytes().splitlines())
    # and a finished run leaves nothing that blocks the next one (a resume)
    code, text = _score(output, tmp_path)
    assert code == 0, text


def test_the_lock_file_is_private(tmp_path: Path) -> None:
    from faithjudge.output_lock import hold_output, lock_path

    output = tmp_path / "out" / "results.jsonl"
    old = os.umask(0)
    try:
        with hold_output(output):
            mode = lock_path(output).stat().st_mode & 0o777
    finally:
        os.umask(old)
    assert mode == 0o600


def test_a_finished_run_leaves_no_lock_file(tmp_path: Path) -> None:
    from faithjudge.output_lock import lock_path

    output = tmp_path / "results.jsonl"
    code, text = _score(output, tmp_path)
    assert code == 0, text
    assert not lock_path(output).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "results.jsonl"]


def test_a_lock_file_removed_while_a_run_opened_it_is_not_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The holder removes the lock file as a second run opens it: the second run's lock on the
    removed file would exclude nobody, so it locks the file now at the path instead."""
    import fcntl

    from faithjudge import output_lock
    from faithjudge.output_lock import hold_output, lock_path

    output = tmp_path / "results.jsonl"
    real_flock = fcntl.flock
    calls = 0

    def holder_lets_go_first(fd: int, operation: int) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:  # the previous holder's exit, between this run's open and its lock
            lock_path(output).unlink()
        real_flock(fd, operation)

    monkeypatch.setattr(output_lock.fcntl, "flock", holder_lets_go_first)
    lock_path(output).write_text("12345\n")  # the previous holder's file
    with hold_output(output):
        assert calls == 2
        # the lock held is on the file at the path: a third run is refused, naming this one
        monkeypatch.setattr(output_lock.fcntl, "flock", real_flock)
        fd = os.open(lock_path(output), os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                real_flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
        with (
            pytest.raises(output_lock.OutputBusy, match=f"process {os.getpid()}"),
            hold_output(output),
        ):
            pass
    assert not lock_path(output).exists()
