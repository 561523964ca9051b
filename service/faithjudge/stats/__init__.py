"""Statistics that the reports, judge validation and the audits share, below all three.

``bootstrap`` (Kendall's tau-b, seeded percentile bootstraps over items), ``resample`` (the
pattern-compressed bootstrap for report-sized runs) and ``judge_coverage`` (the statistics of
the coverage rates that ``faithjudge.scoring.outcomes`` defines: intervals, exact bounds,
placebo FPR and the eligibility gates, for judge validation and the run reports alike). Pure
functions of values already read: nothing here opens a file or reaches the pipeline. The
package itself imports nothing, so importing one module does not pay for the others.
"""
