"""The VLM backend protocol: conversations in, one generation per conversation out.

A conversation is a short list of turns; a user turn may carry images (PIL, already
preprocessed and modified). Backends never raise for one bad conversation: its
``Generation.error`` says what went wrong and the others still complete.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from PIL import Image

__all__ = ["Conversation", "Generation", "Turn", "VLMBackend", "image_count"]


@dataclass(frozen=True, slots=True)
class Turn:
    """One chat turn; images come before the text, as in the paired-design prompt layout."""

    role: Literal["system", "user", "assistant"]
    text: str
    images: tuple[Image.Image, ...] = field(default=(), repr=False)


Conversation = Sequence[Turn]


@dataclass(frozen=True, slots=True)
class Generation:
    """The model's reply to one conversation, or why there is none.

    ``finish_reason`` is ``stop`` (the model ended its reply), ``length`` (cut at the token
    limit) or ``error``.
    """

    text: str
    finish_reason: Literal["stop", "length", "error"] = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"


def image_count(conversation: Conversation) -> int:
    return sum(len(turn.images) for turn in conversation)


@runtime_checkable
class VLMBackend(Protocol):
    """A vision-language model under test. ``id`` looks like ``transformers:PATH``."""

    @property
    def id(self) -> str: ...

    @property
    def model(self) -> str:
        """The model name written into each request line's ``model`` field."""
        ...

    def settings(self) -> Mapping[str, Any]:
        """Everything that changes the output (model, decoding, dtype, versions); no secrets."""
        ...

    async def generate(self, conversations: Sequence[Conversation]) -> list[Generation]:
        """One generation per conversation, in order."""
        ...

    async def aclose(self) -> None: ...
