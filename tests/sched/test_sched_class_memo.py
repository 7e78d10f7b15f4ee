"""Victim classes kept between cycles: a class is reused only before the time its policy says
it may change, so at every instant it equals the class judged afresh (time slicing's classes
move with the quantum, a starved start's unsliced run and each level crossed)."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest
from sched_fakes import flat_queues, job, running

from railyard.sched import StopCause
from railyard.sched.cache import ClassMemo
from railyard.sched.classes import group_victims, signals_of
from railyard.sched.policies import PREEMPTION
from railyard.sched.policies.las import CLASS_MARGIN_S, _class_until
from railyard.sched.policies.registry import PreemptContext
from railyard.sched.quota import QuotaTree

LEVELS = (3600.0, 7200.0, 14_400.0, 28_800.0)


def _context(
    by: str,
    now_t_s: float,
    unsliced_s: float,
    after_s: float = math.inf,
    restarts: float = math.inf,
) -> PreemptContext:
    queues = [replace(q, default_time_s=7200.0) if q.name == "a" else q
              for q in flat_queues({"a": 64, "b": 64})]  # fmt: skip
    return PreemptContext(QuotaTree(queues, {"H100-SXM-80GB"}), now_t_s, None, LEVELS, 300.0,
                          by, 1000.0, unsliced_s, unsliced_after_s=after_s,
                          unsliced_after_restarts=restarts)  # fmt: skip


def _jobs(rng: random.Random) -> list:
    out = []
    for i in range(40):
        gpus = rng.choice([0, 1, 2, 8])
        j = job(f"j{i}", rng.choice("ab"), gpus, preemptible=rng.random() < 0.8,
                walltime_s=rng.choice([None, 1800.0, 9000.0]),
                attained_gpu_s=rng.choice([0.0, 3000.0, 7200.0]),
                submit_t_s=rng.choice([0.0, 900.0]),
                restart_count=rng.choice([0, 1, 2, 3]))  # fmt: skip
        where = f"n0:0-{gpus - 1}" if gpus else "n0:"
        out.append(running(j, where if gpus else "", start_t_s=rng.choice([1000.0, 2000.0])))
    return out


def _times(rng: random.Random, runs: list, unsliced_s: float, after_s: float) -> list[float]:
    """Random instants and every boundary a class can cross, with points just around it."""
    marks = {r.start_t_s + 300.0 for r in runs} | {r.start_t_s + unsliced_s for r in runs}
    marks |= {r.start_t_s + after_s - r.job.attained_gpu_s / r.gpus for r in runs if r.gpus}
    for r in runs:
        for level in LEVELS:
            if r.gpus:
                served = level - r.job.attained_gpu_s
                marks.add(r.start_t_s + served / r.gpus)
                whole = r.job.gpus * (r.job.walltime_s or 7200.0)
                marks.add(r.start_t_s + (whole - level - r.job.attained_gpu_s) / r.gpus)
    times = {m + d for m in marks if math.isfinite(m) for d in (-1e-4, 0.0, 1e-4, 0.002)}
    times |= {rng.uniform(1000.0, 40_000.0) for _ in range(200)}
    return sorted(t for t in times if t >= 1000.0)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("by", ["attained", "remaining"])
@pytest.mark.parametrize("unsliced_s", [0.0, 3600.0, math.inf])
@pytest.mark.parametrize("after_s", [math.inf, 4000.0])  # `unsliced_after_s`
def test_a_kept_class_is_the_class_judged_afresh(seed, by, unsliced_s, after_s):
    rng = random.Random(seed)
    policy = PREEMPTION.get("las")
    runs = _jobs(rng)
    kept: dict[str, tuple[object, float]] = {}
    reused = 0
    for t_s in _times(rng, runs, unsliced_s, after_s):
        ctx = _context(by, t_s, unsliced_s, after_s)
        for r in runs:
            hit = kept.get(r.id)
            if hit is not None and t_s < hit[1]:
                cls, reused = hit[0], reused + 1
            else:
                cls, until_t_s = policy.victim_class_until(r, ctx)
                kept[r.id] = (cls, until_t_s)
            assert cls == policy.victim_class(r, ctx), (r.id, t_s)
    assert reused > len(runs)  # the memo did serve, not only recompute


def _shape(groups) -> dict:
    """What a pass reads of `group_victims`' answer: per flavor, classes in order, each
    with its members in order, their ids and how many sizes."""
    return {
        flavor: [(cls, [r.id for r in g.members], g.ids, g.sizes) for cls, g in classes.items()]
        for flavor, classes in groups.items()
    }


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("name", ["las", "on"])
@pytest.mark.parametrize("after_s", [math.inf, 4000.0])  # `unsliced_after_s`
def test_groups_kept_between_cycles_equal_groups_made_afresh(seed, name, after_s):
    """Jobs start, end, get a new object (a checkpoint, a stop asked), pass their minimum run
    time and cross their classes' boundaries as the clock moves; a node's requeue signals a
    job not asked to stop: the groups kept and moved equal those made from nothing."""
    rng = random.Random(seed)
    policy = PREEMPTION.get(name)
    runs = {r.id: r for r in _jobs(rng)}
    memo = ClassMemo()
    serial, t_s, moved = 100, 1000.0, 0
    for _ in range(120):
        t_s += rng.choice([0.5, 30.0, 300.0, 2000.0])
        for r in list(runs.values()):
            roll = rng.random()
            if roll < 0.05:
                del runs[r.id]
            elif roll < 0.1:
                runs[r.id] = replace(r, last_checkpoint_t_s=t_s)
            elif roll < 0.12:
                runs[r.id] = replace(r, stop_cause=StopCause.PREEMPTED)
        for _ in range(rng.randrange(3)):
            serial += 1
            gpus = rng.choice([1, 2, 8])
            j = job(f"j{serial}", rng.choice("ab"), gpus, preemptible=rng.random() < 0.8,
                    min_runtime_s=rng.choice([0.0, 600.0]),
                    attained_gpu_s=rng.choice([0.0, 3000.0]))  # fmt: skip
            runs[j.id] = running(j, f"n0:0-{gpus - 1}", start_t_s=t_s - rng.choice([0.0, 700.0]))
        ordered = sorted(runs.values(), key=lambda r: r.id)
        signalled = {r.id for r in ordered if r.stop_cause is not None}
        if rng.random() < 0.1 and ordered:
            signalled.add(rng.choice(ordered).id)  # a requeue: grouped afresh
        ctx = _context("attained", t_s, 3600.0, after_s)
        kept = group_victims(ordered, signalled, policy, ctx, memo)
        fresh = group_victims(ordered, signalled, policy, ctx)
        assert _shape(kept) == _shape(fresh), t_s
        moved += bool(kept)
    assert moved > 60


@pytest.mark.parametrize("seed", range(6))
def test_groups_made_at_a_start_split_a_class_by_flavor_as_made_afresh(seed):
    """A start groups every job at once (`KeptGroups._admit_all`), skipping the split by
    flavor where all the jobs judged share one: with jobs of two flavors in one class, the
    first job of either flavor (or a stopped one), the groups equal those made afresh."""
    rng = random.Random(seed)
    policy = PREEMPTION.get("las")
    runs = []
    for i, r in enumerate(_jobs(rng)):
        flavor = "A100-SXM-80GB" if rng.random() < 0.3 else r.job.flavor
        runs.append(replace(r, job=replace(r.job, flavor=flavor)))
        if i == 0 and seed % 2:
            runs[0] = replace(runs[0], stop_cause=StopCause.PREEMPTED)
    ordered = sorted(runs, key=lambda r: r.id)
    signalled = {r.id for r in ordered if r.stop_cause is not None}
    ctx = _context("attained", 5000.0, 3600.0)
    kept = group_victims(ordered, signalled, policy, ctx, ClassMemo())
    fresh = group_victims(ordered, signalled, policy, ctx)
    assert len(fresh) == 2  # both flavors have victims
    assert _shape(kept) == _shape(fresh)


class _UpAtOnce:
    """Time slicing whose every class is up the moment it is judged (a boundary within the
    margin of now): a kept group must judge it again each cycle, once."""

    name = "las"

    def __init__(self) -> None:
        self.inner = PREEMPTION.get("las")
        self.judged = 0

    def victim_class(self, r, ctx):
        return self.inner.victim_class(r, ctx)

    def victim_class_until(self, r, ctx):
        self.judged += 1
        return self.inner.victim_class(r, ctx), ctx.now_t_s


def test_a_class_up_when_judged_is_judged_again_once_a_cycle():
    rng = random.Random(5)
    runs = sorted(_jobs(rng), key=lambda r: r.id)
    policy, memo = _UpAtOnce(), ClassMemo()
    for t_s in (5000.0, 5000.0, 6000.0):
        ctx = _context("attained", t_s, 3600.0)
        policy.judged = 0
        kept = group_victims(runs, set(), policy, ctx, memo)  # type: ignore[arg-type]
        assert _shape(kept) == _shape(group_victims(runs, set(), policy, ctx))  # type: ignore[arg-type]
        assert 0 < policy.judged <= 2 * len(runs)  # once kept, once afresh: no loop


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("by", ["attained", "remaining"])
@pytest.mark.parametrize("ratio", [None, 0.5, 2.0])  # `promotion_wait_ratio`
@pytest.mark.parametrize("after_s", [math.inf, 4000.0])  # `unsliced_after_s`
@pytest.mark.parametrize("restarts", [math.inf, 2])  # `unsliced_after_restarts`
def test_class_and_until_in_one_pass_equal_the_two_asked_apart(seed, by, ratio, after_s, restarts):
    """`victim_class_until` reads each job once (73,500 on a start): its class and time are
    exactly `victim_class`'s and `_class_until`'s less the margin, to the last bit; so are
    `victim_classes_until`'s, one loop over all."""
    rng = random.Random(seed)
    policy = PREEMPTION.get("las")
    runs = _jobs(rng)
    for unsliced_s in (0.0, 3600.0, math.inf):
        for t_s in _times(rng, runs, unsliced_s, after_s)[::7]:
            ctx = replace(
                _context(by, t_s, unsliced_s, after_s, restarts), promotion_wait_ratio=ratio
            )
            for r in runs:
                apart = (policy.victim_class(r, ctx), _class_until(r, ctx) - CLASS_MARGIN_S)
                assert policy.victim_class_until(r, ctx) == apart, (r.id, t_s)
            # and all at once (a start's grouping): the same, job by job
            classes, untils = policy.victim_classes_until(runs, ctx)
            assert list(zip(classes, untils, strict=True)) == [
                policy.victim_class_until(r, ctx) for r in runs
            ], t_s


