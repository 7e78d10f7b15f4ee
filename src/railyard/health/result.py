"""What a check found, and how a figure is judged against its expectation."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

VERSIONS = "gpu-versions"  # the check whose figure is compared across nodes, not with one


class Status(StrEnum):
    PASS = "pass"
    WARN = "warn"  # below expectation, above the failing fraction
    FAIL = "fail"
    SKIP = "skip"  # cannot run here (no NVML, no torch, no baseline); says why


@dataclass(frozen=True)
class Expected:
    """A figure a check is judged against and where it comes from (`health.expect` computes
    it with the twin; kept here so the server's sweeps name it without importing the twin)."""

    value: float
    source: str


@dataclass(frozen=True)
class Result:
    """One check on one node. `measured` and `expected` share `unit`; the check fails below
    `fail_below` x expected and warns below `warn_below` x expected."""

    check: str
    node: str
    status: Status
    measured: float | None = None
    expected: float | None = None
    unit: str = ""
    fail_below: float | None = None
    warn_below: float | None = None
    source: str = ""
    detail: str = ""
    fatal: bool = False  # the node must stop now (XID 79, uncorrectable ECC): requeue its jobs

    @property
    def ratio(self) -> float | None:
        if self.measured is None or not self.expected:
            return None
        return self.measured / self.expected

    def reason(self) -> str:
        """A drain reason in one line, Slurm's `Reason=` style: the check and its figure."""
        if self.measured is not None and self.expected is not None and self.fail_below:
            return (
                f"health: {self.check} {self.measured:.3g} {self.unit} < "
                f"{self.fail_below:g} x expected {self.expected:.3g} {self.unit}"
            )
        what = "fatal" if self.fatal else self.status.value
        return f"health: {self.check}: {self.detail or what}"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["status"] = self.status.value
        out["ratio"] = self.ratio
        return out


def judge(
    check: str,
    node: str,
    measured: float,
    expected: float,
    unit: str,
    *,
    fail_below: float,
    warn_below: float,
    source: str,
) -> Result:
    """Pass at or above `warn_below` x expected, warn between, fail below `fail_below` x."""
    if not 0 < fail_below <= warn_below:
        raise ValueError(
            f"{check}: need 0 < fail_below <= warn_below, got {fail_below}, {warn_below}"
        )
    ratio = measured / expected if expected > 0 else 0.0
    status = (
        Status.PASS if ratio >= warn_below else Status.WARN if ratio >= fail_below else Status.FAIL
    )
    return Result(check, node, status, measured, expected, unit, fail_below, warn_below, source)
