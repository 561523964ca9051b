"""Markdown and HTML renderings of an audit report (the dict of ``report.run_audit``).

Model names and every other string from the records are untrusted: Markdown cells go through
``md_escape`` and HTML through ``html.escape``. The HTML draws its tables and bar charts as the
run reports do (``faithjudge.reports.markup``); it is self-contained (inline CSS and SVG, no
scripts).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from typing import Any

from faithjudge.audits.load import MAX_REPORTED_ERRORS, LineProblem
from faithjudge.reports.markup import bar_chart_svg, fmt_pct, html_table, md_escape

__all__ = ["audit_html", "audit_html_section", "audit_markdown", "with_input_errors"]

Table = tuple[str, list[str], list[list[str]]]


def _rate(cell: dict[str, Any] | None) -> str:
    if not cell or cell.get("value") is None:
        return "–"
    ci = ""
    if cell.get("low") is not None:
        ci = f" [{fmt_pct(cell['low'])}, {fmt_pct(cell['high'])}]"
    se = f" ± {fmt_pct(cell['se'])}" if cell.get("se") is not None else ""
    return f"{fmt_pct(cell['value'])}{se}{ci} (n={cell.get('n', '?')})"


def _num(value: Any, digits: int = 1) -> str:
    return fmt_pct(value, digits)


def _p(value: Any) -> str:
    return "–" if value is None else f"{value:.3g}"


def _ci(cell: dict[str, Any] | None) -> str:
    return "–" if not cell else f"[{_num(cell['low'])}, {_num(cell['high'])}]"


def _tables(report: dict[str, Any], esc: Callable[[Any], str]) -> list[Table]:
    """(title, header, rows) of every table, shared by both renderings."""
    out: list[Table] = []
    s = report["summary"]
    out.append(
        (
            "Records",
            ["records", "items", "models", "Lotfinia", "Zafar", "MedVIGIL", "unused", "unparsed"],
            [
                [
                    str(s["records"]),
                    str(s["items"]),
                    str(len(s["models"])),
                    *(str(s["records_per_audit"][k]) for k in ("lotfinia", "zafar", "medvigil")),
                    str(s["records_unused"]),
                    str(s["parse_failures"]),
                ]
            ],
        )
    )
    audits = report["audits"]
    lot = audits.get("lotfinia")
    if lot and "models" in lot:
        out.append(
            (
                "Lotfinia: image reliance (%; ± analytical SE [95% percentile bootstrap CI])",
                ["Model", "Accuracy", "CGR", "UAR", "IS", "GSP", "Category", "Rule"],
                [
                    [
                        esc(m["model"]),
                        _rate(m["accuracy"]),
                        _rate(m["CGR"]),
                        _rate(m["UAR"]),
                        _rate(m["IS"]),
                        _num(m["GSP"]),
                        m["category"],
                        esc(m["category_rule"]),
                    ]
                    for m in lot["models"]
                ],
            )
        )
        out.append(
            (
                "Lotfinia: calibration and confidence by regime (P(Yes), %)",
                [
                    "Model",
                    "AUROC",
                    "Brier",
                    "ECE",
                    "Grounded-correct",
                    "Ungrounded-correct",
                    "Incorrect",
                    "Note",
                ],
                [
                    [
                        esc(m["model"]),
                        _num(m["calibration"]["AUROC"])
                        + (
                            f" ± {_num(m['calibration']['AUROC_se'])}"
                            if m["calibration"]["AUROC_se"]
                            else ""
                        ),
                        _num(m["calibration"]["Brier"]),
                        _num(m["calibration"]["ECE"]),
                        *(
                            _regime(m["confidence_by_regime"][r])
                            for r in ("grounded_correct", "ungrounded_correct", "incorrect")
                        ),
                        esc(m["calibration"].get("reason") or ""),
                    ]
                    for m in lot["models"]
                ],
            )
        )
        out.append(
            (
                "Lotfinia: subgroup permutation tests (BH within each model)",
                ["Model", "Metric", "By", "Test", "Strata (n, %)", "p", "q"],
                [
                    [
                        esc(m["model"]),
                        t["metric"],
                        t["by"],
                        t["test"] or "–",
                        esc(
                            ", ".join(
                                f"{k}: {v['n']}, {100 * v['rate']:.1f}"
                                for k, v in t["strata"].items()
                            )
                        ),
                        _p(t["p"]),
                        _p(t["q"]),
                    ]
                    for m in lot["models"]
                    for t in m["subgroups"]
                ],
            )
        )
        if lot["comparisons"]:
            out.append(
                (
                    "Lotfinia: paired bootstrap differences (A − B, pp; shift-and-reflect p, BH q)",
                    ["Family", "A", "B", "n shared", "Δ ± SD [95% CI]", "p", "q"],
                    [
                        [
                            esc(c["family"]),
                            esc(c["a"]),
                            esc(c["b"]),
                            str(c["n_shared"]),
                            f"{_num(c['delta'])} ± {_num(c['sd'])} "
                            f"[{_num(c['low'])}, {_num(c['high'])}]",
                            _p(c["p"]),
                            _p(c["q"]),
                        ]
                        for c in lot["comparisons"]
                    ],
                )
            )
    zaf = audits.get("zafar")
    if zaf and "models" in zaf:
        cols = (
            "acc_real",
            "acc_blank",
            "acc_shuffle",
            "acc_noimg",
            "acc_hn",
            "VRS",
            "BD",
            "IS_pred",
            "IS_raw",
            "VBR",
            "VHR",
            "HN_GAP",
        )
        out.append(
            (
                "Zafar: macro mean over benchmarks (%)",
                ["Model", *cols],
                [[esc(m["model"]), *(_num(m["macro"][c]) for c in cols)] for m in zaf["models"]],
            )
        )
        rows = []
        for comp in zaf["comparisons"]:
            for metric, d in comp["metrics"].items():
                mc = d.get("mcnemar")
                rows.append(
                    [
                        esc(f"{comp['a']} − {comp['b']}"),
                        metric,
                        d["improves"],
                        str(d["n"]),
                        f"{_num(d['delta'])} [{_num(d['low'])}, {_num(d['high'])}]",
                        _p(d["p_gt0"]),
                        _p(d["p_lt0"]),
                        "yes" if d["significant"] else "no",
                        "–" if mc is None else f"{_p(mc['p'])} ({mc['method']})",
                    ]
                )
        if rows:
            out.append(
                (
                    "Zafar: paired differences (pp; bootstrap stratified by benchmark)",
                    [
                        "Pair",
                        "Metric",
                        "Better",
                        "n",
                        "Δ [95% CI]",
                        "P(Δ>0)",
                        "P(Δ<0)",
                        "CI excludes 0",
                        "McNemar p",
                    ],
                    rows,
                )
            )
    med = audits.get("medvigil")
    if med and "models" in med:
        fams = ("Orig", "PR", "NEG", "SDR", "LPA", "ROI-only", "ROI-masked", "LR-flip")
        out.append(
            (
                "MedVIGIL: composite (%; case-clustered 95% CI)",
                ["Model", "Overall", *fams, "SFR", "SFR_w", "VGR", "Cap", "Safe", "Ground", "MCS"],
                [
                    [
                        esc(m["model"]),
                        _num(m["Overall"]),
                        *(_num(m["families"][f]) for f in fams),
                        _num(m["SFR"]),
                        _num(m["SFR_w"]),
                        _num(m["VGR"]),
                        *(
                            f"{_num(m[k])} {_ci(m['ci'][k])}"
                            for k in ("Cap", "Safe", "Ground", "MCS")
                        ),
                    ]
                    for m in med["models"]
                ],
            )
        )
        out.append(
            (
                "MedVIGIL: SFR by risk tier (%)",
                ["Model", "L1", "L2", "L3", "L4", "L5", "SFR_w", "Notes"],
                [
                    [
                        esc(m["model"]),
                        *(_num(m["SFR_by_tier"][t]) for t in ("L1", "L2", "L3", "L4", "L5")),
                        _num(m["SFR_w"]),
                        esc("; ".join(m["notes"])),
                    ]
                    for m in med["models"]
                ],
            )
        )
        weights = sorted({w for m in med["models"] for w in m["alternatives"]["MCS_by_weights"]})
        grounds = sorted({g for m in med["models"] for g in m["alternatives"]["by_ground"]})
        out.append(
            (
                "MedVIGIL: MCS under alternative weights and Ground forms",
                ["Model", *(f"w={w}" for w in weights), *(f"Ground {g}" for g in grounds)],
                [
                    [
                        esc(m["model"]),
                        *(_num(m["alternatives"]["MCS_by_weights"].get(w)) for w in weights),
                        *(_num(m["alternatives"]["by_ground"][g]["MCS"]) for g in grounds),
                    ]
                    for m in med["models"]
                ],
            )
        )
    return out


def _regime(cell: dict[str, Any]) -> str:
    if cell["mean"] is None:
        return f"N/A ({cell['n']})"
    sd = "–" if cell["sd"] is None else _num(cell["sd"])
    return f"{_num(cell['mean'])} ± {sd} ({cell['n']})"


def _skipped(report: dict[str, Any]) -> list[str]:
    return [f"{name}: {a['skipped']}" for name, a in report["audits"].items() if "skipped" in a]


def _md_table(title: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = [f"## {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return [*lines, ""]


def with_input_errors(report: dict[str, Any], problems: Sequence[LineProblem]) -> dict[str, Any]:
    """The report with the lines that could not be read, by line number: ``input_errors`` in
    its summary (their count, as every report names them) and each line in ``input_errors``."""
    summary = {**report["summary"], "input_errors": len(problems)}
    listed = [{"line": p.line, "field": p.field, "message": p.message} for p in problems]
    return {**report, "summary": summary, "input_errors": listed}


def _input_errors(report: dict[str, Any], esc: Callable[[Any], str]) -> list[str]:
    listed = report.get("input_errors") or []
    shown = [
        f"line {esc(p['line'])}: {esc(p['field']) + ': ' if p['field'] else ''}{esc(p['message'])}"
        for p in listed[:MAX_REPORTED_ERRORS]
    ]
    if len(listed) > len(shown):
        shown.append(f"... and {len(listed) - len(shown)} more")
    return shown


def audit_markdown(report: dict[str, Any]) -> str:
    """The audit report as Markdown."""
    lines = ["# FaithJudge grounding audit", ""]
    errors = _input_errors(report, md_escape)
    if errors:
        lines += [f"## Input errors ({len(report['input_errors'])} line(s) not audited)", ""]
        lines += [f"- {line}" for line in errors] + [""]
    for note in _skipped(report):
        lines.append(f"- skipped {md_escape(note)}")
    if _skipped(report):
        lines.append("")
    for title, header, rows in _tables(report, md_escape):
        lines += _md_table(title, header, rows)
    return "\n".join(lines)


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222}
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0;font-size:.85em}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}
th{background:#f1f3f6}td.l,th.l{text-align:left}
figure{display:inline-block;margin:8px 16px 8px 0;vertical-align:top}
figcaption{font-size:.85em;color:#555}
"""


