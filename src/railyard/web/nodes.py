"""A node's page: its state and GPUs, and its GPU utilisation over the range picked (the
overview's picker, ``?range=``), from the sampler's readings (`control.usecases.nodeutil`)."""

from __future__ import annotations

from railyard.control.usecases.nodeutil import NodeUtil
from railyard.web.figures import chart
from railyard.web.overview import TICKS, WORDS, range_picker
from railyard.web.page import esc, table


def render(found: NodeUtil, span: str) -> str:
    facts = table(("", ""), [
        ["state", esc(found.state)], ["flavor", esc(found.flavor)],
        ["GPUs", f'<span class="num">{found.gpus}</span>'],
        ["readings in range", f'<span class="num">{found.readings:,}</span>'],
    ])  # fmt: skip
    by_gpu = table(("GPU", "mean utilisation"), [
        [f'<span class="num">{g}</span>', f'<span class="num">{u:.0%}</span>']
        for g, u in sorted(found.by_gpu.items())
    ], tbody_id="node-gpus")  # fmt: skip
    return (
        facts
        + range_picker(f"/ui/nodes/{found.node}", span)
        + '<div class="charts">'
        + chart(found.utilization, label=f"GPU utilisation of {found.node}, {WORDS[span]}",
                percent=True, x_labels=TICKS[span])
        + "</div><h2>By GPU</h2>" + by_gpu
        + '<p><a href="/ui/fabric">Fabric map</a> · <a href="/ui/alerts">Alerts</a></p>'
    )  # fmt: skip
