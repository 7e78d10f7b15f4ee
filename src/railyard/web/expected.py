"""``GET /v1/whatif/starts``: when each of the caller's pending jobs should start, as
``squeue --start`` says it (``railyard queue --start``): the dashboard's what-if as JSON.

It is mounted by ``railyard up`` with or without the dashboard; it lives here, not in
``control.api``, because the twin it runs (the simulator, on the live state, under the
server's policy) sits above control.
"""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

from railyard.control.api.deps import ContextDep, CurrentUser, SessionDep
from railyard.control.schemas import JobSubmit
from railyard.control.usecases.admission import admit
from railyard.control.usecases.whatif import (
    TEST_ONLY_ID,
    TwinJob,
    expected_start_of,
    expected_starts,
)
from railyard.sched import SchedulerConfig
from railyard.web.whatif import twin


class ExpectedStart(BaseModel):
    """A pending job and when the twin expects it to start (None: not within the horizon,
    or a job without GPUs, which the twin does not simulate)."""

    id: str
    queue: str
    user: str
    gpus: int
    start_in_s: float | None
    start_t_s: float | None


def router(scheduler: SchedulerConfig | None = None) -> APIRouter:
    """The route, simulating under ``scheduler`` (the server's policy)."""
    r = APIRouter(prefix="/v1", tags=["jobs"])
    simulate = twin(scheduler or SchedulerConfig())

    @r.get("/whatif/starts")
    def starts(session: SessionDep, user: CurrentUser, ctx: ContextDep) -> list[ExpectedStart]:
        """Expected starts of the caller's pending jobs (an admin's: everyone's), in line
        order: the simulator run on the cluster as it is now (squeue --start)."""
        now = ctx.clock()
        return [
            ExpectedStart(
                id=e.job_id, queue=e.queue, user=e.user, gpus=e.gpus, start_in_s=e.start_in_s,
                start_t_s=None if e.start_in_s is None else now + e.start_in_s,
            )
            for e in expected_starts(session, user, now, simulate)
        ]  # fmt: skip

    @r.post("/whatif/submit")
    def test_only(
        spec: JobSubmit, session: SessionDep, user: CurrentUser, ctx: ContextDep
    ) -> TestOnly:
        """sbatch --test-only: the submission is checked as a submit checks it (one-line
        422/403 on a refusal) and never stored; the twin says when it would start if
        submitted now, behind every pending job."""
        now = ctx.clock()
        known = ctx.known_flavors() if ctx.known_flavors is not None else None
        admitted = admit(session, user, spec, now, known_flavors=known, run_as=ctx.run_as)
        job = admitted.common
        gpus = job["workers"] * job["gpus_per_worker"]
        limit = job["walltime_s"]
        twin_job = TwinJob(TEST_ONLY_ID, 0.0, gpus, limit or 0.0, job["queue"], user.name,
                           job["priority"], limit, job["preemptible"])  # fmt: skip
        start_in_s = expected_start_of(session, twin_job, now, simulate) if gpus else 0.0
        return TestOnly(
            queue=job["queue"], gpus=gpus, start_in_s=start_in_s,
            start_t_s=None if start_in_s is None else now + start_in_s,
        )  # fmt: skip

    return r


class TestOnly(BaseModel):
    """When a submission would start (None: not within the twin's horizon); a job without
    GPUs is taken to start at once (the twin simulates GPU jobs)."""

    queue: str
    gpus: int
    start_in_s: float | None
    start_t_s: float | None
