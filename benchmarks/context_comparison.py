"""medspaCy ConText against the lexicon's hand-written negation and hedging rules.

medspaCy cannot be installed beside the service: medspacy 1.3.1 pins spacy < 3.8, whose
thinc/blis wheels need numpy < 2, while the service pins numpy 2.x. The comparison therefore
runs in two steps, each in its own environment:

1. ``dump`` (in a virtual environment with ``pip install medspacy==1.3.1``): cut the CoTs into
   the lexicon's own sentences, run ConText (its default, curated rules on a blank English
   spaCy tokenizer with the rule-based sentencizer; no model download) over every sentence and
   write each modifier (category, direction, trigger and scope) in the lexicon's token
   positions; also time ConText alone over the 1,000 synthetic ~3 KB CoTs of
   ``lexicon_speed`` on one pinned core.
2. ``evaluate`` (in the service's environment): score the reader study with ``lexicon:v1``
   twice, with the hand-written rules and with ConText's decisions in their place (negated:
   NEGATED_EXISTENCE; uncertain: POSSIBLE_EXISTENCE; hypothetical: HYPOTHETICAL; CT hedges:
   one per POSSIBLE_EXISTENCE trigger, explicit uncertainty statements and boosters kept), and
   report tau-b on both halves of the seeded split with the split-half CIs.

Run::

    python -m venv /tmp/ctx && /tmp/ctx/bin/pip install medspacy==1.3.1
    .venv/bin/python -m benchmarks.context_comparison sentences   # writes the sentences
    /tmp/ctx/bin/python benchmarks/context_comparison.py dump      # needs only medspacy
    .venv/bin/python -m benchmarks.context_comparison evaluate    # writes the results JSON
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# Outside the repository: the sentences come from the reader study, which is never committed.
WORK = Path(tempfile.gettempdir()) / "faithjudge-context-comparison"
SENTENCES = WORK / "sentences.json"
MODIFIERS = WORK / "modifiers.json"
SPEED = WORK / "speed.json"
# The lexicon's word pattern (service/faithjudge/scoring/lexicon/text.py), repeated so that
# ``dump`` runs
# without the service's dependencies.
_TOKEN = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")


def _pin() -> int | None:
    try:
        cpu = sorted(os.sched_getaffinity(0))[-1]
        os.sched_setaffinity(0, {cpu})
        return cpu
    except (AttributeError, OSError):
        return None


def sentences_step(shared: Path, items: int) -> None:
    """Write the lexicon's sentences of the reader-study CoTs and of the speed corpus."""
    import random

    from faithjudge.scoring.lexicon import sentences

    from benchmarks._common import kb_questions, make_request

    def cut(cot: str) -> list[str]:
        return [cot[s.start : s.end] for s in sentences(cot)]

    rows = [json.loads(x) for x in (shared / "reader_study" / "dev.jsonl").read_text().splitlines()]
    rng = random.Random(0)
    questions = kb_questions()
    bench = [make_request(rng, i, questions, cot_chars=(2800, 3200))["cot"] for i in range(items)]
    WORK.mkdir(parents=True, exist_ok=True)
    SENTENCES.write_text(
        json.dumps(
            {"reader": [cut(r["modified_cot"]) for r in rows], "bench": [cut(c) for c in bench]}
        )
    )
    print(f"-> {SENTENCES}")


