"""The judge's older name, "evaluator", still works wherever users and plugins wrote it, and
says so: flags, variables, keyword settings, the TOML key, result lines written before, the REST
path, the SDK method and class, the exception and the entry-point group."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from faithjudge.cli.main import app
from faithjudge.cli.score_config import load_score_config
from faithjudge.errors import ConfigError, EvaluatorError, JudgeError, UserInputError
from faithjudge.judges import JUDGES
from faithjudge.runners.file_runner import output_judge
from faithjudge.settings import Settings
from faithjudge_client.bodies import EvaluatorInfo, JudgeInfo
from faithjudge_client.client import FaithJudgeClient
from faithjudge_client.lines import ItemResult
from faithjudge_client.registry import Registry, refresh_plugins
from faithjudge_client.retry import RetryPolicy
from pydantic import ValidationError
from typer.testing import CliRunner

from tests.fixtures_service import running_app

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "demo.jsonl"

_INFO = {
    "judge": "lexicon:v1",
    "evaluator": "lexicon:v1",
    "settings_sha256": "9f2c",
    "prompt_set": "v2",
    "prompt_sha256": "5d41",
    "schema_version": "1.1",
    "schemas_sha256": "c0ff",
    "service_version": "0.1.0",
}


def _first_lines(tmp_path: Path, count: int) -> Path:
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(DEMO.read_text(encoding="utf-8").splitlines()[:count]) + "\n")
    return path


# ---------------------------------------------------------------- settings


def test_the_older_variables_set_the_judges_and_warn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAITHJUDGE_EVALUATOR", "openai:m")
    monkeypatch.setenv("FAITHJUDGE_EVALUATORS", "lexicon:v1,openai:m")
    with pytest.warns(DeprecationWarning) as seen:
        settings = Settings()
    said = {str(warning.message) for warning in seen}
    assert "FAITHJUDGE_EVALUATOR is deprecated: use FAITHJUDGE_JUDGE" in said
    assert "FAITHJUDGE_EVALUATORS is deprecated: use FAITHJUDGE_JUDGES" in said
    assert settings.judge == "openai:m" and "judge" in settings.model_fields_set
    assert settings.offered_judges == ("lexicon:v1", "openai:m")
    assert "evaluator" not in (settings.__pydantic_extra__ or {})  # not kept as a plugin's


def test_an_older_and_a_newer_variable_together_are_refused_naming_both(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FAITHJUDGE_JUDGE", "lexicon:v1")
    monkeypatch.setenv("FAITHJUDGE_EVALUATOR", "openai:m")
    with pytest.raises(ConfigError, match="FAITHJUDGE_JUDGE and FAITHJUDGE_EVALUATOR"):
        Settings()


def test_the_older_keywords_set_the_judges_and_warn() -> None:
    with pytest.warns(DeprecationWarning, match=r"Settings\(evaluator=...\) is deprecated"):
        assert Settings(evaluator="openai:m").judge == "openai:m"
    with pytest.raises(ConfigError, match=r"Settings\(judges=...\) and Settings\(evaluators="):
        Settings(judges="a:1", evaluators="b:1")


# ---------------------------------------------------------------- the command line


def test_the_older_flag_scores_and_says_to_use_the_new_one(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    args = [str(_first_lines(tmp_path, 3)), "-o", str(out), "--no-progress"]
    ran = CliRunner().invoke(
        app, ["score", *args, "--evaluator", "lexicon:v1", "--data-dir", str(tmp_path)]
    )
    assert ran.exit_code == 0, ran.output
    assert ran.output.count("--evaluator is deprecated: use --judge") == 1
    lines = [orjson.loads(x) for x in out.read_bytes().splitlines()]
    assert len(lines) == 3 and all(x["provenance"]["judge"] == "lexicon:v1" for x in lines)
    assert not any("evaluator" in x["provenance"] for x in lines)  # never written


def test_the_older_flag_beside_the_new_one_is_a_usage_error(tmp_path: Path) -> None:
    args = [str(_first_lines(tmp_path, 1)), "-o", str(tmp_path / "out.jsonl")]
    both = ["--judge", "lexicon:v1", "--evaluator", "lexicon:v1"]
    ran = CliRunner().invoke(app, ["score", *args, *both])
    assert ran.exit_code == 3
    assert "--judge and --evaluator both given" in ran.output


def test_the_older_flag_is_not_in_the_help() -> None:
    shown = CliRunner().invoke(app, ["score", "--help"])
    assert "--judge" in shown.output and "--evaluator" not in shown.output


def test_the_older_toml_key_is_read_and_warned_of(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "faithjudge.toml"
    config.write_text('[score]\nevaluator = "openai:m"\n')
    assert load_score_config(config).judge == "openai:m"
    assert "[score] evaluator is deprecated: name it judge" in capsys.readouterr().err
    config.write_text('[score]\nevaluator = "openai:m"\njudge = "lexicon:v1"\n')
    with pytest.raises(UserInputError, match="both judge and evaluator"):
        load_score_config(config)


# ---------------------------------------------------------------- result lines


def _older_line(**provenance: Any) -> dict[str, Any]:
    return {
        "line": 1,
        "item_id": "a",
        "provenance": {
            "prompt_set": "v2",
            "prompt_sha256": "5d41",
            "schema_version": "1.1",
            "service_version": "0.1.0",
            **provenance,
        },
    }


def test_a_line_written_before_the_rename_is_read_under_the_new_names(tmp_path: Path) -> None:
    older = _older_line(
        evaluator="openai:m", evaluator_model="m-2025", evaluator_settings_sha256="s"
    )
    provenance = ItemResult.model_validate_json(json.dumps(older)).provenance
    assert provenance is not None
    assert (provenance.judge, provenance.judge_model, provenance.judge_settings_sha256) == (
        "openai:m",
        "m-2025",
        "s",
    )
    assert '"evaluator' not in provenance.model_dump_json()  # written back: the new names only
    output = tmp_path / "out.jsonl"
    output.write_text(json.dumps(older) + "\n")
    kept = output_judge(output)  # a resume keeps the judge of such an output
    assert kept is not None
    assert (kept.judge, kept.settings_sha256, kept.model) == ("openai:m", "s", "m-2025")


def test_a_canary_pinned_before_the_rename_names_its_judge() -> None:
    from faithjudge.stats.canary import JudgeIdentity

    assert JudgeIdentity.model_validate({"evaluator": "lexicon:v1"}).judge == "lexicon:v1"
    with pytest.raises(ValidationError, match="older name 'evaluator'"):
        JudgeIdentity.model_validate({"evaluator": "lexicon:v1", "judge": "lexicon:v1"})


def test_a_line_naming_its_judge_under_both_names_is_refused() -> None:
    both = _older_line(evaluator="openai:m", judge="openai:m")
    with pytest.raises(ValidationError, match="both 'judge' and its older name 'evaluator'"):
        ItemResult.model_validate_json(json.dumps(both))


# ---------------------------------------------------------------- REST and SDK


@pytest.mark.anyio
async def test_the_older_path_answers_the_same_and_is_deprecated(tmp_path: Path) -> None:
    async with running_app(Settings(data_dir=tmp_path / "data")) as (service, client):
        new = await client.get("/v1/judge")
        old = await client.get("/v1/evaluator")
        assert new.status_code == old.status_code == 200
        assert new.json() == old.json()
        assert new.json()["evaluator"] == new.json()["judge"] == "lexicon:v1"
        ready = (await client.get("/readyz")).json()["checks"]
        assert ready["judge"] == ready["evaluator"]
        paths = service.openapi()["paths"]
        assert paths["/v1/evaluator"]["get"].get("deprecated") is True
        assert "deprecated" not in paths["/v1/judge"]["get"]


def _sdk(answer: Any) -> tuple[FaithJudgeClient, list[str]]:
    asked: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.path)
        return answer(request)

    client = FaithJudgeClient(
        "http://fj.test", transport=httpx.MockTransport(handler), retry=RetryPolicy(max_retries=0)
    )
    return client, asked


def test_the_sdk_asks_the_new_path_and_the_older_method_warns() -> None:
    client, asked = _sdk(lambda _request: httpx.Response(200, json=_INFO))
    assert client.judge().judge == "lexicon:v1"
    with pytest.warns(DeprecationWarning, match=r"evaluator\(\) is deprecated: call judge\(\)"):
        info = client.evaluator()
    assert isinstance(info, EvaluatorInfo) and EvaluatorInfo is JudgeInfo
    assert asked == ["/v1/judge", "/v1/judge"]


def test_the_sdk_falls_back_to_the_older_path_of_an_older_server() -> None:
    def older_server(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/evaluator":
            return httpx.Response(200, json=_INFO)
        return httpx.Response(404, json={"title": "Not Found", "status": 404})

    client, asked = _sdk(older_server)
    assert client.judge().evaluator == "lexicon:v1"
    assert asked == ["/v1/judge", "/v1/evaluator"]


# ---------------------------------------------------------------- plugins


def test_the_older_exception_name_is_the_same_class() -> None:
    assert EvaluatorError is JudgeError
    with pytest.raises(EvaluatorError):
        raise JudgeError("down")


def test_a_plugin_in_the_older_group_still_registers_and_warns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert JUDGES.group == "faithjudge.judges"
    assert JUDGES.old_groups == ("faithjudge.evaluators",)
    site = tmp_path / "site"
    info = site / "fj_older-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fj-older\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[fj.test.old_judges]\nold = fj_older_mod:OLD\nboth = fj_older_mod:OLD\n"
        "[fj.test.new_judges]\nboth = fj_older_mod:NEW\n"
    )
    (site / "fj_older_mod.py").write_text("OLD = 'old'\nNEW = 'new'\n")
    monkeypatch.syspath_prepend(str(site))
    refresh_plugins()
    try:
        registry: Registry[object] = Registry(
            "judge backend", group="fj.test.new_judges", old_groups=("fj.test.old_judges",)
        )
        with pytest.warns(DeprecationWarning, match="group fj.test.old_judges is deprecated"):
            names = registry.names()
        assert names == ("both", "old")  # the new group's entry wins a name declared in both
        assert registry.get("old") == "old" and registry.get("both") == "new"
    finally:
        refresh_plugins()


def test_a_plugin_importing_the_former_backend_path_gets_the_same_objects_and_a_warning() -> None:
    import faithjudge.evaluators as former
    import faithjudge.judges as judges

    with pytest.warns(DeprecationWarning, match=r"faithjudge\.judges\.JudgeBackend"):
        backend = former.EvaluatorBackend
    assert backend is judges.JudgeBackend
    with pytest.warns(DeprecationWarning, match=r"faithjudge\.judges\.register_judge"):
        assert former.register_evaluator is judges.register_judge
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        former.Nothing  # noqa: B018
