"""The pages of ``faithjudge view``: the folder's runs, one run's explorer, two runs compared.

The listing and the comparison are plain HTML (no script: a form picks the two runs, links
filter the changes, so every view has its URL); a run is the HTML report's item explorer
(``render_html.explorer_page``) over every item of the run. Every text from a file goes through
``html.escape``; each page's policy loads nothing from anywhere.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from faithjudge_client.metric_catalogue import labels

from faithjudge.reports.browser import (
    CHANGES,
    Comparison,
    JobListing,
    Listing,
    Run,
    grades_text,
)
from faithjudge.reports.markup import fmt_ci, fmt_pct, html_table
from faithjudge.reports.render_html import explorer_page

__all__ = ["compare_page", "index_page", "page_policy", "run_page"]

# No script and nothing fetched; the one form sends its choice to this server.
_POLICY = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'"

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.4em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0;font-size:.85em}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}th{background:#f1f3f6}
td.l,th.l{text-align:left}.meta{font-size:.85em;color:#555}.fail{color:#b00020}
nav a{margin-right:12px}a.on{font-weight:700;text-decoration:none;color:#222}
"""


_PER_METRIC = ["Metric", "Graded in both", "Baseline mean %", "Candidate mean %", "Diff",
               "Grades up", "Grades down", "New failures", "Fixed"]  # fmt: skip
_CHANGED = ["Item", "Model", "Modification", "Changes", "Grades (baseline → candidate)", "Flip",
            "Answer", "Baseline", "Candidate"]  # fmt: skip


def page_policy() -> str:
    """The Content-Security-Policy of the listing and comparison pages."""
    return _POLICY


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _page(title: str, body: str) -> str:
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f'<meta http-equiv="Content-Security-Policy" content="{_POLICY}">'
        f"<meta name='viewport' content='width=device-width'><title>{_e(title)}</title>"
        f"<style>{_CSS}</style></head><body>{body}</body></html>"
    )


def run_url(name: str, *, open_line: int | None = None) -> str:
    """The address of a run's page (with the item at ``open_line`` opened)."""
    url = "/run?" + urlencode({"file": name})
    return url if open_line is None else f"{url}#open={open_line}"


def compare_url(base: str, cand: str, change: str | None = None) -> str:
    query = {"base": base, "cand": cand, **({"change": change} if change else {})}
    return "/compare?" + urlencode(query)


