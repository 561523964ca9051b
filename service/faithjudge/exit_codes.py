"""The exit codes of every ``faithjudge`` command (a leaf: the CLI and the gate both read it).

Exit codes (the same for every command: ``score``, ``submit``, ``report``, ``gate``,
``validate-judge``, ``audit``, ``check-judge``, ``canary``, ``kb``, ``judge-requests``,
``serve`` and ``keys``; documented in the README's table and, for ``submit``, in docs/service.md;
``tests/unit/test_exit_code_docs.py`` keeps the three in step):

====  ==================  ==================================================================
code  name                meaning
====  ==================  ==================================================================
0     OK                  every line got a result and at least one grade is valid
1     CHECK_FAILED        ``gate``: a quality, regression or canary check failed;
                          ``canary check``: the judge drifted from its pinned grades;
                          ``check-judge``: the judge answered, but not with a reply its
                          schema accepts, or the longest prompt of the file does not fit the
                          server's context window;
                          ``kb check``: the knowledge base has problems
2     COVERAGE_FAILED     ``gate``: a coverage check failed, or had too few items to show its
                          rate within the threshold (typer's own usage errors are mapped to
                          3 on ``gate``, so 2 always means coverage there)
3     UNEVALUABLE         the command could not run: bad option or configuration, missing or
                          unreadable file, server or judge unreachable / refusing us
4     NOTHING_SCORED      it ran, but not one grade is valid: empty input, no readable
                          line, every judge call failed, every reply failed verification
                          (``report``/``gate``: counted over grades), every batch line rejected
5     STOPPED             the run stopped early (Ctrl-C, a wait that timed out, a batch that
                          was cancelled); what was written so far is kept and resumable
====  ==================  ==================================================================
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["ExitCode"]


class ExitCode(IntEnum):
    OK = 0
    CHECK_FAILED = 1
    COVERAGE_FAILED = 2
    UNEVALUABLE = 3
    NOTHING_SCORED = 4
    STOPPED = 5
