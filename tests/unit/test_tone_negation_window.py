"""Negation flips a tone phrase only inside its window, however many phrases a sentence holds."""

from __future__ import annotations

from faithjudge.judges.lexicon import LexiconJudge
from faithjudge.scoring.lexicon.text import sentences
from faithjudge.scoring.lexicon.tone import tone_hits
from hypothesis import given, settings
from hypothesis import strategies as st

LEX = LexiconJudge()._lexicon
WORDS = ["not", "no", "likely", "probably", "definitely", "clearly", "effusion", "the", "angle"]


def _reference(stems: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """The window test written out: a phrase flips when any negator starts within the window
    before it."""
    get = LEX.scanner.scan(stems).get
    negators = [a for a, _, _ in get(LEX.tone_negators.category, ())]
    hedges: list[str] = []
    boosters: list[str] = []
    for hits, labels, target, other in (
        (get(LEX.hedges.category, ()), LEX.hedges.labels, hedges, boosters),
        (get(LEX.boosters.category, ()), LEX.boosters.labels, boosters, hedges),
    ):
        for a, _, i in hits:
            flipped = any(a - LEX.tone_window <= n < a for n in negators)
            (other if flipped else target).append(labels[i])
    for _, _, i in get(LEX.uncertainty.category, ()):
        label = LEX.uncertainty.labels[i]
        hedges += [label, label + "#"]
    return hedges, boosters


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(WORDS), min_size=1, max_size=60))
def test_tone_hits_flip_as_the_window_says(words: list[str]) -> None:
    (sentence,) = sentences(" ".join(words) + ".")
    hedges, boosters, _ = tone_hits(LEX, sentence.stems)
    assert (hedges, boosters) == _reference(sentence.stems)


def test_a_run_on_sentence_of_thousands_of_phrases_flips_each_one_alone() -> None:
    (sentence,) = sentences("effusion not likely, clearly present " * 5_000)
    hedges, boosters, _ = tone_hits(LEX, sentence.stems)
    assert (hedges, boosters) == _reference(sentence.stems)
    assert len(hedges) + len(boosters) >= 10_000
