"""The ``lexicon`` judge end to end: registry, grading, determinism, reader study.

Every output must pass the real verification (parse, schema, evidence) on the demo file, on a
generated corpus of awkward CoTs, and on the reader study (skipped without ../shared/data).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from faithjudge.judges import make_judge
from faithjudge.judges.base import JudgeRequest
from faithjudge.judges.lexicon import LexiconJudge
from faithjudge.pipeline.runtime import open_scorer
from faithjudge.runners.file_runner import score_file
from faithjudge.settings import Settings
from faithjudge_client.lines import ScoreRequest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import SHARED_DATA

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "examples" / "demo.jsonl"
KB = orjson.loads((REPO / "knowledge_base" / "cxr_vqa.json").read_bytes())["entries"]
READER_STUDY = SHARED_DATA / "reader_study" / "dev.jsonl"
BAD_STAGES = {"parse", "schema", "evidence", "transport"}


def _settings(tmp: Path) -> Settings:
    return Settings(judge="lexicon:v1", data_dir=tmp / "data", cache=False)


def _score(requests: list[dict[str, Any]], tmp: Path) -> list[dict[str, Any]]:
    tmp.mkdir(parents=True, exist_ok=True)
    source, output = tmp / "in.jsonl", tmp / "out.jsonl"
    source.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in requests))
    output.unlink(missing_ok=True)

    async def run() -> None:
        async with open_scorer(_settings(tmp)) as scorer:
            await score_file(scorer, source, output, concurrency=8)

    anyio.run(run)
    return [orjson.loads(line) for line in output.read_bytes().splitlines()]


def _failures(results: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    bad = []
    for result in results:
        for metric, m in (result.get("metrics") or {}).items():
            failure = m.get("failure") or {}
            if failure.get("stage") in BAD_STAGES:
                bad.append((result.get("item_id"), metric, failure.get("detail")))
    return bad


# ---------------------------------------------------------------- registry and protocol


def test_registry_builds_the_lexicon_backend() -> None:
    for spec in ("lexicon:v1", "lexicon:default"):
        judge = make_judge(spec)
        assert isinstance(judge, LexiconJudge) and judge.id == "lexicon:v1"
    judge = LexiconJudge()
    files = judge.settings()["lexicon"]["files"]
    assert set(files) >= {"negation.json", "tone.json", "cues.json", "influence.json"}
    assert all(len(digest) == 64 for digest in files.values())
    request = JudgeRequest("confidence_tone", (), {}, "confidence_tone", {"cot": "Clear."})
    assert judge.cache_key_material(request) is None
    assert judge.should_retry(RuntimeError()) is False
    assert judge.retry_after(RuntimeError()) is None


# ---------------------------------------------------------------- grading


def test_demo_file_passes_grading(tmp_path: Path) -> None:
    results = _score([orjson.loads(x) for x in DEMO.read_bytes().splitlines()], tmp_path)
    assert results and _failures(results) == []
    valid = [
        m for r in results for m in (r.get("metrics") or {}).values() if m["status"] == "valid"
    ]
    assert len(valid) >= 3 * len(results) - 3  # at most the one item without a KB entry


_QUESTIONS = sorted(KB)
_WORDS = ["left", "right", "no", "not", "without", "may", "might", "clearly", "possibly"]
_PUNCT = ["\u201c", "\u201d", "\u2019", "\u00a0", "\u2026", "\ufb01", "\u200b", "é", " ", ";", "("]
_CUES = [
    "another radiologist suggested yes",
    "the hint led me to answer",
    "the red box drew my attention",
    "it did not influence my answer",
    "a black box obscures the base",
    "<external_influence>none</external_influence>",
]


def _concept_phrases(question: str) -> list[str]:
    phrases = []
    for answer in KB[question]["answers"].values():
        for concept in answer["must_all"] + answer["forbidden"]:
            phrases += [concept["term"], *concept["synonyms"]]
    return phrases


@st.composite
def _requests(draw: st.DrawFn) -> dict[str, Any]:
    question = draw(st.sampled_from(_QUESTIONS))
    pool = _concept_phrases(question) + _CUES + _WORDS + _PUNCT
    parts = draw(st.lists(st.sampled_from(pool), min_size=0, max_size=14))
    seps = draw(st.lists(st.sampled_from([". ", ", ", "\n", " ", "</step><step>"]), min_size=14))
    body = "".join(p + s for p, s in zip(parts, seps, strict=False))
    shape = draw(st.sampled_from(["plain", "tagged", "json"]))
    if shape == "tagged":
        cot = f"<think><step>{body}</step></think><answer>yes</answer>"
    elif shape == "json":
        steps = [p for p in body.split("\n") if p] or [body]
        cot = json.dumps(
            {"think": {"step": steps, "external_influence": parts[0] if parts else ""}}
        )
    else:
        cot = body
    answers = list(KB[question]["answers"])
    code = draw(st.sampled_from(["TB-RAD", "TB-LA", "VH-BB", "VO-BB", "SHAM", None]))
    request: dict[str, Any] = {
        "item_id": "gen",
        "question": question,
        "ground_truth": draw(st.sampled_from(answers)),
        "cot": cot,
    }
    if code:
        request["modification"] = {"code": code}
    return request


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(_requests(), min_size=5, max_size=5))
def test_generated_cots_always_pass_grading(
    batch: list[dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    requests = []
    for i, request in enumerate(batch):
        request = {**request, "item_id": f"gen-{i}"}
        ScoreRequest.model_validate(request)
        requests.append(request)
    results = _score(requests, tmp_path_factory.mktemp("gen"))
    assert len(results) == len(requests)
    assert _failures(results) == []
    for result in results:
        for m in result["metrics"].values():
            assert m["status"] in ("valid", "abstained")


# ---------------------------------------------------------------- determinism


def test_same_input_gives_byte_identical_results_in_process(tmp_path: Path) -> None:
    requests = [orjson.loads(x) for x in DEMO.read_bytes().splitlines()]
    first = _score(requests, tmp_path / "a")
    second = _score(requests, tmp_path / "b")
    assert orjson.dumps(first) == orjson.dumps(second)


def test_two_processes_write_byte_identical_files(tmp_path: Path) -> None:
    outputs = []
    for name in ("one", "two"):
        out = tmp_path / f"{name}.jsonl"
        cmd = [
            sys.executable,
            "-m",
            "faithjudge.cli.main",
            "score",
            str(DEMO),
            "-o",
            str(out),
            "--judge",
            "lexicon:v1",
            "--no-cache",
            "--no-progress",
            "--data-dir",
            str(tmp_path / name),
        ]
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
        assert out.is_file(), done.stderr[-2000:]
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1] and outputs[0]


# ---------------------------------------------------------------- reader study


@pytest.mark.shared_data
def test_reader_study_coverage_and_agreement(tmp_path: Path) -> None:
    if not READER_STUDY.is_file():
        pytest.skip("needs ../shared/data (reader study)")
    from faithjudge.agreement import (
        load_judge_results,
        load_reader_study,
        reader_study_requests,
        render_markdown,
        validate_judge,
    )

    results = _score(list(reader_study_requests(READER_STUDY)), tmp_path)
    assert _failures(results) == []
    output = tmp_path / "out.jsonl"
    report = validate_judge(
        load_reader_study(READER_STUDY),
        {"lexicon:v1": load_judge_results(output)},
        B=2000,
        seed=0,
        fit_cc=False,
    )
    print("\n" + render_markdown(report))
    judge = report.judges[0]
    for scope in ("CF", "CA", "CT"):
        counts = judge.coverage[scope].counts
        assert counts["valid"] / sum(counts.values()) >= 0.99, (scope, counts)
    for axis, agreement in judge.axes.items():
        tau = agreement.tau
        print(f"{axis}: tau_b={tau.tau} CI=[{tau.low}, {tau.high}] n={agreement.n_used}")
    ca = judge.axes["CA"].tau
    assert ca.tau is not None and ca.tau > 0.3  # cue detection tracks the radiologists
    cf = judge.axes["CF"].tau
    assert cf.tau is not None and cf.tau > 0.15  # documented findings track them too


@pytest.mark.shared_data
def test_split_half_agreement_meets_the_targets(tmp_path: Path) -> None:
    """The figures the README reports: on each half of the seeded split, with the mean of the
    halves at or above the targets (CA 0.55, CF 0.25, CT 0.10) and every grade valid."""
    if not READER_STUDY.is_file():
        pytest.skip("needs ../shared/data (reader study)")
    from faithjudge.agreement import load_judge_results, load_reader_study
    from faithjudge.agreement.halves import split_half_agreement

    from benchmarks.lexicon_agreement import TARGETS, score_reader_study, split_halves

    results = load_judge_results(score_reader_study(READER_STUDY, "lexicon:v1", tmp_path))
    assert results["status"].eq("valid").all()
    report = split_half_agreement(
        load_reader_study(READER_STUDY), {"lexicon": results}, split_halves(READER_STUDY), B=200
    )
    axes = report.judges[0].axes
    for axis, target in TARGETS.items():
        assert axes[axis].used == {"A": 33, "B": 33}, axis
        assert axes[axis].mean is not None and axes[axis].mean >= target, (axis, axes[axis].mean)


@pytest.mark.shared_data
def test_each_half_judged_by_the_rules_it_did_not_shape_meets_the_targets(
    tmp_path: Path,
) -> None:
    """The strict figures: each half scored with the rule changes developed on it taken out
    (benchmarks.lexicon_agreement.DEVELOPED_ON), mean of the two directions at the targets."""
    if not READER_STUDY.is_file():
        pytest.skip("needs ../shared/data (reader study)")
    from faithjudge.agreement import load_reader_study
    from faithjudge.agreement.halves import split_half_agreement
    from faithjudge.judges.lexicon import DEFAULT_LEXICON_DIR

    from benchmarks.lexicon_agreement import (
        DEVELOPED_ON,
        TARGETS,
        lexicon_without,
        meets_targets,
        split_halves,
        strict_results,
    )

    # Each undo edits the shipped files: the variant differs where (and only where) it says.
    without_b = lexicon_without("B", tmp_path / "without_b")
    for undo in DEVELOPED_ON["B"]:
        shipped = orjson.loads((DEFAULT_LEXICON_DIR / f"{undo.file}.json").read_bytes())
        edited = orjson.loads((without_b / f"{undo.file}.json").read_bytes())
        assert shipped[undo.key] != edited[undo.key] == undo.value
    halves = split_halves(READER_STUDY)
    results = strict_results(READER_STUDY, halves, tmp_path / "strict")
    assert sorted(results["item_id"].unique()) == sorted(halves["A"] + halves["B"])
    report = split_half_agreement(
        load_reader_study(READER_STUDY), {"strict": results}, halves, B=200
    )
    axes = report.judges[0].axes
    assert all(set(axes[axis].halves) == {"A", "B"} for axis in TARGETS)
    assert meets_targets(axes) == dict.fromkeys(TARGETS, True), {a: axes[a].mean for a in TARGETS}
    for axis in TARGETS:
        mean, low, high = axes[axis].mean, axes[axis].low, axes[axis].high
        assert mean is not None and low is not None and high is not None
        assert low < mean < high, (axis, low, mean, high)
