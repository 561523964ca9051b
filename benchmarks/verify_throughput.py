"""Verification throughput on one core: normalise a CoT once, verify its three judge answers.

Each synthetic item is a ~3 KB tagged CoT (smart quotes, a no-break space, ligatures) and three
schema-valid judge answers (CF/CA/CT) quoting it 1-3 times; about a quarter of the quotes are
100-200 characters long with 1-2 typos, so the approximate (edit-distance) path of
``locate_quote`` runs. One *item* is ``normalize(cot)`` plus ``verify()`` for the three metrics,
exactly what ``Scorer`` does per item after the judge answered.

Reference numbers, measured in the same run on the same items:

(a) ``schema_path_ratio``: the same answers verified with validators built from the same schemas
    minus their ``$id``. ``grading._schema_valid`` takes its pydantic fast path only when the
    validator's schema carries the ``$id`` a pydantic mirror declares, so these validators force
    the ``jsonschema``-only path (a fresh validator of the unchanged schema would still take the
    fast path). Ratio = stock items/s / jsonschema-only items/s, both on the first
    ``--slow-items`` items, the two alternating repeat by repeat.
(b) ``quote_location_ratio``: every quote of a subset of items located with ``locate_quote``
    versus a naive per-quote scan, ``rapidfuzz.fuzz.partial_ratio_alignment(quote, cot)`` over
    the same normalised texts (alternating as well). Ratio = locate_quote quotes/s / naive
    quotes/s. The naive scan is a speed reference only: it returns a similarity, not a match
    within the edit budget.

The process pins itself to one CPU (the event loop is single-threaded anyway). Every timing is
the median of ``--repeats`` runs. Run: ``python -m benchmarks.verify_throughput [--items N]``.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from faithjudge.assets.schemas import FaithJudgeValidator, judge_output_validator, load_schema
from faithjudge.scoring.evidence import locate_quote
from faithjudge.scoring.grading import parse_response, verify
from faithjudge.scoring.judge_output import output_model
from faithjudge.scoring.normalize import NormalizedText, normalize, normalize_text
from rapidfuzz import fuzz

from benchmarks._common import (
    METRICS,
    judge_response,
    load_average,
    machine_facts,
    make_cot,
    median,
    write_result,
)

NAME = "verify_throughput"
TARGET_ITEMS_PER_S = 2000.0


@dataclass(frozen=True, slots=True)
class Item:
    cot: str
    responses: tuple[tuple[str, str], ...]  # (metric, raw text)


def build_items(
    n: int,
    seed: int,
    cot_chars: int,
    typo_fraction: float,
    *,
    unicode_ok: bool = True,
    unicode_rate: float = 0.05,
) -> tuple[list[Item], Counter[str]]:
    rng = random.Random(seed)
    items: list[Item] = []
    counts: Counter[str] = Counter()
    for i in range(n):
        cot = make_cot(
            rng,
            cot_chars,
            answer=rng.choice(("yes", "no")),
            unicode_ok=unicode_ok,
            unicode_rate=unicode_rate,
            tag=f"V-{i:06d}",
        )
        responses = []
        for metric in METRICS:
            text, stats = judge_response(rng, metric, cot, typo_fraction=typo_fraction)
            counts.update(stats)
            responses.append((metric, text))
        items.append(Item(cot, tuple(responses)))
    counts["cot_chars_total"] = sum(len(item.cot) for item in items)
    counts["non_ascii_cots"] = sum(1 for item in items if not item.cot.isascii())
    return items, counts


def slow_path_validators() -> dict[str, Any]:
    """Validators of the same schemas without ``$id``: ``verify`` then uses jsonschema only."""
    validators = {}
    for metric in METRICS:
        schema = load_schema(metric)
        schema.pop("$id")
        assert output_model(metric, schema) is None  # no pydantic mirror: jsonschema alone
        validators[metric] = FaithJudgeValidator(schema)
    return validators


def verify_all(
    items: list[Item], validators: Mapping[str, Any], tolerance: float
) -> tuple[Counter[str], int]:
    """One pass: normalise each CoT once, verify its three answers. (statuses, approx quotes)"""
    statuses: Counter[str] = Counter()
    approximate = 0
    for item in items:
        cot = normalize(item.cot)
        for metric, raw in item.responses:
            result = verify(
                raw, metric=metric, cot=cot, validator=validators[metric], tolerance=tolerance
            )
            statuses[result.status] += 1
            approximate += sum(1 for q in result.quotes if q.edits > 0)
    return statuses, approximate


def timed(fn: Callable[[], Any], repeats: int) -> tuple[list[float], list[float], Any]:
    """Wall and CPU seconds of ``repeats`` calls of ``fn`` (GC collected before each)."""
    walls, cpus = [], []
    out = None
    for _ in range(repeats):
        gc.collect()
        c0, w0 = time.process_time(), time.perf_counter()
        out = fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return walls, cpus, out


def interleaved(
    fns: Mapping[str, Callable[[], Any]], repeats: int
) -> dict[str, tuple[list[float], Any]]:
    """Wall seconds of each function over ``repeats`` rounds, the functions alternating."""
    walls: dict[str, list[float]] = {name: [] for name in fns}
    outs: dict[str, Any] = {}
    for _ in range(repeats):
        for name, fn in fns.items():
            gc.collect()
            t0 = time.perf_counter()
            outs[name] = fn()
            walls[name].append(time.perf_counter() - t0)
    return {name: (walls[name], outs[name]) for name in fns}


def quote_pairs(items: list[Item]) -> list[tuple[str, NormalizedText]]:
    pairs = []
    for item in items:
        cot = normalize(item.cot)
        for _, raw in item.responses:
            for quote in parse_response(raw)["quotes"]:
                pairs.append((quote, cot))
    return pairs


def locate_all(pairs: list[tuple[str, NormalizedText]], tolerance: float) -> int:
    found = 0
    for quote, cot in pairs:
        if locate_quote(quote, cot, tolerance=tolerance) is not None:
            found += 1
    return found


def naive_all(pairs: list[tuple[str, NormalizedText]]) -> int:
    """The naive reference: one ``partial_ratio_alignment`` scan of the whole CoT per quote."""
    found = 0
    for quote, cot in pairs:
        alignment = fuzz.partial_ratio_alignment(normalize_text(quote), cot.text)
        if alignment is not None and alignment.score >= 98.0:
            found += 1
    return found


def pin_to_one_core() -> int | None:
    try:
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[-1]})
        return cpus[-1]
    except (AttributeError, OSError):
        return None


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=3000, help="synthetic items (default 3000)")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats (median reported)")
    parser.add_argument("--cot-chars", type=int, default=3000, help="CoT size (default ~3 KB)")
    parser.add_argument("--typo-fraction", type=float, default=0.25, help="quotes with typos")
    parser.add_argument(
        "--unicode-rate", type=float, default=0.05, help="extra non-ASCII sentence rate"
    )
    parser.add_argument("--slow-items", type=int, default=1000, help="items for reference (a)")
    parser.add_argument("--naive-items", type=int, default=300, help="items for reference (b)")
    parser.add_argument("--tolerance", type=float, default=0.02)
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--no-write", action="store_true", help="do not write the JSON file")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    machine = machine_facts()
    core = pin_to_one_core()
    stock = {m: judge_output_validator(m) for m in METRICS}
    slow = slow_path_validators()

    def build(unicode_ok: bool, unicode_rate: float) -> tuple[list[Item], Counter[str]]:
        return build_items(
            args.items,
            args.seed,
            args.cot_chars,
            args.typo_fraction,
            unicode_ok=unicode_ok,
            unicode_rate=unicode_rate,
        )

    def measure(items: list[Item]) -> dict[str, Any]:
        # Warm up (lru caches, lazy pydantic/jsonschema setup) and check the data once.
        statuses, approximate = verify_all(items, stock, args.tolerance)
        if statuses != Counter(valid=3 * len(items)):
            raise SystemExit(f"synthetic answers did not all verify: {dict(statuses)}")
        walls, cpus, _ = timed(lambda: verify_all(items, stock, args.tolerance), args.repeats)
        cots = [item.cot for item in items]
        norm_walls, _, _ = timed(lambda: [normalize(c) for c in cots], args.repeats)
        return {
            "items_per_s": len(items) / median(walls),
            "cpu_items_per_s": len(items) / median(cpus),
            "us_per_item": 1e6 * median(walls) / len(items),
            "normalize_us": 1e6 * median(norm_walls) / len(items),
            "verify_us": 1e6 * (median(walls) - median(norm_walls)) / len(items),
            "walls": walls,
            "cpus": cpus,
            "statuses": dict(statuses),
            "approximate": approximate,
        }

    # Headline data, as specified: one sentence with smart quotes, a ligature and a no-break
    # space per CoT, plus the odd further non-ASCII sentence (--unicode-rate).
    items, counts = build(True, args.unicode_rate)
    spec = measure(items)
    items_per_s = spec["items_per_s"]
    walls, cpus, statuses, approximate = (
        spec["walls"],
        spec["cpus"],
        spec["statuses"],
        spec["approximate"],
    )
    # Sensitivity: plain-ASCII CoTs and CoTs where a quarter of the sentences are non-ASCII.
    variants: dict[str, Any] = {}
    for label, unicode_ok, rate in (("ascii_only", False, 0.0), ("unicode_heavy", True, 0.25)):
        v_items, v_counts = build(unicode_ok, rate)
        got = measure(v_items)
        variants[label] = {
            "unicode_rate": rate if unicode_ok else 0.0,
            "non_ascii_cots": v_counts["non_ascii_cots"],
            "items_per_s": round(got["items_per_s"], 1),
            "normalize_us_per_item": round(got["normalize_us"], 1),
            "verify_3_metrics_us_per_item": round(got["verify_us"], 1),
        }
        del v_items

    # (a) the jsonschema-only path on the same answers. Fast and slow runs alternate, so a
    # change of machine load between them does not bias the ratio.
    slow_items = items[: args.slow_items] if args.slow_items else items
    verify_all(slow_items[:50], slow, args.tolerance)
    ref_a = interleaved(
        {
            "fast": lambda: verify_all(slow_items, stock, args.tolerance),
            "slow": lambda: verify_all(slow_items, slow, args.tolerance),
        },
        args.repeats,
    )
    slow_statuses = ref_a["slow"][1][0]
    if slow_statuses != Counter(valid=3 * len(slow_items)):
        raise SystemExit(f"jsonschema-only path disagrees: {dict(slow_statuses)}")
    slow_items_per_s = len(slow_items) / median(ref_a["slow"][0])
    schema_path_ratio = median(ref_a["slow"][0]) / median(ref_a["fast"][0])

    # (b) quote location: locate_quote vs a naive partial_ratio_alignment scan per quote.
    pairs = quote_pairs(items[: args.naive_items])
    long_pairs = [(q, c) for q, c in pairs if len(q) >= 100]
    ref_b = interleaved(
        {
            "locate": lambda: locate_all(pairs, args.tolerance),
            "naive": lambda: naive_all(pairs),
            "locate_long": lambda: locate_all(long_pairs, args.tolerance),
            "naive_long": lambda: naive_all(long_pairs),
        },
        args.repeats,
    )
    loc_found, naive_found = ref_b["locate"][1], ref_b["naive"][1]
    locate_qps = len(pairs) / median(ref_b["locate"][0])
    naive_qps = len(pairs) / median(ref_b["naive"][0])
    long_ratio = median(ref_b["naive_long"][0]) / median(ref_b["locate_long"][0])

    result: dict[str, Any] = {
        "benchmark": NAME,
        "config": {
            "items": len(items),
            "repeats": args.repeats,
            "cot_chars_target": args.cot_chars,
            "typo_fraction": args.typo_fraction,
            "tolerance": args.tolerance,
            "seed": args.seed,
            "unicode_rate": args.unicode_rate,
            "pinned_cpu": core,
        },
        "data": {
            "mean_cot_chars": round(counts["cot_chars_total"] / len(items)),
            "non_ascii_cots": counts["non_ascii_cots"],
            "quotes": counts["quotes"],
            "long_quotes": counts["long"],
            "quotes_with_typos": counts["typos"],
            "quotes_located_approximately": approximate,
            "statuses": dict(statuses),
        },
        "headline": {
            "items_per_s": round(items_per_s, 1),
            "target_items_per_s": TARGET_ITEMS_PER_S,
            "pass": items_per_s >= TARGET_ITEMS_PER_S,
            "us_per_item": round(spec["us_per_item"], 1),
            "cpu_items_per_s": round(spec["cpu_items_per_s"], 1),
        },
        "repeats_s": {"wall": [round(w, 4) for w in walls], "cpu": [round(c, 4) for c in cpus]},
        "breakdown_us_per_item": {
            "normalize": round(spec["normalize_us"], 1),
            "verify_3_metrics": round(spec["verify_us"], 1),
        },
        "variants": variants,
        "reference_a_jsonschema_only": {
            "items": len(slow_items),
            "items_per_s": round(slow_items_per_s, 1),
            "fast_items_per_s_same_items": round(len(slow_items) / median(ref_a["fast"][0]), 1),
            "schema_path_ratio": round(schema_path_ratio, 2),
        },
        "reference_b_quote_location": {
            "items": min(args.naive_items, len(items)),
            "quotes": len(pairs),
            "long_quotes": len(long_pairs),
            "locate_quote_quotes_per_s": round(locate_qps, 1),
            "naive_partial_ratio_quotes_per_s": round(naive_qps, 1),
            "quote_location_ratio": round(locate_qps / naive_qps, 2),
            "long_quotes_ratio": round(long_ratio, 2),
            "located_by_locate_quote": loc_found,
            "naive_score_ge_98": naive_found,
        },
        "machine": {**machine, "load_average_after": load_average()},
        "duration_s": round(time.perf_counter() - started, 1),
    }
    head = result["headline"]
    ra, rb = result["reference_a_jsonschema_only"], result["reference_b_quote_location"]
    print(f"verify_throughput: {len(items)} items, CoT ~{result['data']['mean_cot_chars']} chars")
    print(
        f"  normalize + verify x3: {head['items_per_s']:.0f} items/s "
        f"({head['us_per_item']} us/item; CPU-based {head['cpu_items_per_s']:.0f}/s) "
        f"target >= {TARGET_ITEMS_PER_S:.0f}: {'PASS' if head['pass'] else 'FAIL'}"
    )
    print(
        f"  breakdown: normalize {result['breakdown_us_per_item']['normalize']} us, "
        f"verify x3 {result['breakdown_us_per_item']['verify_3_metrics']} us per item"
    )
    for label, v in variants.items():
        print(
            f"  variant {label}: {v['items_per_s']:.0f} items/s (normalize "
            f"{v['normalize_us_per_item']} us, verify x3 {v['verify_3_metrics_us_per_item']} us)"
        )
    print(
        f"  (a) jsonschema-only path: {ra['items_per_s']:.0f} items/s -> "
        f"fast path is {ra['schema_path_ratio']}x"
    )
    print(
        f"  (b) quote location: locate_quote {rb['locate_quote_quotes_per_s']:.0f} quotes/s vs "
        f"naive partial_ratio_alignment {rb['naive_partial_ratio_quotes_per_s']:.0f} quotes/s "
        f"-> {rb['quote_location_ratio']}x ({rb['long_quotes_ratio']}x on quotes >= 100 chars)"
    )
    print(
        f"  quotes {counts['quotes']}, with typos {counts['typos']}, located approximately "
        f"{approximate}; load average {result['machine']['load_average']}; "
        f"took {result['duration_s']} s"
    )
    if not args.no_write:
        print(f"  wrote {write_result(NAME, result)}")
    return result


if __name__ == "__main__":
    main()
