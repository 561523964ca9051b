"""Judge answers in the job store, where every replica reads them.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "fj_judge_answers",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("batch_id", sa.String(40), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("model", sa.Text()),
        sa.Column("fingerprint", sa.Text()),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("completion_tokens", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("finish_reason", sa.Text()),
        sa.Column("response_format", sa.Text()),
        sa.Column("created_at", sa.Float(), nullable=False),
    )
    op.create_index("ix_fj_judge_answers_line", "fj_judge_answers", ["batch_id", "seq"])


def downgrade() -> None:
    op.drop_index("ix_fj_judge_answers_line", table_name="fj_judge_answers")
    op.drop_table("fj_judge_answers")