def _when(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M")  # the viewer's own clock


def _pick(name: str) -> list[str]:
    return [
        f'<input type="radio" name="base" value="{name}" aria-label="baseline {name}">',
        f'<input type="radio" name="cand" value="{name}" aria-label="candidate {name}">',
    ]


def _jobs(listing: JobListing) -> tuple[str, bool]:
    """The service's section of the index, and whether it offers a run to compare."""
    head = f"<h2>Jobs of {_e(listing.url)}</h2>"
    if listing.problem is not None:
        return head + f'<p class="fail" id="service-problem">{_e(listing.problem)}</p>', False
    if not listing.jobs:
        return head + "<p>No job on this service for this API key.</p>", False
    rows = []
    for job in listing.jobs:
        name = _e(job.run_name)
        # only a completed job holds every result: an unfinished one is explored, not compared
        done = job.status == "completed"
        rows.append([
            *(_pick(name) if done else ["", ""]),
            f'<a class="job" href="{_e(run_url(job.run_name))}">{_e(job.id)}</a>',
            _e(job.name or ""),
            _e(job.status),
            _e(job.judge or ""),
            str(job.lines),
            _when(job.created),
        ])  # fmt: skip
    header = ["Baseline", "Candidate", "Job", "Name", "Status", "Judge", "Lines", "Created"]
    table = html_table(header, rows, left=6).replace("<table>", '<table id="jobs">', 1)
    more = '<p class="meta">The newest jobs are shown.</p>' if listing.more else ""
    return head + table + more, any(j.status == "completed" for j in listing.jobs)


def index_page(folder: str, listing: Listing, jobs: JobListing | None = None) -> str:
    """The runs of ``folder``: one row each, two radio columns to pick a comparison; with
    ``jobs``, a service's jobs below them, picked the same way."""
    labs = labels()
    rows = []
    for run in listing.runs:
        name = _e(run.name)
        problems = (
            f' <span class="fail">({run.unreadable_lines} unreadable line(s))</span>'
            if run.unreadable_lines
            else ""
        )
        rows.append([
            *_pick(name),
            f'<a class="run" href="{_e(run_url(run.name))}">{name}</a>{problems}',
            _e(run.judge),
            str(run.lines),
            fmt_pct(None if run.coverage is None else 100.0 * run.coverage),
            *(fmt_pct(run.means[lab]) for lab in labs),
            _when(run.modified),
            _e(run.cots) if run.cots else '<span class="meta">none found</span>',
        ])  # fmt: skip
    header = ["Baseline", "Candidate", "Run", "Judge", "Lines", "Coverage %",
              *(f"{lab} mean %" for lab in labs), "Modified", "CoTs from"]  # fmt: skip
    body = [
        f"<h1>FaithJudge runs in {_e(folder)}</h1>",
        f'<p class="meta">{len(listing.runs)} results file(s). Open a run to explore every '
        "item (search reaches the CoTs when a request file of the folder, or given with "
        "--requests, holds the run's lines); pick a baseline and a candidate to compare "
        "them item by item. Coverage is the macro coverage; means are over valid grades.</p>",
    ]
    runs = (
        html_table(header, rows, left=4).replace("<table>", '<table id="runs">', 1)
        if listing.runs
        else "<p>No results file here (a results file's first line is a result line).</p>"
    )
    service, comparable = ("", False) if jobs is None else _jobs(jobs)
    if listing.runs or comparable:
        body.append(
            f'<form method="get" action="/compare" id="pick">{runs}{service}'
            '<button type="submit">Compare</button></form>'
        )
    else:
        body.append(runs + service)
    if listing.unreadable:
        body.append(
            "<h2>Files that could not be read</h2>"
            + html_table(
                ["File", "Why"],
                [[_e(u.name), _e(u.reason)] for u in listing.unreadable],
                left=2,
            ).replace("<table>", '<table id="unreadable">', 1)
        )
    return _page("FaithJudge runs", "".join(body))


def run_page(run: Run, data: Mapping[str, Any]) -> str:
    """The explorer of every item of ``run``."""
    problems = (
        f'<p class="fail">{len(run.problems)} line(s) could not be read; they are listed as '
        "input errors.</p>"
        if run.problems
        else ""
    )
    cots = (
        ""
        if data.get("requests")
        else (
            '<p class="meta">No request file of the folder (nor one given with --requests) holds '
            "this run's lines: search reads what the result lines carry (items, questions, "
            "answers, quotes, rationales, omissions, hallucinations, failures).</p>"
        )
    )
    intro = (
        '<nav><a href="/">All runs</a></nav>'
        f"<h1>{_e(run.name)}</h1><p>{len(run.items)} result lines. "
        f"{_e(run.judges.headline())}</p>{problems}{cots}"
    )
    return explorer_page(f"FaithJudge run {run.name}", intro, data)


def compare_page(base: str, cand: str, comparison: Comparison, change: str | None = None) -> str:
    """``cand`` against ``base``: the paired differences, per metric, then the changed items
    (those of one kind of change when ``change`` names one)."""
    counts = comparison.counts
    body = [
        '<nav><a href="/">All runs</a>'
        f'<a href="{_e(run_url(base))}">{_e(base)}</a>'
        f'<a href="{_e(run_url(cand))}">{_e(cand)}</a></nav>',
        f"<h1>{_e(cand)} against {_e(base)}</h1>",
        f'<p class="meta" id="pairs">{counts["shared"]} items in both runs (matched on model, '
        f"item id and modification); {counts['baseline_only']} only in the baseline, "
        f"{counts['candidate_only']} only in the candidate, {counts['unmatched']} without an "
        "item id.</p>",
        "<h2>Paired differences (candidate − baseline, % points)</h2>",
        html_table(
            ["Stat", "Pairs", "Baseline", "Candidate", "Diff [95% CI]", "Regression"],
            [
                [
                    _e(r["stat"]),
                    str(r["n_pairs"]),
                    fmt_pct(r["baseline"]),
                    fmt_pct(r["candidate"]),
                    fmt_ci(r["diff"], r["low"], r["high"]),
                    '<span class="fail">regression</span>' if r["regression"] else "no",
                ]
                for _, r in comparison.stats.iterrows()
            ],
        ),
        "<h2>Per metric</h2>",
        html_table(
            _PER_METRIC,
            [
                [
                    _e(m["metric"]),
                    str(m["pairs"]),
                    fmt_pct(m["baseline"]),
                    fmt_pct(m["candidate"]),
                    fmt_pct(m["diff"]),
                    str(m["up"]),
                    str(m["down"]),
                    str(m["new failure"]),
                    str(m["fixed"]),
                ]
                for m in comparison.metrics
            ],
        ).replace("<table>", '<table id="per-metric">', 1),
    ]
    changed = comparison.changed
    if change in CHANGES:
        changed = [item for item in changed if change in item["changes"]]
    links = [
        f'<a href="{_e(compare_url(base, cand))}"{" class=on" if change not in CHANGES else ""}>'
        f"all changes ({len(comparison.changed)})</a>"
    ]
    for kind, meaning in CHANGES.items():
        on = " class=on" if kind == change else ""
        links.append(
            f'<a href="{_e(compare_url(base, cand, kind))}" title="{_e(meaning)}"{on}>'
            f"{_e(kind)} ({comparison.tally[kind]})</a>"
        )
    rows = [
        [
            _e(item["item_id"]),
            _e(item["model"]),
            _e(item["modification"]),
            _e(", ".join(item["changes"])),
            _e(grades_text(item["grades"])) or "–",
            _e(f"{item['flip'][0]} → {item['flip'][1]}")
            if item["flip"][0] != item["flip"][1]
            else "–",
            _e(f"{item['answer'][0]} → {item['answer'][1]}")
            if item["answer"][0] != item["answer"][1]
            else "–",
            _open_link(base, item["lines"][0], "baseline"),
            _open_link(cand, item["lines"][1], "candidate"),
        ]
        for item in changed
    ]
    body += [
        "<h2>Items that changed</h2>",
        f"<nav id='changes'>{''.join(links)}</nav>",
        f'<p class="meta" id="changed-count">{len(changed)} of {counts["shared"]} shared items '
        "listed.</p>",
        html_table(
            _CHANGED,
            rows,
            left=7,
        ).replace("<table>", '<table id="changed">', 1),
    ]
    return _page(f"FaithJudge: {cand} against {base}", "".join(body))


def _open_link(name: str, line: int | None, text: str) -> str:
    if line is None:
        return "–"
    return f'<a href="{_e(run_url(name, open_line=line))}">{text} line {line}</a>'
