"""Answer extraction on hostile model output: linear time, no crash, same readings as before.

The readers once used a lazy ``<answer>(.*?)</answer>`` and a lazy line capture before a
trailing ``[\\s*_]*$``; both rescan the rest of the text from every candidate, so a few hundred
kilobytes of bare tags or spaces held a worker for minutes. The properties hold the rewritten
readers to those patterns' readings; the large inputs carry a timeout only as a guard against a
hang (the quadratic readers take minutes on them, the linear ones milliseconds).
"""

from __future__ import annotations

import re

import pytest
from faithjudge.scoring.answers import _line_answer, _tag_answer, extract_answer
from hypothesis import given, settings
from hypothesis import strategies as st

# The patterns the readers replaced: the definitions the properties hold them to.
_OLD_TAG = re.compile(r"<answer\s*>(.*?)</answer\s*>", re.IGNORECASE | re.DOTALL)
_OLD_LINE = re.compile(
    r"^[\s>*#_-]*(?:the\s+)?(?:final\s+)?answer(?:\s+is)?[\s*_]*[:\-–][\s*_]*(\S.*?)[\s*_]*$",
    re.IGNORECASE | re.MULTILINE,
)


def _old_tag_answer(text: str) -> str | None:
    for m in reversed(list(_OLD_TAG.finditer(text))):
        if m.group(1).strip():
            return m.group(1).strip()
    return None


def _old_line_answer(text: str) -> str | None:
    matches = list(_OLD_LINE.finditer(text))
    return matches[-1].group(1).strip() if matches else None


_TAG_TOKENS = [
    "<answer>",
    "</answer>",
    "<ANSWER >",
    "</answer\n>",
    "< answer>",
    "x",
    "yes",
    " ",
    "\n",
]
_LINE_TOKENS = [
    "Answer", "answer is", "Final answer", "the ", ":", "-", "–", "*", "_", " ", "\t", "\n",
    "#", ">", "yes", "no", "x", "\u00a0", "\r",
]  # fmt: skip


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(_TAG_TOKENS), max_size=30).map("".join))
def test_tag_reader_reads_what_the_lazy_pattern_read(text: str) -> None:
    assert _tag_answer(text) == _old_tag_answer(text)


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(_LINE_TOKENS), max_size=30).map("".join))
def test_line_reader_reads_what_the_lazy_pattern_read(text: str) -> None:
    assert _line_answer(text) == _old_line_answer(text)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("cot", "expected"),
    [
        ("<answer>" * 50_000, None),
        # the first opening tag pairs with the only closing one, as it did
        ("<answer>" * 50_001 + "yes</answer>", "<answer>" * 50_000 + "yes"),
        (
            "I looked at the film.\nFinal answer: yes" + " " * 400_000 + ".",
            "yes" + " " * 400_000 + ".",
        ),
        ("Answer: no" + " *_" * 100_000 + "x", "no" + " *_" * 100_000 + "x"),
        ("Answer: **left**" + " " * 200_000, "left"),
    ],
    ids=["bare-tags", "tags-then-pair", "spaces-in-line", "markdown-run", "trailing-spaces"],
)
def test_large_hostile_outputs_are_read_in_linear_time(cot: str, expected: str | None) -> None:
    assert extract_answer(cot) == expected


@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_json_nested_past_the_stack_is_not_an_answer_and_does_not_raise(depth: int) -> None:
    assert extract_answer('{"think": ' * depth) is None
    assert extract_answer('{"think": ' * depth + "\nAnswer: yes") == "yes"
