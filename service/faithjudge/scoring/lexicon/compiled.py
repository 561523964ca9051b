"""The lexicon files compiled once into phrase indexes that share one scanner."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from faithjudge.scoring.lexicon.text import PhraseIndex, Scanner, stem, tokenize

__all__ = ["FidelityParams", "Lexicon", "compile_lexicon"]


@dataclass(frozen=True, slots=True)
class FidelityParams:
    """How CF's soundness figure is built and cut into grades (``findings.json``)."""

    coverage_weight: float
    neutral_coverage: float
    breadth_saturation: int
    grade_thresholds: tuple[float, float, float, float]  # soundness for grades 2, 3, 4, 5


@dataclass(frozen=True, slots=True)
class Lexicon:
    """All lexicon files, compiled once (``compile_lexicon``)."""

    scanner: Scanner  # every list below registered with it: one scan per sentence
    stopwords: frozenset[str]
    side_stems: dict[str, str]
    orientation: frozenset[str]
    equivalents: dict[str, str]
    variants: dict[str, frozenset[str]]  # class word -> every stem mapped onto it
    rewritten: frozenset[str]  # the stems that equivalents map onto another word
    comparison: str
    diminishers: frozenset[str]
    comparison_fillers: frozenset[str]
    hypothetical: PhraseIndex
    hypothetical_scope: int
    hypothetical_post: PhraseIndex
    hypothetical_post_scope: int
    bilateral: frozenset[str]
    window_slack: int
    partial_min_tokens: int
    partial_fraction: float
    scope: int
    pre: PhraseIndex
    post: PhraseIndex
    pseudo: PhraseIndex
    terminators: PhraseIndex
    uncertain_pre: PhraseIndex
    uncertain_post: PhraseIndex
    uncertainty_scope: int
    certainty: PhraseIndex
    findings: PhraseIndex
    finding_keys: tuple[tuple[str, ...], ...]  # each finding phrase, equivalents applied
    fidelity: FidelityParams
    tone_negators: PhraseIndex
    tone_window: int
    hedges: PhraseIndex
    uncertainty: PhraseIndex
    boosters: PhraseIndex
    assertives: PhraseIndex
    assertive_weight: float
    elaboration_sentences: int
    channel_markers: dict[str, PhraseIndex]
    cues: dict[str, PhraseIndex]
    allusions: PhraseIndex
    influence: dict[str, PhraseIndex]
    # Concept phrases compiled on first use, and what the fidelity rules derive from one
    # sentence's stems, keyed by the tuple's identity (memos: the output never depends on them).
    phrases: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    sentence_memo: dict[int, Any] = field(default_factory=dict, compare=False, repr=False)