def dump_step(repeats: int) -> None:
    """Run ConText over every sentence (modifiers) and over the speed corpus (timing)."""
    import medspacy
    import spacy

    def pipeline() -> Any:
        nlp = spacy.blank("en")
        nlp.add_pipe("sentencizer")
        nlp.add_pipe("medspacy_context", config={"rules": "default"})
        return nlp

    def ours(text: str, doc: Any, start: int, end: int) -> tuple[int, int] | None:
        if end <= start:
            return None
        first, last = doc[start].idx, doc[end - 1].idx + len(doc[end - 1])
        hits = [i for i, m in enumerate(_TOKEN.finditer(text)) if first <= m.start() < last]
        return (min(hits), max(hits) + 1) if hits else None

    data = json.loads(SENTENCES.read_text())
    texts = sorted({s for cot in data["reader"] for s in cot})
    nlp = pipeline()
    modifiers: dict[str, list[list[Any]]] = {}
    for text, doc in zip(texts, nlp.pipe(texts), strict=True):
        found = []
        for m in doc._.context_graph.modifiers:
            trigger, scope = ours(text, doc, *m.modifier_span), ours(text, doc, *m.scope_span)
            if trigger and scope:
                found.append([m.category, m.direction, *trigger, *scope])
        modifiers[text] = found
    MODIFIERS.write_text(json.dumps(modifiers))
    core = _pin()
    bench = data["bench"]
    walls, cpus = [], []
    for _ in range(repeats):
        nlp = pipeline()  # cold: a fresh pipeline per repeat
        start, cpu = time.perf_counter(), time.process_time()
        for cot in bench:
            for doc in nlp.pipe(cot):
                _ = doc._.context_graph.modifiers
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    wall, cpu_s = sorted(walls)[len(walls) // 2], sorted(cpus)[len(cpus) // 2]
    SPEED.write_text(
        json.dumps(
            {
                "items": len(bench),
                "sentences": sum(map(len, bench)),
                "repeats": repeats,
                "pinned_cpu": core,
                "seconds_all": [round(w, 3) for w in walls],
                "context_items_per_s": round(len(bench) / wall, 1),
                "context_items_per_cpu_s": round(len(bench) / cpu_s, 1),
                "rules": len(pipeline().get_pipe("medspacy_context").rules),
                "medspacy": medspacy.__version__,
                "spacy": spacy.__version__,
                "python": sys.version.split()[0],
                "load_average_after": [round(x, 2) for x in os.getloadavg()],
            }
        )
    )
    print(f"-> {MODIFIERS}, {SPEED}")


def evaluate_step(shared: Path, bootstrap: int) -> dict[str, Any]:
    """Score the reader study with the hand-written rules and with ConText's decisions."""
    from unittest import mock

    from faithjudge.agreement import load_judge_results, load_reader_study
    from faithjudge.agreement.halves import split_half_agreement
    from faithjudge.scoring.lexicon import attribution, fidelity, negation, tokenize, tone

    from benchmarks._common import write_result
    from benchmarks.lexicon_agreement import render_table, score_reader_study, split_halves

    table = {tuple(tokenize(t)): m for t, m in json.loads(MODIFIERS.read_text()).items()}
    unknown: set[tuple[str, ...]] = set()

    def covered(stems: Any, window: tuple[int, int], category: str) -> bool:
        found = table.get(tuple(stems))
        if found is None:
            unknown.add(tuple(stems))
            return False
        ws, we = window
        for cat, direction, ta, tb, sa, sb in found:
            if cat != category or direction == "TERMINATE" or (ta < we and ws < tb):
                continue
            if sa <= ws and we <= sb:
                return True
        return False

    def negated(lex: Any, stems: Any, window: Any, **_: Any) -> bool:
        return covered(stems, window, "NEGATED_EXISTENCE")

    def uncertain(lex: Any, stems: Any, window: Any, **_: Any) -> bool:
        return covered(stems, window, "POSSIBLE_EXISTENCE")

    def hypothetical(lex: Any, stems: Any, start: int, end: int | None = None) -> bool:
        return covered(stems, (start, start + 1 if end is None else end), "HYPOTHETICAL")

    hand_tone = tone.tone_hits

    def tone_hits(lex: Any, stems: Any) -> Any:
        hedges, boosters, assertive = hand_tone(lex, stems)
        listed = set(lex.hedges.labels)
        kept = [h for h in hedges if h not in listed]  # explicit uncertainty statements
        kept += [
            f"context:{ta}"
            for cat, direction, ta, *_ in table.get(tuple(stems), [])
            if cat == "POSSIBLE_EXISTENCE" and direction != "TERMINATE"
        ]
        return kept, boosters, assertive

    reader_study = shared / "reader_study" / "dev.jsonl"
    halves = split_halves(reader_study)
    variants = {
        "hand-written (lexicon:v1)": [],
        "ConText: negation, uncertainty, hedges": [
            mock.patch.object(fidelity, "is_negated", negated),
            mock.patch.object(attribution, "is_negated", negated),
            mock.patch.object(fidelity, "is_uncertain", uncertain),
            mock.patch.object(tone, "tone_hits", tone_hits),
        ],
    }
    variants["ConText: + hypothetical"] = [
        *variants["ConText: negation, uncertainty, hedges"],
        mock.patch.object(fidelity, "is_hypothetical", hypothetical),
        mock.patch.object(negation, "is_hypothetical", hypothetical),
    ]
    judges = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, patches) in enumerate(variants.items()):
            for p in patches:
                p.start()
            try:
                path = score_reader_study(reader_study, "lexicon:v1", Path(tmp) / str(i))
                judges[name] = load_judge_results(path)
            finally:
                for p in reversed(patches):
                    p.stop()
    report = split_half_agreement(
        load_reader_study(reader_study), judges, halves, B=bootstrap, seed=0
    )
    speed = json.loads(SPEED.read_text())
    lexicon_speed = json.loads((HERE / "results" / "lexicon_speed.json").read_text())
    text = render_table(report)
    print(text)
    payload = {
        "benchmark": "context_comparison",
        "description": __doc__.splitlines()[0],
        "report": report.model_dump(mode="json", exclude={"halves"}),
        "items_per_half": {h: len(items) for h, items in report.halves.items()},
        "table_md": text,
        "sentences_without_context_output": len(unknown),
        "context_speed": speed,
        "lexicon_speed_items_per_s": lexicon_speed["items_per_s"],
    }
    print(f"-> {write_result('context_comparison', payload)}")
    return payload


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("sentences", "dump", "evaluate"))
    parser.add_argument("--shared", type=Path, default=HERE.parents[1] / "shared" / "data")
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bootstrap", type=int, default=10_000)
    args = parser.parse_args(argv)
    if args.step == "sentences":
        sentences_step(args.shared, args.items)
    elif args.step == "dump":
        dump_step(args.repeats)
    else:
        evaluate_step(args.shared, args.bootstrap)


if __name__ == "__main__":
    main()
