"""The fabric map: scalable units, leaf groups, nodes and GPUs, drawn from the nodes'
topology paths (the blueprint's, through the inventory); each GPU colored by the job on it,
each node framed by its state and health. With a job picked, its GPUs stand out and the page
says how many nodes and leaf groups it spans. HTML boxes, not a picture: readable from 12 to
256 nodes, and each node is a link an admin can drain or resume from."""

from __future__ import annotations

from collections import defaultdict

from railyard.control.usecases.fabric import FabricView, NodeCell
from railyard.web.assets import hue_class
from railyard.web.page import button, esc
from railyard.web.session import Viewer


def render(view: FabricView, who: Viewer, asked: str | None) -> str:
    """The map; `asked` is the job id the viewer asked for (`view.focus` is it, when theirs)."""
    tree: dict[str, dict[str, list[NodeCell]]] = defaultdict(lambda: defaultdict(list))
    for n in view.nodes:
        path = list(n.path) or ["su0", "lg0"]
        tree[path[0]][path[-1]].append(n)
    parts = []
    if view.focus is not None:
        picked = view.focus_nodes
        groups = {n.path for n in view.nodes if n.name in picked}
        parts.append(
            f'<p>Job <a href="/ui/jobs/{esc(view.focus)}">{esc(view.focus)}</a>: '
            f"{len(picked)} node(s), {len(groups)} leaf group(s), "
            f"{len({g[0] for g in groups if g})} scalable unit(s).</p>"
        )
    elif asked:
        parts.append(f"<p class=muted>No job {esc(asked)} of yours to show.</p>")
    parts.append(
        "<p class=muted>Frame: green ready, yellow draining or drained, red down; a red outline "
        "is a failed health check. GPU: colored by job, grey another user's, light free.</p>"
    )
    for su in sorted(tree):
        leaves = []
        for lg in sorted(tree[su]):
            boxes = "".join(_node(n, who, view.focus) for n in tree[su][lg])
            leaves.append(f'<div class="lg"><div class="muted">{esc(lg)}</div>{boxes}</div>')
        parts.append(f'<div class="su"><b>{esc(su)}</b> {"".join(leaves)}</div>')
    return "".join(parts)


def _node(n: NodeCell, who: Viewer, focus: str | None) -> str:
    gpus = []
    for cell in n.gpus:
        if not cell.in_use:
            gpus.append('<span class="gpu" title="free"></span>')
            continue
        dim = " dim" if focus is not None and cell.job_id != focus else ""
        if cell.job_id is not None:
            gpus.append(f'<span class="gpu {hue_class(cell.job_id)}{dim}" '
                        f'title="job {esc(cell.job_id)}"></span>')  # fmt: skip
        else:  # another user's job: never named
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
