"""``faithjudge audit``: answer-level grounding audits (Lotfinia, Zafar, MedVIGIL).

Registered on the main app by ``register(app)``. Exit codes as for the other commands: 0 the
audit ran (bad lines are named and counted as input errors), 3 the records could not be
audited (a missing or unreadable file, records that contradict each other, or a usage error:
the message names the line, field or option), 4 the file holds no readable answer record
(each bad line named with its field).
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from faithjudge.cli.common import ExitCode, err, fail
from faithjudge.errors import FaithJudgeError

__all__ = ["audit_command", "register"]


class Framework(StrEnum):
    lotfinia = "lotfinia"
    zafar = "zafar"
    medvigil = "medvigil"
    all = "all"


def audit_command(
    records: Annotated[
        Path, typer.Argument(metavar="RECORDS.jsonl", help="Answer records, one per line.")
    ],
    framework: Annotated[
        Framework, typer.Option("--framework", "-f", help="Which audit to run.")
    ] = Framework.all,
    json_out: Annotated[Path | None, typer.Option("--json", help="Machine-readable JSON.")] = None,
    md: Annotated[Path | None, typer.Option("--md", help="Markdown report.")] = None,
    html: Annotated[Path | None, typer.Option("--html", help="Self-contained HTML.")] = None,
    seed: Annotated[
        int | None, typer.Option(min=0, help="Resampling seed (default: each paper's own).")
    ] = None,
    bootstrap: Annotated[
        int | None,
        typer.Option(min=1, help="Bootstrap resamples (default: 10,000 / 10,000 / 500)."),
    ] = None,
    text_only_model: Annotated[
        list[str] | None,
        typer.Option(help="Lotfinia: a text-only baseline model (repeatable; BH families)."),
    ] = None,
    reference_model: Annotated[
        str | None, typer.Option(help="Zafar: compare every model with this one.")
    ] = None,
    from_requests: Annotated[
        bool,
        typer.Option(
            "--from-requests",
            help="RECORDS holds the VLM sidecar's ScoreRequest lines, not answer records.",
        ),
    ] = False,
    is_all_cases: Annotated[
        bool,
        typer.Option(
            "--is-all-cases",
            help="Lotfinia: IS over all parsed cases (Eq. 8) instead of correct-on-original.",
        ),
    ] = False,
) -> None:
    """Audit answer records: CGR/UAR/IS (Lotfinia), VRS/VHR (Zafar), MCS (MedVIGIL)."""
    import json

    from faithjudge.audits.conditions import FRAMEWORKS
    from faithjudge.audits.consistency import prepare
    from faithjudge.audits.load import (
        MAX_REPORTED_ERRORS,
        AuditInputError,
        LineProblem,
        load_records,
    )
    from faithjudge.audits.lotfinia import LotfiniaConfig
    from faithjudge.audits.render import audit_html, audit_markdown, with_input_errors
    from faithjudge.audits.report import AuditOptions, run_audit
    from faithjudge.audits.zafar import ZafarConfig
    from faithjudge.reports.io import write_text

    frameworks = FRAMEWORKS if framework is Framework.all else (framework.value,)
    options = AuditOptions(
        frameworks=frameworks,
        lotfinia=LotfiniaConfig(
            text_only_models=tuple(text_only_model or ()),
            is_condition_on_correct=not is_all_cases,
        ),
        zafar=ZafarConfig(reference_model=reference_model),
    ).with_resampling(seed=seed, B=bootstrap)
    try:
        bad: list[LineProblem] = []
        try:
            loaded = load_records(records, from_requests=from_requests, problems=bad)
        except AuditInputError as exc:  # not one readable record: nothing to audit
            raise fail(exc, ExitCode.NOTHING_SCORED) from None
        table = prepare(loaded, source=str(records))
        report = run_audit(table, options)
        if bad:
            # a bad line is named and counted, never a reason to audit nothing
            report = with_input_errors(report, bad)
            shown = "\n".join(p.render(str(records)) for p in bad[:MAX_REPORTED_ERRORS])
            err.print(f"{records}: {len(bad)} unreadable answer record line(s), counted as "
                      f"input errors:\n{shown}", highlight=False, markup=False)  # fmt: skip
        if json_out is not None:
            write_text(json_out, json.dumps(report, indent=2, allow_nan=False))
        if md is not None:
            write_text(md, audit_markdown(report))
        if html is not None:
            write_text(html, audit_html(report))
    except FaithJudgeError as exc:
        raise fail(exc) from None
    if json_out is None and md is None and html is None:
        typer.echo(audit_markdown(report))
    else:
        err.print(f"audit of {len(table.frame)} answer records written", highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``audit`` to the ``faithjudge`` app."""
    app.command("audit")(audit_command)
