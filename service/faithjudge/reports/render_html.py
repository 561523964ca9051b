"""Self-contained HTML report: inline CSS, inline SVG plots, one inline script, nothing fetched.

The tables and plots are rendered here; the item explorer (a sortable, filterable table whose
rows open to the judge's rationale, answers, failures and the highlighted CoT) is drawn by
``html_assets/explorer.js`` from the records of ``reports.explorer``, embedded as inert JSON.

CoT texts, quotes, model names and every other string from the result lines are untrusted: the
HTML rendered here goes through ``html.escape``, the embedded JSON has ``<``, ``>`` and ``&``
escaped, and the script only ever sets ``textContent``. A Content-Security-Policy allows that
one script (by its hash) and no request at all, so even text that slipped through could neither
run nor load anything. Quote spans index the original CoT (spans out of range are ignored).
"""

from __future__ import annotations

import base64
import hashlib
import html
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Any

import pandas as pd
from faithjudge_client.metric_catalogue import headline_scopes, labels, metrics

from faithjudge.reports.aggregate import stats, table1_columns
from faithjudge.reports.explorer import (
    RequestViews,
    cot_segments,
    explorer_data,
    explorer_json,
)
from faithjudge.reports.gate import TOO_FEW, compared
from faithjudge.reports.limits import LISTED_ITEMS, LISTED_PROBLEMS
from faithjudge.reports.markup import bar_chart_svg, fmt_ci, fmt_pct, html_table
from faithjudge.reports.palette import scope_tint
from faithjudge.reports.report import Report, problem_counts, problem_lines
from faithjudge.reports.run_coverage import bound_cell, fpr_bound, not_judged_cells, rate_cell
from faithjudge.scoring.outcomes import RATES
from faithjudge.stats.judge_coverage import GateResult

