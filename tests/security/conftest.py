"""The security suite: a root `railyard up` shared by two fresh Unix accounts, alice and bob,
and attacks made from bob's own account (his shell, his jobs, his token). Each module says
which promise of the trust boundary it tests (docs/architecture.md, "The trust boundary")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.tenants import Site, shared_site


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """One root server and its two tenants for the whole test module."""
    state: Path = tmp_path_factory.mktemp("state")
    with shared_site(state) as made:
        yield made
