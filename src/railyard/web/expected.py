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
from railyard.control.usecases.whatif import expected_starts
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

    return r