__all__ = ["LISTED_ITEMS", "explorer_page", "heatmap_svg", "highlight", "report_html"]

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222}
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0;font-size:.85em}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}
th{background:#f1f3f6}td.l,th.l{text-align:left}.cc{color:#777}
.fail{color:#b00020;font-weight:600}.pass{color:#1b7f3b}
figure{display:inline-block;margin:8px 16px 8px 0;vertical-align:top}
figcaption{font-size:.85em;color:#555}
.item{border:1px solid #ddd;border-radius:6px;padding:8px 12px;margin:10px 0}
.meta{font-size:.8em;color:#555}.cot{white-space:pre-wrap;font-family:ui-monospace,monospace;
font-size:.85em;background:#fafafa;padding:8px}
mark{background:#fff1a8;padding:0 1px}mark.multi{background:#e8d4f2}
.filters{display:flex;flex-wrap:wrap;gap:6px 14px;align-items:center;font-size:.85em;
margin:8px 0}.filters .count{color:#555}
table.items tr.item{cursor:pointer}table.items tr.item:hover,table.items tr.item:focus{
background:#f5f8fc}table.items tr.input-error td{background:#fdf0f0}
td.unmatched{color:#8a4b00;font-style:italic}
table.items tr.more td{cursor:pointer;text-align:left;font-style:italic}
button.sort{font:inherit;font-weight:600;background:none;border:0;padding:0;cursor:pointer}
th[aria-sort=ascending] button.sort::after{content:" \\25B2"}
th[aria-sort=descending] button.sort::after{content:" \\25BC"}
td .detail{text-align:left;font-size:1.05em;padding:6px 4px;max-width:1100px}
.detail dl.facts{display:grid;grid-template-columns:max-content auto;gap:2px 12px;margin:4px 0}
.detail dt{font-weight:600;color:#444}.detail dd{margin:0}
.detail .metrics{display:flex;flex-wrap:wrap;gap:8px}
.detail section.metric{border:1px solid #ddd;border-radius:6px;padding:4px 10px;
flex:1 1 300px}.detail h4{margin:4px 0;font-size:.95em}
.detail ul{margin:2px 0 4px 18px;padding:0}.failure{color:#b00020}
pre.judge{background:#f6f6f6;padding:4px 6px;font-size:.85em;white-space:pre-wrap;margin:2px 0}
.error-card{border:1px solid #e2a5a5;background:#fdf0f0;border-radius:6px;padding:6px 10px;
margin:4px 0}.error-card p{margin:4px 0;font-family:ui-monospace,monospace;font-size:.9em}
"""


def _mark_css() -> str:
    """One highlight class per catalogue metric (the classes ``highlight`` writes)."""
    return "".join(f"mark.{label}{{background:{scope_tint(label)}}}" for label in labels())


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def heatmap_svg(
    rows: Sequence[str],
    columns: Sequence[str],
    values: Sequence[Sequence[float | None]],
    intervals: Sequence[Sequence[tuple[float | None, float | None]]] | None = None,
) -> str:
    """A heatmap of % values (white 0 → dark blue 100), value printed in every cell.

    ``intervals`` (one (low, high) per cell) goes into each cell's tooltip: a heatmap has no room
    for whiskers, and its value alone would hide how little a small cell says.
    """
    cell_w, cell_h, left, top = 58, 20, 150, 30
    width, height = left + cell_w * len(columns) + 10, top + cell_h * len(rows) + 10
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{width}" '
        f'height="{height}" class="plot heatmap">'
    ]
    for c, name in enumerate(columns):
        parts.append(
            f'<text x="{left + c * cell_w + cell_w / 2}" y="{top - 8}" font-size="11" '
            f'text-anchor="middle">{_e(name)}</text>'
        )
    for r, name in enumerate(rows):
        y = top + r * cell_h
        parts.append(
            f'<text x="{left - 6}" y="{y + 14}" font-size="11" text-anchor="end">'
            f"{_e(name[:24])}</text>"
        )
        for c in range(len(columns)):
            value = values[r][c]
            x = left + c * cell_w
            tip = f"{_e(rows[r])} · {_e(columns[c])}: "
            if value is None or pd.isna(value):
                fill, label, ink = "#f4f4f4", "–", "#999"
                tip += "no value"
            else:
                t = max(0.0, min(1.0, float(value) / 100))
                shade = (int(255 - 208 * t), int(255 - 146 * t), int(255 - 74 * t))
                fill, label = "#{:02x}{:02x}{:02x}".format(*shade), f"{float(value):.0f}"
                ink = "#fff" if t > 0.6 else "#222"
                low, high = intervals[r][c] if intervals is not None else (None, None)
                tip += f"{fmt_ci(value, low, high)} %"
            parts.append(
                f'<rect x="{x}" y="{y}" width="{cell_w - 2}" height="{cell_h - 2}" '
                f'fill="{fill}"><title>{tip}</title></rect><text x="{x + cell_w / 2 - 1}" '
                f'y="{y + 14}" font-size="11" text-anchor="middle" fill="{ink}">{label}</text>'
            )
    return "".join(parts) + "</svg>"


def highlight(cot: str, quotes: Sequence[tuple[str, int, int, str]]) -> str:
    """Escaped CoT with every verified quote span wrapped in ``<mark>`` (class = metric)."""
    out: list[str] = []
    for segment in cot_segments(cot, quotes):
        text = _e(segment[0])
        if len(segment) > 1:
            quoting = segment[1].split(" ")
            css = _e(quoting[0]) if len(quoting) == 1 else "multi"
            out.append(f'<mark class="{css}" title="{_e(segment[1])}">{text}</mark>')
        else:
            out.append(text)
    return "".join(out)


def _charts(report: Report) -> str:
    agg = report.aggregates
    per_mod = agg[agg["dimension"] == "modification"]
    parts: list[str] = []
    for model in sorted(per_mod["model"].unique())[:6]:
        frame = per_mod[(per_mod["model"] == model) & (per_mod["split"] == "all")]
        groups = sorted(frame["group"].unique())
        series = {m: [_value(frame, g, m) for g in groups] for m in headline_scopes()}
        bounds = {m: [_interval(frame, g, m) for g in groups] for m in headline_scopes()}
        parts.append(
            f"<figure>{bar_chart_svg(groups, series, bounds)}<figcaption>{_e(model)}: mean "
            f"{', '.join(headline_scopes())} per modification (%), whiskers the 95% bootstrap "
            "CI</figcaption></figure>"
        )
    rows, values, intervals = [], [], []
    columns = [column for column, _, split in table1_columns() if split != "all"]
    for (model, group), frame in per_mod.groupby(["model", "group"], sort=True):
        rows.append(f"{model} · {group}" if per_mod["model"].nunique() > 1 else str(group))
        cells = [
            (frame[frame["split"] == split], stat)
            for split in ("flip", "non-flip")
            for stat in headline_scopes()
        ]
        values.append([_value(cell, group, stat) for cell, stat in cells])
        intervals.append([_interval(cell, group, stat) for cell, stat in cells])
    parts.append(
        f"<figure>{heatmap_svg(rows[:60], columns, values[:60], intervals[:60])}<figcaption>"
        "Flip (F) vs non-flip (NF) per modification (%); each cell's tooltip gives its 95% "
        "bootstrap CI</figcaption></figure>"
    )
    return "".join(parts)


def _value(frame: pd.DataFrame, group: str, stat: str) -> float | None:
    cell = frame[(frame["group"] == group) & (frame["stat"] == stat)]["value"]
    return None if cell.empty or pd.isna(cell.iloc[0]) else float(cell.iloc[0])


def _interval(frame: pd.DataFrame, group: str, stat: str) -> tuple[float | None, float | None]:
    """The (low, high) bootstrap bounds of one aggregate cell; None where there are none."""
    cell = frame[(frame["group"] == group) & (frame["stat"] == stat)]
    if cell.empty:
        return None, None
    low, high = cell["low"].iloc[0], cell["high"].iloc[0]
    return (None if pd.isna(low) else float(low)), (None if pd.isna(high) else float(high))


def _quote_legend() -> str:
    """What the highlight colours of verified quotes mean (the mark classes of ``highlight``)."""
    marks = "".join(
        f'<mark class="{spec.label}">{spec.title} ({spec.label})</mark> ' for spec in metrics()
    )
    return (
        f'<p class="legend">Verified quotes: {marks}'
        '<mark class="multi">quoted for more than one metric</mark></p>'
    )


@cache
def _explorer_script() -> str:
    """The explorer's script, shipped beside this module (in the wheel too)."""
    script = (
        resources.files("faithjudge.reports")
        .joinpath("html_assets/explorer.js")
        .read_text(encoding="utf-8")
    )
    if "</" in script:  # it is inlined: nothing in it may end the script element
        raise RuntimeError("html_assets/explorer.js must not contain '</'")
    return script


def _csp(script: str) -> str:
    """A policy that runs the one inline script by its hash and loads nothing at all."""
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
    return (
        f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )


def _items(
    report: Report,
    requests: RequestViews | None,
    details: Sequence[Mapping[str, Any]] | None,
    max_items: int,
) -> str:
    items = report.items
    data = explorer_data(items, max_items=max_items, details=details, requests=requests)
    return (
        f"<h2>Items ({len(data['items'])} of {len(items)})</h2>"
        '<p class="meta">Click an item (or focus it and press Enter) to open its question, '
        "answers, each metric's rationale, omissions, hallucinations, judge's answer and "
        "failure, and its CoT; click a column to sort.</p>"
        + _quote_legend()
        + '<div id="explorer"><noscript><p class="meta">The item explorer needs JavaScript.'
        "</p></noscript></div>"
        f'<script type="application/json" id="explorer-data">{explorer_json(data)}</script>'
    )


def report_html(
    report: Report,
    *,
    requests: RequestViews | None = None,
    details: Sequence[Mapping[str, Any]] | None = None,
    max_items: int = LISTED_ITEMS,
) -> str:
    """The full report as one HTML document.

    ``requests`` (``reports.explorer.read_request_views``) adds each listed item's ground truth,
    baseline answer and CoT; ``details`` (``ItemDetails.rows`` of
    ``reports.explorer``) adds the judge's rationales and answers.
    """
    s = report.summary
    body = [
        f"<h1>FaithJudge report</h1><p>{s['lines']} result lines · models "
        f"{_e(', '.join(s['models']))} · {s['modifications']} modifications · flip "
        f"{s['flip']}, non-flip {s['non_flip']}, undecided {s['flip_undecided']} · "
        f"{problem_counts(s)}. Values in %; 95% percentile bootstrap CIs over items "
        f"(B = {s['bootstrap']}, seed {s['seed']}). <span class='cc'>CC is exploratory."
        "</span></p>"
    ]
    body.append(_judges(report))
    body.append("<h2>Table 1 (mean ± SD across modifications)</h2>")
    table1_cols = [column for column, _, _ in table1_columns()]
    body.append(
        html_table(
            ["Model", *table1_cols],
            [
                [
                    _e(r["model"]),
                    *(
                        fmt_pct(r[c])
                        + ("" if pd.isna(r[f"{c}_sd"]) else f" ± {fmt_pct(r[f'{c}_sd'])}")
                        for c in table1_cols
                    ),
                ]
                for _, r in report.table1.iterrows()
            ],
        )
    )
    body.append("<h2>Plots</h2>" + _charts(report))
    agg = report.aggregates
    for dimension, title in (
        ("all", "Overall"),
        ("modification", "Per modification"),
        ("alignment", "Aligned vs misleading"),
        ("channel", "Channel"),
        ("question_type", "Question type"),
    ):
        frame = agg[agg["dimension"] == dimension]
        rows = []
        for (model, group, split), cell in frame.groupby(["model", "group", "split"], sort=True):
            by = cell.set_index("stat")
            rows.append(
                [_e(model), _e(group), split, str(int(by["n"].iloc[0]))]
                + [
                    fmt_ci(by.at[st, "value"], by.at[st, "low"], by.at[st, "high"])
                    for st in stats()
                ]
            )
        body.append(
            f"<h2>{title}</h2>"
            + html_table(
                [
                    "Model",
                    "Group",
                    "Subset",
                    "n",
                    "Acc",
                    "Flip rate",
                    "Flip undecided",
                    *headline_scopes(),
                ],
                rows[:600],
                3,
            )
        )
    body.append(_problems(report))
    body.append(_coverage(report))
    if report.comparison is not None:
        rows = [
            [
                r["stat"],
                str(r["n_pairs"]),
                fmt_pct(r["baseline"]),
                fmt_pct(r["candidate"]),
                fmt_ci(r["diff"], r["low"], r["high"]),
                '<span class="fail">regression</span>' if r["regression"] else "no",
            ]
            for _, r in report.comparison.iterrows()
        ]
        body.append(
            "<h2>Comparison (candidate − baseline, % points)</h2>"
            + html_table(
                ["Stat", "Pairs", "Baseline", "Candidate", "Diff [95% CI]", "Regression"], rows
            )
        )
    body.append(_items(report, requests, details, max_items))
    script = _explorer_script()
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f'<meta http-equiv="Content-Security-Policy" content="{_csp(script)}">'
        "<meta name='viewport' content='width=device-width'><title>FaithJudge report</title>"
        f"<style>{_CSS}{_mark_css()}</style></head><body>{''.join(body)}"
        f'<script id="explorer-script">{script}</script></body></html>'
    )


def explorer_page(title: str, intro: str, data: Mapping[str, Any]) -> str:
    """One HTML document holding only the item explorer of ``data`` (``explorer_data``'s
    records), with the report's styles, script and policy: what ``faithjudge view`` serves for
    a run. ``intro`` is HTML, escaped by the caller."""
    script = _explorer_script()
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f'<meta http-equiv="Content-Security-Policy" content="{_csp(script)}">'
        f"<meta name='viewport' content='width=device-width'><title>{_e(title)}</title>"
        f"<style>{_CSS}{_mark_css()}</style></head><body>{intro}{_quote_legend()}"
        '<div id="explorer"><noscript><p class="meta">The item explorer needs JavaScript.'
        "</p></noscript></div>"
        f'<script type="application/json" id="explorer-data">{explorer_json(data)}</script>'
        f'<script id="explorer-script">{script}</script></body></html>'
    )


def _judges(report: Report) -> str:
    """The judge of the run (or each judge of a mixed run, with its line count)."""
    if report.judges is None:
        return ""
    header, rows = report.judges.table()
    css = ' class="fail"' if report.judges.mixed else ""
    canary = "".join(f"<p>{_e(said)}</p>" for said in report.canary)
    return f"<h2>Judge</h2><p{css}>{_e(report.judges.headline())}</p>{canary}" + html_table(
        header, [[_e(cell) for cell in row] for row in rows], len(header)
    )


def _problems(report: Report) -> str:
    """The lines not judged because of the line itself (as the Markdown report lists them)."""
    rows = problem_lines(report)
    if not rows:
        return ""
    shown = [
        [_e("–" if r["line"] is None else r["line"]), _e(r["item_id"] or "–"),
         _e(r["model"] or "–"), _e(r["problem"]), _e(r["detail"] or "")]
        for r in rows[:LISTED_PROBLEMS]
    ]  # fmt: skip
    return f"<h2>Lines not judged ({_e(problem_counts(report.summary))})</h2>" + html_table(
        ["Line", "Item", "Model", "Problem", "Detail"], shown, 1
    )


def _coverage(report: Report) -> str:
    rates = RATES
    rows = []
    for scope, cov in report.coverage.items():
        rows.append(
            [scope, str(cov.n_judged), str(cov.n_not_judged)]
            + [rate_cell(r, cov.rates[r]) for r in rates]
            + not_judged_cells(scope, cov)
        )
    gates = [[_e(g.gate), _e(g.scope), *_gate_cells(g), _e(g.note or "")] for g in report.gates]
    f = report.fpr
    fpr = bound_cell(f.rate.point, fpr_bound(f))
    return (
        "<h2>Coverage diagnostics (exact one-sided 95% bound in brackets)</h2>"
        + html_table(
            [
                "Scope",
                "Judged",
                "Not judged",
                "Pr[parse]",
                "Pr[schema]",
                "Pr[evidence]",
                "Pr[invalid]",
                "Pr[abstain]",
                "Pr[not judged]",
                "Cov",
                "Val",
                "Transport failures",
                "KB misses",
                "Input errors",
            ],
            rows,
        )
        + f"<p>Placebo FPR (CA &gt; 3 on {f.n_valid} of {f.n_sham} SHAM items): {fpr}"
        + (f" — {_e(f.note)}" if f.note else "")
        + "</p><h2>Paper gates (exact one-sided 95% upper bound; a zero threshold is judged on "
        "the rate itself)</h2>"
        + html_table(["Gate", "Scope", "Threshold %", "Value %", "Result", "Note"], gates, 2)
    )


def _gate_cells(gate: GateResult) -> list[str]:
    """Threshold, the value compared with it (printed to tell them apart) and the result, which
    names too few items apart from a failure."""
    compared_value = gate.point if gate.threshold == 0.0 else gate.upper
    value, threshold = compared(
        None if compared_value is None else 100 * compared_value, 100 * gate.threshold
    )
    if gate.needed is not None:
        result = f'<span class="fail">{TOO_FEW}</span> ({gate.trials or 0} of {gate.needed})'
    else:
        result = {
            True: '<span class="pass">pass</span>',
            False: '<span class="fail">fail</span>',
            None: "n/a",
        }[gate.passed]
    return [threshold, value, result]
