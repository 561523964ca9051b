"""The judge a job was uploaded under.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("fj_batches") as table:
        table.add_column(sa.Column("judge", sa.Text()))
        table.add_column(sa.Column("judge_key", sa.String(64)))
        table.add_column(sa.Column("judge_config", sa.Text()))


def downgrade() -> None:
    with op.batch_alter_table("fj_batches") as table:
        table.drop_column("judge_config")
        table.drop_column("judge_key")
        table.drop_column("judge")
