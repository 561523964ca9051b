"""The data side of ``faithjudge view`` (no browser): which files of a folder are runs, which
request file a run's CoTs come from, what changed between two runs, and the server's refusals.
"""

from __future__ import annotations

import http.client
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from faithjudge.cli.view import make_server
from faithjudge.reports.browser import RunFolder, compare_items, file_kind
from faithjudge_client.lines import Failure, FlipResult, ItemResult, MetricResult, Provenance

PROVENANCE = Provenance(
    judge="replay:judge.jsonl",
    prompt_set="v1",
    prompt_sha256="0" * 64,
    schema_version="1.1",
    service_version="0",
)


def _graded(score: int | None) -> MetricResult:
    if score is None:
        return MetricResult(
            status="invalid", failure=Failure(stage="evidence", detail="quotes[0] not found")
        )
    return MetricResult(status="valid", score=score, normalized=(score - 1) / 4)


def _result(line: int, item_id: str, cf: int | None, *, flip: bool = False,
            answer: str = "yes") -> str:  # fmt: skip
    result = ItemResult(
        line=line,
        item_id=item_id,
        model="vlm",
        question="Is there an effusion? (yes or no)",
        answer=answer,
        flip=FlipResult(value=flip, reason="changed" if flip else "unchanged"),
        metrics={"clinical_fidelity": _graded(cf)},
        provenance=PROVENANCE,
    )
    return result.model_dump_json() + "\n"


def _request(item_id: str, cot: str) -> str:
    return json.dumps({"item_id": item_id, "question": "Is there an effusion? (yes or no)",
                       "ground_truth": "yes", "cot": cot}) + "\n"  # fmt: skip


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "base.jsonl").write_text(
        _result(1, "i1", 5) + _result(2, "i2", 4) + _result(3, "i3", 3) + _result(4, "i4", 2)
    )
    (tmp_path / "cand.jsonl").write_text(
        _result(1, "i1", 2) + _result(2, "i2", None) + _result(3, "i3", 3, flip=True)
        + _result(4, "i4", 2, answer="no")
    )  # fmt: skip
    # two request files: only one holds these items at these lines
    (tmp_path / "other_requests.jsonl").write_text(_request("x1", "an unrelated CoT"))
    (tmp_path / "requests.jsonl").write_text(
        "".join(_request(f"i{n}", f"CoT {n} with a Kerley line") for n in range(1, 5))
    )
    (tmp_path / "notes.md").write_text("# notes\n")
    (tmp_path / "torn.jsonl").write_text('{"line": 1, "metrics": {"clinical_fidelity": 3}}\n')
    (tmp_path / ".base.jsonl.lock").write_text("")
    return tmp_path


def test_a_file_is_a_run_by_its_first_line(folder: Path) -> None:
    assert file_kind(folder / "base.jsonl") == ("results", None)
    assert file_kind(folder / "requests.jsonl") == ("requests", None)
    assert file_kind(folder / "notes.md") == (None, None)
    kind, reason = file_kind(folder / "torn.jsonl")
    assert kind is None and reason is not None
    assert reason.startswith("line 1 is not a result line: metrics.clinical_fidelity")
    assert file_kind(folder / "missing.jsonl")[1] == "cannot be read: No such file or directory"


def test_the_listing_names_runs_and_unreadable_files_and_finds_each_runs_cots(
    folder: Path,
) -> None:
    runs = RunFolder(folder)
    listing = runs.listing()
    assert [run.name for run in listing.runs] == ["base.jsonl", "cand.jsonl"]
    assert [u.name for u in listing.unreadable] == ["torn.jsonl"]
    base = listing.runs[0]
    assert base.lines == 4 and base.judge.startswith("replay:judge.jsonl")
    assert base.means["CF"] == pytest.approx(100 * (1 + 0.75 + 0.5 + 0.25) / 4)
    assert base.cots == str(folder / "requests.jsonl")
    data = runs.explorer("base.jsonl")
    assert data["requests"] and len(data["items"]) == 4
    assert "Kerley" in "".join(part[0] for part in data["items"][0]["cot"])
    # a name is a file of the folder, never a path out of it
    with pytest.raises(KeyError):
        runs.run("../base.jsonl")
    with pytest.raises(KeyError):
        runs.run("requests.jsonl")


def test_a_changed_file_is_read_again(folder: Path) -> None:
    runs = RunFolder(folder)
    first = runs.run("base.jsonl")
    assert runs.run("base.jsonl") is first
    path = folder / "base.jsonl"
    path.write_text(path.read_text() + _result(5, "i5", 1))
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert len(runs.run("base.jsonl").items) == 5


def test_two_runs_compared_item_by_item(folder: Path) -> None:
    runs = RunFolder(folder)
    comparison = compare_items(runs.run("base.jsonl").items, runs.run("cand.jsonl").items, B=50)
    assert comparison.counts["shared"] == 4
    changed = {item["item_id"]: item for item in comparison.changed}
    assert changed["i1"]["changes"] == ["grade"] and changed["i1"]["grades"] == {"CF": ("5", "2")}
    assert changed["i2"]["changes"] == ["new failure"]
    assert changed["i2"]["grades"] == {"CF": ("4", "evidence")}
    assert changed["i3"]["changes"] == ["flip"] and changed["i3"]["flip"] == ("non-flip", "flip")
    assert changed["i4"]["changes"] == ["answer"] and changed["i4"]["answer"] == ("yes", "no")
    assert changed["i1"]["lines"] == (1, 1)
    cf = {m["metric"]: m for m in comparison.metrics}["CF"]
    assert (cf["pairs"], cf["down"], cf["up"], cf["new failure"], cf["fixed"]) == (3, 1, 0, 1, 0)
    assert cf["diff"] == pytest.approx(100 * (0.25 - 1.0) / 3)
    assert comparison.tally == {"new failure": 1, "fixed": 0, "grade": 1, "flip": 1, "answer": 1}


@pytest.fixture
def server(folder: Path) -> Iterator[int]:
    served = make_server(folder, [], port=0)
    thread = threading.Thread(target=served.serve_forever, daemon=True)
    thread.start()
    try:
        yield served.server_address[1]
    finally:
        served.shutdown()
        served.server_close()


def _get(port: int, path: str, host: str | None = None) -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", path, headers={"Host": host or f"127.0.0.1:{port}"})
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def test_the_server_answers_only_its_own_address_and_names_what_is_wrong(server: int) -> None:
    status, page = _get(server, "/")
    assert status == 200 and "base.jsonl" in page and "torn.jsonl" in page
    assert _get(server, "/", host=f"evil.example:{server}")[0] == 403
    status, page = _get(server, "/run?file=nothing.jsonl")
    assert status == 404 and "no results file &#x27;nothing.jsonl&#x27;" in page
    status, page = _get(server, "/compare?base=base.jsonl")
    assert status == 400 and "&#x27;cand&#x27; is missing" in page
    status, page = _get(server, "/compare?base=base.jsonl&cand=cand.jsonl&change=grade")
    assert status == 200 and 'id="changed-count">1 of 4 shared items' in page
