"""Bulk actions on the jobs list's selected jobs (cancel, hold, release): a POST form with the
CSRF field like every action; each id goes through the same use-case as its own button and
the API (the acting user's rights checked per job, the audit trail written), in a savepoint
of its own, so one refusal (another user's job, a started job held) leaves the others done
and is named on the result page."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from fastapi.responses import HTMLResponse
from sqlalchemy.orm import Session

from railyard.control.errors import ServiceError
from railyard.control.usecases import jobs
from railyard.web.page import esc, page
from railyard.web.session import Viewer

MAX_SELECTED = 500  # the largest page
ACTIONS: dict[str, Callable[[Session, Any, str, float], Any]] = {
    "cancel": jobs.cancel_job, "hold": jobs.hold_job, "release": jobs.release_job,
}  # fmt: skip


@dataclass
class Outcome:
    done: list[str] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)


def selected(body: bytes) -> tuple[str, list[str]]:
    """The form's action and its ticked ids (each once, in order, at most `MAX_SELECTED`)."""
    fields = parse_qs(body.decode("utf-8", "replace"))
    ids = list(dict.fromkeys(v.strip() for v in fields.get("job", []) if v.strip()))
    return (fields.get("action") or [""])[0], ids


def apply(session: Session, who: Viewer, action: str, ids: list[str], now_t_s: float) -> Outcome:
    run = ACTIONS[action]
    out = Outcome()
    for job_id in ids[:MAX_SELECTED]:
        try:
            with session.begin_nested():
                run(session, who.user, job_id, now_t_s)
        except ServiceError as exc:
            out.refused.append((job_id, str(exc)))
        else:
            out.done.append(job_id)
    out.refused += [(i, f"more than {MAX_SELECTED} selected") for i in ids[MAX_SELECTED:]]
    return out


def result_page(action: str, out: Outcome, user: str, csrf: str) -> HTMLResponse:
    """What was done and what was refused, with a way back to the list."""
    verb = {"cancel": "Cancelled", "hold": "Held", "release": "Released"}[action]
    done = f"<p id=bulk-done>{verb} {len(out.done)} job(s): {esc(', '.join(out.done))}</p>"
    refused = "".join(f"<li>{esc(i)}: {esc(why)}</li>" for i, why in out.refused)
    if refused:
        done += f"<p>Refused {len(out.refused)}:</p><ul id=bulk-refused>{refused}</ul>"
    body = done + '<p><a href="/ui/jobs">Back to the jobs</a></p>'
    status = 200 if out.done or not out.refused else 409
    return page(f"{action.title()} the selected jobs", body, user=user, active="/ui/jobs",
                status=status, csrf=csrf)  # fmt: skip
