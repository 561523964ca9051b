"""The shared text comes first: what a provider's prompt cache can reuse.

A provider caches the longest prefix a prompt shares with earlier ones (OpenAI: the response
format's schema, then the messages in order). So every prompt set puts what all calls of a
metric share (the schema, the system prompt, the user message's fixed head) before anything of
the item, and the question's block (question, ground truth, KB criteria) before what changes
within a question (the modification, the context flags, the CoT and its boundary token).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from faithjudge.assets.prompts import available_prompt_sets, load_prompt_set
from faithjudge.judges.openai import OpenAIJudge
from faithjudge.pipeline.runtime import open_scorer
from faithjudge.runners.judge_check import SAMPLE_REQUEST
from faithjudge.settings import Settings
from faithjudge_client.lines import ScoreRequest
from faithjudge_client.metric_catalogue import metric_names

pytestmark = pytest.mark.anyio

# what one question's calls share, and what changes from item to item within a question
_QUESTION_INPUTS = ("question", "ground_truth", "kb_entry")
_ITEM_INPUTS = ("context_flags", "modification_description", "final_answer", "fence_token",
                "cot_block")  # fmt: skip


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def judge_and_scorer(tmp_path: Path) -> AsyncIterator[tuple[OpenAIJudge, Any]]:
    settings = Settings(
        judge="openai:gpt-test",
        openai_base_url="http://127.0.0.1:9/v1",  # never called: requests are only rendered
        openai_api_key="unused",
        data_dir=tmp_path,
        cache=False,
    )
    async with open_scorer(settings) as scorer:
        judge = scorer.caller.judge
        assert isinstance(judge, OpenAIJudge)
        yield judge, scorer


def _request(**changes: Any) -> ScoreRequest:
    return ScoreRequest.model_validate({**SAMPLE_REQUEST, **changes})


def _provider_prompt(body: dict[str, Any]) -> str:
    """The request as a provider's prompt cache reads it: the schema, then each message."""
    schema = orjson.dumps(body.get("response_format"), option=orjson.OPT_SORT_KEYS).decode()
    return schema + "".join(f"\n{m['role']}\n{m['content']}" for m in body["messages"])


def _bodies(judge: OpenAIJudge, scorer: Any, request: ScoreRequest) -> dict[str, Any]:
    return {r.metric: judge.request_body(r) for r in scorer.judge_requests(request)}


def _shared(a: str, b: str) -> int:
    """How many leading characters ``a`` and ``b`` share."""
    differ = (n for n, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)
    return next(differ, min(len(a), len(b)))


def _fixed_head(body: dict[str, Any], metric: str) -> int:
    """Where the first item input starts in the provider's prompt of ``body``: the schema, the
    system prompt and the user template's text before its first placeholder."""
    user_head = load_prompt_set().templates[metric].user.template.split("$", 1)[0]
    prompt = _provider_prompt(body)
    head = prompt[: len(prompt) - len(body["messages"][-1]["content"])] + user_head
    assert prompt.startswith(head)
    return len(head)


async def test_calls_of_a_metric_share_the_schema_the_system_prompt_and_the_fixed_head(
    judge_and_scorer: tuple[OpenAIJudge, Any],
) -> None:
    judge, scorer = judge_and_scorer
    first = _bodies(judge, scorer, _request())
    other = _request(
        question="Is the endotracheal tube correctly positioned? (yes or no)",
        cot="<think><step>The tip sits 4 cm above the carina.</step></think><answer>yes</answer>",
        modification={"code": "TB-RAD", "target_answer": "no"},
    )
    second = _bodies(judge, scorer, other)
    assert set(first) == set(second) == set(metric_names())
    for metric, body in first.items():
        system = body["messages"][0]["content"]
        shared = _shared(_provider_prompt(body), _provider_prompt(second[metric]))
        schema = orjson.dumps(body["response_format"], option=orjson.OPT_SORT_KEYS).decode()
        assert shared >= len(schema) + len(system), metric
        assert shared >= _fixed_head(body, metric), metric


async def test_calls_of_one_question_share_its_block_up_to_the_cot(
    judge_and_scorer: tuple[OpenAIJudge, Any],
) -> None:
    judge, scorer = judge_and_scorer
    first = _bodies(judge, scorer, _request())
    # the same question, another item: another CoT, answer and modification
    other = _request(
        cot="<think><step>Both angles are sharp.</step></think><answer>no</answer>",
        modification={"code": "TB-RAD", "target_answer": "no"},
        context={"projection": "PA"},
    )
    second = _bodies(judge, scorer, other)
    for metric, body in first.items():
        prompt = _provider_prompt(body)
        shared = _shared(prompt, _provider_prompt(second[metric]))
        user = body["messages"][-1]["content"]
        user_at = len(prompt) - len(user)
        question = orjson.dumps(SAMPLE_REQUEST["question"]).decode()
        cot_at = user_at + user.index("<<<BEGIN UNTRUSTED COT")
        if metric != "confidence_tone":  # the only metric whose prompt holds no question
            assert shared >= user_at + user.index(question) + len(question), metric
        if metric == "clinical_fidelity":  # its KB criteria too
            criteria = '"term": "left pleural effusion"'
            assert shared > user_at + user.index(criteria) + len(criteria), metric
        assert shared < cot_at, metric  # the items differ: nothing after this is shared


# v1 is frozen as the results graded with it used it (prompts/README.md): its clinical-fidelity
# template names the context flags before the KB entry, which v2 reorders
_FROZEN_BEFORE_THE_ORDER = {"v1"}


@pytest.mark.parametrize(
    "prompt_set", sorted(set(available_prompt_sets()) - _FROZEN_BEFORE_THE_ORDER)
)
def test_every_prompt_set_puts_the_question_block_before_the_item(prompt_set: str) -> None:
    """In every user template, the question's inputs come before any input of the item."""
    loaded = load_prompt_set(prompt_set)
    for metric in loaded.metrics:
        template = loaded.templates[metric].user
        order = [
            match.group("named") or match.group("braced")
            for match in template.pattern.finditer(template.template)
            if match.group("named") or match.group("braced")
        ]
        question = [n for n, name in enumerate(order) if name in _QUESTION_INPUTS]
        item = [n for n, name in enumerate(order) if name in _ITEM_INPUTS]
        assert not question or not item or max(question) < min(item), (metric, order)
        system = loaded.templates[metric].system
        assert not system.get_identifiers(), (metric, "the system prompt must hold no input")
