"""Durable batch jobs: the job store (SQLAlchemy; SQLite or PostgreSQL) and the worker."""
