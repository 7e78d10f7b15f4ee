"""The jobs page's parts: the filter, search and sort form, the table (refreshed in place every
2 s through ``?partial=1``, keeping the page's query), and the pager. The lines come from
`control.usecases.joblist`; nothing here reads the store."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlencode

from railyard.control.usecases.joblist import SORTS, JobPage, ListedJob
from railyard.control.usecases.jobviews import JobFilters
from railyard.web.page import duration, esc, table

HEADERS = ("job", "name", "user", "queue", "state", "GPUs", "priority", "waited", "ran",
           "placement", "reason")  # fmt: skip


def rows(found: JobPage, now_t_s: float) -> str:
    return table(HEADERS, [_row(line, now_t_s) for line in found.lines], tbody_id="jobs")


def _row(line: ListedJob, now_t_s: float) -> list[str]:
    link = f'<a href="{esc(line.href)}">{esc(line.id)}</a>'
    if line.tasks > 1:
        link += f' <span class="muted">({line.tasks} tasks)</span>'
    state = f'<span class="state-{esc(line.state)}">{esc(line.state)}</span>'
    waited = (line.start_t_s if line.start_t_s is not None else now_t_s) - line.submit_t_s
    ran = None if line.start_t_s is None else (line.end_t_s or now_t_s) - line.start_t_s
    placement = " ".join(f"{n}:{','.join(map(str, g))}" for n, g in line.placement.items())
    return [link, esc(line.name), esc(line.user), esc(line.queue), state, _n(line.gpus),
            _n(line.priority), _n(duration(waited)), _n(duration(ran) if ran is not None else ""),
            esc(placement), esc(line.reason)]  # fmt: skip


def form(choices: JobFilters, params: Mapping[str, str]) -> str:
    """State, queue and (admins) user; a search box; the sort."""

    def select_box(name: str, values: list[str], label: str = "") -> str:
        current = params.get(name) or ""
        options = "".join(
            f'<option value="{esc(v)}"{" selected" if v == current else ""}>'
            f"{esc(v) or 'all'}</option>"
            for v in ["", *values]
        )
        return f'<label>{label or name} <select name="{name}">{options}</select></label> '

    sort = params.get("sort") or "newest"
    sorts = "".join(f'<option value="{s}"{" selected" if s == sort else ""}>{s}</option>'
                    for s in SORTS)  # fmt: skip
    boxes = select_box("state", choices.states) + select_box("queue", choices.queues)
    if choices.users:
        boxes += select_box("user", choices.users)
    search = esc(params.get("q") or "")
    array = params.get("array")
    keep = f'<input type="hidden" name="array" value="{esc(array)}">' if array else ""
    return (
        f'<form method="get" action="/ui/jobs">{boxes}'
        f'<label>search <input name="q" value="{search}" maxlength="100" '
        'placeholder="id, name, user or command"></label> '
        f'<label>sort <select name="sort">{sorts}</select></label> {keep}'
        "<button>Show</button></form>"
    )


def pager(found: JobPage, params: Mapping[str, str]) -> str:
    """Where this page sits among all, and links to its neighbours (same filters)."""
    if not found.total:
        return "<p class=muted>no jobs</p>"
    first, last = found.offset + 1, found.offset + len(found.lines)
    keep = {k: v for k, v in params.items() if k not in ("partial", "offset")}

    def link(offset: int, label: str) -> str:
        href = "/ui/jobs?" + urlencode(keep | {"offset": str(offset)})
        return f'<a href="{esc(href)}">{label}</a>'

    final = (found.total - 1) // found.limit * found.limit
    if not found.lines:  # an offset past the end (a stale link, a hand-made URL)
        return (f'<p class="pager">none here: {found.total:,} in all · {link(0, "first")} · '
                f'{link(final, "last")}</p>')  # fmt: skip
    parts = [f"{first:,}-{last:,} of {found.total:,}"]
    if found.offset > 0:
        parts.append(link(0, "first"))
        parts.append(link(max(0, found.offset - found.limit), "previous"))
    if last < found.total:
        parts.append(link(found.offset + found.limit, "next"))
        parts.append(link(final, "last"))
    return f'<p class="pager">{" · ".join(parts)}</p>'


def _n(value: object) -> str:
    return f'<span class="num">{esc(value)}</span>'
