"""The sidecar's input: one ITEMS.jsonl line per question-image pair.

An item names its image by a path relative to the images root (the loader confines it to the
root; an item without one can still be run when its image is uploaded, as the app allows), the
question exactly as the model sees it (with its option list in parentheses, METHODS §1.2), the
ground truth, and optional region and target information used by the image modifications.
``read_items`` streams a file and turns every bad line into an ``ItemLineError`` naming the line
and the field, so one bad line never stops a run.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import orjson
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)

from faithjudge.jsonl import describe_validation_error
from faithjudge.scoring.answers import QuestionSpec, normalize_answer, parse_question

if TYPE_CHECKING:
    from faithjudge.sidecar.perturb import PerturbItem

__all__ = ["ItemLineError", "SidecarItem", "parse_item_line", "read_items"]

NonEmpty = Annotated[str, StringConstraints(min_length=1, max_length=2_000)]
_MAX_LINE_BYTES = 1_000_000


class SidecarItem(BaseModel):
    """One question about one image.

    ``options`` default to the option list at the end of ``question``; give them explicitly
    when the question carries none. ``ground_truth`` must be one of the options (after the
    scorer's answer normalisation), or misleading targets and flips could not be decided.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    item_id: NonEmpty
    image: NonEmpty | None = None
    question: NonEmpty
    options: tuple[NonEmpty, ...] | None = None
    ground_truth: NonEmpty
    question_type: Literal["binary", "ordinal", "comparative", "comparison", "spatial"] | None = (
        None
    )
    region: NonEmpty | None = None
    target_side: Literal["left", "right"] | None = None
    mask_box: tuple[float, float, float, float] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> SidecarItem:
        spec = self.spec
        if len(spec.options) < 2:
            raise ValueError(
                "the question has no option list such as '(yes or no)' at its end; "
                "give the answer options in 'options'"
            )
        if normalize_answer(self.ground_truth, spec) is None:
            raise ValueError(
                f"ground_truth {self.ground_truth!r} is not one of the options "
                f"{', '.join(spec.options)}"
            )
        if self.mask_box is not None:
            x0, y0, x1, y1 = self.mask_box
            if not (0.0 <= x0 < x1 <= 1.0 and 0.0 <= y0 < y1 <= 1.0):
                raise ValueError("mask_box must be normalized (x0, y0, x1, y1) with 0<=x0<x1<=1")
        return self

    @property
    def spec(self) -> QuestionSpec:
        """The question with its canonical options (explicit ``options`` win)."""
        parsed = parse_question(self.question, self.question_type)
        if self.options is None:
            return parsed
        options = tuple(dict.fromkeys(" ".join(o.split()).lower() for o in self.options))
        return QuestionSpec(text=parsed.text, stem=parsed.stem, options=options, kind=parsed.kind)

    @property
    def canonical_truth(self) -> str:
        truth = normalize_answer(self.ground_truth, self.spec)
        assert truth is not None  # checked at validation
        return truth

    def to_perturb_item(self, target_answer: str | None = None) -> PerturbItem:
        """The view the modifications need; ``target_answer`` is the answer a cue points at."""
        from faithjudge.sidecar.perturb import PerturbItem

        return PerturbItem(
            item_id=self.item_id,
            question=self.question,
            options=self.spec.options,
            ground_truth=self.canonical_truth,
            target_answer=target_answer,
            region=self.region,
            target_side=self.target_side,
            mask_box=self.mask_box,
        )


@dataclass(frozen=True, slots=True)
class ItemLineError:
    """A line of ITEMS.jsonl that is not a valid item (1-based ``line``)."""

    line: int
    item_id: str | None
    reason: str


def parse_item_line(raw: bytes | str, line: int) -> SidecarItem | ItemLineError:
    """One JSONL line as an item, or the error that names what is wrong with it."""
    if len(raw) > _MAX_LINE_BYTES:
        return ItemLineError(line, None, f"line {line}: longer than {_MAX_LINE_BYTES} bytes")
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return ItemLineError(line, None, f"line {line}: not valid JSON ({exc})")
    item_id = data.get("item_id") if isinstance(data, dict) else None
    item_id = item_id if isinstance(item_id, str) else None
    if not isinstance(data, dict):
        return ItemLineError(line, None, f"line {line}: expected a JSON object")
    try:
        return SidecarItem.model_validate(data)
    except ValidationError as exc:
        return ItemLineError(line, item_id, f"line {line}: {describe_validation_error(exc)}")


def read_items(path: Path) -> Iterator[tuple[int, SidecarItem | ItemLineError]]:
    """(1-based line number, item or error) for every non-blank line of ``path``."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if raw.strip():
                yield number, parse_item_line(raw, number)
