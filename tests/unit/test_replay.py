"""ReplayJudge and the judge factory's spec parsing."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from faithjudge.errors import ConfigError, JudgeError, UserInputError
from faithjudge.judges import JUDGES, make_judge, register_judge
from faithjudge.judges.base import Judge, JudgeRequest
from faithjudge.judges.replay import ReplayJudge
from faithjudge.transport.chat import Message
from faithjudge.transport.resilience import JudgeCaller

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def request(item_id: str | None, metric: str = "confidence_tone") -> JudgeRequest:
    return JudgeRequest(
        metric=metric,  # type: ignore[arg-type]
        messages=(Message("user", "cot"),),
        response_schema={},
        schema_name=metric,
        item_id=item_id,
    )


def write(path: Path, lines: list[object]) -> Path:
    path.write_bytes(
        b"\n".join(x if isinstance(x, bytes) else orjson.dumps(x) for x in lines) + b"\n"
    )
    return path


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    return write(
        tmp_path / "judge.jsonl",
        [
            {"item_id": "a", "metric": "confidence_tone", "response": {"score": 2}},
            {"item_id": "a", "metric": "causal_attribution", "response": "raw text"},
            b"",
            {"item_id": "b", "metric": "confidence_tone", "response": None},
        ],
    )


async def test_replays_objects_strings_and_nulls(recorded: Path) -> None:
    judge = ReplayJudge(recorded)
    assert isinstance(judge, Judge)
    assert judge.id == "replay:judge.jsonl" and len(judge) == 3
    assert orjson.loads((await judge.judge(request("a"))).text) == {"score": 2}
    assert (await judge.judge(request("a", "causal_attribution"))).text == "raw text"
    assert (await judge.judge(request("b"))).text == ""
    assert judge.cache_key_material(request("a")) is None
    assert judge.should_retry(RuntimeError()) is False
    assert judge.retry_after(RuntimeError()) is None
    assert len(judge.settings()["sha256"]) == 64


async def test_missing_record_is_a_non_retryable_judge_error(recorded: Path) -> None:
    judge = ReplayJudge(recorded)
    with pytest.raises(JudgeError, match="no recorded response for item b metric"):
        await judge.judge(request("b", "clinical_fidelity"))
    calls = 0

    async def sleep(_: float) -> None:
        nonlocal calls
        calls += 1

    caller = JudgeCaller(judge, sleep=sleep)
    with pytest.raises(JudgeError) as info:
        await caller.call(request(None))
    assert info.value.attempts == 1 and info.value.status is None and calls == 0


def several(tmp_path: Path) -> Path:
    return write(
        tmp_path / "two.jsonl",
        [
            {"item_id": "a", "metric": "confidence_tone", "response": {"s": 1}, "judge": "gpt"},
            {"item_id": "a", "metric": "confidence_tone", "response": {"s": 2}, "judge": "llama"},
        ],
    )


async def test_judge_selects_among_several(tmp_path: Path) -> None:
    path = several(tmp_path)
    llama = ReplayJudge(path, judge="llama")
    assert llama.id == "replay:two.jsonl#llama"
    replayed = await llama.judge(request("a"))
    assert (replayed.text, replayed.model) == ('{"s":2}', "llama")
    with pytest.raises(ConfigError, match=r"several judges.*gpt, llama"):
        ReplayJudge(path)
    with pytest.raises(ConfigError, match=r"no judge 'mistral'.*gpt, llama"):
        ReplayJudge(path, judge="mistral")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "expected a JSON object"),
        (b'{"metric": "confidence_tone", "response": null}', "item_id"),
        (b'{"item_id": "x", "metric": "vibes", "response": null}', "'metric' must be one of"),
        (b'{"item_id": "x", "metric": "confidence_tone"}', "'response' is missing"),
        (b'{"item_id": "x", "metric": "confidence_tone", "response": 5}', "'response' must be"),
        (b'{"item_id": "a", "metric": "confidence_tone", "response": null}', "a second response"),
    ],
)
def test_malformed_lines_name_file_and_line(recorded: Path, line: bytes, message: str) -> None:
    path = recorded.with_name("bad.jsonl")
    path.write_bytes(recorded.read_bytes() + line + b"\n")
    with pytest.raises(ConfigError, match=message) as info:
        ReplayJudge(path)
    assert f"{path}:5" in str(info.value)


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the replay file"):
        ReplayJudge(tmp_path / "missing.jsonl")


# ------------------------------------------------------------------ the factory


def test_factory_builds_replay_with_judge(tmp_path: Path) -> None:
    judge = make_judge(f"replay:{several(tmp_path)}#gpt")
    assert isinstance(judge, ReplayJudge) and judge.id == "replay:two.jsonl#gpt"


def test_unknown_backend_lists_the_known_ones() -> None:
    with pytest.raises(
        UserInputError, match=r"lexicon:v1.*openai:MODEL.*litellm:MODEL.*replay:FILE"
    ) as info:
        make_judge("bogus:thing")
    assert info.value.field == "judge"
    with pytest.raises(UserInputError, match="unknown judge"):
        make_judge("no-colon")
    with pytest.raises(UserInputError, match="names no model"):
        make_judge("openai:")


def test_registry_is_extensible(recorded: Path) -> None:
    register_judge("echo", lambda target, settings: ReplayJudge(target))
    try:
        assert make_judge(f"echo:{recorded}").id == "replay:judge.jsonl"
        with pytest.raises(ValueError, match="'echo' is already registered"):
            register_judge("echo", lambda target, settings: ReplayJudge(target))
    finally:
        JUDGES.unregister("echo")
    with pytest.raises(UserInputError, match="unknown judge"):
        make_judge(f"echo:{recorded}")


def test_identical_repeats_are_accepted_and_other_judges_conflicts_ignored(tmp_path: Path) -> None:
    record = b'{"item_id": "a", "metric": "confidence_tone", "judge": "j1", "response": "x"}'
    other = b'{"item_id": "a", "metric": "confidence_tone", "judge": "j2", "response": "%s"}'
    path = tmp_path / "rec.jsonl"
    path.write_bytes(b"\n".join([record, record, other % b"y", other % b"z"]) + b"\n")
    assert len(ReplayJudge(path, judge="j1")) == 1
    with pytest.raises(ConfigError, match="a second response"):
        ReplayJudge(path, judge="j2")
