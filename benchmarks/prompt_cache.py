"""A provider's prompt cache: the cached share of the prompt tokens, and what it saves.

1. Generate ``--items`` (300) ScoreRequest lines (seeded CoTs of 1.5-3 KB over the starter
   KB's questions, a third of them with a modification).
2. Serve the fake judge with OpenAI's caching rules (``FakeJudgeConfig.prompt_cache``: prompts
   from 1,024 tokens, cached in 128-token steps, per prefix; a token is 4 characters there) on
   loopback, in this process.
3. Score the file through ``faithjudge score``'s path (``open_scorer`` + ``score_file``, the
   ``openai`` backend, no response cache) at each ``--concurrency`` (1 and 16), on a fresh
   fake each time.

Checks: every result's ``provenance.tokens.cached`` adds up to what the fake reported, and so
do the prompt tokens. Reported: the cached share of the prompt tokens, and the price at
illustrative per-million prices (``--price-input`` 2.00, ``--price-cached`` 0.50,
``--price-output`` 8.00: OpenAI's list prices for gpt-4.1 when this was written) with the
cached-input price and without it (every prompt token at the input price), live and through the
Batch API (half, and the cached discount stacks on it).

Run: ``python -m benchmarks.prompt_cache [--items N] [--concurrency 1 16]``.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from benchmarks._common import (
    REPO_ROOT,
    kb_questions,
    load_average,
    machine_facts,
    make_request,
    write_result,
)

NAME = "prompt_cache"


async def _score(
    base_url: str, source: Path, out: Path, data: Path, concurrency: int, prompt_set: str
) -> None:
    from faithjudge.pipeline.runtime import open_scorer
    from faithjudge.runners.file_runner import score_file
    from faithjudge.settings import Settings

    settings = Settings(
        judge="openai:bench-judge",
        openai_base_url=base_url,
        openai_api_key="bench-key",
        data_dir=data,
        cache=False,
        concurrency=concurrency,
        prompt_set=prompt_set,
    )
    async with open_scorer(settings) as scorer:
        await score_file(scorer, source, out, concurrency=concurrency)


def _run(
    source: Path, workdir: Path, concurrency: int, prices: dict[str, float], prompt_set: str
) -> dict[str, Any]:
    import anyio
    from faithjudge.settings import Settings
    from faithjudge.transport.judge_servers import forget_servers
    from faithjudge_client.lines import ItemResult

    sys.path.insert(0, str(REPO_ROOT))
    from tests.fakes.judge_server import FakeJudgeConfig, run_fake_judge

    forget_servers()
    out = workdir / f"out-{concurrency}.jsonl"
    with run_fake_judge(FakeJudgeConfig(prompt_cache=True)) as fake:
        wall = time.perf_counter()
        data = workdir / f"data-{concurrency}"
        anyio.run(_score, fake.base_url, source, out, data, concurrency, prompt_set)
        wall = time.perf_counter() - wall
        reported = (fake.counters.prompt_tokens, fake.counters.cached_tokens)
        calls = fake.counters.total
    prompt = cached = completion = 0
    for raw in out.read_bytes().splitlines():
        result = ItemResult.model_validate_json(raw)
        if result.provenance is not None:
            prompt += result.provenance.tokens.prompt
            cached += result.provenance.tokens.cached
            completion += result.provenance.tokens.completion
    if (prompt, cached) != reported:
        raise SystemExit(f"results hold {(prompt, cached)} tokens, the server reported {reported}")
    priced = Settings(
        price_input_per_mtok=prices["input"],
        price_cached_input_per_mtok=prices["cached"],
        price_output_per_mtok=prices["output"],
    )
    with_cached = priced.token_cost(prompt, completion, cached) or 0.0
    without = priced.token_cost(prompt, completion) or 0.0
    return {
        "concurrency": concurrency,
        "calls": calls,
        "wall_s": round(wall, 2),
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "completion_tokens": completion,
        "cached_share": round(cached / prompt, 4) if prompt else 0.0,
        "cost_live_usd": round(with_cached, 4),
        "cost_live_without_cached_price_usd": round(without, 4),
        "cost_batch_usd": round(with_cached * 0.5, 4),
        "cost_batch_without_cached_price_usd": round(without * 0.5, 4),
        "saving": round(1 - with_cached / without, 4) if without else 0.0,
    }


def summary_rows(results: dict[str, dict[str, Any] | None]) -> list[tuple[str, str, str, str]]:
    """The headline row for ``benchmarks.run_all``."""
    found = results.get(NAME)
    if not found or not found.get("runs"):
        return []
    run = found["runs"][0]
    return [
        (
            "Provider prompt cache (OpenAI's rules, fake judge): cached share of the prompt "
            "tokens; live price with vs without the cached-input rate",
            f"{run['cached_share']:.1%}; ${run['cost_live_usd']:.2f} vs "
            f"${run['cost_live_without_cached_price_usd']:.2f}",
            "reference",
            "—",
        )
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=300)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--prompt-set", default="v1", help="a bundled set's name, or a folder")
    parser.add_argument("--price-input", type=float, default=2.00)
    parser.add_argument("--price-cached", type=float, default=0.50)
    parser.add_argument("--price-output", type=float, default=8.00)
    args = parser.parse_args(argv)
    prices = {"input": args.price_input, "cached": args.price_cached, "output": args.price_output}
    rng = random.Random(args.seed)
    questions = kb_questions()
    runs = []
    with tempfile.TemporaryDirectory(prefix="fj-prompt-cache-") as tmp:
        workdir = Path(tmp)
        source = workdir / "requests.jsonl"
        source.write_bytes(
            b"".join(
                orjson.dumps(make_request(rng, i, questions)) + b"\n" for i in range(args.items)
            )
        )
        for concurrency in args.concurrency:
            run = _run(source, workdir, concurrency, prices, args.prompt_set)
            runs.append(run)
            print(
                f"concurrency {concurrency:>3}: {run['cached_tokens']:,} of "
                f"{run['prompt_tokens']:,} prompt tokens cached ({run['cached_share']:.1%}); "
                f"live ${run['cost_live_usd']:.4f} (without the cached price "
                f"${run['cost_live_without_cached_price_usd']:.4f}, saving {run['saving']:.1%}); "
                f"Batch API ${run['cost_batch_usd']:.4f} "
                f"(${run['cost_batch_without_cached_price_usd']:.4f})"
            )
    path = write_result(
        NAME,
        {
            "config": {
                "items": args.items,
                "seed": args.seed,
                "prices_per_mtok": prices,
                "prompt_set": args.prompt_set,
                "cache_rules": "OpenAI: from 1,024 tokens, 128-token steps, per prefix; "
                "4 characters a token",
            },
            "runs": runs,
            "machine": machine_facts(),
            "load_average": load_average(),
        },
    )
    print(f"written {path}")


if __name__ == "__main__":
    main()
