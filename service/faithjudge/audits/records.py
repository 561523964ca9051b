"""The answer record: one model's answer to one probe of one item under one condition.

One JSONL line per (model, item, condition[, variant]). The ``condition`` is a code of the
modification catalogue (METHODS §5.1, ``faithjudge.scoring.modifications``); it is stored as the
catalogue's id, so ``original``, ``real`` and ``baseline`` are one condition. The record is
plain data: which audit uses which conditions, and the checks that need several records at
once (duplicates, a perturbed record without its original, gold letters), live in
``faithjudge.audits.conditions`` and ``faithjudge.audits.consistency``.

``answer`` is the parsed answer; ``null`` means the parser could not read ``raw_output`` (a
parse failure). ``gold`` is the answer that counts as correct for this probe (MedVIGIL scores
every probe against its own gold, e.g. ``E`` for traps; Lotfinia and Zafar score every
condition against the original's gold, so their perturbed records may leave it out).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from faithjudge.errors import UserInputError
from faithjudge.scoring.modifications import lookup_modification

__all__ = [
    "MAX_OUTPUT_CHARS",
    "MAX_SHORT_CHARS",
    "AnswerRecord",
    "ItemMeta",
    "RiskTier",
    "Sex",
    "normalize_answer",
]

MAX_SHORT_CHARS = 512
MAX_OUTPUT_CHARS = 100_000

Id = Annotated[str, StringConstraints(min_length=1, max_length=MAX_SHORT_CHARS)]
Short = Annotated[str, StringConstraints(max_length=MAX_SHORT_CHARS)]
Long = Annotated[str, StringConstraints(max_length=MAX_OUTPUT_CHARS)]
Sex = Literal["M", "F"]
RiskTier = Literal["L1", "L2", "L3", "L4", "L5"]


class _Strict(BaseModel):
    # strict: JSON "0.5" is not the number 0.5 and true is not 1
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class ItemMeta(_Strict):
    """What is known about the item (the case), used for subgroups and strata.

    ``source`` is the dataset or benchmark (Zafar's stratified bootstrap and macro mean run over
    it); ``risk_tier`` is MedVIGIL's clinical risk tier; ``sex``, ``view`` and ``age_group`` are
    Lotfinia's subgroup labels (any age-group labels work; the test uses whichever strata have
    at least two cases).
    """

    finding: Short | None = None
    view: Short | None = None
    sex: Sex | None = None
    age_group: Short | None = None
    risk_tier: RiskTier | None = None
    source: Short | None = None
    laterality_dependent: bool | None = None
    text_only_answerable: bool | None = None


class AnswerRecord(_Strict):
    """One answer line. See the module docstring and the README section on ``faithjudge audit``.

    ``variant`` tells apart several probes of one condition on one item: the two hallucination
    traps of a MedVIGIL case (``"1"``, ``"2"``), a blur level (``"8"``), a progressive-mask step.
    ``p_yes`` is the first-token P(Yes) of a Yes/No answer (Lotfinia Eq. 1), ``rationale`` the
    model's reasoning text when it wrote one (Zafar's RCR/NVCR/HVRR), ``question`` the prompt's
    question (NVCR looks for visual claims that the question does not already make).
    """

    model: Id
    item_id: Id
    condition: Id
    variant: Short | None = None
    raw_output: Long | None = None
    answer: Short | None = None
    gold: Short | None = None
    p_yes: Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)] | None = None
    question: Long | None = None
    rationale: Long | None = None
    metadata: ItemMeta = Field(default_factory=ItemMeta)

    @field_validator("condition")
    @classmethod
    def _known_condition(cls, value: str) -> str:
        try:
            return lookup_modification(value).id
        except UserInputError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("p_yes", mode="before")
    @classmethod
    def _finite(cls, value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("p_yes must be a finite number in [0, 1]")
        return value


def normalize_answer(text: str | None) -> str | None:
    """The comparable form of an answer or gold: case-folded, single-spaced, no trailing dot.

    ``"Yes."``, ``" yes"`` and ``"YES"`` compare equal; ``"E"`` equals ``"e"``. Empty -> None.
    """
    if text is None:
        return None
    folded = " ".join(text.casefold().split()).strip(" .")
    return folded or None
