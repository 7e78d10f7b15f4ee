"""The accounting page: GPU-hours per group and period as a pivot (groups down, periods
across), each group's share of the cluster, and for queues their nominal quota's GPU-hours
beside what they used (utilisation against entitlement). Figures come from
`control.usecases.accounting`; the CSV export is the same report, one line per cell."""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Mapping
from urllib.parse import urlencode

from railyard.client.wire import Report
from railyard.web.page import esc, table

WINDOWS_DAYS = (1, 7, 30, 90, 365)
PERIOD_OF_WINDOW = {1: "total", 7: "day", 30: "day", 90: "week", 365: "month"}


def _label(t_s: float, period: str) -> str:
    fmt = {"month": "%Y-%m", "total": "%Y-%m-%d %H:%M"}.get(period, "%m-%d")
    return time.strftime(fmt, time.gmtime(t_s))


def _key(line_user: str | None, queue: str | None, account: str | None) -> str:
    return " / ".join(k for k in (account, queue, line_user) if k is not None)


def render(report: Report, nominal_gpus: Mapping[str, int], days: int, by: str) -> str:
    """The choices, the pivot and the export link."""
    starts = [lo for lo, _ in report["periods"]]
    cells: dict[str, dict[float, float]] = {}
    for line in report["lines"]:
        cell = cells.setdefault(_key(line["user"], line["queue"], line["account"]), {})
        cell[line["start_t_s"]] = cell.get(line["start_t_s"], 0.0) + line["gpu_hours"]
    window_h = (report["end_t_s"] - report["start_t_s"]) / 3600
    capacity = report["cluster_gpus"] * window_h
    headers = ["", *(_label(s, report["period"]) for s in starts), "GPU-hours", "of the cluster"]
    if by == "queue":
        headers += ["nominal GPU-hours", "used of nominal"]
    rows = []
    for key, by_start in sorted(cells.items(), key=lambda kv: -sum(kv[1].values())):
        total = sum(by_start.values())
        row = [esc(key), *(_hours(by_start.get(s)) for s in starts), _hours(total),
               _percent(total / capacity if capacity else 0.0)]  # fmt: skip
        if by == "queue":
            entitled = nominal_gpus.get(key, 0) * window_h
            row += [_hours(entitled), _percent(total / entitled) if entitled else "-"]
        rows.append(row)
    args = {"days": days, "by": by}
    export = f'<p><a href="/ui/accounting.csv?{esc(urlencode(args))}">Download CSV</a></p>'
    summary = (
        f"<p>GPU-hours from {esc(_label(report['start_t_s'], 'total'))} to "
        f"{esc(_label(report['end_t_s'], 'total'))} UTC, per {esc(report['period'])}, of "
        f"{report['cluster_gpus']} GPUs ({_hours(capacity)} GPU-hours). Every run counts, a "
        "preempted one too; running jobs up to now. <code>railyard report</code> prints the "
        "same.</p>"
    )
    body = table(headers, rows, tbody_id="usage") if rows else "<p class=muted>no usage</p>"
    return _choices(days, by) + summary + body + export


def _choices(days: int, by: str) -> str:
    def options(values: tuple[object, ...], current: object) -> str:
        return "".join(f'<option value="{esc(v)}"{" selected" if v == current else ""}>'
                       f"{esc(v)}</option>" for v in values)  # fmt: skip

    return (
        '<form method="get" action="/ui/accounting">'
        f'<label>last <select name="days">{options(WINDOWS_DAYS, days)}</select> days</label> '
        f'<label>by <select name="by">{options(("user", "queue", "account"), by)}</select>'
        "</label> <button>Show</button></form>"
    )


def csv_text(report: Report) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["period_start_utc", "period_end_utc", "user", "queue", "account",
                     "gpu_hours", "share"])  # fmt: skip
    for line in report["lines"]:
        writer.writerow([
            time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(line["start_t_s"])),
            time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(line["end_t_s"])),
            line["user"] or "", line["queue"] or "", line["account"] or "",
            f"{line['gpu_hours']:.4f}", f"{line['share']:.4f}",
        ])  # fmt: skip
    return out.getvalue()


def _hours(value: float | None) -> str:
    return "" if value is None else f'<span class="num">{value:,.2f}</span>'


def _percent(value: float) -> str:
    return f'<span class="num">{value:.2%}</span>'
