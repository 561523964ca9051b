"""Which judge graded a results file: read once from the lines' provenance, shown by every report.

A grade means little without its judge: the evaluator and the model the server answered as, the
prompt set and knowledge base (by name and content hash) and the response format the server
accepted. ``JudgeTally`` collects them while the report reads the lines (no second pass over a
large file); ``JudgeSummary`` is what the Markdown, HTML, JSON and JUnit renderers show. A file
that mixes judges (a resumed run against another server, two files concatenated) says so and
lists each judge with its line count, most lines first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from faithjudge_client.lines import ItemResult, Provenance

__all__ = ["Judge", "JudgeSummary", "JudgeTally", "judge_of", "summarise_judges"]

# Hashes are shown this long in tables; the JSON report keeps them whole.
SHORT_SHA = 12


@dataclass(frozen=True, slots=True)
class Judge:
    """One judge configuration as the result lines record it."""

    evaluator: str
    model: str | None
    """The model the server said it answered as (None: an offline judge, or no call made)."""
    prompt_set: str
    prompt_sha256: str
    kb_id: str | None
    kb_sha256: str | None
    response_format: str | None
    """The response format the server accepted (None: not recorded, or no call made)."""
    settings_sha256: str | None
    """Hash of the evaluator's frozen settings (temperature, seed, max tokens, base URL...)."""

    def describe(self) -> str:
        """One line naming the judge, for a sentence or a log."""
        parts = [self.evaluator]
        if self.model:
            parts.append(f"model {self.model}")
        parts.append(f"prompts {self.prompt_set} ({_short(self.prompt_sha256)})")
        if self.kb_id:
            parts.append(f"KB {self.kb_id} ({_short(self.kb_sha256)})")
        if self.response_format:
            parts.append(f"response format {self.response_format}")
        return ", ".join(parts)


@dataclass(frozen=True, slots=True)
class JudgeSummary:
    """The judges of a results file, most lines first."""

    judges: tuple[tuple[Judge, int], ...]
    without_judge: int = 0
    """Lines that never reached a judge (unreadable request lines carry no provenance)."""

    @property
    def mixed(self) -> bool:
        return len(self.judges) > 1

    def headline(self) -> str:
        """A sentence naming the judge, or saying that the file mixes judges."""
        if not self.judges:
            text = "No line names its judge (no line reached the scorer)."
        elif not self.mixed:
            text = f"Judge: {self.judges[0][0].describe()}."
        else:
            text = (
                f"Mixed judges: these results come from {len(self.judges)} different judges "
                "(their grades are not comparable; score the file again with one judge)."
            )
        if self.judges and self.without_judge:
            text += f" {self.without_judge} line(s) never reached a judge."
        return text

    def table(self) -> tuple[list[str], list[list[str]]]:
        """Header and rows (plain, unescaped text) of one row per judge."""
        header = ["Lines", "Evaluator", "Model", "Prompt set", "KB", "Response format",
                  "Settings"]  # fmt: skip
        rows = [
            [
                str(lines),
                judge.evaluator,
                judge.model or "–",
                f"{judge.prompt_set} ({_short(judge.prompt_sha256)})",
                f"{judge.kb_id} ({_short(judge.kb_sha256)})" if judge.kb_id else "–",
                judge.response_format or "–",
                _short(judge.settings_sha256),
            ]
            for judge, lines in self.judges
        ]
        return header, rows

    def properties(self) -> list[tuple[str, str]]:
        """``(name, value)`` pairs for JUnit ``<properties>``: ``judge.*`` for one judge,
        ``judge.N.*`` (1-based, most lines first) with ``judge.mixed`` for several."""
        out: list[tuple[str, str]] = [("judge.mixed", str(self.mixed).lower())]
        for number, (judge, lines) in enumerate(self.judges, start=1):
            prefix = "judge." if not self.mixed else f"judge.{number}."
            fields = {**asdict(judge), "lines": lines}
            out += [
                (prefix + key, str(value)) for key, value in fields.items() if value is not None
            ]
        if self.without_judge:
            out.append(("judge.lines_without_judge", str(self.without_judge)))
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "mixed": self.mixed,
            "judges": [{**asdict(judge), "lines": lines} for judge, lines in self.judges],
            "lines_without_judge": self.without_judge,
        }


def judge_of(provenance: Provenance) -> Judge:
    """The judge a result line's provenance names."""
    return Judge(
        evaluator=provenance.evaluator,
        model=provenance.evaluator_model,
        prompt_set=provenance.prompt_set,
        prompt_sha256=provenance.prompt_sha256,
        kb_id=provenance.kb_id,
        kb_sha256=provenance.kb_sha256,
        response_format=provenance.response_format,
        settings_sha256=provenance.evaluator_settings_sha256,
    )


class JudgeTally:
    """Counts the judges of result lines as they stream past (``watch``), then ``summary()``."""

    def __init__(self) -> None:
        self._judges: Counter[Judge] = Counter()
        self._without = 0

    def add(self, result: ItemResult) -> None:
        if result.provenance is None:
            self._without += 1
        else:
            self._judges[judge_of(result.provenance)] += 1

    def watch(self, results: Iterable[ItemResult]) -> Iterator[ItemResult]:
        """Yield ``results`` unchanged, counting each one's judge."""
        for result in results:
            self.add(result)
            yield result

    def summary(self) -> JudgeSummary:
        # most lines first; ties in the order the judges first appeared
        ranked = sorted(self._judges.items(), key=lambda pair: -pair[1])
        return JudgeSummary(judges=tuple(ranked), without_judge=self._without)


def summarise_judges(results: Iterable[ItemResult]) -> JudgeSummary:
    """The judges of ``results`` (see ``JudgeSummary``)."""
    tally = JudgeTally()
    for result in results:
        tally.add(result)
    return tally.summary()


def _short(sha: str | None) -> str:
    return sha[:SHORT_SHA] if sha else "–"
