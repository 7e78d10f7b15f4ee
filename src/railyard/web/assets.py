"""The dashboard's only style sheet and script, served from `/ui/static/` so that the pages
carry no inline script or style and the Content-Security-Policy can forbid both.

Each URL carries a hash of its content (``?v=...``), so a browser may cache it for a day and
still gets the new file after an upgrade.
"""

from __future__ import annotations

import hashlib

from fastapi.responses import Response

HUES = 36  # a job's GPUs are colored by one of these hues (10 degrees apart)

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#1d3557;color:#fff;padding:8px 16px;display:flex;gap:18px;align-items:center}
header a{color:#fff;text-decoration:none} header a.on{font-weight:700;text-decoration:underline}
header .who{margin-left:auto} main{padding:12px 16px}
table{border-collapse:collapse;margin:8px 0} th,td{padding:3px 8px;border-bottom:1px solid #ddd;
text-align:left;vertical-align:top} th{background:#eee}
.num{text-align:right} .muted{color:#777} .err{color:#b00020}
.state-running{color:#1a7f37} .state-pending{color:#9a6700} .state-failed,.state-timeout,
.state-node_fail,.state-deadline{color:#b00020} .state-completed{color:#555}
pre.log{background:#111;color:#ddd;padding:8px;max-height:420px;overflow:auto;font-size:12px}
.su{border:1px solid #bbb;margin:6px 0;padding:4px;background:#fff}
.lg{display:inline-block;vertical-align:top;border:1px dashed #ccc;margin:3px;padding:3px}
.node{display:inline-block;margin:2px;padding:2px;border:2px solid #2a9d8f;font-size:10px;
width:92px} .node.draining,.node.drained{border-color:#e9c46a} .node.down{border-color:#b00020}
.node.hfail{outline:2px solid #b00020} .gpu{display:inline-block;width:8px;height:8px;
margin:1px;background:#ddd} .gpu.other{background:#999} .gpu.dim{opacity:.25}
form.inline{display:inline} button{cursor:pointer}
.node.absent{border-color:#bbb;color:#999} .node .note{color:#b00020;display:block}
.su.map .lg{width:auto;max-width:118px;margin:2px}
.cell{display:inline-block;width:12px;height:12px;margin:1px;background:#e8eef3;
border:1px solid transparent;box-sizing:border-box}
.cell.u1{background:#a8c5da} .cell.u2{background:#6b9ac4} .cell.u3{background:#3a6ea5}
.cell.u4{background:#1d3557} .cell.draining,.cell.drained{border-color:#e9c46a}
.cell.down{border-color:#b00020} .cell.absent{background:#f4f4f4;border-color:#ccc}
.cell.hfail{outline:2px solid #b00020} .cell.dim{opacity:.3} p.pager a{margin:0 2px}
.inline-table{display:inline-block;vertical-align:top;margin-right:24px}
.charts figure{display:inline-block;margin:8px 16px 8px 0}
.warn{color:#9a3412;font-weight:600} form.bulk{margin:6px 0} p.range b{text-decoration:underline}
.alert-firing{color:#b00020;font-weight:600} .alert-ok{color:#1a7f37}
""" + "".join(
    f".gpu.h{i},.cell.h{i}{{background:hsl({i * 360 // HUES},65%,45%)}}\n" for i in range(HUES)
)

JS = r"""
"use strict";
// a form with data-confirm asks before it is sent (actions: cancel, hold, drain...)
document.addEventListener("submit", (e) => {
  const ask = e.target.dataset ? e.target.dataset.confirm : undefined;
  if (ask && !window.confirm(ask)) e.preventDefault();
});
// the jobs page: its table is fetched again every 2 s
if (document.getElementById("jobs")) {
  setInterval(async () => {
    const u = new URL(location.href); u.searchParams.set("partial", "1");
    const r = await fetch(u);
    if (r.ok) {
      const ticked = new Set([...document.querySelectorAll("#jobs input[name=job]:checked")]
        .map((box) => box.value));  // the selection outlives the refresh
      document.getElementById("jobs").outerHTML = (await r.text())
        .replace(/^[\s\S]*?<tbody/, "<tbody").replace(/<\/tbody>[\s\S]*$/, "</tbody>");
      document.querySelectorAll("#jobs input[name=job]").forEach((box) => {
        if (ticked.has(box.value)) box.checked = true;
      });
    }
  }, 2000);
}
// a pending job's page: the twin's expected start, asked apart (it runs the simulator)
const start = document.getElementById("start");
if (start) {
  fetch(location.pathname + "/start").then((r) => r.json()).then((d) => {
    start.textContent = d.text || "not pending any more";
  }).catch(() => { start.textContent = "unknown"; });
}
// a job's page: its log, tailed while the job runs
const pre = document.getElementById("log");
const rank = document.getElementById("rank");
if (pre && rank) {
  let offset = 0;
  const tail = async () => {
    const r = await fetch(location.pathname + "/log?rank=" + rank.value + "&offset=" + offset);
    if (!r.ok) { pre.textContent += "\n[" + r.status + "]"; return; }
    const d = await r.json();
    if (d.text) { pre.textContent += d.text; pre.scrollTop = pre.scrollHeight; }
    offset = d.offset;
    if (!d.finished) setTimeout(tail, 1000);
  };
  rank.addEventListener("change", () => { offset = 0; pre.textContent = ""; tail(); });
  tail();
}
"""

FILES = {
    "app.css": (CSS, "text/css; charset=utf-8"),
    "app.js": (JS, "text/javascript; charset=utf-8"),
}
VERSION = {
    name: hashlib.sha256(text.encode()).hexdigest()[:12] for name, (text, _) in FILES.items()
}


def url(name: str) -> str:
    return f"/ui/static/{name}?v={VERSION[name]}"


def serve(name: str) -> Response | None:
    """The file, or None if there is no such file."""
    found = FILES.get(name)
    if found is None:
        return None
    text, kind = found
    return Response(text, media_type=kind, headers={"Cache-Control": "public, max-age=86400"})


def hue_class(job_id: str) -> str:
    """A stable color class per job (one of HUES)."""
    return f"h{int(hashlib.sha256(job_id.encode()).hexdigest()[:4], 16) % HUES}"
