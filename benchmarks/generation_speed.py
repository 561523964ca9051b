"""VLM generation throughput of the ``transformers`` backend: batched vs one input at a time.

A tiny LLaVA-style model (``tests/fakes/tiny_vlm.py``: CLIP vision tower + Llama decoder,
random weights, built offline) is saved and loaded through the real backend code path, then
``--items`` image+question inputs (prompts of different lengths, so batches are left-padded) are
generated greedily with at most ``--max-new-tokens`` new tokens each, once with
``batch_size=1`` and once per batch size in ``--batch-sizes``. Every run must produce the same
texts as the unbatched one (checked and recorded), so every run generates the same new tokens;
rows of a batch that end early still wait for the batch, which is part of batching's cost.
Figures are medians over ``--repeats`` runs after one warm-up.

The tiny model measures the batching machinery (padding, one forward pass per step for the whole
batch) where per-step overhead dominates; what a real VLM gains depends on the model and device.
CPU runs use one torch thread (``--threads``; 0 keeps torch's default): on a shared machine,
more OpenMP threads than free cores made the unbatched run 40x slower in one measurement.
Run on CUDA: ``python -m benchmarks.generation_speed --device cuda --hidden 1024 --layers 8``.
Run: ``python -m benchmarks.generation_speed [--items N] [--max-new-tokens T] [--repeats R]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import load_average, machine_facts, median, write_result

__all__ = ["main"]

NAME = "generation_speed"


def _inputs(n: int) -> list[Any]:
    from faithjudge.sidecar.backends.base import Turn
    from PIL import Image

    question = "Is there a pleural effusion on the right? (yes or no)"
    convs = []
    for i in range(n):
        image = Image.new("RGB", (64 + 5 * (i % 7), 56 + 3 * (i % 5)), (30 * i % 255, 90, 140))
        convs.append([Turn("user", question + " the heart" * (i % 6), (image,))])
    return convs


def _time(backend: Any, convs: list[Any], repeats: int) -> tuple[float, list[str], int]:
    backend.generate_sync(convs[: max(1, backend.batch_size)])  # warm-up
    times = []
    texts: list[str] = []
    tokens = 0
    for _ in range(repeats):
        start = time.perf_counter()
        out = backend.generate_sync(convs)
        times.append(time.perf_counter() - start)
        texts = [g.text for g in out]
        tokens = sum(g.completion_tokens for g in out)
        if any(g.error for g in out):
            raise RuntimeError(f"generation failed: {[g.error for g in out if g.error][:1]}")
    return median(times), texts, tokens


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from faithjudge.sidecar.backends.hf import TransformersBackend

    from tests.fakes.tiny_vlm import build_tiny_vlm

    if args.threads:
        torch.set_num_threads(args.threads)
    convs = _inputs(args.items)
    with tempfile.TemporaryDirectory() as tmp:
        folder = build_tiny_vlm(Path(tmp) / "model", hidden=args.hidden, layers=args.layers)
        rows: dict[str, Any] = {}
        reference: list[str] | None = None
        for batch in [1, *args.batch_sizes]:
            backend = TransformersBackend(
                str(folder),
                device=args.device,
                max_new_tokens=args.max_new_tokens,
                batch_size=batch,
            )
            seconds, texts, tokens = _time(backend, convs, args.repeats)
            if reference is None:
                reference = texts
            rows[f"batch_{batch}"] = {
                "batch_size": batch,
                "seconds": round(seconds, 3),
                "items_per_s": round(args.items / seconds, 2),
                "new_tokens_per_s": round(tokens / seconds, 1),
                "new_tokens": tokens,
                "outputs_equal_unbatched": texts == reference,
            }
    base = rows["batch_1"]["items_per_s"]
    for row in rows.values():
        row["speedup_vs_unbatched"] = round(row["items_per_s"] / base, 2)
    best = max(rows.values(), key=lambda r: r["items_per_s"])
    return {
        "config": {
            "items": args.items,
            "max_new_tokens": args.max_new_tokens,
            "repeats": args.repeats,
            "device": args.device,
            "hidden": args.hidden,
            "layers": args.layers,
            "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__,
        },
        "runs": rows,
        "headline": {
            "unbatched_items_per_s": base,
            "best_batch_size": best["batch_size"],
            "best_items_per_s": best["items_per_s"],
            "speedup": best["speedup_vs_unbatched"],
            "outputs_equal_unbatched": all(r["outputs_equal_unbatched"] for r in rows.values()),
        },
    }


def markdown(result: dict[str, Any]) -> str:
    config = result["config"]
    lines = [
        f"Tiny LLaVA-style VLM (hidden {config['hidden']}, {config['layers']} layer(s)), "
        f"{config['items']} inputs x {config['max_new_tokens']} new tokens, greedy, "
        f"{config['device']}, {config['torch_threads']} torch threads, median of "
        f"{config['repeats']}:",
        "",
        "| batch size | items/s | new tokens/s | speedup vs unbatched | same outputs |",
        "|---|---|---|---|---|",
    ]
    for row in result["runs"].values():
        same = "yes" if row["outputs_equal_unbatched"] else "no"
        lines.append(
            f"| {row['batch_size']} | {row['items_per_s']:.2f} | {row['new_tokens_per_s']:.0f} "
            f"| {row['speedup_vs_unbatched']:.2f}x | {same} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=64)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[4, 8, 16])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch default)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    facts = {**machine_facts(), "load_average": load_average()}
    result = run(args)
    payload = {"machine": facts, **result, "duration_s": round(time.perf_counter() - start, 1)}
    path = write_result(NAME, payload)
    print(markdown(result))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
