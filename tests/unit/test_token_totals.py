"""Token totals over result lines: reports add them up, ``/metrics`` counts them."""

from __future__ import annotations

from faithjudge.api.prometheus import Metrics
from faithjudge.reports.judges import summarise_judges
from faithjudge_client.lines import ItemResult, MetricResult, Provenance, TokenUsage


def _line(line: int, prompt: int, completion: int, cached: int = 0) -> ItemResult:
    return ItemResult(
        line=line,
        metrics={"confidence_tone": MetricResult(status="valid", score=3, normalized=0.5)},
        provenance=Provenance(
            judge="openai:judge-1",
            judge_model="judge-1",
            prompt_set="v1",
            prompt_sha256="0" * 64,
            schema_version="1.1",
            service_version="0",
            tokens=TokenUsage(prompt=prompt, completion=completion, cached=cached),
        ),
    )


def test_a_report_adds_up_the_tokens_of_every_line() -> None:
    summary = summarise_judges(
        [_line(1, 2000, 100), _line(2, 2000, 120, cached=1536), ItemResult(line=3)]
    )
    assert summary.to_json()["tokens"] == {"prompt": 4000, "completion": 220, "cached": 1536}
    assert (
        "The judge's answers used 4,000 prompt tokens (1,536 of them cached by the provider, "
        "38.4%) and 220 completion tokens." in summary.headline()
    )
    properties = dict(summary.properties())
    assert properties["judge.tokens.cached"] == "1536"
    assert properties["judge.tokens.prompt"] == "4000"


def test_lines_without_tokens_say_nothing_of_them() -> None:
    summary = summarise_judges([_line(1, 0, 0)])
    assert "tokens" not in summary.headline()
    assert not any(name.startswith("judge.tokens") for name, _ in summary.properties())


def test_metrics_count_prompt_cached_and_completion_tokens() -> None:
    metrics = Metrics()
    metrics.observe(_line(1, 2000, 100, cached=1024), source="score")
    metrics.observe(_line(2, 1500, 80), source="batch")
    text = metrics.render().decode()
    assert 'faithjudge_judge_tokens_total{kind="prompt"} 3500.0' in text
    assert 'faithjudge_judge_tokens_total{kind="cached"} 1024.0' in text
    assert 'faithjudge_judge_tokens_total{kind="completion"} 180.0' in text
