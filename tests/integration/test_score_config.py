"""``score --config`` (the ``[score]`` table beside the gate's) and the smoke runs ``--limit``
and ``--sample``."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from faithjudge.cli.main import app
from faithjudge.reports.gate import GateConfigError, parse_config
from faithjudge.runners.selection import sample_lines
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "demo.jsonl"
GATE_TABLES = "[quality]\nmin_cf = 0.0\n"


def _demo() -> list[dict[str, Any]]:
    return [json.loads(x) for x in DEMO.read_text(encoding="utf-8").splitlines() if x.strip()]


def _run(*args: object) -> Any:
    return CliRunner().invoke(app, [*map(str, args)])


def _lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in path.read_bytes().splitlines() if x.strip()]


def _project(tmp_path: Path, score_table: str) -> Path:
    """A folder with a config and the demo file as ``cots.jsonl``."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "cots.jsonl").write_bytes(DEMO.read_bytes())
    config = project / "faithjudge.toml"
    config.write_text(f"[score]\n{score_table}\n{GATE_TABLES}", encoding="utf-8")
    return config


def test_config_paths_are_read_from_its_folder_and_the_gate_reads_the_same_file(
    tmp_path: Path,
) -> None:
    config = _project(
        tmp_path,
        'input = "cots.jsonl"\noutput = "out/results.jsonl"\njudge = "lexicon:v1"\n'
        'concurrency = 2\nprompt_set = "v1"\nknowledge_base = "cxr_vqa"\ndata_dir = "cache"\n'
        "cache = true",
    )
    result = _run("score", "--config", config, "--no-progress")
    assert result.exit_code == 0, result.output
    results = config.parent / "out" / "results.jsonl"
    scored = _lines(results)
    assert [r["line"] for r in scored] == [1, 2, 3, 4, 5, 6]
    assert scored[0]["provenance"]["judge"] == "lexicon:v1"
    assert (config.parent / "cache").is_dir()
    gated = _run("gate", results, "--config", config)
    assert gated.exit_code in (0, 1, 2), gated.output
    assert "unknown section" not in gated.output


def test_options_given_on_the_command_line_win(tmp_path: Path) -> None:
    config = _project(tmp_path, 'input = "cots.jsonl"\noutput = "a.jsonl"\njudge = "nosuch:model"')
    refused = _run("score", "--config", config, "--no-progress")
    assert refused.exit_code == 3 and "nosuch" in refused.output
    other = tmp_path / "b.jsonl"
    result = _run(
        "score", "--config", config, "-o", other, "--judge", "lexicon:v1",
        "--data-dir", tmp_path / "d", "--no-progress",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert len(_lines(other)) == 6 and not (config.parent / "a.jsonl").exists()


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("bogus = 1", "bogus"),
        ('concurrency = "eight"', "concurrency"),
        ("concurrency = 0", "concurrency"),
        ("output = 3", "output"),
        ("cache = 1", "cache"),
    ],
)
def test_a_bad_score_table_exits_3_naming_the_key(tmp_path: Path, table: str, message: str) -> None:
    config = _project(tmp_path, f'input = "cots.jsonl"\n{table}')
    result = _run("score", "--config", config, "-o", tmp_path / "o.jsonl", "--no-progress")
    assert result.exit_code == 3, result.output
    assert "[score]" in result.output and message in result.output
    assert not (tmp_path / "o.jsonl").exists()


def test_a_config_without_score_table_or_input_exits_3(tmp_path: Path) -> None:
    gate_only = tmp_path / "gate.toml"
    gate_only.write_text(GATE_TABLES, encoding="utf-8")
    result = _run("score", "--config", gate_only, "-o", tmp_path / "o.jsonl")
    assert result.exit_code == 3 and "no [score] table" in result.output
    config = _project(tmp_path, 'judge = "lexicon:v1"')
    result = _run("score", "--config", config, "-o", tmp_path / "o.jsonl")
    assert result.exit_code == 3 and "IN.jsonl is required" in result.output
    result = _run("score", DEMO)
    assert result.exit_code == 3 and "--output is required" in result.output
    broken = tmp_path / "broken.toml"
    broken.write_text("[score\n", encoding="utf-8")
    result = _run("score", "--config", broken, "-o", tmp_path / "o.jsonl")
    assert result.exit_code == 3 and "not valid TOML" in result.output


def test_a_config_saved_with_a_byte_order_mark_is_read_by_score_and_gate(tmp_path: Path) -> None:
    config = _project(tmp_path, 'input = "cots.jsonl"\noutput = "results.jsonl"')
    config.write_bytes("\ufeff".encode() + config.read_bytes())
    result = _run("score", "--config", config, "--no-progress")
    assert result.exit_code == 0, result.output
    gated = _run("gate", config.parent / "results.jsonl", "--config", config)
    assert gated.exit_code in (0, 1, 2), gated.output
    assert "not valid TOML" not in gated.output


def test_a_missing_kb_path_is_looked_for_beside_the_config_not_where_score_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _project(
        tmp_path, 'input = "cots.jsonl"\noutput = "r.jsonl"\nknowledge_base = "kbs/mine.json"'
    )
    # the same relative path exists where the command runs: it must not be the one read
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "kbs").mkdir(parents=True)
    (elsewhere / "kbs" / "mine.json").write_text("{}", encoding="utf-8")
    monkeypatch.chdir(elsewhere)
    result = _run("score", "--config", config, "--no-progress")
    assert result.exit_code == 3, result.output
    said = " ".join(result.output.split())
    assert f"not found: {config.parent / 'kbs' / 'mine.json'}" in said


