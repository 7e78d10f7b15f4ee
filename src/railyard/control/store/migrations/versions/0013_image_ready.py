"""container images in the scheduler: jobs.image (what placement prefers nodes for),
jobs.run_t_s (when its image was ready: its time limit runs from then) and nodes.images
(the images a node holds)

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("image", sa.String(1024), nullable=True))
    op.add_column("jobs", sa.Column("run_t_s", sa.Float(), nullable=True))
    op.add_column("nodes", sa.Column("images", sa.JSON(), nullable=True))
    # Jobs stored before keep image NULL: as before, no preference and no pull phase.


def downgrade() -> None:
    op.drop_column("nodes", "images")
    op.drop_column("jobs", "run_t_s")
    op.drop_column("jobs", "image")
