"""``GET /v1/report``: GPU-hours by user, queue and account per period (sreport), as
:mod:`railyard.control.usecases.accounting` sums them."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Query

from railyard.client.bounds import MAX_USER_NAME, USER_NAME_PATTERN
from railyard.control.api.deps import ContextDep, CurrentUser, SessionDep, v1_router
from railyard.control.schemas import Response
from railyard.control.usecases import accounting

router = v1_router()

Group = Literal["user", "queue", "account"]


class UsageLineOut(Response):
    start_t_s: float
    end_t_s: float
    user: str | None
    queue: str | None
    account: str | None
    gpu_hours: float
    share: float


class ReportOut(Response):
    start_t_s: float
    end_t_s: float
    period: str
    by: list[str]
    cluster_gpus: int
    lines: list[UsageLineOut]
    periods: list[list[float]]  # [start, end] of each period, with usage or not


@router.get("/report")
def report(
    session: SessionDep,
    user: CurrentUser,
    ctx: ContextDep,
    start: Annotated[float, Query(ge=0, le=1e11, description="Unix time")],
    end: Annotated[float | None, Query(ge=0, le=1e11, description="Unix time; now")] = None,
    period: Annotated[Literal["total", "day", "week", "month"], Query()] = "total",
    by: Annotated[list[Group] | None, Query(description="repeat: user, queue, account")] = None,
    owner: Annotated[
        str | None, Query(alias="user", max_length=MAX_USER_NAME, pattern=USER_NAME_PATTERN)
    ] = None,
) -> ReportOut:
    """GPU-hours per period and group; a plain user's own only, an admin's everyone's (or
    ``user``'s)."""
    now = ctx.clock()
    found = accounting.gpu_hours(
        session, user, start, now if end is None else end, now,
        period=period, by=by or ["user"], user=owner,
    )  # fmt: skip
    return ReportOut(
        start_t_s=found.start_t_s,
        end_t_s=found.end_t_s,
        period=found.period,
        by=list(found.by),
        cluster_gpus=found.cluster_gpus,
        lines=[UsageLineOut(**vars(line)) for line in found.lines],
        periods=[list(p) for p in found.periods],
    )
