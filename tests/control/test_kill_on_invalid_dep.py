"""sbatch --kill-on-invalid-dep=yes through the live loop and the simulator's driver (one rule,
`sched.lifecycle.step`'s `abandoned`): a job whose dependency can never be met is cancelled,
reason DependencyNeverSatisfied, never started; without the option it waits, as Slurm's
default (no kill_invalid_depend) leaves it."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select
from tests.control.loop_helpers import Cluster, states, step_until

from railyard.client.scripts import parse_args
from railyard.control.store.tables import EventRow, JobRow
from railyard.sched.config import SchedulerConfig
from railyard.sched.lifecycle import StepInput, step
from railyard.sched.model import Dependency, DependencyKind, Job


def test_the_loop_cancels_a_job_whose_dependency_can_never_be_met(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, gpus=1)
    [fails] = cluster.submit(command=["false"], gpus=0)
    [killed] = cluster.submit(command=["true"], gpus=0, dependency=f"afterok:{fails}",
                              kill_on_invalid_dep=True)  # fmt: skip
    [waits] = cluster.submit(command=["true"], gpus=0, dependency=f"afterok:{fails}")
    step_until(cluster.loop, lambda: states(cluster.store)[killed] == "cancelled")
    with cluster.store.session() as session:
        row = session.get_one(JobRow, killed)
        assert (row.reason, row.start_t_s) == ("DependencyNeverSatisfied", None)
        assert row.end_t_s is not None
        kinds = session.scalars(select(EventRow.kind).where(EventRow.job_id == killed)).all()
        assert "cancelled" in kinds
        waiting = session.get_one(JobRow, waits)
        assert (waiting.state, waiting.reason) == ("pending", "DependencyNeverSatisfied")


def test_the_step_abandons_only_jobs_that_asked_and_sbatch_reads_the_option() -> None:
    never = (Dependency(DependencyKind.AFTER_OK, ("1",)),)
    asked = Job("k", "q", "f", 1, 0, user="u", dependencies=never, kill_on_invalid_dep=True)
    plain = Job("p", "q", "f", 1, 0, user="u", dependencies=never)
    given = StepInput(nodes=(), queues=(), pending=(asked, plain), running=(), exits=(),
                      now_t_s=10.0, job_states={"1": "failed"})  # fmt: skip
    plan = step(given, SchedulerConfig())
    assert plan.abandoned == ("k",)
    assert "k" not in plan.held
    assert plan.held["p"].value == "DependencyNeverSatisfied"
    notes: list[str] = []
    assert parse_args(["--kill-on-invalid-dep=yes"], notes) == {"kill_on_invalid_dep": True}
    assert parse_args(["--kill-on-invalid-dep", "NO"], notes) == {"kill_on_invalid_dep": False}
    assert notes == []
