"""The SQL job store: ``SqlJobStore`` on SQLite (embedded) or PostgreSQL (shared by replicas).

``store.py`` implements ``faithjudge.jobs.interface.JobStore``, ``ledger.py`` a job's Batch API
ledger (``ProviderLedger``), ``schema.py`` the tables, ``migrations/`` their Alembic history and
``errors.py`` the one place a SQLAlchemy failure becomes ``StoreUnavailable``. Nothing outside
this package imports SQLAlchemy for the job store: ``interface.py`` names ``SqlJobStore`` by a
lazy reference, so the domain (ingest, worker, results, status) loads without it.
"""
