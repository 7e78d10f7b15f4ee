"""The page frame, escaping and small HTML builders every page uses."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

from fastapi.responses import HTMLResponse

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#1d3557;color:#fff;padding:8px 16px;display:flex;gap:18px;align-items:center}
header a{color:#fff;text-decoration:none} header a.on{font-weight:700;text-decoration:underline}
header .who{margin-left:auto} main{padding:12px 16px}
table{border-collapse:collapse;margin:8px 0} th,td{padding:3px 8px;border-bottom:1px solid #ddd;
text-align:left;vertical-align:top} th{background:#eee}
.num{text-align:right} .muted{color:#777} .err{color:#b00020}
.state-running{color:#1a7f37} .state-pending{color:#9a6700} .state-failed,.state-timeout,
.state-node_fail{color:#b00020} .state-completed{color:#555}
pre.log{background:#111;color:#ddd;padding:8px;max-height:420px;overflow:auto;font-size:12px}
.su{border:1px solid #bbb;margin:6px 0;padding:4px;background:#fff}
.lg{display:inline-block;vertical-align:top;border:1px dashed #ccc;margin:3px;padding:3px}
.node{display:inline-block;margin:2px;padding:2px;border:2px solid #2a9d8f;font-size:10px;
width:92px} .node.draining,.node.drained{border-color:#e9c46a} .node.down{border-color:#b00020}
.node.hfail{outline:2px solid #b00020} .gpu{display:inline-block;width:8px;height:8px;
margin:1px;background:#ddd} .gpu.other{background:#999} .gpu.dim{opacity:.25}
form.inline{display:inline} button{cursor:pointer}
"""


def esc(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


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
        f'onsubmit="return confirm({esc(repr(confirm))})">{fields}'
        f'<input type="hidden" name="csrf" value="{esc(csrf)}">'
        f"<button>{esc(label)}</button></form>"
    )


NAV = (("/ui/", "Overview"), ("/ui/jobs", "Jobs"), ("/ui/fabric", "Fabric"),
       ("/ui/queues", "Queues"))  # fmt: skip


def page(title: str, body: str, *, user: str | None, active: str = "", status: int = 200,
         script: str = "", csrf: str = "") -> HTMLResponse:  # fmt: skip
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
    js = f"<script>{script}</script>" if script else ""
    doc = (
        f"<!doctype html><html><head><meta charset=utf-8><title>{esc(title)} · railyard"
        f"</title><style>{CSS}</style></head><body>{nav}<main><h1>{esc(title)}</h1>"
        f"{body}</main>{js}</body></html>"
    )
    return HTMLResponse(doc, status_code=status, headers={"Cache-Control": "no-store"})
