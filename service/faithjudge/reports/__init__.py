"""Reports of scored runs: aggregates, coverage, comparisons, renderers and the CI gate.

Everything here is a pure function of result lines (via the item table of ``table``); only
``io`` and ``export`` touch files. The package itself imports nothing, so a command line that
only needs ``limits`` does not pay for pandas and scipy.
"""