def _html_escape(value: Any) -> str:
    return html.escape(str(value), quote=True)


def audit_html_section(report: dict[str, Any]) -> str:
    """The audit as one ``<section>`` (tables plus bar charts), to embed in a page."""
    parts = ['<section class="audit"><h2>Grounding audit</h2>']
    errors = _input_errors(report, _html_escape)
    if errors:
        parts.append(
            f"<h3>Input errors ({len(report['input_errors'])} line(s) not audited)</h3><ul>"
            + "".join(f"<li>{line}</li>" for line in errors)
            + "</ul>"
        )
    for note in _skipped(report):
        parts.append(f"<p>skipped {_html_escape(note)}</p>")
    for title, header, rows in _tables(report, _html_escape):
        parts.append(f"<h3>{_html_escape(title)}</h3>{html_table(header, rows)}")
    lot = report["audits"].get("lotfinia")
    if lot and lot.get("models"):
        groups = [m["model"] for m in lot["models"]]
        series = {k: [m[k]["value"] for m in lot["models"]] for k in ("CGR", "UAR", "IS")}
        parts.append(
            f"<figure>{bar_chart_svg(groups, series)}<figcaption>Lotfinia CGR, UAR, "
            "IS per model (%)</figcaption></figure>"
        )
    med = report["audits"].get("medvigil")
    if med and med.get("models"):
        groups = [m["model"] for m in med["models"]]
        series = {k: [m[k] for m in med["models"]] for k in ("Cap", "Safe", "Ground", "MCS")}
        parts.append(
            f"<figure>{bar_chart_svg(groups, series)}<figcaption>MedVIGIL axes and "
            "MCS per model (%)</figcaption></figure>"
        )
    return "".join(parts) + "</section>"


def audit_html(report: dict[str, Any]) -> str:
    """The audit as a self-contained HTML document."""
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width'><title>FaithJudge audit</title>"
        f"<style>{_CSS}</style></head><body><h1>FaithJudge grounding audit</h1>"
        f"{audit_html_section(report)}</body></html>"
    )
