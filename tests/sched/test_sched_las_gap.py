"""Time slicing's `slice_level_gap` (issue 56): a job slices only running jobs at least that
many service levels above its own. With 1 (Tiresias' rule) a newcomer slices a job one level
up, which is then a level or two from it once it has run, so the same jobs were sliced again
and again; gangs that had waited days for a whole node were sliced minutes after coming back.
On Gavel's Philly VCs a gap of 3 cut `las`'s worst p99 JCT from 1.70x to 1.50x
fairshare+easy's (docs/explanation/scheduler.md)."""

from __future__ import annotations

import pytest
from sched_fakes import flat_queues, job, nodes, running, schedule, state

from railyard.sched import ClusterState, PreemptReason, Reason, SchedulerConfig
from railyard.sched.config import TIME_SLICING_DEFAULTS

HOUR = 3600.0
LEVELS = tuple(HOUR * 2**i for i in range(10))  # 1, 2, 4 ... 512 GPU-hours
LAS = {
    "ordering": "las",
    "preemption": "las",
    "time_slice_by": "attained",
    "service_levels_gpu_s": LEVELS,
}


def one_node(victim_level: int, newcomer_level: int) -> tuple[ClusterState, float]:
    """`old` (8 GPUs) runs on the only node, on `victim_level`; `new` (8 GPUs) waits on
    `newcomer_level` (level k: service between thresholds k-1 and k)."""
    now_t_s = 1000 * HOUR

    def served(level: int) -> float:  # in the middle of the level (level 0: none)
        return 0.0 if level == 0 else 1.5 * LEVELS[level - 1]

    old = job("old", gpus=8, preemptible=True, attained_gpu_s=served(victim_level))
    run = running(old, "n0:0-7", start_t_s=now_t_s - 0.5 * HOUR)  # 4 GPU-h more
    new = job("new", gpus=8, attained_gpu_s=served(newcomer_level), submit_t_s=now_t_s - 60.0)
    return state(nodes(1), flat_queues({"a": 8}), [new], [run]), now_t_s


@pytest.mark.parametrize(
    ("newcomer_level", "sliced_at_gap_3"),
    [(0, True), (2, True), (3, False), (4, False)],
)
def test_a_job_slices_only_jobs_the_gap_above_it(newcomer_level: int, sliced_at_gap_3: bool):
    # `old` has 1.5 x 16 + 4 = 28 GPU-h: level 5 (16 <= x < 32); `new` is 5 - 3 or lower,
    # or 2 or 1 level below
    s, now_t_s = one_node(victim_level=5, newcomer_level=newcomer_level)
    gap3 = schedule(s, now_t_s, **LAS, slice_level_gap=3)
    got = [(p.job_id, p.reason) for p in gap3.preemptions]
    assert got == ([("old", PreemptReason.TIME_SLICE)] if sliced_at_gap_3 else [])
    if not sliced_at_gap_3:
        assert gap3.pending_reasons["new"] is Reason.RESOURCES
    # Tiresias' rule: any job on a lower level slices it
    gap1 = schedule(s, now_t_s, **LAS, slice_level_gap=1)
    assert [p.job_id for p in gap1.preemptions] == ["old"]


def test_time_slicing_defaults_to_a_gap_of_three_and_the_gap_is_at_least_one():
    assert SchedulerConfig.of(preemption="las").slice_level_gap == 3
    assert TIME_SLICING_DEFAULTS["slice_level_gap"] == 3
    assert SchedulerConfig().slice_level_gap == 1  # other policies do not slice
    with pytest.raises(ValueError, match="slice_level_gap"):
        SchedulerConfig(slice_level_gap=0)
