"""Batches and their lines.

Revision ID: 0001
Revises:
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_STAGES = ("parse", "schema", "evidence", "abstain", "transport", "kb", "input")
_STATUSES = ("valid", "abstained", "invalid")


def _counter(name: str) -> sa.Column[int]:
    return sa.Column(name, sa.SmallInteger(), nullable=False, server_default="0")


def upgrade() -> None:
    op.create_table(
        "fj_batches",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("tenant", sa.String(200), nullable=False),
        sa.Column("name", sa.String(200)),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("started_at", sa.Float()),
        sa.Column("finished_at", sa.Float()),
        sa.Column("total", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("rejected_count", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("rejections", sa.Text(), nullable=False, server_default="[]"),
        sa.Column("idempotency_key", sa.String(200)),
        sa.Column("body_sha256", sa.String(64)),
        sa.Column("detail", sa.Text()),
        sa.UniqueConstraint("tenant", "idempotency_key", name="uq_fj_batches_idempotency"),
    )
    op.create_index("ix_fj_batches_tenant_created", "fj_batches", ["tenant", "created_at", "id"])
    op.create_index("ix_fj_batches_status", "fj_batches", ["status"])
    op.create_table(
        "fj_batch_lines",
        sa.Column(
            "batch_id",
            sa.String(40),
            sa.ForeignKey("fj_batches.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("seq", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("line", sa.Integer(), nullable=False),
        sa.Column("request", sa.Text(), nullable=False),
        sa.Column("state", sa.SmallInteger(), nullable=False, server_default="0"),
        sa.Column("owner", sa.String(64)),
        sa.Column("lease_until", sa.Float()),
        sa.Column("result", sa.Text()),
        sa.Column("done_at", sa.Float()),
        _counter("is_error"),
        *(_counter(f"n_{status}") for status in _STATUSES),
        *(_counter(f"stage_{stage}") for stage in _STAGES),
    )
    op.create_index("ix_fj_batch_lines_todo", "fj_batch_lines", ["batch_id", "state", "seq"])
    op.create_index("ix_fj_batch_lines_owner", "fj_batch_lines", ["owner", "state"])


def downgrade() -> None:
    op.drop_table("fj_batch_lines")
    op.drop_table("fj_batches")
