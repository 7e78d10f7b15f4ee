"""``GET /v1/report``: GPU-hours by user, queue and account per period (sreport), as
:mod:`railyard.control.usecases.accounting` sums them."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Query

from railyard.client import wire
from railyard.client.bounds import MAX_USER_NAME, USER_NAME_PATTERN
from railyard.control.api.deps import ContextDep, CurrentUser, SessionDep, v1_router
from railyard.control.api.wiremodels import model_of
from railyard.control.usecases import accounting

router = v1_router()

Group = Literal["user", "queue", "account"]


ReportOut = model_of(wire.Report, "ReportOut", {wire.UsageLine: "UsageLineOut"})


@router.get("/report", response_model=ReportOut)
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
) -> wire.Report:
    """GPU-hours per period and group; a plain user's own only, an admin's everyone's (or
    ``user``'s)."""
    now = ctx.clock()
    return accounting.gpu_hours(
        session, user, start, now if end is None else end, now,
        period=period, by=by or ["user"], user=owner,
    )  # fmt: skip
