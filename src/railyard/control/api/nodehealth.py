"""Routes of node health: report a run (admins, usually `railyard health --report` on the
node), read a node's history (any user: no tenant's data is in it)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from railyard.control.api.deps import ERRORS, ContextDep, CurrentUser, NodePath, SessionDep
from railyard.control.errors import Conflict
from railyard.control.health_schemas import (
    MAX_HISTORY_RUNS,
    AcrossOut,
    AcrossRequest,
    HealthReport,
    HealthReportOut,
    HealthRunOut,
)
from railyard.control.loop.sweeps import AcrossChecks, describe
from railyard.control.usecases import nodehealth
from railyard.control.usecases.users import require_admin

router = APIRouter(prefix="/v1", responses=ERRORS, tags=["health"])


@router.post("/nodes/{name}/health")
def report_health(
    name: NodePath, body: HealthReport, session: SessionDep, user: CurrentUser, ctx: ContextDep
) -> HealthReportOut:
    """Store a run of the node's checks and apply the health rule: a fatal error takes the
    node down and requeues its jobs, a failure drains it (or, with `railyard up --health-fail
    requeue`, takes it down too), and a run where nothing fails resumes a node that health
    took out of service."""
    return nodehealth.report(
        session, user, name, body.results, ctx.clock(), fail_requeues=ctx.health_fail_requeues
    )


@router.get("/nodes/{name}/health")
def health_history(
    name: NodePath,
    session: SessionDep,
    user: CurrentUser,
    limit: Annotated[int, Query(ge=1, le=MAX_HISTORY_RUNS)] = 20,
) -> list[HealthRunOut]:
    """The node's last runs, newest first, each with its verdict and every check's figures."""
    return nodehealth.history(session, name, limit)


NO_LOOP = "this server runs no scheduler loop to run sweeps (`railyard up` does)"


def _sweeps(ctx: ContextDep) -> AcrossChecks:
    if ctx.across is None:
        raise Conflict(NO_LOOP)
    return ctx.across


@router.post("/health/across", status_code=202)
def ask_across(
    body: AcrossRequest, session: SessionDep, user: CurrentUser, ctx: ContextDep
) -> AcrossOut:
    """Start an across-node sweep (admins): all_reduce over the nodes (every ready node when
    none are named), bisected to the slow ones as seed 004 does; each test is a system job
    the scheduler starts when the group's nodes are idle, and the sweep's nodes take no new
    job until it ends. 409 while another sweep runs."""
    require_admin(user)
    sweeps = _sweeps(ctx)
    nodes = sweeps.request(session, body.nodes, user.name)
    ctx.wake()
    return AcrossOut(
        active=True, nodes=nodes, detail=f"sweep over {len(nodes)} nodes asked; "
        "`railyard health --across-status` follows it"
    )  # fmt: skip


@router.get("/health/across")
def across_status(user: CurrentUser, ctx: ContextDep) -> AcrossOut:
    """The sweep under way: its nodes, the group tested now or next, the tests so far (their
    figures against their expectations). Verdicts land in each node's health history."""
    if ctx.across is None:
        return AcrossOut(active=False, detail=NO_LOOP)
    return describe(ctx.across)
