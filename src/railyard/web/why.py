"""The "why" panel of a pending job's page: its reason in words and in numbers (quota, free
GPUs, jobs ahead, fair share), and a slot the page's script fills with the twin's expected
start (``/ui/jobs/ID/start``: the simulator runs apart from the page, at most every 30 s)."""

from __future__ import annotations

from railyard.control.usecases.why import Why
from railyard.web.page import esc, table


def render(why: Why, job_id: str) -> str:
    facts = [
        ("reason", f"<b>{esc(why.reason)}</b>" + (f": {esc(why.explanation)}"
                                                    if why.explanation else "")),
        ("expected start", f'<span id="start" data-job="{esc(job_id)}">asking the twin...</span>'),
        ("asks", f"{why.gpus} {esc(why.flavor)} GPUs; {why.free_gpus} of that flavor are free now"),
        (f"queue {esc(why.queue)}", f"quota {why.nominal_gpus}, in use {why.used_gpus}"
         + (f", of which {why.borrowed_gpus} borrowed" if why.borrowed_gpus else "")),
        ("ahead of it", f"{why.ahead:,} pending job(s) of its queue, {why.ahead_cluster:,} of "
         "its flavor in all queues (higher priority, or the same and submitted before)"),
        ("fair share", f"its queue has used {why.queue_usage:.0%} of the cluster's recent GPU "
         f"time against an entitlement of {why.queue_entitlement:.0%}; its user "
         f"{why.user_usage_gpu_h:,.1f} GPU-hours there (decayed)"),
    ]  # fmt: skip
    return "<h2>Why it waits</h2>" + table(("", ""), [[esc(k), v] for k, v in facts])
