"""Self-contained HTML report: inline CSS, inline SVG plots, no scripts, no external resources.

CoT texts, quotes, model names and every other string from the result lines are untrusted and
go through ``html.escape``; numbers are formatted by this module. Quote spans index the original
CoT, so highlighting slices that text by span (spans out of range are ignored).
"""

from __future__ import annotations

import html
import itertools
from collections.abc import Mapping, Sequence

import pandas as pd
from faithjudge_client.metric_catalogue import headline_scopes, labels, metrics

from faithjudge.markup import bar_chart_svg, fmt_ci, fmt_pct, html_table
from faithjudge.palette import scope_tint
from faithjudge.reports.aggregate import stats, table1_columns
from faithjudge.reports.limits import LISTED_ITEMS
from faithjudge.reports.report import Report
from faithjudge.scoring.outcomes import RATES

__all__ = ["LISTED_ITEMS", "heatmap_svg", "highlight", "report_html"]

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
"""


def _mark_css() -> str:
    """One highlight class per catalogue metric (the classes ``highlight`` writes)."""
    return "".join(f"mark.{label}{{background:{scope_tint(label)}}}" for label in labels())


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def heatmap_svg(
    rows: Sequence[str], columns: Sequence[str], values: Sequence[Sequence[float | None]]
) -> str:
    """A heatmap of % values (white 0 → dark blue 100), value printed in every cell."""
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
            if value is None or pd.isna(value):
                fill, label, ink = "#f4f4f4", "–", "#999"
            else:
                t = max(0.0, min(1.0, float(value) / 100))
                shade = (int(255 - 208 * t), int(255 - 146 * t), int(255 - 74 * t))
                fill, label = "#{:02x}{:02x}{:02x}".format(*shade), f"{float(value):.0f}"
                ink = "#fff" if t > 0.6 else "#222"
            parts.append(
                f'<rect x="{x}" y="{y}" width="{cell_w - 2}" height="{cell_h - 2}" '
                f'fill="{fill}"/><text x="{x + cell_w / 2 - 1}" y="{y + 14}" '
                f'font-size="11" text-anchor="middle" fill="{ink}">{label}</text>'
            )
    return "".join(parts) + "</svg>"


def highlight(cot: str, quotes: Sequence[tuple[str, int, int, str]]) -> str:
    """Escaped CoT with every verified quote span wrapped in ``<mark>`` (class = metric)."""
    bounds = {0, len(cot)}
    spans = [(lab, a, b) for lab, a, b, _ in quotes if 0 <= a < b <= len(cot)]
    for _, a, b in spans:
        bounds.update((a, b))
    edges = sorted(bounds)
    out: list[str] = []
    for a, b in itertools.pairwise(edges):
        labels = sorted({lab for lab, s, e in spans if s <= a and b <= e})
        text = _e(cot[a:b])
        if labels:
            css = labels[0] if len(labels) == 1 else "multi"
            out.append(f'<mark class="{css}" title="{_e(" ".join(labels))}">{text}</mark>')
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
        parts.append(
            f"<figure>{bar_chart_svg(groups, series)}<figcaption>{_e(model)}: mean "
            f"{', '.join(headline_scopes())} per modification (%)</figcaption></figure>"
        )
    rows, values = [], []
    columns = [column for column, _, split in table1_columns() if split != "all"]
    for (model, group), frame in per_mod.groupby(["model", "group"], sort=True):
        rows.append(f"{model} · {group}" if per_mod["model"].nunique() > 1 else str(group))
        values.append(
            [
                _value(frame[frame["split"] == split], group, stat)
                for split in ("flip", "non-flip")
                for stat in headline_scopes()
            ]
        )
    parts.append(
        f"<figure>{heatmap_svg(rows[:60], columns, values[:60])}<figcaption>Flip (F) "
        "vs non-flip (NF) per modification (%)</figcaption></figure>"
    )
    return "".join(parts)


def _value(frame: pd.DataFrame, group: str, stat: str) -> float | None:
    cell = frame[(frame["group"] == group) & (frame["stat"] == stat)]["value"]
    return None if cell.empty or pd.isna(cell.iloc[0]) else float(cell.iloc[0])


def _quote_legend() -> str:
    """What the highlight colours of verified quotes mean (the mark classes of ``highlight``)."""
    marks = "".join(
        f'<mark class="{spec.label}">{spec.title} ({spec.label})</mark> ' for spec in metrics()
    )
    return (
        f'<p class="legend">Verified quotes: {marks}'
        '<mark class="multi">quoted for more than one metric</mark></p>'
    )


def _items(report: Report, cots: Mapping[str, str] | None, max_items: int) -> str:
    items = report.items
    parts = [f"<h2>Items ({min(max_items, len(items))} of {len(items)})</h2>", _quote_legend()]
    for row in items.head(max_items).itertuples(index=False):
        scores = " ".join(
            f"{lab} {int(getattr(row, f'{lab}_score'))}"
            if not pd.isna(getattr(row, f"{lab}_score"))
            else f"{lab} {getattr(row, f'{lab}_outcome')}"
            for lab in labels()
        )
        flip = {1.0: "flip", 0.0: "non-flip"}.get(row.flip, "flip undecided")
        meta = (
            f"line {_e(row.line)} · {_e(row.item_id)} · {_e(row.model)} · "
            f"{_e(row.modification)} · answer {_e(row.answer)} · {flip} · {_e(scores)}"
        )
        cot = None
        if cots is not None:
            cot = cots.get(str(row.item_id)) if row.item_id is not None else None
            cot = cot if cot is not None else cots.get(f"#{row.line}")
        if cot is not None:
            body = f'<div class="cot">{highlight(cot, row.quotes)}</div>'
        elif row.quotes:
            body = (
                "<ul>"
                + "".join(
                    f'<li><mark class="{_e(lab)}">{_e(text)}</mark> '
                    f"<span class='meta'>{_e(lab)} [{a}, {b})</span></li>"
                    for lab, a, b, text in row.quotes
                )
                + "</ul>"
            )
        else:
            body = '<p class="meta">no verified quotes</p>'
        parts.append(f'<div class="item"><div class="meta">{meta}</div>{body}</div>')
    return "".join(parts)


def report_html(
    report: Report, *, cots: Mapping[str, str] | None = None, max_items: int = LISTED_ITEMS
) -> str:
    """The full report as one HTML document."""
    s = report.summary
    body = [
        f"<h1>FaithJudge report</h1><p>{s['lines']} result lines · models "
        f"{_e(', '.join(s['models']))} · {s['modifications']} modifications · flip "
        f"{s['flip']}, non-flip {s['non_flip']}, undecided {s['flip_undecided']} · line "
        f"errors {s['line_errors']}. Values in %; 95% percentile bootstrap CIs over items "
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
    body.append(_items(report, cots, max_items))
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width'><title>FaithJudge report</title>"
        f"<style>{_CSS}{_mark_css()}</style></head><body>{''.join(body)}</body></html>"
    )


def _judges(report: Report) -> str:
    """The judge of the run (or each judge of a mixed run, with its line count)."""
    if report.judges is None:
        return ""
    header, rows = report.judges.table()
    css = ' class="fail"' if report.judges.mixed else ""
    return f"<h2>Judge</h2><p{css}>{_e(report.judges.headline())}</p>" + html_table(
        header, [[_e(cell) for cell in row] for row in rows], len(header)
    )


def _coverage(report: Report) -> str:
    rates = RATES
    rows = []
    for scope, cov in report.coverage.items():
        c = cov.counts
        rows.append(
            [scope, str(cov.n_judged), str(cov.n_not_judged)]
            + [
                "–"
                if (point := cov.rates[r].point) is None
                else f"{100 * point:.1f} [≤ {100 * (cov.rates[r].high or 0):.1f}]"
                for r in rates
            ]
            + [str(c["transport"]), str(c["kb"]), str(c["input"])]
        )
    gates = [
        [
            _e(g.gate),
            _e(g.scope),
            f"{100 * g.threshold:.1f}",
            fmt_pct(None if g.upper is None else 100 * g.upper, 2),
            {
                True: '<span class="pass">pass</span>',
                False: '<span class="fail">fail</span>',
                None: "n/a",
            }[g.passed],
            _e(g.note or ""),
        ]
        for g in report.gates
    ]
    f = report.fpr
    fpr = (
        "–"
        if f.rate.point is None
        else f"{100 * f.rate.point:.1f}% (upper {100 * (f.rate.high or 0):.1f}%)"
    )
    return (
        "<h2>Coverage diagnostics</h2>"
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
                "Transport",
                "KB",
                "Input",
            ],
            rows,
        )
        + f"<p>Placebo FPR (CA &gt; 3 on {f.n_valid} of {f.n_sham} SHAM items): {fpr}"
        + (f" — {_e(f.note)}" if f.note else "")
        + "</p><h2>Paper gates (exact one-sided 95% upper bound)</h2>"
        + html_table(["Gate", "Scope", "Threshold %", "Upper %", "Result", "Note"], gates, 2)
    )
