"""The provider Batch API phase of a job: its lease, its parts and its requests.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def _job() -> sa.Column[str]:
    return sa.Column(
        "batch_id",
        sa.String(40),
        sa.ForeignKey("fj_batches.id", ondelete="CASCADE"),
        nullable=False,
    )


def upgrade() -> None:
    with op.batch_alter_table("fj_batches") as table:
        table.add_column(sa.Column("provider_done_at", sa.Float()))
        table.add_column(sa.Column("provider_owner", sa.String(64)))
        table.add_column(sa.Column("provider_lease_until", sa.Float()))
    op.create_table(
        "fj_provider_parts",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        _job(),
        sa.Column("lines", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("bytes", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("sealed", sa.SmallInteger(), nullable=False, server_default="0"),
        sa.Column("file_id", sa.String(200)),
        sa.Column("provider_batch_id", sa.String(200)),
        sa.Column("state", sa.String(16), nullable=False, server_default="staged"),
        sa.Column("done", sa.SmallInteger(), nullable=False, server_default="0"),
        sa.Column("completed", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("failed", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("prompt_tokens", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("completion_tokens", sa.BigInteger(), nullable=False, server_default="0"),
    )
    op.create_index("ix_fj_provider_parts_job", "fj_provider_parts", ["batch_id", "done"])
    op.create_table(
        "fj_provider_requests",
        _job(),
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("part", sa.Integer()),
        sa.Column("tries", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("status", sa.Integer()),
        sa.Column("error", sa.Text()),
        sa.Column("seq", sa.Integer()),
        sa.Column("answer", sa.Text()),
        sa.PrimaryKeyConstraint("batch_id", "key"),
    )
    op.create_index("ix_fj_provider_requests_key", "fj_provider_requests", ["key", "state"])
    op.create_index(
        "ix_fj_provider_requests_part", "fj_provider_requests", ["batch_id", "part", "state"]
    )


def downgrade() -> None:
    op.drop_table("fj_provider_requests")
    op.drop_table("fj_provider_parts")
    with op.batch_alter_table("fj_batches") as table:
        table.drop_column("provider_lease_until")
        table.drop_column("provider_owner")
        table.drop_column("provider_done_at")
