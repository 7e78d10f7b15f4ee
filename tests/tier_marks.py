"""A pytest plugin for tests/test_tiers.py (`-p tests.tier_marks`): after collection, one line
per test saying whether it is marked slow, so one collection of everything shows both tiers."""

from __future__ import annotations

import pytest


def pytest_collection_finish(session: pytest.Session) -> None:
    for item in session.items:
        tier = "slow" if item.get_closest_marker("slow") is not None else "main"
        print(f"tier-mark {item.nodeid} {tier}")
