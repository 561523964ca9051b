"""The three exceptions at the root of FaithJudge's one exception tree, shared by the SDK and the
service (``faithjudge_client.errors`` documents the tree). Standard library only: the service
imports them on every command, without the SDK's HTTP client or REST bodies."""

from __future__ import annotations

__all__ = ["ConfigError", "FaithJudgeError", "UserInputError"]


class FaithJudgeError(Exception):
    """Base class of every error FaithJudge raises on purpose, in the SDK and in the service."""


class UserInputError(FaithJudgeError):
    """Input the caller can fix; ``field`` names the offending field or line when known."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class ConfigError(FaithJudgeError):
    """A setting or a bundled asset is wrong; the message says which and how to fix it."""
