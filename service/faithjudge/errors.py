"""The one exception tree of FaithJudge.

    FaithJudgeError
    ├── UserInputError        bad request, line, file or option: the caller can fix it
    │   └── UnknownQuestionError   no KB entry for a question (failure stage ``kb``)
    ├── ConfigError           the service or an asset (schema, prompt set, KB) is misconfigured
    ├── JudgeError            unreachable or kept failing (stage ``transport``)
    └── JudgeOutputInvalid    an answer that fails parse, schema or evidence checks

HTTP mapping and CLI exit codes are decided in one place each (the API's error handlers and the
CLI), never by inspecting message text.
"""

from __future__ import annotations

from faithjudge_client.base_errors import ConfigError, FaithJudgeError, UserInputError

__all__ = [
    "ConfigError",
    "EvaluatorError",
    "FaithJudgeError",
    "JudgeError",
    "JudgeOutputInvalid",
    "UnknownQuestionError",
    "UserInputError",
]


class UnknownQuestionError(UserInputError):
    """No knowledge-base entry matches the question and none was given inline."""


class JudgeError(FaithJudgeError):
    """The judge call failed for good (retries exhausted or a non-retryable error).

    ``status`` is the HTTP status when there was one; ``attempts`` counts every try made.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        body: str | None = None,
        attempts: int = 1,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body = body
        self.attempts = attempts


EvaluatorError = JudgeError
"""The older name of ``JudgeError`` (the same class): plugins written before the rename catch
and raise it."""


class JudgeOutputInvalid(FaithJudgeError):
    """A judge answer failed verification at ``stage`` (parse, schema or evidence)."""

    def __init__(self, stage: str, detail: str, *, raw: str | None = None) -> None:
        super().__init__(f"{stage}: {detail}")
        self.stage = stage
        self.detail = detail
        self.raw = raw
