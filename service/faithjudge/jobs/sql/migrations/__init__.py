"""Alembic migrations of the job store, shipped inside the package and run on start-up."""
