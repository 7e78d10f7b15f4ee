"""Shared helpers: tiny blueprints written inline, so each test states its cluster as data."""

from __future__ import annotations

import compileall
import fcntl
import os
import tempfile
import textwrap
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from railyard.blueprint import Blueprint, load_text
from tests import parts


def blueprint(
    *,
    nodes: int,
    design: str,
    tiers: list[str],
    gpus: int = 8,
    nics: int = 8,
    nic_gbit_s: int = 400,
    su_gpus: int | None = None,
    oversubscription: float = 1.0,
) -> Blueprint:
    """A one-group blueprint of ``nodes`` identical GPU servers on the given fabric."""
    tier_lines = "\n".join(
        f"    - {{switch: {t}, oversubscription: {oversubscription}}}" for t in tiers
    )
    su = f"  scalable_unit_gpus: {su_gpus}\n" if su_gpus else ""
    text = textwrap.dedent(
        f"""\
        name: test
        node_types:
          box:
            gpu: H100-SXM-80GB
            gpus: {gpus}
            nvlink_domain_gpus: {gpus}
            nics: {{count: {nics}, speed_gbit_s: {nic_gbit_s}}}
            power_w: 10000
        node_groups:
          n: {{node_type: box, count: {nodes}, hostname_prefix: n}}
        """
    )
    text += f"fabric:\n  design: {design}\n{su}  tiers:\n{tier_lines}\n"
    return load_text(text, file="test.yaml").blueprint


@pytest.fixture
def make_blueprint() -> object:
    return blueprint


def pytest_sessionstart(session: pytest.Session) -> None:
    """Byte-compile railyard once, before any worker starts: the suite starts hundreds of
    Python processes (servers, CLI commands, job wrappers), and where the host sets
    PYTHONDONTWRITEBYTECODE none of them writes its .pyc, so each compiled railyard's ~280
    modules from source again (0.4 s of a server's 2.4 s start-up CPU). Reading a .pyc is
    allowed either way; an edited module is recompiled here at the next run."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:  # the controller, or a run without xdist
        src = Path(__file__).resolve().parents[1] / "src" / "railyard"
        if src.is_dir():
            compileall.compile_dir(src, quiet=1)


@pytest.hookimpl(tryfirst=True)  # before the test's fixtures are set up
def pytest_runtest_setup(item: pytest.Item) -> None:
    """``@needs(...)`` (tests/parts.py): skip, saying why, where a part is absent."""
    for marker in item.iter_markers("needs"):
        parts.require(*marker.args)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The PostgreSQL copy of a test is in the extended tier, unless its module is marked
    ``stores`` (it tests what the store does: locks, compare-and-set, migrations, types):
    store-agnostic behaviour runs on SQLite in the main tier."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is None or "postgresql" not in callspec.params.values():
            continue
        if item.get_closest_marker("stores") is None:
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(trylast=True, specname="pytest_collection_modifyitems")  # after `-m`
def pytest_collection_modifyitems_long_first(items: list[pytest.Item]) -> None:
    """The order pytest-xdist hands modules to its workers (`--dist loadfile` with
    `--no-loadscope-reorder`, pyproject): modules marked ``long`` (a few tests that run for
    long: real servers, Ray clusters, torch in child processes) first, then the rest, most
    tests first. xdist alone orders by test count only, so a long module of three tests was
    handed out last and ran for a minute on one worker while the other sat idle. Modules
    marked ``exclusive`` go last: one runs alone, so early on it idled the other worker
    (100 s behind the Ray sweep), while at the end that worker has little left to do."""

    def module(item: pytest.Item) -> str:
        return item.nodeid.split("::")[0]

    counts = Counter(module(item) for item in items)
    long_modules = {module(item) for item in items if item.get_closest_marker("long")}
    alone = {module(item) for item in items if item.get_closest_marker("exclusive")}
    heavy = sorted({module(item) for item in items if item.get_closest_marker("heavy")})
    others = sorted(long_modules - set(heavy), key=lambda name: (-counts[name], name))
    # Heavy modules (one at a time: `_one_heavy`) take turns with the other long ones,
    # so xdist's first hand-out (units 1 and 3 to one worker, 2 and 4 to the other) gives
    # two to one worker in a row, not one to each at once, where one would wait on the lock.
    turn = {name: 2 * index for index, name in enumerate(heavy)}
    turn |= {name: 2 * index + 1 for index, name in enumerate(others)}
    items.sort(
        key=lambda item: (
            module(item) in alone,
            module(item) not in long_modules,
            turn.get(module(item), 0),
            -counts[module(item)],
        )
    )


@pytest.fixture(autouse=True)
def _machine_share(request: pytest.FixtureRequest) -> Iterator[None]:
    """Under pytest-xdist, a test marked ``exclusive`` (it judges this machine's speed: health
    checks against a baseline, a node slowed on purpose) runs alone: the other worker finishes
    its test and waits. Every other test shares the machine. A reader-writer lock on files
    (flock), with a turnstile so an exclusive test is not starved by back-to-back shared ones."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run is None:  # one process: nothing runs beside the test
        yield
        return
    base = os.path.join(tempfile.gettempdir(), f"railyard-tests-{run}")
    exclusive = request.node.get_closest_marker("exclusive") is not None
    with open(f"{base}.turnstile", "a") as turnstile, open(f"{base}.lock", "a") as lock:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            if not exclusive:
                fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            if exclusive:
                fcntl.flock(turnstile, fcntl.LOCK_UN)


@pytest.fixture(scope="module", autouse=True)  # autouse: before the module's own fixtures
def _one_heavy(request: pytest.FixtureRequest) -> Iterator[None]:
    """Under pytest-xdist, a module marked ``heavy`` (it starts many processes of its own: a
    Ray cluster, torch.distributed workers) holds this machine's one heavy slot from before
    its first fixture to after its last. Ray waits a hard-coded 30 s for a new raylet to
    register with its GCS: two clusters starting on a loaded 2-core machine missed it ("timed
    out during startup") in CI, and a two-worker DDP job beside a Ray cluster missed its
    120 s. Mark the module, not a test: the slot must be taken before any fixture."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run is None or request.node.get_closest_marker("heavy") is None:
        yield
        return
    path = os.path.join(tempfile.gettempdir(), f"railyard-tests-{run}.heavy")
    with open(path, "a") as slot:
        fcntl.flock(slot, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(slot, fcntl.LOCK_UN)
