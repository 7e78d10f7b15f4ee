"""The page frame, escaping and small HTML builders every page uses. Pages carry no inline
script or style (the Content-Security-Policy forbids both): `web.assets` serves them."""

from __future__ import annotations

import html
import shlex
import time
from collections.abc import Iterable, Sequence

from fastapi.responses import HTMLResponse

from railyard.client.printable import printable_lines
from railyard.web import assets


def esc(value: object) -> str:
    """HTML-escaped, with a user's control characters shown as their escapes (the CLI's rule,
    :mod:`railyard.client.printable`): a page must not carry bytes a terminal would act on
    when it is saved, copied or read with curl."""
    return html.escape(printable_lines("" if value is None else str(value)), quote=True)


_ANSI_C = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\\": "\\\\", "'": "\\'"}


def shell_word(arg: str) -> str:
    """``arg`` as a shell would read it back: quoted as ``shlex`` does, or, holding a line
    break or tab, as bash's ``$'...'`` with the escapes written out, so a command with newlines
    reads on one line as what was run (the other control characters are `esc`'s)."""
    if not any(c in arg for c in "\n\t\r"):
        return shlex.quote(arg)
    return "$'" + "".join(_ANSI_C.get(c, c) for c in arg) + "'"


def command_text(argv: Sequence[str]) -> str:
    return " ".join(shell_word(a) for a in argv)


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], *, tbody_id: str = "") -> str:
    """Cells are HTML already (escape with `esc`)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    ident = f' id="{esc(tbody_id)}"' if tbody_id else ""
    thead = f"<thead><tr>{head}</tr></thead>" if any(headers) else ""
    return f"<table>{thead}<tbody{ident}>{body}</tbody></table>"


def button(action: str, label: str, csrf: str, *, confirm: str, fields: str = "") -> str:
    """A POST form with the CSRF field; the browser asks before it sends."""
    return (
        f'<form class="inline" method="post" action="{esc(action)}" '
        f'data-confirm="{esc(confirm)}">{fields}'
        f'<input type="hidden" name="csrf" value="{esc(csrf)}">'
        f"<button>{esc(label)}</button></form>"
    )


NAV = (("/ui/", "Overview"), ("/ui/jobs", "Jobs"), ("/ui/fabric", "Fabric"),
       ("/ui/queues", "Queues"), ("/ui/accounting", "Accounting"),
       ("/ui/alerts", "Alerts"))  # fmt: skip


def page(title: str, body: str, *, user: str | None, active: str = "", status: int = 200,
         csrf: str = "") -> HTMLResponse:  # fmt: skip
    links = "".join(
        f'<a href="{href}"{" class=on" if href == active else ""}>{label}</a>'
        for href, label in NAV
    )
    who = ""
    if user is not None:
        logout = (f'<form class="inline" method="post" action="/ui/logout">'
                  f'<input type="hidden" name="csrf" value="{esc(csrf)}">'
                  f"<button>log out</button></form>")  # fmt: skip
        who = f'<span class="who">{esc(user)} {logout}</span>'
    nav = f"<header><b>railyard</b>{links if user else ''}{who}</header>"
    doc = (
        f"<!doctype html><html><head><meta charset=utf-8><title>{esc(title)} · railyard"
        f'</title><link rel="stylesheet" href="{assets.url("app.css")}"></head><body>{nav}'
        f"<main><h1>{esc(title)}</h1>{body}</main>"
        f'<script src="{assets.url("app.js")}"></script></body></html>'
    )
    return HTMLResponse(doc, status_code=status, headers={"Cache-Control": "no-store"})


def duration(seconds: float) -> str:
    """Slurm's ``[D-]HH:MM:SS``."""
    seconds = max(0, int(seconds))
    days, rest = divmod(seconds, 86400)
    text = time.strftime("%H:%M:%S", time.gmtime(rest))
    return f"{days}-{text}" if days else text