def test_the_gate_passes_over_the_score_table_and_still_checks_its_own() -> None:
    parsed = parse_config({"score": {"judge": "lexicon:v1"}, "quality": {"min_cf": 10.0}})
    assert parsed.quality == {"min_cf": 10.0}
    with pytest.raises(
        GateConfigError, match=r"unknown section \[scores\]; did you mean \[score\]\?"
    ):
        parse_config({"scores": {}, "quality": {"min_cf": 10.0}})


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "[score]\nconcurency = 8\n",
            "unknown key 'concurency' in [score]; did you mean 'concurrency'?",
        ),
        (
            "[gate]\nseeds = 1\n[quality]\nmin_cf = 1.0\n",
            "unknown key 'seeds' in [gate]; did you mean 'seed'?",
        ),
        (
            "[coverage]\nmax_shema = 1.0\n",
            "unknown key 'max_shema' in [coverage]; did you mean 'max_schema'?",
        ),
    ],
)
def test_a_typo_in_a_key_is_named_with_the_key_it_was_meant_to_be(
    tmp_path: Path, text: str, said: str
) -> None:
    config = tmp_path / "faithjudge.toml"
    config.write_text('[score]\ninput = "cots.jsonl"\n' + text.replace("[score]\n", ""))
    command = "score" if text.startswith("[score]") else "gate"
    (tmp_path / "r.jsonl").write_text("")
    args = ["--config", config, "--no-progress"] if command == "score" else [
        tmp_path / "r.jsonl", "--config", config]  # fmt: skip
    result = _run(command, *args)
    assert result.exit_code == 3, result.output
    assert said in " ".join(result.output.split()), result.output
    assert "Extra inputs are not permitted" not in result.output


# ------------------------------------------------------------------ smoke runs


def _probe(tmp_path: Path, codes: dict[str | None, int]) -> Path:
    base = _demo()[0]
    lines = []
    for code, count in codes.items():
        for i in range(count):
            line = dict(base, item_id=f"{code}-{i}")
            if code is None:
                line.pop("modification")
            else:
                line["modification"] = {"code": code}
            lines.append(json.dumps(line))
    source = tmp_path / "probe.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return source


def test_limit_scores_the_first_lines_and_a_larger_limit_resumes(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    common = ("--judge", "lexicon:v1", "--data-dir", tmp_path / "d", "--no-progress")
    result = _run("score", DEMO, "-o", out, "--limit", 2, *common)
    assert result.exit_code == 0, result.output
    assert "2 of 6 lines" in result.output
    assert [r["line"] for r in _lines(out)] == [1, 2]
    result = _run("score", DEMO, "-o", out, "--limit", 4, *common)
    assert result.exit_code == 0, result.output
    assert [r["line"] for r in _lines(out)] == [1, 2, 3, 4]


def test_a_sample_is_stratified_by_modification_and_seeded(tmp_path: Path) -> None:
    source = _probe(tmp_path, {"SHAM": 20, None: 10, "TB-RAD": 10})
    picked = sample_lines(source, 8, seed=1)
    rows = [json.loads(x) for x in source.read_text().splitlines()]
    codes = [row.get("modification", {}).get("code") for row in rows]
    by_code = Counter(codes[n - 1] for n in picked)
    assert by_code == {"SHAM": 4, None: 2, "TB-RAD": 2}
    assert sample_lines(source, 8, seed=1) == picked
    assert any(sample_lines(source, 8, seed=s) != picked for s in range(2, 6))
    assert sample_lines(source, 100, seed=1) == frozenset(range(1, 41))

    out = tmp_path / "out.jsonl"
    result = _run(
        "score", source, "-o", out, "--sample", 8, "--seed", 1, "--judge", "lexicon:v1",
        "--data-dir", tmp_path / "d", "--no-progress",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert sorted(r["line"] for r in _lines(out)) == sorted(picked)

    # the full run after it fills the gaps in line order, the sample's results byte for byte
    sampled = {json.loads(x)["line"]: x for x in out.read_text().splitlines()}
    result = _run(
        "score", source, "-o", out, "--judge", "lexicon:v1", "--data-dir", tmp_path / "d",
        "--no-progress",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = out.read_text().splitlines()
    assert [json.loads(x)["line"] for x in rows] == list(range(1, 41))
    assert all(rows[n - 1] == text for n, text in sampled.items())


def test_a_sample_shares_its_lines_by_largest_remainder(tmp_path: Path) -> None:
    source = _probe(tmp_path, {"SHAM": 18, "VH-BB": 2})
    with source.open("a", encoding="utf-8") as handle:
        handle.write("{torn\n")
    picked = sample_lines(source, 10, seed=0)
    assert len(picked) == 10
    codes = [
        "unreadable" if not x.startswith('{"') else json.loads(x)["modification"]["code"]
        for x in source.read_text().splitlines()
    ]
    # exact shares 8.57, 0.95 and 0.48: the two seats left go to the largest remainders
    assert Counter(codes[n - 1] for n in picked) == {"SHAM": 9, "VH-BB": 1}
