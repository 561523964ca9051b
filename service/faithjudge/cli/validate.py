"""``faithjudge`` commands for judge validation: ``validate-judge``, ``split`` and
``reader-study-requests``.

Registered on the main app by ``register(app)``. Exit codes are ``faithjudge.cli.common.ExitCode``:
0 success, 3 the inputs could not be evaluated (the message names the file and line). The
statistics libraries are imported when a command runs, not when the CLI starts.
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from faithjudge.cli.common import check_outputs, err, fail
from faithjudge.errors import FaithJudgeError, UserInputError

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "parse_judge_spec",
    "reader_study_requests_command",
    "register",
    "split_command",
    "validate_judge_command",
]


def parse_judge_spec(spec: str) -> tuple[str, Path]:
    """``NAME=RESULTS.jsonl`` -> (NAME, path); a bare path is named after its file stem.

    Raises:
        UserInputError: the name or the path is empty.
    """
    name, sep, path = spec.partition("=")
    if not sep:
        name, path = Path(spec).stem, spec
    if not name.strip() or not path.strip():
        raise UserInputError(f"--judge {spec!r}: expected NAME=RESULTS.jsonl", field="judge")
    return name.strip(), Path(path.strip())


def _write_atomically(path: Path, lines: list[bytes]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise fail(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            for line in lines:
                handle.write(line.rstrip(b"\r\n") + b"\n")
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise fail(f"cannot write {path}: {exc.strerror or exc}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _load_all_ratings(ratings: Path | None, reader_study: Path | None) -> pd.DataFrame:
    import pandas as pd

    from faithjudge.agreement.ratings import load_ratings, load_reader_study

    frames = []
    if ratings is not None:
        frames.append(load_ratings(ratings))
    if reader_study is not None:
        frames.append(load_reader_study(reader_study))
    combined = pd.concat(frames, ignore_index=True)
    twice = combined.duplicated(["item_id", "rater", "axis"], keep=False)
    if len(frames) > 1 and twice.any():
        first = combined[twice].iloc[0]
        raise UserInputError(
            f"{ratings} and {reader_study} both rate item {first['item_id']} by rater "
            f"{first['rater']} ({first['axis']}): give each rating once",
            field="ratings",
        )
    return combined


def validate_judge_command(
    judge: Annotated[
        list[str],
        typer.Option(
            "--judge", help="NAME=RESULTS.jsonl (ItemResult lines of one judge); repeatable."
        ),
    ],
    ratings: Annotated[
        Path | None, typer.Option("--ratings", help="Ratings JSONL (item_id, rater, scores).")
    ] = None,
    reader_study: Annotated[
        Path | None,
        typer.Option("--reader-study", help="Reader-study JSONL (rows with 'ratings')."),
    ] = None,
    bootstrap: Annotated[
        int | None,
        typer.Option("--bootstrap", min=1, help="Bootstrap resamples for CIs [default: 10000]."),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of every bootstrap.")] = 0,
    delta: Annotated[
        float, typer.Option(min=0.0, help="Screening tie margin on macro tau.")
    ] = 0.02,
    fit_cc: Annotated[
        bool, typer.Option("--fit-cc/--no-fit-cc", help="Also fit the CC scale kappa per judge.")
    ] = False,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the report JSON.")] = None,
    md_out: Annotated[Path | None, typer.Option("--md", help="Write the Markdown.")] = None,
) -> None:
    """Validate judges against radiologist ratings: tau-b vs consensus, gates, screening."""
    if ratings is None and reader_study is None:
        raise typer.BadParameter("give --ratings FILE, --reader-study FILE or both")
    from faithjudge.agreement.ratings import load_judge_results
    from faithjudge.agreement.render import render_markdown
    from faithjudge.agreement.validate import validate_judge

    try:
        read = [path for path in (ratings, reader_study) if path is not None]
        check_outputs([*read, *(parse_judge_spec(s)[1] for s in judge)], [json_out, md_out])
        frame = _load_all_ratings(ratings, reader_study)
        judges: dict[str, pd.DataFrame] = {}
        for spec in judge:
            name, path = parse_judge_spec(spec)
            if name in judges:
                raise UserInputError(f"--judge: the name {name!r} is given twice", field="judge")
            judges[name] = load_judge_results(path)
            unreadable = judges[name].attrs["unreadable_lines"]
            if unreadable:
                # counted as input errors of the judge, as ``score`` would have written them
                shown = "\n".join(unreadable[:20])
                err.print(f"{path}: {len(unreadable)} unreadable result line(s), counted as "
                          f"input errors:\n{shown}", highlight=False, markup=False)  # fmt: skip
        report = (
            validate_judge(frame, judges, seed=seed, delta=delta, fit_cc=fit_cc)
            if bootstrap is None
            else validate_judge(frame, judges, B=bootstrap, seed=seed, delta=delta, fit_cc=fit_cc)
        )
    except FaithJudgeError as exc:
        raise fail(exc) from None
    markdown = render_markdown(report)
    if json_out is not None:
        _write_atomically(json_out, [report.model_dump_json(indent=2).encode()])
    if md_out is not None:
        _write_atomically(md_out, [markdown.encode()])
    typer.echo(markdown)


def split_command(
    input_path: Annotated[
        Path, typer.Argument(metavar="IN.jsonl", help="Reader-study, request or result lines.")
    ],
    dev: Annotated[Path, typer.Option("--dev", help="Where the dev lines go.")],
    test: Annotated[Path, typer.Option("--test", help="Where the test lines go.")],
    by: Annotated[
        str, typer.Option(help="Comma-separated strata fields (modification, flip, model, ...).")
    ] = "modification,flip",
    test_fraction: Annotated[float, typer.Option(help="Share of lines in test.")] = 0.5,
    seed: Annotated[int, typer.Option(min=0, help="Seed of the split.")] = 0,
) -> None:
    """Split a JSONL file into stratified dev and test halves (lines copied unchanged, ending
    in a line feed)."""
    fields = tuple(f.strip() for f in by.split(",") if f.strip())
    if not fields:
        raise typer.BadParameter("--by needs at least one field")
    from rich.table import Table

    from faithjudge.agreement.ratings import read_jsonl_objects
    from faithjudge.agreement.split import stratified_split, stratum_of

    try:
        check_outputs([input_path], [dev, test])
        parsed = read_jsonl_objects(input_path, what="lines to split")
        raw = [line for line in input_path.read_bytes().splitlines() if line.strip()]
        rows = [row for _, row in parsed]
        where = [f"{input_path}:{lineno}" for lineno, _ in parsed]
        dev_rows, test_rows = stratified_split(
            rows, by=fields, test_fraction=test_fraction, seed=seed, where=where
        )
    except FaithJudgeError as exc:
        raise fail(exc) from None
    test_ids = {id(r) for r in test_rows}
    dev_lines = [line for line, row in zip(raw, rows, strict=True) if id(row) not in test_ids]
    test_lines = [line for line, row in zip(raw, rows, strict=True) if id(row) in test_ids]
    _write_atomically(dev, dev_lines)
    _write_atomically(test, test_lines)

    counts: Counter[tuple[tuple[str, ...], str]] = Counter()
    for row in dev_rows:
        counts[(stratum_of(row, fields), "dev")] += 1
    for row in test_rows:
        counts[(stratum_of(row, fields), "test")] += 1
    table = Table(title=f"{len(dev_lines)} dev -> {dev}, {len(test_lines)} test -> {test}")
    table.add_column(" × ".join(fields))
    table.add_column("dev", justify="right")
    table.add_column("test", justify="right")
    for key in sorted({k for k, _ in counts}):
        table.add_row(" × ".join(key), str(counts[(key, "dev")]), str(counts[(key, "test")]))
    err.print(table)


def reader_study_requests_command(
    input_path: Annotated[Path, typer.Argument(metavar="READER.jsonl", help="Reader-study rows.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="ScoreRequest lines to write.")],
) -> None:
    """Turn reader-study rows into ScoreRequest lines (then run "faithjudge score" on them).

    Every row becomes one line, in order: a row that cannot be converted is written as close to
    a request as it gets and listed here; "faithjudge score" gives it an error result naming
    the field. Exit 0 when at least one row converts, 4 when none does.
    """
    from rich.markup import escape

    from faithjudge.agreement.ratings import reader_study_lines
    from faithjudge.cli.common import ExitCode

    try:
        check_outputs([input_path], [output])
        converted = list(reader_study_lines(input_path))
    except FaithJudgeError as exc:
        raise fail(exc) from None
    _write_atomically(output, [line for _, line, _ in converted])
    problems = [(row, why) for row, _, why in converted if why is not None]
    good = len(converted) - len(problems)
    err.print(f"{good} requests, {len(problems)} rows with problems -> {output}", highlight=False)
    for row, why in problems[:50]:
        err.print(f"  {input_path}:{row}: {escape(why)}", highlight=False)
    if len(problems) > 50:
        err.print(f"  ... and {len(problems) - 50} more", highlight=False)
    if good == 0:
        raise fail(f"no row of {input_path} converts to a request", ExitCode.NOTHING_SCORED)


def register(app: typer.Typer) -> None:
    """Add the validation commands to the ``faithjudge`` app."""
    app.command("validate-judge")(validate_judge_command)
    app.command("split")(split_command)
    app.command("reader-study-requests")(reader_study_requests_command)
