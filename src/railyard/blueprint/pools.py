"""Node pools: nodes a blueprint sets aside (the seed's RTX 6000 Ada nodes for interactive
work) as a resource flavor of their own, Kueue's ``ResourceFlavor``.

A pooled node's flavor is its GPU model and its pool, ``RTX-6000-Ada-48GB@interactive``: the
scheduler then needs no new rule (quotas, placement, preemption and reasons are per flavor
already), a queue gets quota in the pool by naming that flavor, and a queue limited to a
pool (``pool: interactive``) admits jobs on that pool's flavors only, while a queue without
one admits them on unpooled flavors only, so training never lands on a pooled node nor
waits behind a session. Where the GPU model matters (the twin's figures, health
expectations), :func:`gpu_of` drops the pool.
"""

from __future__ import annotations

POOL_SEP = "@"


def pooled(gpu: str, pool: str | None) -> str:
    """The flavor of a node with GPU model ``gpu`` in ``pool`` (None: in no pool)."""
    return f"{gpu}{POOL_SEP}{pool}" if pool else gpu


def gpu_of(flavor: str) -> str:
    """The GPU model of a flavor, pooled or not."""
    return flavor.partition(POOL_SEP)[0]


def pool_of(flavor: str) -> str | None:
    """The pool of a flavor; None for an unpooled one."""
    return flavor.partition(POOL_SEP)[2] or None
