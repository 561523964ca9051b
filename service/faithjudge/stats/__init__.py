"""Statistics that the reports, judge validation and the audits share, below all three.

``bootstrap`` (Kendall's tau-b, seeded percentile bootstraps over items), ``resample`` (the
pattern-compressed bootstrap for report-sized runs) and ``judge_coverage`` (the coverage rates
of the one outcome definition, exact bounds, placebo FPR and the eligibility gates). Pure
functions of values already read: nothing here opens a file or reaches the pipeline. The
package itself imports nothing, so importing one module does not pay for the others.
"""