def test_signals_kept_for_the_same_tuple_equal_the_walk_and_move_with_a_new_one():
    """`ClassMemo.signals` keeps a pass's walk over the running jobs (who was asked to stop,
    who stops for whom, who backfilled) while they are the same tuple; a new tuple, or a
    list (it may change in place), is walked again."""
    rng = random.Random(2)
    runs = []
    for r in _jobs(rng):
        roll = rng.random()
        if roll < 0.2:
            r = replace(r, preempt_for=f"p-{r.id}")
        elif roll < 0.3:
            r = replace(r, stop_cause=StopCause.CANCELLED)
        runs.append(replace(r, backfilled=rng.random() < 0.3))
    memo = ClassMemo()
    given = tuple(runs)
    stopping, asked, backfilled = memo.signals(given)
    assert stopping == [r.id for r in runs if r.stop_cause is not None]
    assert asked == [r for r in runs if r.preempt_for is not None]
    assert backfilled == [r for r in runs if r.backfilled and r.job.preemptible]
    assert all((stopping, asked, backfilled))
    assert memo.signals(given) == signals_of(given)
    listed = list(runs)
    memo.signals(listed)
    listed[0] = replace(listed[0], stop_cause=StopCause.PREEMPTED)
    assert memo.signals(listed) == signals_of(listed)
    fewer = given[1:]
    assert memo.signals(fewer) == signals_of(fewer)
