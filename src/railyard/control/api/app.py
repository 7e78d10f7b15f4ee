"""The REST API: thin routes over the use-cases (``jobs``, ``queues``, ``nodes``, ``users``).

Each request gets one transaction (``SessionDep``) that commits before the response is sent,
so a client that reads right after a write sees it; a refused request rolls back. Every error
is :class:`~railyard.control.schemas.ErrorOut`, one line in ``detail``: 400 (a body that
cannot be read), 401 (no, bad, revoked or expired token, with ``WWW-Authenticate: Bearer``),
403 (not allowed), 404 (missing, or another user's job: ids of others' jobs do not leak), 409
(exists, or would lock admins out), 413 (body over the limit), 422 (bad input, naming the
field and a hint), 503 (the store is unreachable, read-only, or still busy after the request
was run again: ``Retry-After``), 507 (no space left). No input of a client's is answered with
a 500.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI
from fastapi.responses import JSONResponse
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from railyard import __version__
from railyard.control import schemas as s
from railyard.control.api import accounting as accounting_routes
from railyard.control.api import jobs as job_routes
from railyard.control.api import nodehealth
from railyard.control.api import nodes as node_routes
from railyard.control.api import queues as queue_routes
from railyard.control.api import samples as sample_routes
from railyard.control.api import terminal as terminal_routes
from railyard.control.api import users as user_routes
from railyard.control.api import whatif as whatif_routes
from railyard.control.api.deps import Context
from railyard.control.api.errors import BodyLimit, install_errors
from railyard.control.api.fastsubmit import FastSubmit
from railyard.control.api.metrics import metrics_router
from railyard.control.errors import (
    describe_failure,
)
from railyard.control.metrics.prometheus import MetricsConfig
from railyard.control.store.database import Store
from railyard.control.usecases import logs
from railyard.control.usecases.accounts import RunAs
from railyard.control.usecases.activity import Activity
from railyard.control.usecases.auth import TokenCache
from railyard.control.usecases.groupcommit import (
    GroupCommit,
    SubmitStore,
)
from railyard.control.usecases.logs import read_log as read_log
from railyard.control.usecases.loopstatus import LoopHealth, loop_status
from railyard.control.usecases.sizebounds import DEFAULT_LIMITS, SiteLimits
from railyard.control.usecases.whatif import Simulate
from railyard.exec.terminals.jobsocket import SocketOpener

if TYPE_CHECKING:
    from railyard.control.loop.sweeps import AcrossChecks


def create_app(
    store: Store,
    *,
    wake: Callable[[], None],
    state_dir: Path,
    spool_dir: Path | None = None,
    known_flavors: Callable[[], set[str]] | None = None,
    clock: Callable[[], float] = time.time,
    run_as: RunAs | None = None,
    loop_health: LoopHealth | None = None,
    metrics: MetricsConfig | None = None,
    health_fail_requeues: bool = False,
    remote_log: logs.RemoteLog | None = None,
    remote_socket: SocketOpener | None = None,
    extra_routers: Sequence[APIRouter] = (),
    across: AcrossChecks | None = None,
    wake_prompt: Callable[[], None] | None = None,
    ordering: str = "fairshare",
    whatif: Simulate | None = None,
    limits: SiteLimits = DEFAULT_LIMITS,
    starvation_limit_s: float | None = None,
) -> FastAPI:
    """The API over ``store``; ``wake`` is called after each commit the service loop must see
    (submit, cancel, node or queue change); ``wake_prompt`` after a submit of interactive jobs
    alone (someone waits at a terminal: a shorter coalescing window). Job files are under
    ``spool_dir`` (default ``state_dir/jobs``). ``run_as`` checks at submit that this server can
    run a job as its user's Unix account (``railyard up`` passes it; None skips the check).
    ``/healthz`` reports the loop's ``loop_health`` and whether the store answers; ``/metrics``
    serves what ``metrics`` says (default: the store's figures, for an admin's token).
    ``health_fail_requeues``: a failed health check requeues the node's jobs (else drains).
    ``ordering``: the loop's ordering policy (under fair share, a pending job's record says
    its figures); ``whatif`` the twin the what-if routes run (None: they answer 503).
    ``starvation_limit_s``: the loop's, for sprio's figures (None: the scheduler's default).
    ``limits``: the site's bounds on a job's size, every way in (``usecases.sizebounds``).
    ``remote_log``, ``remote_socket``: the backend's reader of logs and opener of interactive
    jobs' sockets on other machines (None: every job runs here)."""
    app = FastAPI(
        title="railyard",
        version=__version__,
        description="Submit and watch training jobs on a shared GPU cluster. Errors are "
        "ErrorOut: a one-line `detail` naming the field, what is wrong and a hint.",
    )
    spool = Path(spool_dir) if spool_dir is not None else Path(state_dir) / "jobs"
    submits = GroupCommit(
        SubmitStore(store, wake, spool, clock, known_flavors, run_as, wake_prompt, limits)
    )
    app.state.railyard = Context(
        store, wake, spool, known_flavors, clock, run_as, loop_health, health_fail_requeues,
        remote_log, across, submits, Path(state_dir), Activity(store, clock), TokenCache(),
        ordering, whatif, remote_socket, limits, starvation_limit_s,
    )  # fmt: skip

    @app.get(
        "/healthz", tags=["health"], response_model=s.Health, responses={503: {"model": s.Health}}
    )
    def healthz() -> Any:
        """``ok``; ``degraded`` (200) when jobs are held for the loop's own error
        (``SchedulerError``, how many, which); or 503 ``failing`` with why: the store does not
        answer, the loop's last step failed, the loop is behind, no job started for the stall
        time while some could, or jobs are stuck in a transient state past their deadline."""
        now = clock()
        problem = _store_problem(store)
        health = loop_health
        status = None
        if problem is None and health is not None:
            with store.session() as session:
                status = loop_status(session, health, now)
            problem = status.reason()
        verdict = "failing" if problem else (status.status if status else "ok")
        body = s.Health(
            status=verdict,
            version=__version__,
            reason=problem or (status.note() if status else None),
            held_jobs=status.held[0] if status else 0,
            held=list(status.held[1]) if status else [],
            last_step_t_s=health.last_ok_t_s if health else None,
            failing_steps=health.failing_steps if health else 0,
            last_failed_t_s=health.last_failed_t_s if health else None,
            behind_s=status.behind_s if status else None,
            stuck_jobs=status.stuck.total if status else 0,
            stuck=list(status.stuck.ids) if status else [],
        )
        if problem:
            return JSONResponse(body.model_dump(), status_code=503)
        return body

    for routes in (user_routes, job_routes, node_routes, queue_routes, whatif_routes,
                   accounting_routes, sample_routes):  # fmt: skip
        app.include_router(routes.router)
    app.include_router(nodehealth.router)
    app.include_router(terminal_routes.router)
    for router in extra_routers:  # the dashboard (railyard.web), mounted by `railyard up`
        app.include_router(router)
    app.include_router(
        metrics_router(store, metrics or MetricsConfig(loop_health=loop_health), clock)
    )
    install_errors(app)
    app.add_middleware(BodyLimit)
    app.add_middleware(FastSubmit)  # outside BodyLimit: it takes small bodies only
    return app


def _store_problem(store: Store) -> str | None:
    try:
        with store.engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except DBAPIError as exc:
        refusal = describe_failure(exc)
        return f"store unreachable: {refusal.line() if refusal else exc}"
    return None


__all__ = ["create_app"]
