"""The overview page: GPUs by flavor, and when some are free while jobs wait, the head of the
queue with its reasons (why they do not start); pending jobs by reason; the viewer's sessions
and GPUs in use; the charts over a range the viewer picks (``?range=1h|6h|24h|7d``, one
picker for every chart, kept in the links). Each part is a `control.usecases` value."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from sqlalchemy.orm import Session

from railyard.control.usecases.accounting import daily_utilization
from railyard.control.usecases.history import SPANS_S, history
from railyard.control.usecases.overview import FlavorGpus, HeadJob
from railyard.control.usecases.why import explain
from railyard.web.figures import chart
from railyard.web.page import esc, table

DEFAULT_RANGE = "6h"
TICKS = {  # the edges and the thirds of each range
    "1h": ("-1 h", "-40 min", "-20 min", "now"),
    "6h": ("-6 h", "-4 h", "-2 h", "now"),
    "24h": ("-24 h", "-16 h", "-8 h", "now"),
    "7d": ("-7 d", "-112 h", "-56 h", "now"),
}
WORDS = {"1h": "last hour", "6h": "last 6 hours", "24h": "last 24 hours", "7d": "last 7 days"}


def picked_range(value: str | None) -> str:
    return value if value in SPANS_S else DEFAULT_RANGE


def range_picker(path: str, current: str) -> str:
    """Links to the same page over each range; the current one marked."""
    links = " · ".join(
        f"<b>{esc(name)}</b>" if name == current
        else f'<a href="{esc(path)}?range={esc(name)}">{esc(name)}</a>'
        for name in SPANS_S
    )  # fmt: skip
    return f'<p class="range" id="range">range: {links}</p>'


def charts(session: Session, now_t_s: float, total_gpus: int, span: str) -> str:
    util, waiting = history(session, now_t_s, total_gpus, SPANS_S[span])
    week = daily_utilization(session, 7, now_t_s)
    return (
        range_picker("/ui/", span)
        + '<div class="charts">'
        + chart(util, label=f"GPU utilization, {WORDS[span]}", percent=True,
                x_labels=TICKS[span])
        + chart(waiting, label=f"pending jobs (all users), {WORDS[span]}", x_labels=TICKS[span])
        + chart([u for _, u in week], label="GPUs held per day, last 7 days (today so far)",
                percent=True, bars=True, latest="today so far",
                x_labels=[time.strftime("%m-%d", time.gmtime(d)) for d, _ in week])
        + "</div>"
    )  # fmt: skip


def why_free(flavors: Sequence[FlavorGpus], pending: int,
             heads: Callable[[], list[HeadJob]]) -> str:  # fmt: skip
    """When GPUs are free and jobs wait: the head jobs and what holds each back."""
    free = sum(f.free for f in flavors)
    if not free or not pending:
        return ""
    rows = [[esc(h.id) if h.id is not None else '<span class="muted">(another user\'s)</span>',
             esc(h.queue), f"{h.gpus} {esc(h.flavor)}", esc(h.reason),
             esc(explain(h.reason))] for h in heads()]  # fmt: skip
    return (
        f'<h2 id="why-free">{free:,} GPUs free while {pending:,} jobs wait: the first in the '
        "loop's order, and what holds each back</h2>"
        + table(("job", "queue", "asks", "reason", "meaning"), rows)
    )
