"""Routes of the what-if (``squeue --start``, ``sbatch --test-only``): the twin (the
simulator, on the live state, under the server's policy) says when jobs should start.

Control sits below the simulator, so the twin is handed in: ``railyard up`` passes
``railyard.web.whatif.twin`` to ``create_app`` (``Context.whatif``); an API built without one
answers 503 here.
"""

from __future__ import annotations

from railyard.control import schemas as s
from railyard.control.api.deps import ContextDep, CurrentUser, SessionDep, v1_router
from railyard.control.errors import Unavailable
from railyard.control.submission import JobSubmit
from railyard.control.usecases.admission import admit
from railyard.control.usecases.whatif import (
    TEST_ONLY_ID,
    Simulate,
    TwinJob,
    expected_start_of,
    expected_starts,
)

router = v1_router()


def _twin(simulate: Simulate | None) -> Simulate:
    if simulate is None:
        raise Unavailable("this server runs no twin", hint="railyard up starts one")
    return simulate


@router.get("/whatif/starts")
def starts(session: SessionDep, user: CurrentUser, ctx: ContextDep) -> list[s.ExpectedStart]:
    """Expected starts of the caller's pending jobs (an admin's: everyone's), in line order:
    the simulator run on the cluster as it is now (squeue --start)."""
    simulate = _twin(ctx.whatif)
    now = ctx.clock()
    return [
        s.ExpectedStart(
            id=e.job_id, queue=e.queue, user=e.user, gpus=e.gpus, start_in_s=e.start_in_s,
            start_t_s=None if e.start_in_s is None else now + e.start_in_s,
        )
        for e in expected_starts(session, user, now, simulate)
    ]  # fmt: skip


@router.post("/whatif/submit")
def test_only(
    spec: JobSubmit, session: SessionDep, user: CurrentUser, ctx: ContextDep
) -> s.TestOnly:
    """sbatch --test-only: the submission is checked as a submit checks it (a refusal is its
    one line) and never stored; the twin says when it would start if submitted now, behind
    every pending job."""
    simulate = _twin(ctx.whatif)
    now = ctx.clock()
    known = ctx.known_flavors() if ctx.known_flavors is not None else None
    job = admit(
        session, user, spec, now, known_flavors=known, run_as=ctx.run_as, limits=ctx.limits
    ).common
    gpus = job["workers"] * job["gpus_per_worker"]
    limit = job["walltime_s"]
    twin_job = TwinJob(TEST_ONLY_ID, 0.0, gpus, limit or 0.0, job["queue"], user.name,
                       job["priority"], limit, job["preemptible"])  # fmt: skip
    start_in_s = expected_start_of(session, twin_job, now, simulate) if gpus else 0.0
    return s.TestOnly(
        queue=job["queue"], gpus=gpus, start_in_s=start_in_s,
        start_t_s=None if start_in_s is None else now + start_in_s,
    )  # fmt: skip
