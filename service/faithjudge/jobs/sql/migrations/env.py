"""Alembic environment: migrations run on a connection the job store hands over."""

from __future__ import annotations

from alembic import context

from faithjudge.jobs.sql.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - the store always passes its connection
    raise RuntimeError("run migrations through faithjudge.jobs.sql.store.SqlJobStore.migrate()")

context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
