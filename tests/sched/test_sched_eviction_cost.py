"""What an eviction throws away decides whether time slicing evicts, and whom (issue 56 item
2): the work since the victim's last checkpoint plus its restart (`restart_cost_s` on each
of its GPUs). With `eviction_max_loss` a time slice evicts only a victim whose cost is at
most that share of all the service it has had; a job that never checkpoints loses its whole
attempt, so it is not sliced (with `--checkpoint none`, `las`'s evictions threw away 49% of
the useful GPU-hours on one of Gavel's Philly VCs; 4% with this rule)."""

from __future__ import annotations

from dataclasses import replace

from sched_fakes import flat_queues, job, nodes, running, state

from railyard.sched import PreemptReason, SchedulerConfig, cycle

HOUR = 3600.0
LAS = {"ordering": "las", "backfill": "none", "preemption": "las", "time_slice_by": "attained"}
COSTED = {"eviction_max_loss": 0.25, "restart_cost_s": 300.0}


def _runner(last_checkpoint_t_s: float | None, attained_gpu_s: float = 0.0):
    long = job("long", gpus=8, preemptible=True, attained_gpu_s=attained_gpu_s)
    return running(long, "n0:0-7", start_t_s=0.0, last_checkpoint_t_s=last_checkpoint_t_s)


def _sliced(run, now_t_s: float, **knobs: object) -> list[str]:
    new = job("new", gpus=8, submit_t_s=now_t_s - 60.0)
    s = state(nodes(1), flat_queues({"a": 8}), [new], [run])
    config = SchedulerConfig.of(**{**LAS, **knobs})  # type: ignore[arg-type]
    result = cycle(s, now_t_s, config)
    assert all(p.reason is PreemptReason.TIME_SLICE for p in result.preemptions)
    return [p.job_id for p in result.preemptions]


def test_a_runner_that_never_checkpointed_is_not_sliced():
    """Two hours on 8 GPUs with no checkpoint: evicting it throws away all 16 GPU-hours (and
    a restart). Without the rule it is sliced as ever."""
    run = _runner(None)
    assert _sliced(run, 2 * HOUR) == ["long"]
    assert _sliced(run, 2 * HOUR, **COSTED) == []


def test_a_runner_that_checkpointed_a_minute_ago_is_sliced():
    """The same runner, checkpointed a minute ago: a minute and a restart lost out of two
    hours of service, and it is sliced."""
    assert _sliced(_runner(2 * HOUR - 60.0), 2 * HOUR, **COSTED) == ["long"]


def test_service_of_earlier_attempts_counts_toward_what_may_be_lost():
    """An hour into this attempt with no checkpoint, but 160 GPU-hours of earlier service (20 h
    on 8 GPUs): 8 GPU-hours and a restart lost are under a quarter of 168."""
    run = _runner(None, attained_gpu_s=160 * HOUR)
    assert _sliced(run, HOUR, **COSTED) == ["long"]
    assert _sliced(_runner(None), HOUR, **COSTED) == []


def test_a_runner_that_saves_on_the_signal_loses_only_its_restart():
    """Checkpointed 50 minutes ago: 6.7 GPU-hours since then, over a quarter of its 16. With a
    grace to checkpoint in when asked to stop (it has shown it checkpoints), the slice throws
    away only its restart, and it is sliced; without a grace it would lose the 50 minutes."""
    without = _runner(2 * HOUR - 3000.0)
    assert _sliced(without, 2 * HOUR, **COSTED) == []
    grace = replace(without, job=replace(without.job, checkpoint_grace_s=120.0))
    assert _sliced(grace, 2 * HOUR, **COSTED) == ["long"]
    # a grace, but no checkpoint yet in this attempt: nothing says it can save its work
    never = replace(_runner(None), job=replace(without.job, checkpoint_grace_s=120.0))
    assert _sliced(never, 2 * HOUR, **COSTED) == []
