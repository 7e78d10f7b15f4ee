"""Named scheduling policies. Importing this package registers every built-in policy."""

from railyard.sched.policies import (
    admission,
    backfill,
    fairness,
    las,
    ordering,
    placement,
    preemption,
)
from railyard.sched.policies.registry import (
    ADMISSION,
    BACKFILL,
    ORDERING,
    PLACEMENT,
    PREEMPTION,
    AdmissionPolicy,
    BackfillPolicy,
    OrderContext,
    OrderingPolicy,
    PlacementPolicy,
    PreemptContext,
    PreemptionPolicy,
    Registry,
)

__all__ = [
    "ADMISSION",
    "BACKFILL",
    "ORDERING",
    "PLACEMENT",
    "PREEMPTION",
    "AdmissionPolicy",
    "BackfillPolicy",
    "OrderContext",
    "OrderingPolicy",
    "PlacementPolicy",
    "PreemptContext",
    "PreemptionPolicy",
    "Registry",
    "admission",
    "backfill",
    "fairness",
    "las",
    "ordering",
    "placement",
    "preemption",
]
