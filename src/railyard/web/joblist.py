"""The jobs page's parts: the filter, search and sort form, the table (refreshed in place every
2 s through ``?partial=1``, keeping the page's query), and the pager. The lines come from
`control.usecases.joblist`; nothing here reads the store."""

from __future__ import annotations

import time
from collections.abc import Mapping
from urllib.parse import urlencode

from railyard.control.usecases.joblist import SORTS, JobPage, ListedJob
from railyard.control.usecases.jobviews import JobFilters
from railyard.web.page import duration, esc, table

HEADERS = ("", "job", "name", "user", "queue", "state", "GPUs", "priority", "submitted",
           "started", "ended", "exit", "waited", "ran", "placement", "reason")  # fmt: skip
PAGE_SIZES = (25, 50, 100, 500)
DEFAULT_PAGE_SIZE = 50
BULK_ACTIONS = ("cancel", "hold", "release")


def page_size(value: str | None) -> int:
    """The rows a page shows: one of `PAGE_SIZES` (``?rows=``), else the default."""
    return int(value) if value in {str(n) for n in PAGE_SIZES} else DEFAULT_PAGE_SIZE


def rows(found: JobPage, now_t_s: float) -> str:
    return table(HEADERS, [_row(line, now_t_s) for line in found.lines], tbody_id="jobs")


def _when(t_s: float | None, now_t_s: float) -> str:
    """A time as the list shows it: the clock today, the date and clock before."""
    if t_s is None:
        return ""
    same_day = time.localtime(t_s)[:3] == time.localtime(now_t_s)[:3]
    text = time.strftime("%H:%M:%S" if same_day else "%m-%d %H:%M", time.localtime(t_s))
    title = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t_s))
    return f'<time title="{title}">{text}</time>'


def _exit(line: ListedJob) -> str:
    """sacct's ExitCode ``code:signal``; empty until the job ends."""
    if line.exit_code is None and not line.exit_signal:
        return ""
    return _n(f"{line.exit_code if line.exit_code is not None else 0}:{line.exit_signal or 0}")


def _row(line: ListedJob, now_t_s: float) -> list[str]:
    pick = (f'<input type="checkbox" name="job" value="{esc(line.array or line.id)}" '
            f'form="bulk" aria-label="select {esc(line.id)}">')  # fmt: skip
    link = f'<a href="{esc(line.href)}">{esc(line.id)}</a>'
    if line.tasks > 1:
        link += f' <span class="muted">({line.tasks} tasks)</span>'
    state = f'<span class="state-{esc(line.state)}">{esc(line.state)}</span>'
    waited = (line.start_t_s if line.start_t_s is not None else now_t_s) - line.submit_t_s
    ran = None if line.start_t_s is None else (line.end_t_s or now_t_s) - line.start_t_s
    placement = " ".join(f"{n}:{','.join(map(str, g))}" for n, g in line.placement.items())
    return [pick, link, esc(line.name), esc(line.user), esc(line.queue), state, _n(line.gpus),
            _n(line.priority), _when(line.submit_t_s, now_t_s), _when(line.start_t_s, now_t_s),
            _when(line.end_t_s, now_t_s), _exit(line), _n(duration(waited)),
            _n(duration(ran) if ran is not None else ""), esc(placement),
            esc(line.reason)]  # fmt: skip


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

    size = page_size(params.get("rows"))
    sizes = "".join(f'<option value="{n}"{" selected" if n == size else ""}>{n}</option>'
                    for n in PAGE_SIZES)  # fmt: skip
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
        f'<label>sort <select name="sort">{sorts}</select></label> '
        f'<label>rows <select name="rows">{sizes}</select></label> {keep}'
        "<button>Show</button></form>"
    )


def bulk_form(csrf: str) -> str:
    """Acts on the jobs ticked in the table (their boxes name this form): each id through the
    same use-case and checks as its own button, for this user's rights."""
    options = "".join(f'<option value="{a}">{a} the selected jobs</option>'
                      for a in BULK_ACTIONS)  # fmt: skip
    return (
        '<form id="bulk" class="bulk" method="post" action="/ui/jobs/bulk" '
        'data-confirm="Apply this to every selected job?">'
        f'<input type="hidden" name="csrf" value="{esc(csrf)}">'
        f'<select name="action">{options}</select> <button>Apply</button></form>'
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
