"""Restatements of an answer: the question turned into a plain statement of one option.

A CoT made only of these states the answer and no evidence for it. The knowledge-base review
(``tests/unit/test_knowledge_base_review.py``) and the offline judge's restatement test
(``tests/integration/test_lexicon_restatement.py``) read them.
"""

from __future__ import annotations

import re

__all__ = ["restatements", "statement"]

ABSENT = frozenset({"no", "none", "not present"})


def _article(noun: str) -> str:
    return "An" if noun[:1].lower() in "aeiou" else "A"


def statement(question: str, option: str) -> str:
    """The question turned into a plain statement of ``option`` (and nothing more)."""
    stem = re.sub(r"\s*\([^()]*\)\s*$", "", question).rstrip("?").strip()
    no = option in ABSENT
    if m := re.fullmatch(r"Is there (a |an |any )?(.*)", stem):
        article = "" if m[1] is None else "a " if m[1] == "any " else m[1]
        return f"There is no {m[2]}." if no else f"There is {article}{m[2]}."
    if m := re.fullmatch(r"Are there (.*)", stem):
        return f"There are {'no ' if no else ''}{m[1]}."
    if m := re.fullmatch(r"Is (?:a|an) (.*) (present|visible) in this image", stem):
        return f"{'No' if no else _article(m[1])} {m[1]} is {m[2]} in this image."
    if m := re.fullmatch(r"Does the chest X-ray show (.*)", stem):
        return f"The chest X-ray {'does not show' if no else 'shows'} {m[1]}."
    if m := re.fullmatch(r"Is the X-ray image (.*)", stem):
        return f"The X-ray image is {'not ' if no else ''}{m[1]}."
    if m := re.fullmatch(r"Are the (.*) fully visualized (.*)", stem):
        return f"The {m[1]} are {'not ' if no else ''}fully visualized {m[2]}."
    if m := re.fullmatch(r"What is the severity of (.*)", stem):
        return f"There is {'no' if no else option} {m[1]}."
    if stem == "What is the size of the heart":
        return "The heart size is normal." if option == "normal" else f"The heart is {option}."
    if m := re.fullmatch(r"Which side shows more severe (.*)", stem):
        if option == "same severity":
            return f"Both sides show {m[1]} of the same severity."
        if option == "none":
            return f"Neither side shows {m[1]}."
        return f"The {option} side shows more severe {m[1]}."
    if m := re.fullmatch(r"What is the position of the (.*)", stem):
        return f"The {m[1]} is {option}."
    if stem == "On which side is a chest tube present":
        if option == "both":
            return "A chest tube is present on both sides."
        return "No chest tube is present." if no else f"A chest tube is present on the {option}."
    raise ValueError(f"no statement pattern for {question!r}")


def restatements(question: str, option: str) -> dict[str, str]:
    """Three CoTs that restate ``option`` and document nothing: the answer alone, the
    statement, and the question quoted with the statement and the answer."""
    said = statement(question, option)
    answer = f"<answer>{option}</answer>"
    return {
        "answer only": f"<think><step>The answer is {option}.</step></think>{answer}",
        "statement": f"<think><step>{said}</step></think>{answer}",
        "question, statement, answer": (
            f"<think><step>The question asks: {question}</step><step>{said}</step>"
            f"<step>Therefore the answer is {option}.</step></think>{answer}"
        ),
    }
