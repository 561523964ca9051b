"""Every rejected line of an upload in a table of its own, not in the batch row.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "fj_batch_rejections",
        sa.Column(
            "batch_id",
            sa.String(40),
            sa.ForeignKey("fj_batches.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("line", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("rejection", sa.Text(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("fj_batch_rejections")
