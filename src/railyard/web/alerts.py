"""The alerts page: every rule of `control.usecases.alerts` (the ones ``/healthz`` judges by
and the Prometheus rules shipped in ``examples/grafana/railyard-alerts.yml`` fire on), firing
first, each with why in lines this viewer may read."""

from __future__ import annotations

from collections.abc import Sequence

from railyard.control.usecases.alerts import Alert
from railyard.web.page import esc, table


def render(found: Sequence[Alert]) -> str:
    rows = []
    for a in found:
        state = ('<span class="alert-firing">firing</span>' if a.firing
                 else '<span class="alert-ok">ok</span>')  # fmt: skip
        why = "<br>".join(esc(line) for line in a.details) or '<span class="muted">-</span>'
        rows.append([f'<span id="alert-{esc(a.name)}">{esc(a.name)}</span>', state,
                     esc(a.severity), esc(a.summary), why])  # fmt: skip
    firing = sum(a.firing for a in found)
    head = (f"<p><b>{firing} firing</b> of {len(found)} rules.</p>" if firing
            else f"<p class=muted>None of {len(found)} rules fires.</p>")  # fmt: skip
    return (
        head + table(("alert", "state", "severity", "watches", "why"), rows)
        + "<p class=muted>The same rules as /healthz; Prometheus fires them on /metrics with "
        "examples/grafana/railyard-alerts.yml, shipped next to the Grafana dashboard.</p>"
    )  # fmt: skip
