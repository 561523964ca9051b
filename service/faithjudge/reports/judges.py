"""Which judge graded a results file: read once from the lines' provenance, shown by every report.

A grade means little without its judge: the judge and the model the server answered as, the
prompt set and knowledge base (by name and content hash) and the response format the server
accepted. ``JudgeTally`` collects them while the report reads the lines (no second pass over a
large file); ``JudgeSummary`` is what the Markdown, HTML, JSON and JUnit renderers show. A file
that mixes judges (a resumed run against another server, two files concatenated) says so and
lists each judge with its line count, most lines first. The summary also adds up the tokens the
lines' provenance records (prompt, the part of it the provider served from its prompt cache, and
completion), so a report says what the grades cost in tokens.

A judge is known by its answers: a line whose every grade failed before the judge answered
(the server was down, the knowledge base had no entry) carries no model and no response format,
and it is no second judge. It is counted with the judge that answered the file's other lines
under the same configuration (judge, prompts, knowledge base, settings); a line that no
judge of its configuration answered is counted apart, as a line without a judge's answer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from faithjudge_client.lines import ItemResult, Provenance

from faithjudge.scoring.outcomes import JUDGED, metric_outcome

__all__ = [
    "Judge",
    "JudgeSummary",
    "JudgeTally",
    "TokenTotals",
    "answered",
    "judge_of",
    "summarise_judges",
]

# Hashes are shown this long in tables; the JSON report keeps them whole.
SHORT_SHA = 12


@dataclass(frozen=True, slots=True)
class Judge:
    """One judge configuration as the result lines record it."""

    judge: str
    model: str | None
    """The model the server said it answered as (None: an offline judge, or no call made)."""
    prompt_set: str
    prompt_sha256: str
    kb_id: str | None
    kb_sha256: str | None
    response_format: str | None
    """The response format the server accepted (None: not recorded, or no call made)."""
    settings_sha256: str | None
    """Hash of the judge's frozen settings (temperature, seed, max tokens, base URL...)."""

    def describe(self) -> str:
        """One line naming the judge, for a sentence or a log."""
        parts = [self.judge]
        if self.model:
            parts.append(f"model {self.model}")
        parts.append(f"prompts {self.prompt_set} ({_short(self.prompt_sha256)})")
        if self.kb_id:
            parts.append(f"KB {self.kb_id} ({_short(self.kb_sha256)})")
        if self.response_format:
            parts.append(f"response format {self.response_format}")
        return ", ".join(parts)

    @property
    def configuration(self) -> tuple[object, ...]:
        """What the run chose (everything but what the server said back)."""
        return (self.judge, self.prompt_set, self.prompt_sha256, self.kb_id, self.kb_sha256,
                self.settings_sha256)  # fmt: skip


@dataclass(frozen=True, slots=True)
class TokenTotals:
    """Tokens of the judge answers a file's lines were graded with, as their provenance records
    them (an answer from the response cache counts what it cost when it was paid)."""

    prompt: int = 0
    completion: int = 0
    cached: int = 0
    """The part of ``prompt`` the provider served from its prompt cache."""

    def describe(self) -> str | None:
        """A sentence of the totals, or None when the lines record no tokens."""
        if not self.prompt and not self.completion:
            return None
        share = f", {self.cached / self.prompt:.1%}" if self.prompt else ""
        return (
            f"The judge's answers used {self.prompt:,} prompt tokens ({self.cached:,} of them "
            f"cached by the provider{share}) and {self.completion:,} completion tokens."
        )


