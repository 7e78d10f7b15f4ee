"""Fixtures the integration tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.control.conftest import fresh_pg_database


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """Each store in turn: None is the embedded SQLite, else a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield None
        return
    with fresh_pg_database() as url:
        yield url
