"""A job keeps the judge it was uploaded under; a service may offer several judges.

On SQLite and PostgreSQL: a job is never finished by a judge other than its own (it waits,
saying for which judge, until a process offering that judge takes it up), and a service offering
two judges scores each job with the judge it names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson
import pytest
from faithjudge.reports.judges import summarise_judges
from faithjudge.settings import Settings
from faithjudge_client.lines import ItemResult

from tests import fixtures_service
from tests.fakes.judge_server import run_fake_judge
from tests.fixtures_service import Backend, running_app, wait_for_status
from tests.integration.test_api_jobs import NDJSON, demo_lines, settings_for

pytestmark = pytest.mark.anyio
store_backend = fixtures_service.store_backend

OTHER = "openai:judge-x"
"""A second judge: the OpenAI backend against the fake judge server."""


def _settings(backend: Backend, tmp_path: Path, base_url: str, **extra: object) -> Settings:
    return settings_for(
        backend, tmp_path, openai_base_url=base_url, openai_api_key="sk-test", **extra
    )


async def _upload(client: httpx.AsyncClient, count: int, **params: str) -> dict[str, Any]:
    body = b"\n".join(demo_lines(count)) + b"\n"
    response = await client.post("/v1/jobs", content=body, headers=NDJSON, params=params)
    assert response.status_code == 202, response.text
    accepted: dict[str, Any] = response.json()
    return accepted


async def _results(client: httpx.AsyncClient, job_id: str) -> list[ItemResult]:
    response = await client.get(f"/v1/jobs/{job_id}/results")
    response.raise_for_status()
    return [ItemResult.model_validate_json(x) for x in response.content.splitlines() if x]


def _judge(result: ItemResult) -> str:
    assert result.provenance is not None, result
    return result.provenance.judge


async def _wait_for_detail(
    client: httpx.AsyncClient, job_id: str, start: str, *, within: float = 30.0
) -> dict[str, Any]:
    with anyio.fail_after(within):
        while True:
            response = await client.get(f"/v1/jobs/{job_id}")
            response.raise_for_status()
            body: dict[str, Any] = response.json()
            if (body["detail"] or "").startswith(start):
                return body
            await anyio.sleep(0.05)


async def test_a_job_waits_for_its_judge_and_is_never_scored_by_another(
    store_backend: Backend, tmp_path: Path
) -> None:
    with run_fake_judge() as fake:
        uploading = _settings(store_backend, tmp_path, fake.base_url, judge=OTHER)
        async with running_app(uploading.model_copy(update={"workers": False})) as (_, client):
            accepted = await _upload(client, 6)
        assert accepted["judge"] == OTHER
        job_id = accepted["id"]

        # restarted with another judge: the job waits, and says for which judge
        other = _settings(store_backend, tmp_path, fake.base_url, judge="lexicon:v1")
        async with running_app(other) as (_, client):
            status = await _wait_for_detail(client, job_id, "waiting for a worker")
            assert status["detail"] == (
                f"waiting for a worker that offers judge {OTHER}; this service offers lexicon:v1"
            )
            assert status["status"] == "queued" and status["done"] == 0
            assert status["judge"] == OTHER
        assert fake.counters.total == 0

        # a process offering the job's judge (beside another) finishes it with that judge
        both = _settings(store_backend, tmp_path, fake.base_url, judges=f"lexicon:v1,{OTHER}")
        async with running_app(both) as (_, client):
            status = await wait_for_status(client, job_id)
            assert status["done"] == 6 and status["detail"] is None
            results = await _results(client, job_id)
    assert len(results) == 6
    assert {_judge(r) for r in results} == {OTHER}
    assert fake.counters.total > 0


async def test_a_judge_with_a_long_spec_is_recorded_on_every_backend(
    store_backend: Backend, tmp_path: Path
) -> None:
    # a judge is named by its spec, which holds a path or a model name of any length
    long_judge = "openai:" + "m" * 250
    settings = _settings(
        store_backend, tmp_path, "http://127.0.0.1:9", judge=long_judge, workers=False
    )
    async with running_app(settings) as (_, client):
        accepted = await _upload(client, 2)
        assert accepted["judge"] == long_judge
        status = (await client.get(f"/v1/jobs/{accepted['id']}")).json()
        assert status["status"] == "queued"


async def test_a_job_waits_when_its_judges_configuration_changed(
    store_backend: Backend, tmp_path: Path
) -> None:
    async with running_app(settings_for(store_backend, tmp_path, workers=False)) as (_, client):
        job_id = (await _upload(client, 3))["id"]
    changed = settings_for(store_backend, tmp_path, quote_tolerance=0.05)
    async with running_app(changed) as (_, client):
        status = await _wait_for_detail(client, job_id, "waiting for a worker")
        assert status["detail"] == (
            "waiting for a worker that offers judge lexicon:v1 as it was at upload; this "
            "service offers lexicon:v1, whose lexicon:v1 differs in scoring settings"
        )
        assert status["done"] == 0
    async with running_app(settings_for(store_backend, tmp_path)) as (_, client):
        status = await wait_for_status(client, job_id)
    assert status["done"] == 3 and status["detail"] is None


async def test_a_service_offering_two_judges_scores_each_job_with_its_own(
    store_backend: Backend, tmp_path: Path
) -> None:
    with run_fake_judge() as fake:
        settings = _settings(store_backend, tmp_path, fake.base_url, judges=f"lexicon:v1,{OTHER}")
        async with running_app(settings) as (_, client):
            config = (await client.get("/v1/config")).json()
            assert config["default_judge"] == "lexicon:v1"
            assert [j["judge"] for j in config["judges"]] == ["lexicon:v1", OTHER]
            info = (await client.get("/v1/judge", params={"judge": OTHER})).json()
            assert info["judge"] == OTHER and info["judge"] == OTHER

            default = await _upload(client, 5)
            named = await _upload(client, 4, judge=OTHER)
            assert (default["judge"], named["judge"]) == ("lexicon:v1", OTHER)
            for accepted in (default, named):
                status = await wait_for_status(client, accepted["id"])
                assert status["judge"] == accepted["judge"]
            lexicon_results = await _results(client, default["id"])
            other_results = await _results(client, named["id"])

            line = orjson.loads(demo_lines(1)[0])
            scored = await client.post("/v1/score", json=line, params={"judge": OTHER})
            assert scored.status_code == 200, scored.text
            assert scored.json()["provenance"]["judge"] == OTHER

            for path in ("/v1/score", "/v1/jobs"):
                refused = await client.post(
                    path,
                    content=demo_lines(1)[0],
                    headers={"content-type": "application/json"},
                    params={"judge": "openai:nope"},
                )
                assert refused.status_code == 422, refused.text
                problem = refused.json()
                assert problem["detail"] == (
                    f"this service offers no judge 'openai:nope'; it offers lexicon:v1, {OTHER}"
                )
                assert problem["errors"][0]["field"] == "judge"

    assert len(lexicon_results) == 5 and len(other_results) == 4
    lexicon_judges = summarise_judges(lexicon_results)
    other_judges = summarise_judges(other_results)
    assert not lexicon_judges.mixed and not other_judges.mixed
    assert lexicon_judges.judges[0][0].judge == "lexicon:v1"
    assert other_judges.judges[0][0].judge == OTHER
    assert other_judges.judges[0][0].model == "judge-x"
    # both together are two judges, each named with its lines
    together = summarise_judges([*lexicon_results, *other_results])
    assert together.mixed
    assert {(j.judge, n) for j, n in together.judges} == {("lexicon:v1", 5), (OTHER, 4)}


def test_the_sdk_and_submit_name_the_judge(tmp_path: Path) -> None:
    from faithjudge.api.app import create_app
    from faithjudge.cli.main import app as cli
    from faithjudge_client import FaithJudgeClient, ValidationFailed
    from typer.testing import CliRunner

    source = tmp_path / "in.jsonl"
    source.write_bytes(b"\n".join(demo_lines(3)) + b"\n")
    with run_fake_judge() as fake:
        values: dict[str, Any] = {
            "data_dir": tmp_path / "data",
            "judges": f"lexicon:v1,{OTHER}",
            "openai_base_url": fake.base_url,
            "openai_api_key": "sk-test",
        }
        settings = Settings(**values)
        with fixtures_service.serve_in_thread(create_app(settings)) as url:
            with FaithJudgeClient(url) as client:
                assert [j.judge for j in client.config().judges] == ["lexicon:v1", OTHER]
                assert client.judge(OTHER).judge == OTHER
                accepted = client.submit_job(source, judge=OTHER)
                assert accepted.judge == OTHER
                final = client.wait(accepted.id, timeout=60)
                assert final.judge == OTHER
                judges = {_judge(r) for r in client.iter_results(accepted.id)}
                assert judges == {OTHER}
                line = orjson.loads(demo_lines(1)[0])
                assert _judge(client.score(line)) == "lexicon:v1"
                assert _judge(client.score(line, judge=OTHER)) == OTHER
                with pytest.raises(ValidationFailed, match="offers lexicon:v1"):
                    client.submit_job(source, judge="lexicon:v2")

            runner = CliRunner()
            done = runner.invoke(
                cli, ["submit", str(source), "--server", url, "--judge", OTHER, "--no-progress"]
            )
            assert done.exit_code == 0, done.output
            assert f"(judge {OTHER})" in done.output
            refused = runner.invoke(
                cli, ["submit", str(source), "--server", url, "--judge", "nope:1", "--no-wait"]
            )
            assert refused.exit_code == 3, refused.output
            assert "offers no judge 'nope:1'" in refused.output


def test_the_offered_judges_come_from_the_settings() -> None:
    assert Settings().offered_judges == ("lexicon:v1",)
    assert Settings(judge="openai:m").offered_judges == ("openai:m",)
    offered = Settings(judge="openai:m", judges=" lexicon:v1 , openai:m2")
    assert offered.offered_judges == ("lexicon:v1", "openai:m2")
    assert Settings(judges="").offered_judges == ("lexicon:v1",)
    from faithjudge.errors import ConfigError

    with pytest.raises(ConfigError, match=r"FAITHJUDGE_JUDGES.*judge named twice: a:1"):
        Settings.from_overrides({"judges": "a:1,b:2,a:1"})
    with pytest.raises(ConfigError, match=r"FAITHJUDGE_JUDGES.*empty judge name"):
        Settings.from_overrides({"judges": "a:1,,b:2"})


def test_the_offered_judges_are_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FAITHJUDGE_JUDGES", "lexicon:v1,openai:gpt-5")
    assert Settings().offered_judges == ("lexicon:v1", "openai:gpt-5")


def test_a_waiting_detail_names_what_changed_in_the_judge() -> None:
    from faithjudge.jobs.interface import JobJudge, JobRow
    from faithjudge.jobs.judges import waiting_detail

    def config(prompt_set: str) -> str:
        return orjson.dumps({"evaluator": "lexicon:v1", "prompt_set": prompt_set}).decode()

    # only the judge fields matter here; the rest of the row stays None
    fields: dict[str, Any] = dict.fromkeys(JobRow.__slots__)
    fields.update(judge="lexicon:v1", judge_key="k1", judge_config=config("v1"))
    waiting = JobRow(**fields)
    now = JobJudge("lexicon:v1", "k2", config("v2"))
    assert waiting_detail(waiting, [now, JobJudge("openai:m", "k3", "{}")]) == (
        "waiting for a worker that offers judge lexicon:v1 as it was at upload; this service "
        "offers lexicon:v1, openai:m, whose lexicon:v1 differs in prompt set (v2, not v1)"
    )
    assert waiting_detail(waiting, [JobJudge("openai:m", "k3", "{}")]) == (
        "waiting for a worker that offers judge lexicon:v1; this service offers openai:m"
    )
