"""Named policy registries and the small protocols each kind of policy implements.

A new policy is one small module: implement the protocol, call `<KIND>.add(...)`, and import
the module from `railyard.sched.policies`. `SchedulerConfig` then selects it by name.

Contract that keeps a cycle fast: within one cycle, admission and preemption decisions may
depend on a job's queue, flavor, gang shape and priority (and, for a victim, its queue,
priority and spot flag), not on its id, user or times; the cycle reuses outcomes for jobs
that are alike in those.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from railyard.sched.decisions import PreemptReason
from railyard.sched.model import Job, Usage
from railyard.sched.quota import QuotaTree
from railyard.sched.snapshot import Masks, Shape, Snapshot


class Named(Protocol):
    @property
    def name(self) -> str: ...


P = TypeVar("P", bound=Named)


class Registry(Generic[P]):
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, P] = {}

    def add(self, policy: P) -> P:
        if policy.name in self._items:
            raise ValueError(f"{self.kind} policy {policy.name!r} registered twice")
        self._items[policy.name] = policy
        return policy

    def get(self, name: str) -> P:
        try:
            return self._items[name]
        except KeyError:
            raise KeyError(f"unknown {self.kind} policy {name!r}; known: {self.names()}") from None

    def names(self) -> list[str]:
        return sorted(self._items)


@dataclass(frozen=True)
class OrderContext:
    now_t_s: float
    usage: Usage
    quota: QuotaTree
    pending: Sequence[Job]


SortKey = Callable[[Job], tuple[object, ...]]


class OrderingPolicy(Protocol):
    """Returns the key that orders pending jobs (after the starving-first tier)."""

    @property
    def name(self) -> str: ...

    def sort_key(self, ctx: OrderContext) -> SortKey: ...


class AdmissionPolicy(Protocol):
    """Decides whether a job's queue may take its GPUs now. With `defers_borrowing`, jobs
    that fit only by borrowing are admitted after all jobs that fit their nominal quota."""

    @property
    def name(self) -> str: ...

    @property
    def defers_borrowing(self) -> bool: ...

    def fits(self, quota: QuotaTree, job: Job) -> bool: ...


class PlacementPolicy(Protocol):
    """Finds GPUs for the whole gang, or None. Must not change the snapshot."""

    @property
    def name(self) -> str: ...

    def place(self, snap: Snapshot, shape: Shape) -> Masks | None: ...


class BackfillPolicy(Protocol):
    """Decides which blocked jobs get a reservation that later jobs must not delay, and whether
    a blocked job stops the jobs behind it outright (`blocks`: no backfill at all)."""

    @property
    def name(self) -> str: ...

    @property
    def blocks(self) -> bool: ...

    def reserves(self, reserved_for_flavor: int, max_reservations: int) -> bool: ...


class PreemptionPolicy(Protocol):
    """Says whether (and why) `victim` may be evicted to make room for `preemptor`."""

    @property
    def name(self) -> str: ...

    def victim_reason(
        self, preemptor: Job, victim: Job, quota: QuotaTree
    ) -> PreemptReason | None: ...


ORDERING: Registry[OrderingPolicy] = Registry("ordering")
ADMISSION: Registry[AdmissionPolicy] = Registry("admission")
PLACEMENT: Registry[PlacementPolicy] = Registry("placement")
BACKFILL: Registry[BackfillPolicy] = Registry("backfill")
PREEMPTION: Registry[PreemptionPolicy] = Registry("preemption")
