"""What the HTML report shows when an item is opened: the parts of a result line the item table
does not flatten (the judge's rationale, omissions, hallucinations, its answer and failure per
metric, the model's raw answer, the tokens and attempts the line cost).

Kept as plain JSON-ready data, and only for the rows the report lists (``item_table``'s
``quote_rows``), so a large run's table stays small.
"""

from __future__ import annotations

from typing import Any

from faithjudge_client.lines import ItemResult, MetricResult
from faithjudge_client.metric_catalogue import metrics

__all__ = ["costs", "item_details", "metric_details"]


def metric_details(graded: MetricResult) -> dict[str, Any]:
    """One metric's grade as the judge gave it and as the service verified it."""
    judge: dict[str, Any] = {}
    if graded.score is not None:
        judge["score"] = graded.score
    judge.update(graded.signals)
    failure = graded.failure
    return {
        "status": graded.status,
        "score": graded.score,
        "rationale": graded.rationale,
        "omissions": list(graded.omissions),
        "hallucinations": list(graded.hallucinations),
        "judge": judge,
        "failure": None if failure is None else {"stage": failure.stage, "detail": failure.detail},
        "attempts": graded.attempts,
        "cache_hit": graded.cache_hit,
    }


def costs(result: ItemResult) -> dict[str, Any] | None:
    """What grading the line cost, as its provenance records it (None: it reached no judge).

    Result lines keep no prompt or raw reply: the page says so instead of guessing.
    """
    provenance = result.provenance
    if provenance is None:
        return None
    tokens = provenance.tokens
    return {
        "prompt_tokens": tokens.prompt,
        "cached_tokens": tokens.cached,
        "completion_tokens": tokens.completion,
        "attempts": provenance.attempts,
        "judge_s": provenance.judge_s,
        "cache_hits": provenance.cache.hits,
        "cache_misses": provenance.cache.misses,
        "route": provenance.route,
        "judge_model": provenance.judge_model,
    }


def item_details(result: ItemResult) -> dict[str, Any]:
    """The drill-down of one result line, metrics keyed by catalogue label."""
    mod = result.modification
    graded = {
        spec.label: metric_details(found)
        for spec in metrics()
        if (found := result.metrics.get(spec.name)) is not None
    }
    return {
        "answer_raw": result.answer_raw,
        "target_answer": None if mod is None else mod.target_answer,
        "metrics": graded,
        "costs": costs(result),
    }
