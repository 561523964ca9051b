"""The judge transport: how one request reaches a model endpoint and its raw answer comes back.

``base`` (the call target protocol and the raw response), ``resilience`` (concurrency limit,
retries with backoff, in-flight dedupe), ``cache`` (content-addressed response cache) and
``providers`` (SDK client factories, the one place that reads credentials). The package sits
below the pipeline: it imports nothing of FaithJudge but ``faithjudge.errors``, and it is generic
over the requests it carries, so the judges and the sidecar both run on it.
"""