@dataclass(frozen=True, slots=True)
class JudgeSummary:
    """The judges of a results file, most lines first."""

    judges: tuple[tuple[Judge, int], ...]
    """The judges that answered lines of the file, each with its lines (those it answered and
    the unanswered lines of its configuration); when no judge answered any line, the judges
    the unanswered lines were sent to."""
    without_judge: int = 0
    """Lines that never reached a judge (unreadable request lines carry no provenance)."""
    without_answer: int = 0
    """Lines sent to a judge that answered none of the file's lines (counted in ``judges``
    only when no line of the file was answered)."""
    answered: bool = True
    """Whether ``judges`` answered lines (False: no line of the file holds a judge's answer)."""
    tokens: TokenTotals = TokenTotals()
    """The tokens the lines' provenance records, over every line."""

    @property
    def mixed(self) -> bool:
        """Grades of more than one judge: only a judge's answers make it one of the file's."""
        return self.answered and len(self.judges) > 1

    def headline(self) -> str:
        """A sentence naming the judge, or saying that the file mixes judges."""
        if not self.judges:
            text = "No line names its judge (no line reached the scorer)."
        elif not self.answered:
            sent_to = "; ".join(judge.describe() for judge, _ in self.judges)
            text = f"No judge answered any line (they were sent to {sent_to})."
        elif not self.mixed:
            text = f"Judge: {self.judges[0][0].describe()}."
        else:
            text = (
                f"Mixed judges: these results come from {len(self.judges)} different judges "
                "(their grades are not comparable; score the file again with one judge)."
            )
        if self.answered and self.without_answer:
            text += f" {self.without_answer} line(s) hold no answer of any judge."
        if self.judges and self.without_judge:
            text += f" {self.without_judge} line(s) never reached a judge."
        tokens = self.tokens.describe()
        return f"{text} {tokens}" if tokens else text

    def table(self) -> tuple[list[str], list[list[str]]]:
        """Header and rows (plain, unescaped text) of one row per judge."""
        header = ["Lines", "Judge", "Model", "Prompt set", "KB", "Response format",
                  "Settings"]  # fmt: skip
        rows = [
            [
                str(lines),
                judge.judge,
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
            prefix = "judge." if len(self.judges) == 1 else f"judge.{number}."
            fields = {**asdict(judge), "lines": lines}
            out += [
                (prefix + key, str(value)) for key, value in fields.items() if value is not None
            ]
        if not self.answered and self.judges:
            out.append(("judge.answered", "false"))
        if self.without_answer:
            out.append(("judge.lines_without_answer", str(self.without_answer)))
        if self.without_judge:
            out.append(("judge.lines_without_judge", str(self.without_judge)))
        if self.tokens.describe() is not None:
            out += [(f"judge.tokens.{k}", str(v)) for k, v in asdict(self.tokens).items()]
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "mixed": self.mixed,
            "answered": self.answered,
            "judges": [{**asdict(judge), "lines": lines} for judge, lines in self.judges],
            "lines_without_answer": self.without_answer,
            "lines_without_judge": self.without_judge,
            "tokens": asdict(self.tokens),
        }


def judge_of(provenance: Provenance) -> Judge:
    """The judge a result line's provenance names."""
    return Judge(
        judge=provenance.judge,
        model=provenance.judge_model,
        prompt_set=provenance.prompt_set,
        prompt_sha256=provenance.prompt_sha256,
        kb_id=provenance.kb_id,
        kb_sha256=provenance.kb_sha256,
        response_format=provenance.response_format,
        settings_sha256=provenance.judge_settings_sha256,
    )


def answered(result: ItemResult) -> bool:
    """Whether a judge answered at least one grade of ``result`` (valid, or its own failure)."""
    return any(metric_outcome(graded) in JUDGED for graded in result.metrics.values())


class JudgeTally:
    """Counts the judges of result lines as they stream past (``watch``), then ``summary()``."""

    def __init__(self) -> None:
        self._judges: Counter[Judge] = Counter()
        self._unanswered: Counter[Judge] = Counter()
        self._without = 0
        self._tokens = [0, 0, 0]  # prompt, completion, cached

    def add(self, result: ItemResult) -> None:
        if result.provenance is None:
            self._without += 1
            return
        tokens = result.provenance.tokens
        self._tokens[0] += tokens.prompt
        self._tokens[1] += tokens.completion
        self._tokens[2] += tokens.cached
        if answered(result):
            self._judges[judge_of(result.provenance)] += 1
        else:
            self._unanswered[judge_of(result.provenance)] += 1

    def watch(self, results: Iterable[ItemResult]) -> Iterator[ItemResult]:
        """Yield ``results`` unchanged, counting each one's judge."""
        for result in results:
            self.add(result)
            yield result

    def summary(self) -> JudgeSummary:
        tokens = TokenTotals(*self._tokens)
        if not self._judges:
            return JudgeSummary(
                judges=_ranked(self._unanswered),
                without_judge=self._without,
                answered=False,
                tokens=tokens,
            )
        counts = Counter(self._judges)
        without_answer = 0
        for sent_to, lines in self._unanswered.items():
            # the judge of the same configuration that answered most lines answered for it
            same = [j for j in self._judges if j.configuration == sent_to.configuration]
            if same:
                counts[max(same, key=lambda j: self._judges[j])] += lines
            else:
                without_answer += lines
        return JudgeSummary(
            judges=_ranked(counts),
            without_judge=self._without,
            without_answer=without_answer,
            tokens=tokens,
        )


def summarise_judges(results: Iterable[ItemResult]) -> JudgeSummary:
    """The judges of ``results`` (see ``JudgeSummary``)."""
    tally = JudgeTally()
    for result in results:
        tally.add(result)
    return tally.summary()


def _ranked(judges: Counter[Judge]) -> tuple[tuple[Judge, int], ...]:
    # most lines first; ties in the order the judges first appeared
    return tuple(sorted(judges.items(), key=lambda pair: -pair[1]))


def _short(sha: str | None) -> str:
    return sha[:SHORT_SHA] if sha else "–"
