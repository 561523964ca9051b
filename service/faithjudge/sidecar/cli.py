"""The ``faithjudge-sidecar`` command: generate ScoreRequest lines with a VLM, or serve it.

Exit codes follow ``faithjudge``: 0 success; 2 usage error; 3 the run could not start (bad
configuration, missing input, model that does not load). Per-item problems never change the
exit code: they are counted in the summary and written to ``OUT.issues.jsonl``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from faithjudge.errors import FaithJudgeError
from faithjudge.event_loop import run_async
from faithjudge.exit_codes import ExitCode
from faithjudge.jsonl import count_lines
from faithjudge.progress import progress_bar
from faithjudge.sidecar.backends import BACKENDS, BackendConfig, make_backend
from faithjudge.sidecar.generate import (
    GenerationOptions,
    GenerationSummary,
    Generator,
    generate_file,
    parse_modifications,
    parse_params,
    read_pool,
)

__all__ = ["app", "main"]

app = typer.Typer(
    name="faithjudge-sidecar",
    help="Generate baseline and modified chain-of-thought runs of a VLM as ScoreRequest lines.",
    no_args_is_help=True,
    add_completion=False,
)
_err = Console(stderr=True)

BackendOpt = Annotated[str, typer.Option(help=f"One of {', '.join(BACKENDS)}.")]
ModelOpt = Annotated[str, typer.Option(help="Model folder or hub name, or the served model.")]
ModsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--modifications",
        "-m",
        help="Modification codes, comma-separated or repeated (TB-RAD, TB-RAD:misleading, "
        "VH-BB, VO-BB, SHAM, ...). Bias cues without :aligned/:misleading run both.",
    ),
]


def _backend_config(**kw: Any) -> BackendConfig:
    if kw["backend"] not in BACKENDS:
        raise FaithJudgeError(
            f"unknown backend {kw['backend']!r}; use one of {', '.join(BACKENDS)}"
        )
    return BackendConfig(**kw)


ParamsOpt = Annotated[
    str | None,
    typer.Option(help='Perturbation parameters per code as JSON: {"blur_sigma": {"sigma": 4}}.'),
]
GradesOpt = Annotated[
    int | None,
    typer.Option(min=1, help="Ordinal misleading targets at least this many grades away."),
]


def _options(
    modifications: list[str] | None,
    protocol: str,
    seed: int,
    square_pad: bool,
    params: str | None,
    min_grade_distance: int | None,
) -> GenerationOptions:
    if protocol not in ("single", "multi"):
        raise FaithJudgeError(f"unknown protocol {protocol!r}; use single or multi")
    return GenerationOptions(
        modifications=tuple(parse_modifications(modifications or [])),
        protocol=protocol,  # type: ignore[arg-type]
        seed=seed,
        square_pad=square_pad,
        params=parse_params(params),
        min_grade_distance=min_grade_distance,
    )


@app.command()
def generate(
    items: Annotated[Path, typer.Argument(metavar="ITEMS.jsonl", help="One item per line.")],
    images: Annotated[Path, typer.Option(help="Root folder of the items' images.")],
    model: ModelOpt,
    output: Annotated[Path, typer.Option("--output", "-o", help="ScoreRequest lines (JSONL).")],
    modifications: ModsOpt = None,
    backend: BackendOpt = "transformers",
    base_url: Annotated[str | None, typer.Option(help="Server URL (openai/litellm).")] = None,
    api_key: Annotated[str | None, typer.Option(envvar="SIDECAR_API_KEY")] = None,
    max_new_tokens: Annotated[int, typer.Option(min=1)] = 2048,
    batch_size: Annotated[int, typer.Option(min=1, help="transformers: rows a batch.")] = 8,
    concurrency: Annotated[int, typer.Option(min=1, help="openai/litellm: calls in flight.")] = 100,
    device: Annotated[str, typer.Option(help="transformers: auto, cpu, cuda, cuda:1...")] = "auto",
    dtype: Annotated[str, typer.Option(help="transformers: auto, float32, bfloat16...")] = "auto",
    protocol: Annotated[str, typer.Option(help="single or multi (caption, reason, answer).")] = (
        "single"
    ),
    seed: int = 0,
    square_pad: Annotated[bool, typer.Option(help="Pad images to a square.")] = False,
    params: ParamsOpt = None,
    min_grade_distance: GradesOpt = None,
    pool: Annotated[
        Path | None,
        typer.Option(help="Candidate images (JSONL) for swap_same_label and hard_negative."),
    ] = None,
    chunk_items: Annotated[int, typer.Option(min=1, help="Items generated together.")] = 16,
    submit: Annotated[
        str | None, typer.Option(help="FaithJudge service URL: upload the lines as a job.")
    ] = None,
    submit_api_key: Annotated[str | None, typer.Option(envvar="FAITHJUDGE_API_KEY")] = None,
    progress: Annotated[bool, typer.Option("--progress/--no-progress")] = True,
    restart: Annotated[
        bool, typer.Option(help="Start afresh instead of resuming from OUTPUT's checkpoint.")
    ] = False,
) -> None:
    """Run every item of ITEMS.jsonl (baseline + modifications) into OUTPUT.

    A run that stopped part-way resumes from its checkpoint when started again with the same
    items and settings; items already generated are not run again.
    """
    try:
        if not items.is_file():
            raise FaithJudgeError(f"items file not found: {items}")
        if not images.is_dir():
            raise FaithJudgeError(f"images folder not found: {images}")
        options = _options(modifications, protocol, seed, square_pad, params, min_grade_distance)
        config = _backend_config(
            backend=backend,
            model=model,
            max_new_tokens=max_new_tokens,
            batch_size=batch_size,
            device=device,
            dtype=dtype,
            base_url=base_url,
            api_key=api_key,
            concurrency=concurrency,
            seed=seed,
        )
        if pool is not None and not pool.is_file():
            raise FaithJudgeError(f"pool file not found: {pool}")
        candidates = read_pool(pool, root=images) if pool is not None else None
        summary = run_async(
            _run, config, options, items, images, candidates, output, chunk_items, progress, restart
        )
    except FaithJudgeError as exc:
        _err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(ExitCode.UNEVALUABLE) from None
    _print_summary(summary, output)
    if submit is not None:
        _submit(submit, submit_api_key, output)


async def _run(
    config: BackendConfig,
    options: GenerationOptions,
    items: Path,
    images: Path,
    pool: Any,
    output: Path,
    chunk_items: int,
    show_progress: bool,
    restart: bool,
) -> GenerationSummary:
    total = count_lines(items)
    vlm = make_backend(config)
    try:
        generator = Generator(vlm, options, images_root=images, pool=pool)
        with progress_bar("generating", console=_err, show=show_progress) as bar:
            task = bar.add_task("generate", total=total)
            return await generate_file(
                generator,
                items,
                output,
                chunk_items=chunk_items,
                progress=lambda n: bar.advance(task, n),
                restart=restart,
            )
    finally:
        await vlm.aclose()


def _print_summary(summary: GenerationSummary, output: Path) -> None:
    table = Table(title=f"{summary.lines} request lines -> {output}")
    table.add_column("outcome")
    table.add_column("count", justify="right")
    table.add_row("items read", str(summary.items))
    table.add_row("baseline lines", str(summary.baseline_lines))
    table.add_row("modified lines", str(summary.lines - summary.baseline_lines))
    for status, count in sorted(summary.parse_status.items()):
        table.add_row(f"reply {status}", str(count))
    for kind, count in sorted(summary.issues.items()):
        table.add_row(f"issue: {kind}", str(count))
    _err.print(table)
    if summary.issues:
        _err.print(f"issues: {output.with_name(output.name + '.issues.jsonl')}")


def _submit(url: str, api_key: str | None, output: Path) -> None:
    from faithjudge_client import FaithJudgeClient
    from faithjudge_client.errors import FaithJudgeError as ClientFailure

    try:
        with FaithJudgeClient(url, api_key) as client:
            accepted = client.submit_job(output, name=output.stem)
    except ClientFailure as exc:
        _err.print(f"[red]submit failed:[/red] {exc}")
        raise typer.Exit(ExitCode.UNEVALUABLE) from None
    rejected = len(accepted.rejected)
    _err.print(
        f"submitted job {accepted.id}: {accepted.accepted} lines accepted, {rejected} rejected"
    )
    typer.echo(accepted.id)


@app.command()
def serve(
    model: ModelOpt,
    images: Annotated[Path | None, typer.Option(help="Root folder for items' image paths.")] = None,
    modifications: ModsOpt = None,
    backend: BackendOpt = "transformers",
    base_url: Annotated[str | None, typer.Option(help="Server URL (openai/litellm).")] = None,
    api_key: Annotated[str | None, typer.Option(envvar="SIDECAR_API_KEY")] = None,
    max_new_tokens: Annotated[int, typer.Option(min=1)] = 2048,
    batch_size: Annotated[int, typer.Option(min=1)] = 8,
    concurrency: Annotated[int, typer.Option(min=1)] = 100,
    device: str = "auto",
    dtype: str = "auto",
    protocol: str = "single",
    seed: int = 0,
    square_pad: bool = False,
    params: ParamsOpt = None,
    min_grade_distance: GradesOpt = None,
    pool: Annotated[Path | None, typer.Option(help="Candidate images (JSONL).")] = None,
    host: str = "127.0.0.1",
    port: int = 8010,
) -> None:
    """Serve POST /v1/generate and POST /v1/generate/batches for one loaded VLM."""
    import uvicorn

    from faithjudge.sidecar.app import create_app

    try:
        if images is not None and not images.is_dir():
            raise FaithJudgeError(f"images folder not found: {images}")
        options = _options(modifications, protocol, seed, square_pad, params, min_grade_distance)
        config = _backend_config(
            backend=backend,
            model=model,
            max_new_tokens=max_new_tokens,
            batch_size=batch_size,
            device=device,
            dtype=dtype,
            base_url=base_url,
            api_key=api_key,
            concurrency=concurrency,
            seed=seed,
        )
        if pool is not None and images is None:
            raise FaithJudgeError("--pool needs --images (pool paths are relative to it)")
        candidates = read_pool(pool, root=images) if pool is not None and images else None
        vlm = make_backend(config)
    except (FaithJudgeError, OSError) as exc:
        _err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(ExitCode.UNEVALUABLE) from None
    generator = Generator(vlm, options, images_root=images, pool=candidates)
    uvicorn.run(create_app(generator), host=host, port=port, log_level="info")


def main() -> None:  # pragma: no cover - console entry point
    app()