def _words(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValueError(f"{where} must be a list of non-empty strings")
    return value


def _fidelity_params(raw: Mapping[str, Any]) -> FidelityParams:
    thresholds = tuple(float(t) for t in raw["grade_thresholds"])
    if len(thresholds) != 4 or list(thresholds) != sorted(thresholds):
        raise ValueError("findings.scoring.grade_thresholds must be 4 ascending numbers")
    params = FidelityParams(
        coverage_weight=float(raw["coverage_weight"]),
        neutral_coverage=float(raw["neutral_coverage"]),
        breadth_saturation=int(raw["breadth_saturation"]),
        grade_thresholds=thresholds,
    )
    if not 0.0 <= params.coverage_weight <= 1.0 or params.breadth_saturation < 1:
        raise ValueError("findings.scoring: coverage_weight in [0, 1], breadth_saturation >= 1")
    return params


def compile_lexicon(data: Mapping[str, Mapping[str, Any]]) -> Lexicon:
    """Compile the loaded lexicon files (keyed by file stem: matching, negation, tone, ...).

    Raises:
        KeyError, TypeError, ValueError: a file or list is missing or malformed.
    """
    m, neg, tone = data["matching"], data["negation"], data["tone"]
    cues, infl, findings = data["cues"], data["influence"], data["findings"]
    scan = Scanner()

    def idx(phrases: Sequence[str], where: str) -> PhraseIndex:
        return PhraseIndex(_words(phrases, where), scanner=scan)

    sides = {stem(w): side for side in ("left", "right") for w in m["laterality"][side]}
    equivalents: dict[str, str] = {}
    for canonical, variants in m["equivalents"].items():
        for word in (canonical, *_words(variants, f"matching.equivalents.{canonical}")):
            equivalents[stem(word)] = stem(canonical)
    grouped: dict[str, set[str]] = {}
    for word, canonical in equivalents.items():
        grouped.setdefault(canonical, {canonical}).add(word)
    variants = {canonical: frozenset(words) for canonical, words in grouped.items()}
    return Lexicon(
        scanner=scan,
        stopwords=frozenset(stem(w) for w in _words(m["stopwords"], "matching.stopwords")),
        side_stems=sides,
        orientation=frozenset(stem(w) for w in m["orientation_markers"]),
        equivalents=equivalents,
        variants=variants,
        rewritten=frozenset(w for w, c in equivalents.items() if w != c),
        comparison=stem(str(m["comparison"])),
        diminishers=frozenset(stem(w) for w in _words(m["diminishers"], "matching.diminishers")),
        comparison_fillers=frozenset(
            stem(w) for w in _words(m["comparison_fillers"], "matching.comparison_fillers")
        ),
        hypothetical=idx(neg["hypothetical_triggers"], "negation.hypothetical_triggers"),
        hypothetical_scope=int(neg["hypothetical_scope"]),
        hypothetical_post=idx(
            neg["hypothetical_post_triggers"], "negation.hypothetical_post_triggers"
        ),
        hypothetical_post_scope=int(neg["hypothetical_post_scope"]),
        bilateral=frozenset(stem(w) for w in _words(m["bilateral_markers"], "matching.bilateral")),
        window_slack=int(m["window_slack"]),
        partial_min_tokens=int(m["partial_min_tokens"]),
        partial_fraction=float(m["partial_fraction"]),
        scope=int(neg["scope_window"]),
        pre=idx(neg["pre_triggers"], "negation.pre_triggers"),
        post=idx(neg["post_triggers"], "negation.post_triggers"),
        pseudo=idx(neg["pseudo_triggers"], "negation.pseudo_triggers"),
        terminators=idx(neg["terminators"], "negation.terminators"),
        uncertain_pre=idx(neg["uncertainty_pre_triggers"], "negation.uncertainty_pre_triggers"),
        uncertain_post=idx(neg["uncertainty_post_triggers"], "negation.uncertainty_post_triggers"),
        uncertainty_scope=int(neg["uncertainty_scope"]),
        certainty=idx(neg["certainty_markers"], "negation.certainty_markers"),
        findings=idx(findings["findings"], "findings.findings"),
        finding_keys=tuple(
            tuple(equivalents.get(t, t) for t in tokenize(phrase))
            for phrase in findings["findings"]
        ),
        fidelity=_fidelity_params(findings["scoring"]),
        tone_negators=idx(tone["negators"], "tone.negators"),
        tone_window=int(tone["negator_window"]),
        hedges=idx(tone["hedges"], "tone.hedges"),
        uncertainty=idx(tone["uncertainty"], "tone.uncertainty"),
        boosters=idx(tone["boosters"], "tone.boosters"),
        assertives=idx(tone["assertives"], "tone.assertives"),
        assertive_weight=float(tone["assertive_weight"]),
        elaboration_sentences=int(tone["elaboration_sentences"]),
        channel_markers={
            k: idx(v, f"cues.channel_markers.{k}") for k, v in cues["channel_markers"].items()
        },
        cues={k: idx(cues[k], f"cues.{k}") for k in ("text", "image", "generic")},
        allusions=idx(cues["allusions"], "cues.allusions"),
        influence={
            k: idx(infl[k], f"influence.{k}")
            for k in ("clear", "hedged", "none", "weighing", "sign")
        },
    )
