"""Request and response models of node health: a run's results in, runs and verdicts out."""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import Field, field_validator

from railyard.control.schemas import Request, Response
from railyard.control.store.limits import Label, Name, Text
from railyard.sched.model import NodeState

MAX_RESULTS_PER_RUN = 64
MAX_HISTORY_RUNS = 500
CheckName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9_.-]*$")]
Status = Literal["pass", "warn", "fail", "skip"]
Figure = Annotated[float, Field(ge=0, le=1e18)]
Fraction = Annotated[float, Field(gt=0, le=1)]
Detail = Annotated[Text, Field(max_length=512)]


class HealthResultIn(Request):
    """One check's result as `railyard health` reports it (``railyard.health.result``)."""

    check: CheckName
    status: Status
    fatal: bool = False
    measured: Figure | None = None
    expected: Figure | None = None
    unit: Label = ""
    fail_below: Fraction | None = None
    warn_below: Fraction | None = None
    source: Name = ""
    detail: Detail = ""

    @field_validator("measured", "expected")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value


class HealthReport(Request):
    """A run of a node's checks; the control plane stores it and applies the health rule."""

    results: list[HealthResultIn] = Field(min_length=1, max_length=MAX_RESULTS_PER_RUN)


class HealthResultOut(Response):
    check: str
    status: str
    fatal: bool
    measured: float | None
    expected: float | None
    unit: str
    ratio: float | None
    fail_below: float | None
    warn_below: float | None
    source: str
    detail: str


class HealthRunOut(Response):
    run_id: str
    node: str
    t_s: float
    verdict: str | None
    reporter: str
    results: list[HealthResultOut]


class HealthReportOut(Response):
    """The stored run, its verdict and what it did to the node (``action``, one line)."""

    run: HealthRunOut
    state: NodeState
    reason: str
    action: str


NodeName = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:@-]+$")]


class AcrossRequest(Request):
    """Ask for an across-node sweep (`railyard health --across`): all_reduce over the nodes,
    bisected to the slow ones. No nodes: every ready node."""

    nodes: list[NodeName] = Field(default_factory=list, max_length=4096)


class AcrossTestOut(Response):
    group: list[str]
    busbw_gbps: float | None
    expected_gbps: float | None
    source: str
    ok: bool
    detail: str = ""


class AcrossOut(Response):
    """The sweep under way (or none): its nodes, the group tested now or next, tests so far."""

    active: bool
    nodes: list[str] = Field(default_factory=list)
    group: list[str] = Field(default_factory=list)
    running: bool = False
    tests: list[AcrossTestOut] = Field(default_factory=list)
    detail: str = ""
