"""Judge tokens per job line, and the prompt-cache part of the tokens answers and parts record.

A job's status sums its lines' tokens; lines scored before this revision count 0.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_LINE_TOKENS = ("prompt_tokens", "completion_tokens", "cached_tokens")


def upgrade() -> None:
    with op.batch_alter_table("fj_batch_lines") as table:
        for name in _LINE_TOKENS:
            table.add_column(sa.Column(name, sa.Integer(), nullable=False, server_default="0"))
    with op.batch_alter_table("fj_provider_parts") as table:
        table.add_column(
            sa.Column("cached_tokens", sa.BigInteger(), nullable=False, server_default="0")
        )
    with op.batch_alter_table("fj_judge_answers") as table:
        table.add_column(
            sa.Column("cached_tokens", sa.Integer(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    with op.batch_alter_table("fj_judge_answers") as table:
        table.drop_column("cached_tokens")
    with op.batch_alter_table("fj_provider_parts") as table:
        table.drop_column("cached_tokens")
    with op.batch_alter_table("fj_batch_lines") as table:
        for name in reversed(_LINE_TOKENS):
            table.drop_column(name)
