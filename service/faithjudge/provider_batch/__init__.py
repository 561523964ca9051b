"""The provider Batch API route (``openai-batch:MODEL``): judge calls sent as batches, at half
the price, and their answers read back as if the live backend had given them.

``wire`` (a request line out, an output or error line back), ``ledger`` (the contract a run
records its parts, batches and requests in, and the per-file limits), ``file_ledger`` (the
CLI's ledger: SQLite and part files in the data dir), ``runner`` (``BatchRunner``: upload,
submit, poll, collect, follow-ups, cancel), ``judge`` (the ``openai-batch`` backend, which
only reads what a batch phase recorded), ``collect`` (the judge requests of an input as Batch
API lines), ``route`` (a scorer's runner for a ledger), ``file_route`` (a file scored through
the Batch API) and ``request_files`` (request lines exported for an engine of the user's own,
its answers imported). A service job's phase is the jobs domain's use of the route
(``faithjudge.jobs.provider_phase``). The package imports nothing at import time, so the job
store's contract can take the ledger's types from it cheaply.
"""
