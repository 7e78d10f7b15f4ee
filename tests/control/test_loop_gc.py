"""The loop's process and the garbage collector (`control/loop/service.py` ``freeze_heap``):
a step over thousands of pending jobs holds many objects for a moment (the rows it reads,
the cycle's decisions), and with CPython's default young threshold those set off full
collections, tens of milliseconds each, every few steps (benchmarks/bench_live.py); after
``freeze_heap`` they must set off none."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from loop_helpers import Cluster, stop_all

from railyard.control.loop.service import freeze_heap

STEPS_AT_DEFAULTS = 40


@pytest.fixture
def collections() -> Iterator[list[int]]:
    """The generations of the collections that ran; the collector restored afterwards."""
    threshold = gc.get_threshold()
    ran: list[int] = []

    def note(phase: str, info: dict[str, Any]) -> None:
        if phase == "stop":
            ran.append(info["generation"])

    gc.callbacks.append(note)
    try:
        yield ran
    finally:
        gc.callbacks.remove(note)
        gc.set_threshold(*threshold)
        gc.unfreeze()


def test_loop_steps_over_thousands_of_pending_jobs_move_nothing_to_the_old_generation(
    tmp_path: Path, collections: list[int]
) -> None:
    """A middle-generation pass moves what survives it to the old generation, and that is
    what sets off full passes: at CPython's default thresholds 40 steps run some (3 here;
    since a step reads only the rows that changed it allocates far less, and 15 steps no
    longer ran the 5 or more they did); after ``freeze_heap`` none, nor a full pass."""
    cluster = Cluster(tmp_path)
    cluster.submit(command=["true"], gpus=1, array="0-3999", hold=True)
    cluster.submit(command=["true"], gpus=1, array="0-999")  # pending for GPUs, with reasons
    try:
        at_defaults, after = _collections_in_steps(cluster, collections)
    finally:
        stop_all(cluster.loop)
    assert at_defaults >= 1
    assert after == [], after


def _collections_in_steps(cluster: Cluster, collections: list[int]) -> tuple[int, list[int]]:
    """Middle and old collections in 40 steps at the defaults; those after ``freeze_heap``."""
    cluster.loop.step()  # the first read: every row converted
    gc.set_threshold(700, 10, 10)  # CPython's defaults
    collections.clear()
    for _ in range(STEPS_AT_DEFAULTS):
        cluster.loop.step()
    at_defaults = collections.count(1) + collections.count(2)
    freeze_heap()
    collections.clear()
    for _ in range(15):
        cluster.loop.step()
    return at_defaults, [g for g in collections if g > 0]
