"""The queues page: each queue the viewer may see with its quota, what it may borrow and
lend, its use and fair share; flagged where the leaf queues' nominal quotas sum to more than
the cluster has (16 on 8 GPUs: their guarantees cannot all hold at once), and where a
borrowing limit sits on a queue with no parent (nothing to borrow from: it does nothing)."""

from __future__ import annotations

from collections.abc import Sequence

from railyard.control.usecases.queueviews import Overcommit, QueueShare, inert_borrowing
from railyard.web.page import esc, table

HEADERS = ("queue", "parent", "nominal", "borrowing limit", "lending limit", "in use",
           "borrowed", "fair-share usage", "entitlement", "pending", "running")  # fmt: skip


def _quota(values: dict[str, int]) -> str:
    return esc(", ".join(f"{k}={v}" for k, v in sorted(values.items()) if v))


def _borrowing(found: QueueShare) -> str:
    q = found.queue
    limit = _quota(q.borrowing_limit_gpus)
    if inert_borrowing(q):
        return (f'<span class="warn" title="a queue with no parent has no one to borrow '
                f'from">{limit} (no parent: does nothing)</span>')  # fmt: skip
    return limit or '<span class="muted">none (all its parent lends)</span>' if q.parent else "-"


def render(shares: Sequence[QueueShare], over: Sequence[Overcommit]) -> str:
    rows = []
    for found in shares:
        q = found.queue
        rows.append([
            esc(q.name), esc(q.parent or ""), _quota(q.nominal_gpus), _borrowing(found),
            _quota(q.lending_limit_gpus) or "-", _quota(q.used_gpus), _quota(q.borrowed_gpus),
            f"{found.usage_ratio:.0%}", f"{found.entitlement:.0%}",
            f'<span class="num">{q.pending_jobs}</span>',
            f'<span class="num">{q.running_jobs}</span>',
        ])  # fmt: skip
    flags = "".join(
        f'<p class="warn" id="overcommit">Over-committed: the leaf queues\' nominal quotas '
        f"sum to {o.nominal_gpus:,} {esc(o.flavor)} GPUs on a cluster of {o.cluster_gpus:,}: "
        "their guarantees cannot all hold at once (lower some quotas, or add nodes).</p>"
        for o in over
    )  # fmt: skip
    return (
        flags
        + table(HEADERS, rows)
        + '<p><a href="/ui/queues/whatif">What-if: when does each pending job start?</a>'
        " (the simulator on the live state, under this server's policy)</p>"
    )
