"""The fabric map: scalable units, leaf groups, nodes and GPUs, drawn from the nodes'
topology paths (the blueprint's, through the inventory), in the hierarchy's own order (su2
before su10).

Two views of one page. The heat-map (the default from 64 nodes: 2,048 GPUs fit on one
screen) draws a node as a small square shaded by how many of its GPUs are busy, framed by its
state, outlined red when its last health check failed, and holding the picked job's GPUs in
its color; each square links to that node in the boxes view. The boxes view draws every GPU,
colored by its job, with the node's reason and health, and the admin's drain and resume.
Above both: the nodes that need someone (as ``sinfo -R``), those with no machine behind them
counted on one line, and a filter by name and state.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from urllib.parse import urlencode

from railyard.control.usecases.fabric import FabricView, NodeCell
from railyard.web.assets import hue_class
from railyard.web.page import button, esc, table
from railyard.web.session import Viewer

HEATMAP_FROM_NODES = 64
STATES = ("ready", "draining", "drained", "down")
BAD_HEALTH = ("fail", "fatal")


def natural(text: str) -> tuple[tuple[int, object], ...]:
    """``su2`` before ``su10``: digits compare as numbers."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", text) if p)


def render(view: FabricView, who: Viewer, asked: str | None, params: Mapping[str, str]) -> str:
    """The map; `asked` is the job id the viewer asked for (`view.focus` is it, when theirs)."""
    name = (params.get("q") or "").strip()
    state = params.get("state") or ""
    shown = [n for n in view.nodes if name in n.name and (not state or n.state == state)]
    mode = params.get("view") or ("map" if len(view.nodes) >= HEATMAP_FROM_NODES else "boxes")
    parts = [_choices(params, mode), _attention(view.nodes)]
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
    if mode == "map":
        parts.append(
            "<p class=muted>A square per node, darker as more of its GPUs are busy; frame: "
            "none ready, yellow draining or drained, red down, grey no machine; a red outline "
            "is a failed health check. A picked job's nodes are in its color.</p>"
        )
    else:
        parts.append(
            "<p class=muted>Frame: green ready, yellow draining or drained, red down; a red "
            "outline is a failed health check. GPU: colored by job, grey another user's, light "
            "free.</p>"
        )
    draw = _square if mode == "map" else _node
    for su, leaves in _tree(shown):
        cells = [
            f'<div class="lg"><div class="muted">{esc(lg)}</div>'
            + "".join(draw(n, who, view.focus) for n in nodes)
            + "</div>"
            for lg, nodes in leaves
        ]
        parts.append(f'<div class="su{" map" if mode == "map" else ""}"><b>{esc(su)}</b> '
                     f'{"".join(cells)}</div>')  # fmt: skip
    if not shown:
        parts.append("<p class=muted>no node matches</p>")
    return "".join(parts)


def _tree(nodes: list[NodeCell]) -> list[tuple[str, list[tuple[str, list[NodeCell]]]]]:
    tree: dict[str, dict[str, list[NodeCell]]] = defaultdict(lambda: defaultdict(list))
    for n in nodes:
        path = list(n.path) or ["su0", "lg0"]
        tree[path[0]][path[-1]].append(n)
    return [
        (su, [(lg, sorted(tree[su][lg], key=lambda n: natural(n.name)))
              for lg in sorted(tree[su], key=natural)])
        for su in sorted(tree, key=natural)
    ]  # fmt: skip


def _choices(params: Mapping[str, str], mode: str) -> str:
    states = "".join(f'<option value="{s}"{" selected" if s == params.get("state") else ""}>'
                     f"{s or 'any'}</option>" for s in ("", *STATES))  # fmt: skip
    other = "boxes" if mode == "map" else "map"
    keep = {k: v for k, v in params.items() if k in ("q", "state", "job")} | {"view": other}
    label = "every GPU" if other == "boxes" else "heat-map"
    return (
        '<form method="get" action="/ui/fabric">'
        f'<label>node <input name="q" value="{esc(params.get("q") or "")}" maxlength="64">'
        f'</label> <label>state <select name="state">{states}</select></label> '
        f'<input type="hidden" name="view" value="{esc(mode)}">'
        + (f'<input type="hidden" name="job" value="{esc(params["job"])}">'
           if params.get("job") else "")
        + f'<button>Show</button> <a href="/ui/fabric?{esc(urlencode(keep))}">{label}</a>'
        "</form>"
    )  # fmt: skip


