"""Container images in the simulated world: what a cold start costs.

A job whose image is not yet on some of its nodes waits for the pull before its work begins,
holding its GPUs (so goodput pays for it) but not its time limit (the live rule, see
`sched.model.RunningJob.run_t_s`). The pull is the image's bytes over the slower of the
node's own link and its share of the registry's, when `k` nodes pull at once:

    pull_s = latency_s + 8 * size_bytes / min(link_gbps, registry_gbps / k) / 1e9
             (+ 8 * size_bytes / unpack_gbps / 1e9 when unpacking is charged)

Serialization time is the only physics here; the defaults are assumptions to change per
site. The link default is the 100 GbE "external access" port the cluster build guide puts on
every node beside its fabric ports (seed article 001, "ネットワークインターフェース"); the
registry default is one such port. A node keeps every image it pulled (no eviction), and a
job that starts while another's pull of the same image is under way counts it as present.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

GB = 1e9


@dataclass(frozen=True)
class ImageWorld:
    """Image sizes and the links they travel over."""

    sizes_bytes: Mapping[str, float] = field(default_factory=dict)
    default_size_bytes: float = 10 * GB  # an image the map does not name
    link_gbps: float = 100.0
    registry_gbps: float = 100.0
    latency_s: float = 0.0
    unpack_gbps: float | None = None  # None: unpacking is not charged

    def __post_init__(self) -> None:
        for name, value in (("link_gbps", self.link_gbps), ("registry_gbps", self.registry_gbps)):
            if not 0 < value < math.inf:
                raise ValueError(f"images: {name} must be a finite number > 0, got {value!r}")
        if self.unpack_gbps is not None and not 0 < self.unpack_gbps < math.inf:
            raise ValueError(f"images: unpack_gbps must be > 0, got {self.unpack_gbps!r}")
        if not 0 <= self.latency_s < math.inf:
            raise ValueError(f"images: latency_s must be >= 0, got {self.latency_s!r}")
        sizes = [*self.sizes_bytes.values(), self.default_size_bytes]
        if any(not 0 <= s < math.inf for s in sizes):
            raise ValueError("images: sizes must be finite and >= 0 bytes")

    def size_bytes(self, image: str) -> float:
        return self.sizes_bytes.get(image, self.default_size_bytes)

    def pull_s(self, image: str, nodes_pulling: int) -> float:
        """Seconds until `image` is on every one of `nodes_pulling` nodes (0 when none pulls)."""
        if nodes_pulling <= 0:
            return 0.0
        bits = 8 * self.size_bytes(image)
        rate_gbps = min(self.link_gbps, self.registry_gbps / nodes_pulling)
        seconds = self.latency_s + bits / (rate_gbps * GB)
        if self.unpack_gbps is not None:
            seconds += bits / (self.unpack_gbps * GB)
        return seconds


def parse_image_size(text: str) -> tuple[str, float]:
    """``NAME=GB`` (the CLI's ``--image-size``) -> (name, bytes); ValueError with a hint."""
    name, sep, size = text.rpartition("=")
    if not sep or not name:
        raise ValueError(f"{text!r} is not NAME=GB (e.g. nvcr.io/nvidia/nemo:24.05=28)")
    try:
        gb = float(size)
    except ValueError:
        raise ValueError(f"{text!r}: {size!r} is not a number of GB") from None
    if not 0 <= gb < math.inf:
        raise ValueError(f"{text!r}: the size must be >= 0 GB")
    return name, gb * GB
