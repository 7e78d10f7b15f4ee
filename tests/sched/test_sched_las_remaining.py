"""Time slicing by what a job's time limit leaves it (`time_slice_by="remaining"`, the `las`
default), and a starved attempt left to run (`starved_unsliced_s`).

Levels double from 1 GPU-hour to 512 (`TIME_SLICING_DEFAULTS`): an 8-GPU job with a 1-hour
limit has 8 GPU-hours left (level 4 of 10), one with a 7-day limit 1,344 (the last level).
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from sched_fakes import flat_queues, job, nodes, running, state

from railyard.sched import ClusterState, CycleCache, PreemptReason, Reason, SchedulerConfig, cycle
from railyard.sched.config import TIME_SLICING_DEFAULTS
from railyard.sched.model import Queue
from railyard.sched.policies.registry import PreemptContext, level_of, pending_level
from railyard.sched.quota import QuotaTree

# the starvation tests below were written for a 7-day limit (las's default before issue 56)
LAS = {
    "ordering": "las",
    "backfill": "none",
    "preemption": "las",
    "starvation_limit_s": 7 * 86_400.0,
}
ATTAINED = {"time_slice_by": "attained", "service_levels_gpu_s": (3600.0, 8 * 3600.0, 64 * 3600.0)}
HOUR, DAY = 3600.0, 86_400.0


def las(s: ClusterState, now_t_s: float, **knobs: object):
    return cycle(s, now_t_s, SchedulerConfig.of(**{**LAS, **knobs}))  # type: ignore[arg-type]


def test_the_default_ranks_by_remaining_and_the_knob_is_checked():
    assert TIME_SLICING_DEFAULTS["time_slice_by"] == "remaining"
    assert SchedulerConfig.of(**LAS).time_slice_by == "remaining"
    assert SchedulerConfig().time_slice_by == "attained"  # other policies: unchanged
    with pytest.raises(ValueError, match="time_slice_by must be one of attained, remaining"):
        SchedulerConfig(time_slice_by="shortest")
    with pytest.raises(ValueError, match="starved_unsliced_s"):
        SchedulerConfig(starved_unsliced_s=-1.0)


def _ctx(by: str, queues: list[Queue] | None = None) -> PreemptContext:
    tree = QuotaTree(queues or flat_queues({"a": 8}), ["H100"])
    levels = TIME_SLICING_DEFAULTS["service_levels_gpu_s"]  # 1, 2, 4 ... 512 GPU-hours
    return PreemptContext(tree, 0.0, service_levels_gpu_s=levels, time_slice_by=by)


@pytest.mark.parametrize(
    ("limit_s", "attained", "remaining", "served"),
    [
        (HOUR, 0.0, 4, 0),  # 8 GPUs x 1 h = 8 GPU-hours left: level 4 (8 <= x < 16)
        (HOUR, 3 * HOUR, 3, 2),  # what it ran is taken off: 5 left
        (HOUR, 20 * HOUR, 0, 5),  # ran past it in earlier attempts: nothing left, level 0
        (None, 0.0, 0, 0),  # no limit: cut on its service, as under `attained`
        (None, 20 * 3600.0, 5, 5),  # (it ranked last, after every job with one, before)
    ],
)
def test_the_level_of_a_job(limit_s: float | None, attained: float, remaining: int, served: int):
    j = job("j", gpus=8, walltime_s=limit_s)
    assert level_of(j, attained, _ctx("remaining")) == remaining
    assert level_of(j, attained, _ctx("attained")) == served


def test_the_shortest_limit_goes_first_and_no_limit_ranks_by_service():
    """One free node, three waiting gangs: of the two with limits, the one with a 1-hour
    limit starts though it came last; the one with no limit and no service is on level 0, as
    Tiresias ranks it (it went last before issue 56: on traces where no job has a limit,
    every job tied there and `las` ran FIFO). By attained service (all at zero) the first
    to arrive starts."""
    none = job("none", gpus=8, submit_t_s=0.0)
    week = job("week", gpus=8, submit_t_s=10.0, walltime_s=2 * DAY)  # 384 GPU-h: level 9
    hour = job("hour", gpus=8, submit_t_s=20.0, walltime_s=HOUR)
    s = state(nodes(1), flat_queues({"a": 8}), [none, week, hour])
    assert [x.job_id for x in las(s, 60.0).starts] == ["none"]
    assert [x.job_id for x in las(s, 60.0, **ATTAINED).starts] == ["none"]
    limited = replace(s, pending=(week, hour))
    assert [x.job_id for x in las(limited, 60.0).starts] == ["hour"]
    # served past the last threshold, the one without a limit goes after the week's job
    served = replace(s, pending=(replace(none, attained_gpu_s=600 * 3600.0), week))
    assert [x.job_id for x in las(served, 60.0).starts] == ["week"]


def _long_runs_short_waits() -> ClusterState:
    long = running(
        job("long", gpus=8, preemptible=True, walltime_s=7 * DAY), "n0:0-7", start_t_s=0.0
    )
    short = job("short", gpus=8, submit_t_s=650.0, walltime_s=HOUR, preemptible=True)
    return state(nodes(1), flat_queues({"a": 8}), [short], [long])


def test_a_short_job_slices_a_long_one_that_has_less_service():
    """`long` has run 700 s (1.6 GPU-hours) and has days left; `short` would be done within
    the hour. Both orders slice `long` for a `short` with no service; once `short` has 2
    GPU-hours from an earlier attempt, attained service puts both on one level (no slice)
    while remaining service still tells 6 GPU-hours from 1,342."""
    s = _long_runs_short_waits()
    got = las(s, 700.0)
    assert [(p.job_id, p.reason) for p in got.preemptions] == [("long", PreemptReason.TIME_SLICE)]
    served = replace(s, pending=(replace(s.pending[0], attained_gpu_s=2 * HOUR),))
    assert [p.job_id for p in las(served, 700.0).preemptions] == ["long"]
    assert las(served, 700.0, **ATTAINED).preemptions == ()


def test_the_swapped_jobs_do_not_slice_back():
    """Once `short` runs (a quantum in) and `long` waits, `long` has more left than `short`
    and may not take the node back: no ping-pong."""
    short = running(
        job("short", gpus=8, preemptible=True, walltime_s=HOUR), "n0:0-7", start_t_s=700.0
    )
    long = job("long", gpus=8, preemptible=True, walltime_s=7 * DAY, attained_gpu_s=8 * 700.0)
    s = state(nodes(1), flat_queues({"a": 8}), [long], [short])
    assert las(s, 700.0 + 900.0).preemptions == ()


def _starved_gang(ran_s: float) -> tuple[ClusterState, float]:
    """`gang` waited 8 days (past the 7-day starvation limit), then started and ran `ran_s`;
    a 1-hour job arrives."""
    start = 8 * DAY
    gang = running(
        job("gang", gpus=8, preemptible=True, walltime_s=7 * DAY, submit_t_s=0.0),
        "n0:0-7",
        start_t_s=start,
    )
    short = job("short", gpus=8, submit_t_s=start + ran_s - 60, walltime_s=HOUR)
    return state(nodes(1), flat_queues({"a": 8}), [short], [gang]), start + ran_s


@pytest.mark.parametrize("ran_s", [HOUR, 3 * DAY])
def test_a_job_that_started_starved_runs_to_its_end(ran_s: float):
    s, now = _starved_gang(ran_s)
    assert las(s, now).preemptions == ()
    # the round before: sliced minutes after it started, again and again
    assert [p.job_id for p in las(s, now, starved_unsliced_s=0.0).preemptions] == ["gang"]


def test_a_start_is_starved_by_its_wait_not_its_age():
    """The same gang with `--begin` at day 7 started after a day's wait: not a starved
    start, it is sliced as any other."""
    s, now = _starved_gang(HOUR)
    gang = s.running[0]
    begun = replace(s, running=(replace(gang, job=replace(gang.job, begin_t_s=7 * DAY)),))
    assert [p.job_id for p in las(begun, now).preemptions] == ["gang"]


def test_a_starved_start_may_be_sliced_after_its_window():
    s, now = _starved_gang(7 * HOUR)
    assert [p.job_id for p in las(s, now, starved_unsliced_s=6 * HOUR).preemptions] == ["gang"]
    s, now = _starved_gang(5 * HOUR)
    assert las(s, now, starved_unsliced_s=6 * HOUR).preemptions == ()


def test_a_job_that_started_young_is_sliced_as_ever():
    """The same gang started 6 days after submission (before it starved) and is now 8 days
    old: it is sliced like any other."""
    gang = running(
        job("gang", gpus=8, preemptible=True, walltime_s=7 * DAY, submit_t_s=0.0),
        "n0:0-7",
        start_t_s=6 * DAY,
    )
    short = job("short", gpus=8, submit_t_s=8 * DAY - 60, walltime_s=HOUR)
    s = state(nodes(1), flat_queues({"a": 8}), [short], [gang])
    assert [p.job_id for p in las(s, 8 * DAY).preemptions] == ["gang"]


def _starving_gang_waits(age_s: float, ones_submitted_t_s: float | None = None) -> ClusterState:
    """One node busy with eight 1-GPU jobs of an hour's limit (level 0) that started half an
    hour ago (past their quantum), submitted a minute before or at `ones_submitted_t_s`; an
    8-GPU gang with a 7-day limit (1,344 GPU-hours left: the last level) was submitted
    `age_s` ago."""
    now = 10 * DAY
    started = now - 1800.0
    submitted = started - 60.0 if ones_submitted_t_s is None else ones_submitted_t_s
    ones = [
        running(
            job(f"one{i}", walltime_s=HOUR, preemptible=True, submit_t_s=submitted),
            f"n0:{i}",
            start_t_s=started,
        )
        for i in range(8)
    ]
    gang = job("gang", gpus=8, walltime_s=7 * DAY, preemptible=True, submit_t_s=now - age_s)
    return state(nodes(1), flat_queues({"a": 8}), [gang], ones)


def test_a_starving_gang_slices_in_over_jobs_of_any_level():
    """Past the starvation limit (7 days) a gang on the last level slices the node free at
    once, instead of waiting for it to drain (days, for 8-GPU gangs among short jobs: their
    p99 JCT on the Gavel profile came to 1.07-1.08x fairshare+easy's). A day short of the
    limit it may not take jobs of a lower level, as ever."""
    now = 10 * DAY
    got = las(_starving_gang_waits(7 * DAY + HOUR), now)
    assert sorted(p.job_id for p in got.preemptions) == [f"one{i}" for i in range(8)]
    assert {p.reason for p in got.preemptions} == {PreemptReason.TIME_SLICE}
    assert las(_starving_gang_waits(6 * DAY), now).preemptions == ()
    # the rule before it (`las-r2` and `las-r3` in compare_policies.py): it waits
    assert las(_starving_gang_waits(7 * DAY + HOUR), now, starving_slices=False).preemptions == ()
    # a later limit: not starving yet
    assert (
        las(_starving_gang_waits(7 * DAY + HOUR), now, starvation_limit_s=8 * DAY).preemptions == ()
    )


def test_a_starving_gang_does_not_slice_starved_starts():
    """Jobs that started starved (submitted 8 days before they started) run to their end
    (`starved_unsliced_s`), and even once they may be sliced, a starving gang does not take
    them: starving too once waiting, they would take the node straight back. It waits."""
    s = _starving_gang_waits(7 * DAY + HOUR, ones_submitted_t_s=10 * DAY - 1800.0 - 8 * DAY)
    for knobs in ({}, {"starved_unsliced_s": 0.0}):
        got = las(s, 10 * DAY, **knobs)  # type: ignore[arg-type]
        assert got.preemptions == ()
        assert got.pending_reasons["gang"] == Reason.RESOURCES


def test_a_job_past_the_starvation_limit_is_not_sliced_by_one_that_is_not():
    """The gang started before it starved and is now 8 days old: a preemptible 1-hour job
    would slice it out, and the gang, starving, would slice straight back; so it does not.
    A job that may not be sliced back still slices it (`test_a_job_that_started_young_...`)."""
    gang = running(
        job("gang", gpus=8, preemptible=True, walltime_s=7 * DAY, submit_t_s=0.0),
        "n0:0-7",
        start_t_s=6 * DAY,
    )
    short = job("short", gpus=8, submit_t_s=8 * DAY - 60, walltime_s=HOUR, preemptible=True)
    s = state(nodes(1), flat_queues({"a": 8}), [short], [gang])
    assert las(s, 8 * DAY).preemptions == ()
    young = replace(s, pending=(replace(short, submit_t_s=6.5 * DAY - 60),))
    assert [p.job_id for p in las(young, 6.5 * DAY).preemptions] == ["gang"]


@pytest.mark.parametrize("kept", [False, True], ids=["fresh", "cached"])
def test_a_job_ages_from_its_begin_time_not_its_submission(kept: bool):
    """Submitted 8 days ago with `--begin` an hour ago (a released hold moves the begin time
    too), a week-long gang has waited an hour, not 8 days: it neither goes first as starving
    nor slices in. Aged from its submission it would do both. With and without the cache
    (which keeps `las`'s line sorted between cycles)."""
    now = 10 * DAY
    config = SchedulerConfig.of(**LAS)  # type: ignore[arg-type]

    def run(s: ClusterState):
        return cycle(s, now, config, CycleCache() if kept else None)

    week = job("week", gpus=8, walltime_s=7 * DAY, preemptible=True, submit_t_s=now - 8 * DAY)
    hour = job("hour", gpus=8, walltime_s=HOUR, submit_t_s=now - 2 * DAY)
    s = state(nodes(1), flat_queues({"a": 8}), [week, hour])
    assert [x.job_id for x in run(s).starts] == ["week"]  # starving: ahead of every level
    begun = replace(s, pending=(replace(week, begin_t_s=now - HOUR), hour))
    assert [x.job_id for x in run(begun).starts] == ["hour"]
    busy = _starving_gang_waits(7 * DAY + HOUR)
    assert len(run(busy).preemptions) == 8
    late = replace(busy, pending=(replace(busy.pending[0], begin_t_s=now - HOUR),))
    assert run(late).preemptions == ()


def test_a_job_without_a_limit_ranks_by_its_queues_default():
    """The limit a job runs under is its queue's DefaultTime when it gives none (Slurm's
    partition rule): ranked by that, it goes before a job of another queue that asked for
    two days, and slices in over a week-long runner as a job with that limit would."""
    queues = [
        replace(q, default_time_s=HOUR) if q.name == "a" else q
        for q in flat_queues({"a": 8, "b": 8})
    ]
    none = job("none", queue="a", gpus=8, submit_t_s=20.0)
    days = job("days", queue="b", gpus=8, submit_t_s=10.0, walltime_s=2 * DAY)
    s = state(nodes(1), queues, [none, days])
    assert [x.job_id for x in las(s, 60.0).starts] == ["none"]
    long = running(job("long", queue="b", gpus=8, preemptible=True, walltime_s=7 * DAY), "n0:0-7")
    sliced = state(nodes(1), queues, [none], [long])
    assert [p.job_id for p in las(sliced, 700.0).preemptions] == ["long"]
    # without the default it is cut on its service (none yet): first, and it slices
    bare = flat_queues({"a": 8, "b": 8})
    assert [x.job_id for x in las(replace(s, queues=tuple(bare)), 60.0).starts] == ["none"]
    assert [p.job_id for p in las(replace(sliced, queues=tuple(bare)), 700.0).preemptions] == [
        "long"
    ]


@pytest.mark.parametrize("by", ["attained", "remaining"])
def test_the_two_spellings_of_a_level_agree(by: str):
    """A pending job's level written out for the order (`pending_level`) and any job's
    (`level_of`) give the rule's answer, worked out here from scratch, for jobs with and
    without limits, in queues with and without defaults, served or not."""
    rng = random.Random(7)
    queues = [
        replace(q, default_time_s=HOUR if q.name == "a" else None, max_time_s=None)
        if q.parent
        else q
        for q in flat_queues({"a": 8, "b": 8})
    ]
    ctx = _ctx(by, queues)
    levels = ctx.service_levels_gpu_s
    order_level = pending_level(levels, by, ctx.quota.queues)
    for i in range(400):
        limit = rng.choice([None, 60.0, HOUR, 9 * HOUR, 3 * DAY, 40 * DAY])
        j = job(f"j{i}", queue=rng.choice("ab"), gpus=rng.choice([1, 2, 8]), walltime_s=limit)
        attained = rng.choice([0.0, 500.0, 7 * HOUR, 90 * HOUR, 900 * HOUR])
        j = replace(j, attained_gpu_s=attained)
        runs_under = limit if limit is not None else (HOUR if j.queue == "a" else None)
        if by == "attained":
            service = attained
        elif runs_under is None:
            service = attained  # no limit: cut on its service
        else:
            service = max(0.0, j.gpus * runs_under - attained)
        want = sum(1 for x in levels if x <= service)
        assert order_level(j) == want == level_of(j, attained, ctx), (j, attained)
