"""The fabric map: scalable units, leaf groups, nodes and GPUs, drawn from the nodes'
topology paths (the blueprint's, through the inventory); each GPU colored by the job on it,
each node framed by its state and health. With a job picked, its GPUs stand out and the page
says how many nodes and leaf groups it spans. HTML boxes, not a picture: readable from 12 to
256 nodes, and each node is a link an admin can drain or resume from."""

from __future__ import annotations

from collections import defaultdict

from sqlalchemy import select
from sqlalchemy.orm import Session

from railyard.control.tables import JobRow, NodeRow
from railyard.web.assets import hue_class
from railyard.web.figures import placements
from railyard.web.page import button, esc
from railyard.web.session import Viewer


def render(session: Session, who: Viewer, focus: str | None) -> str:
    rows = list(session.scalars(select(NodeRow).order_by(NodeRow.name)))
    held = placements(session)
    focus_row = session.get(JobRow, focus) if focus else None
    if focus_row is not None and not who.admin and focus_row.user_id != who.user.id:
        focus_row = None  # not theirs: nothing to show
    picked = set((focus_row.placement or {}).keys()) if focus_row is not None else set()
    tree: dict[str, dict[str, list[NodeRow]]] = defaultdict(lambda: defaultdict(list))
    for n in rows:
        path = list(n.path) or ["su0", "lg0"]
        tree[path[0]][path[-1]].append(n)
    parts = []
    if focus_row is not None:
        groups = {tuple(n.path) for n in rows if n.name in picked}
        parts.append(
            f'<p>Job <a href="/ui/jobs/{esc(focus_row.id)}">{esc(focus_row.id)}</a>: '
            f"{len(picked)} node(s), {len(groups)} leaf group(s), "
            f"{len({g[0] for g in groups if g})} scalable unit(s).</p>"
        )
    elif focus:
        parts.append(f"<p class=muted>No job {esc(focus)} of yours to show.</p>")
    parts.append(
        "<p class=muted>Frame: green ready, yellow draining or drained, red down; a red outline "
        "is a failed health check. GPU: colored by job, grey another user's, light free.</p>"
    )
    for su in sorted(tree):
        leaves = []
        for lg in sorted(tree[su]):
            boxes = "".join(_node(n, held.get(n.name, {}), who, focus_row) for n in tree[su][lg])
            leaves.append(f'<div class="lg"><div class="muted">{esc(lg)}</div>{boxes}</div>')
        parts.append(f'<div class="su"><b>{esc(su)}</b> {"".join(leaves)}</div>')
    return "".join(parts)


def _node(n: NodeRow, held: dict[int, tuple[str, int]], who: Viewer,
          focus: JobRow | None) -> str:  # fmt: skip
    gpus = []
    for g in range(n.gpus):
        job = held.get(g)
        if job is None:
            gpus.append('<span class="gpu" title="free"></span>')
            continue
        job_id, owner = job
        dim = " dim" if focus is not None and job_id != focus.id else ""
        if who.admin or owner == who.user.id:
            gpus.append(f'<span class="gpu {hue_class(job_id)}{dim}" '
                        f'title="job {esc(job_id)}"></span>')  # fmt: skip
        else:
            gpus.append(f'<span class="gpu other{dim}" title="in use"></span>')
    health = " hfail" if n.health in ("fail", "fatal") else ""
    title = f"{n.name}: {n.state}" + (f" ({n.reason})" if n.reason else "")
    actions = ""
    if who.admin:
        if n.state == "ready":
            reason = '<input type="hidden" name="reason" value="dashboard">'
            actions = button(f"/ui/nodes/{n.name}/drain", "drain", who.csrf,
                             confirm=f"Drain {n.name}? Running jobs finish; no new ones start.",
                             fields=reason)  # fmt: skip
        else:
            actions = button(f"/ui/nodes/{n.name}/resume", "resume", who.csrf,
                             confirm=f"Resume {n.name}?")  # fmt: skip
    return (
        f'<div class="node {esc(n.state)}{health}" title="{esc(title)}" id="node-{esc(n.name)}"'
        f' data-state="{esc(n.state)}">{esc(n.name)}<br>{"".join(gpus)}<br>{actions}</div>'
    )
