"""Validate the four recorded judges against the reader study, end to end (needs ../shared/data).

The reader-study rows become ScoreRequest lines (the adapter), each judge's recorded answers are
replayed through the real scorer (``replay:FILE#judge``, in-process, no cache), and the result
files go through ``validate_judge``. ``pytest -s`` prints the Markdown report.

The recorded file holds three judges' answers for item rs-063 twice, byte for byte; the replay
backend accepts identical repeats, so the file is replayed as it is.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import orjson
import pandas as pd
import pytest
from faithjudge.agreement import (
    ValidationReport,
    load_judge_results,
    load_reader_study,
    reader_study_requests,
    render_markdown,
    validate_judge,
)
from faithjudge.cli.main import app
from faithjudge.pipeline.runtime import open_scorer
from faithjudge.runners.file_runner import score_file
from faithjudge.settings import Settings
from typer.testing import CliRunner

from tests.conftest import SHARED_DATA

READER_STUDY = SHARED_DATA / "reader_study" / "dev.jsonl"
JUDGE_OUTPUTS = SHARED_DATA / "judge_outputs" / "dev.jsonl"
JUDGES = (
    "llama-3.3-70b-instruct-awq/run1",
    "llama-3.3-70b-instruct-awq/run2",
    "qwen3-30b-a3b-instruct",
    "gpt-oss-20b",
)
N_ITEMS = 66

pytestmark = pytest.mark.shared_data


def _records(path: Path) -> list[tuple[bytes, dict[str, Any]]]:
    return [(line, orjson.loads(line)) for line in path.read_bytes().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Result files of the four judges on the 66 reader-study items."""
    if not (READER_STUDY.is_file() and JUDGE_OUTPUTS.is_file()):
        pytest.skip("needs ../shared/data (reader study and recorded judge outputs)")
    tmp = tmp_path_factory.mktemp("validate")
    requests = tmp / "requests.jsonl"
    requests.write_bytes(
        b"".join(orjson.dumps(r) + b"\n" for r in reader_study_requests(READER_STUDY))
    )
    replay = JUDGE_OUTPUTS

    async def run(judge: str, output: Path) -> None:
        settings = Settings(judge=f"replay:{replay}#{judge}", data_dir=tmp / "d", cache=False)
        async with open_scorer(settings) as scorer:
            summary = await score_file(scorer, requests, output, concurrency=8)
        assert summary.scored == N_ITEMS and summary.input_errors == 0

    outputs = {}
    for judge in JUDGES:
        output = tmp / f"{judge.replace('/', '_')}.jsonl"
        anyio.run(run, judge, output)
        outputs[judge] = output
    return outputs


def test_recorded_duplicates_are_identical_repeats() -> None:
    if not JUDGE_OUTPUTS.is_file():
        pytest.skip("needs ../shared/data (recorded judge outputs)")
    counts = Counter(
        (r.get("judge"), r["item_id"], r["metric"]) for _, r in _records(JUDGE_OUTPUTS)
    )
    repeated = {key for key, n in counts.items() if n > 1}
    assert {item for _, item, _ in repeated} == {"rs-063"}
    assert {judge for judge, _, _ in repeated} == set(JUDGES) - {JUDGES[0]}


def test_validate_the_recorded_judges_on_the_reader_study(scored: dict[str, Path]) -> None:
    ratings = load_reader_study(READER_STUDY)
    frames = {judge: load_judge_results(path) for judge, path in scored.items()}
    report = validate_judge(ratings, frames, B=10_000, seed=0, fit_cc=True)
    print("\n" + render_markdown(report))

    assert report.n_items == N_ITEMS and report.raters == ["r1", "r2", "r3", "r4"]
    names = {j.name for j in report.judges}
    assert names == set(JUDGES)
    for judge in report.judges:
        for axis, agreement in judge.axes.items():
            tau = agreement.tau
            if tau.tau is not None:
                assert -1.0 <= tau.tau <= 1.0, (judge.name, axis)
                assert tau.low is not None and tau.high is not None
                assert -1.0 <= tau.low <= tau.high <= 1.0
            assert agreement.n_used <= agreement.n_rated <= N_ITEMS
        for scope in ("CF", "CA", "CC", "CT"):
            assert sum(judge.coverage[scope].counts.values()) == N_ITEMS
        # the reader study has no SHAM items: FPR is reported as not estimable, not failed
        assert judge.fpr_sham.n_sham == 0
        assert judge.fpr_sham.note == "no sham items: FPR not estimable"
        assert not any(g.gate == "fpr_sham" and g.passed is False for g in judge.gates)

    by_name = {j.name: j for j in report.judges}
    for run in JUDGES[:2]:  # both Llama runs track the radiologists on causal attribution
        ca = by_name[run].axes["CA"].tau
        assert ca.tau is not None and ca.tau > 0.3 and ca.p is not None and ca.p < 0.001
        assert ca.low is not None and ca.low > 0
    # run1 has no recorded answers for 16 items: they are transport failures, not judge failures
    assert by_name[JUDGES[0]].coverage["CA"].counts["transport"] == 16
    assert by_name[JUDGES[0]].coverage["CA"].n_judged == 50

    screening = report.screening
    if screening.status == "selected":
        assert screening.selected in names
    else:
        assert screening.best_available in names and screening.failed_gates
    assert screening.reason.endswith(".")
    for axis in ("CF", "CA"):
        ceiling = report.ceiling[axis]
        assert ceiling.mean is not None and ceiling.min is not None and ceiling.max is not None
        assert ceiling.min <= ceiling.mean <= ceiling.max
    assert ValidationReport.model_validate_json(report.model_dump_json()) == report


def test_cli_validate_judge_on_the_reader_study(scored: dict[str, Path], tmp_path: Path) -> None:
    args = ["validate-judge", "--reader-study", str(READER_STUDY), "--bootstrap", "500"]
    for judge, path in scored.items():
        args += ["--judge", f"{judge}={path}"]
    out = tmp_path / "report.json"
    result = CliRunner().invoke(app, [*args, "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "### Screening decision" in result.output
    report = orjson.loads(out.read_bytes())
    assert len(report["judges"]) == 4
    assert pd.Series([j["name"] for j in report["judges"]]).is_unique
