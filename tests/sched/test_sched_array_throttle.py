"""Issue 56 item 3: a throttled array (`--array=0-5%2`) neither blocks the head's reservation
nor passes it. A 2-GPU job runs for 45 s on one 8-GPU node; an array of 1-GPU tasks throttled
to two at a time is queued, then an 8-GPU job, then two 1-GPU jobs. Each task released when a
sibling ends used to go ahead of the 8-GPU job (it arrived earlier), so the array ran to its
end first and the big job started at 63 s; under Slurm it starts when 8 GPUs are free."""

from __future__ import annotations

from lifecycle_driver import drive
from sched_fakes import flat_queues, job, nodes, running, state

from railyard.sched import SchedulerConfig

LIMIT_S = 300.0  # every job's time limit (a Slurm partition's DefaultTime)


def throttled_array_case(tasks: int = 6, max_running: int | None = 2):
    two = running(job("j2", gpus=2, submit_t_s=0.0, walltime_s=LIMIT_S), "n0:0-1", 0.0)
    array = [
        job(
            f"7_{i}",
            array_parent="7",
            array_index=i,
            array_max_running=max_running,
            submit_t_s=1.0,
            walltime_s=LIMIT_S,
        )
        for i in range(tasks)
    ]
    first = [running(t, f"n0:{2 + i}", 1.0) for i, t in enumerate(array[: max_running or 0])]
    big = job("j8", gpus=8, submit_t_s=2.0, walltime_s=LIMIT_S)
    small = [job(f"s{i}", submit_t_s=3.0, walltime_s=LIMIT_S) for i in range(2)]
    runtime_s = {"j2": 45.0, "j8": 30.0, "s0": 20.0, "s1": 20.0}
    runtime_s.update({t.id: 20.0 for t in array})
    queued = [*array[len(first) :], big, *small]
    return state(nodes(1), flat_queues({"a": 8}), queued, [two, *first]), runtime_s


def starts(config: SchedulerConfig, **case: int | None) -> dict[str, float]:
    s, runtime_s = throttled_array_case(**case)  # type: ignore[arg-type]
    run = drive(s, config, runtime_s=runtime_s, until_t_s=600.0, dt_s=1.0, start_t_s=3.0)
    return {job_id: t for t, job_id, _ in run.kinds("start")}


def test_the_8_gpu_job_starts_when_8_gpus_are_free_not_after_the_array():
    t = starts(SchedulerConfig())
    # the array's first two tasks (started at 1 s) end at 21 s, the two small jobs
    # (backfilled at 3 s) at 23 s, the 2-GPU job at 45 s: from then all 8 GPUs are free
    assert t["j8"] == 45.0, t
    # released tasks waited behind the reservation, never started inside it
    assert all(t[f"7_{i}"] == 75.0 for i in range(2, 4)), t


def test_no_more_than_the_throttle_runs_at_once_and_every_task_runs():
    s, runtime_s = throttled_array_case()
    run = drive(s, SchedulerConfig(), runtime_s=runtime_s, until_t_s=600.0, dt_s=1.0, start_t_s=3.0)
    live, most = 2, 2  # the first two tasks run from 1 s, before the drive begins
    for _, kind, job_id, _ in run.log:
        if job_id.startswith("7_") and kind in ("start", "end"):
            live += 1 if kind == "start" else -1
            most = max(most, live)
    assert most == 2
    assert sum(1 for j, end in run.ended.items() if j.startswith("7_") and end == "completed") == 6


def test_a_throttled_array_alone_runs_as_fast_as_its_throttle_allows():
    """Nothing reserves: the released tasks start the moment a sibling ends."""
    s, runtime_s = throttled_array_case()
    alone = state(s.nodes, s.queues, [j for j in s.pending if j.id.startswith("7_")], s.running)
    run = drive(alone, SchedulerConfig(), runtime_s=runtime_s, until_t_s=600.0, dt_s=1.0,
                start_t_s=3.0)  # fmt: skip
    t = {job_id: at for at, job_id, _ in run.kinds("start")}
    assert [t[f"7_{i}"] for i in range(2, 6)] == [21.0, 21.0, 41.0, 41.0]


def test_an_unthrottled_array_is_unchanged():
    """Without `%N` every task is queued at once and starts ahead of the later big job,
    as before (and as under Slurm): only the throttle's released tasks yield."""
    t = starts(SchedulerConfig(), tasks=4, max_running=None)
    assert [t[f"7_{i}"] for i in range(4)] == [3.0] * 4
    assert t["j8"] == 45.0
