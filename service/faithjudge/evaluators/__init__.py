"""The judge backends' former import path, kept for plugins written against it.

Everything here is the same object under its former name in ``faithjudge.judges``; importing a
name warns once with the name to use instead. Nothing in FaithJudge imports this module.
"""

from __future__ import annotations

import warnings
from typing import Any

_RENAMED = {
    "EVALUATORS": "JUDGES",
    "Evaluator": "Judge",
    "EvaluatorBackend": "JudgeBackend",
    "EvaluatorFactory": "JudgeFactory",
    "JudgeRequest": "JudgeRequest",
    "JudgeResponse": "JudgeResponse",
    "Message": "Message",
    "Usage": "Usage",
    "evaluator_forms": "judge_forms",
    "evaluator_help": "judge_help",
    "is_batch_route": "is_batch_route",
    "live_spec": "live_spec",
    "make_evaluator": "make_judge",
    "register_evaluator": "register_judge",
}

__all__ = sorted(_RENAMED)


def __getattr__(name: str) -> Any:
    new = _RENAMED.get(name)
    if new is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"faithjudge.evaluators.{name} is deprecated; import faithjudge.judges.{new}",
        DeprecationWarning,
        stacklevel=2,
    )
    from faithjudge import judges

    return getattr(judges, new)
