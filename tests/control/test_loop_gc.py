"""The loop's process and the garbage collector (`control/loop/service.py` ``freeze_heap``):
a step over thousands of pending jobs holds many objects for a moment (the rows it reads,
the cycle's decisions), and with CPython's default young threshold those set off full
collections, tens of milliseconds each, every few steps (benchmarks/bench_live.py); after
``freeze_heap`` they must set off none."""

from __future__ import annotations

import gc
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from loop_helpers import Cluster, stop_all

import railyard.control.loop.service as service
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


class _Node:
    """One half of a reference cycle: garbage only the cyclic collector frees."""

    def __init__(self) -> None:
        self.other: _Node | None = None


def test_the_running_loop_frees_cycles_between_steps(
    tmp_path: Path, collections: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the heap frozen and young passes every 50,000 allocations, a full pass came so
    seldom that the cycles each request and step leave behind piled up (issue 55: the server
    grew 67 MiB/h in a steady soak). The running loop runs one between steps now and then
    (``FULL_COLLECT_EVERY_S``, shortened here): a cycle dropped while it runs is freed."""
    monkeypatch.setattr(service, "FULL_COLLECT_EVERY_S", 0.05, raising=False)
    cluster = Cluster(tmp_path)
    stop = threading.Event()
    runner = threading.Thread(target=cluster.loop.run, args=(stop,), daemon=True)
    # An earlier loop in this process may have left the young threshold raised: reset it, so
    # that seeing it raised again means this run() has frozen the heap (a cycle made before
    # its freeze would be frozen with the heap, and never freed).
    gc.set_threshold(700, *gc.get_threshold()[1:])
    runner.start()
    try:
        while gc.get_threshold()[0] != service.YOUNG_GC_THRESHOLD:  # frozen by run()
            time.sleep(0.01)
        first, second = _Node(), _Node()
        first.other, second.other = second, first
        gone = weakref.ref(first)
        del first, second
        deadline = time.monotonic() + 30
        while gone() is not None:
            assert time.monotonic() < deadline, "a dropped cycle was never freed"
            time.sleep(0.05)
        assert 2 in collections
    finally:
        stop.set()
        runner.join(timeout=30)