def _attention(nodes: list[NodeCell]) -> str:
    """Nodes someone should look at: not ready, or failing their checks; those with no
    machine behind them on one line (a blueprint's nodes before they join)."""
    absent = sorted((n.name for n in nodes if not n.machine), key=natural)
    bad = [n for n in nodes if n.machine and (n.state != "ready" or n.health in BAD_HEALTH)]
    out = ""
    if bad:
        rows = []
        for n in sorted(bad, key=lambda n: natural(n.name)):
            href = "/ui/fabric?" + urlencode({"view": "boxes", "q": n.name})
            rows.append([f'<a href="{esc(href)}">{esc(n.name)}</a>', esc("/".join(n.path)),
                         esc(n.state), esc(n.reason), esc(n.health or "")])  # fmt: skip
        out += "<h2>Nodes needing attention</h2>" + table(
            ("node", "place", "state", "reason", "health"), rows, tbody_id="bad-nodes"
        )
    if absent:
        names = ", ".join(absent[:8]) + (", ..." if len(absent) > 8 else "")
        out += (f'<p class="muted" id="absent">{len(absent)} node(s) have no live machine: '
                f"{esc(names)} (they come up when one joins).</p>")  # fmt: skip
    return out


def _square(n: NodeCell, who: Viewer, focus: str | None) -> str:
    busy = sum(1 for g in n.gpus if g.in_use)
    level = 0 if not n.gpus or not busy else 1 + min(3, busy * 4 // (len(n.gpus) + 1))
    mine = [g.job_id for g in n.gpus if focus is not None and g.job_id == focus]
    color = f" {hue_class(focus)} pick" if mine and focus is not None else ""
    dim = " dim" if focus is not None and not mine else ""
    state = n.state if n.machine else "absent"
    health = " hfail" if n.health in BAD_HEALTH else ""
    title = f"{n.name}: {n.state}, {busy}/{len(n.gpus)} GPUs busy"
    title += (f" ({n.reason})" if n.reason else "") + (f", health {n.health}" if n.health else "")
    href = "/ui/fabric?" + urlencode({"view": "boxes", "q": n.name})
    return (
        f'<a class="cell u{level} {esc(state)}{health}{color}{dim}" href="{esc(href)}" '
        f'title="{esc(title)}" id="node-{esc(n.name)}" data-state="{esc(n.state)}"></a>'
    )


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
    health = " hfail" if n.health in BAD_HEALTH else ""
    title = f"{n.name}: {n.state}" + (f" ({n.reason})" if n.reason else "")
    note = esc(n.reason) if n.state != "ready" and n.reason else ""
    if n.health:
        note += f"{' · ' if note else ''}health {esc(n.health)}"
    actions = ""
    if who.admin and n.machine:
        if n.state == "ready":
            reason = '<input type="hidden" name="reason" value="dashboard">'
            actions = button(f"/ui/nodes/{n.name}/drain", "drain", who.csrf,
                             confirm=f"Drain {n.name}? Running jobs finish; no new ones start.",
                             fields=reason)  # fmt: skip
        else:
            actions = button(f"/ui/nodes/{n.name}/resume", "resume", who.csrf,
                             confirm=f"Resume {n.name}?")  # fmt: skip
    return (
        f'<div class="node {esc(n.state if n.machine else "absent")}{health}" '
        f'title="{esc(title)}" id="node-{esc(n.name)}" data-state="{esc(n.state)}">'
        f'<a href="/ui/nodes/{esc(n.name)}" title="its GPU utilisation">{esc(n.name)}</a><br>'
        f'{"".join(gpus)}<br><span class="note">{note}</span>{actions}</div>'
    )
