"""Per-GPU metrics under dcgm-exporter's names and labels, read through NVML
(:func:`railyard.probe.read_gpus`), so dashboards built for dcgm-exporter work unchanged.

Names, units and labels follow dcgm-exporter's default counters
(https://github.com/NVIDIA/dcgm-exporter, ``etc/default-counters.csv``): ``gpu`` (the NVML
index), ``UUID``, ``device`` (``nvidia<minor>``), ``modelName`` and ``Hostname``. On top,
the railyard job on that GPU: ``hpc_job`` (dcgm-exporter's own label for an HPC job mapped
to a GPU, its ``--hpc-job-mapping-dir``), ``user`` and ``queue``, empty when the GPU is free.
``job`` is not used: Prometheus sets it to the scrape job's name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from sqlalchemy import select
from sqlalchemy.orm import Session

from railyard.control.store.database import Store
from railyard.control.store.tables import HOLDING_STATES, JobRow, User
from railyard.probe import GpuReading

LABELS = ["gpu", "UUID", "device", "modelName", "Hostname", "hpc_job", "user", "queue"]
# (name, help, the reading's field), in dcgm-exporter's units
FIELDS = (
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", "util_pct"),
    ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", "fb_used_mib"),
    ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", "fb_free_mib"),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", "power_w"),
    ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", "temp_c"),
    ("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", "sm_clock_mhz"),
    ("DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", "mem_clock_mhz"),
)
DCGM_NAMES = frozenset(name for name, _, _ in FIELDS)


@dataclass(frozen=True)
class Owner:
    """The railyard job placed on a GPU."""

    job_id: str
    user: str
    queue: str


def dcgm_families(
    readings: Sequence[GpuReading], owners: Mapping[int, Owner], hostname: str
) -> list[Metric]:
    """One family per DCGM field, one sample per GPU that reports it; ``owners`` maps a GPU
    index of this node to the job placed on it."""
    families: list[Metric] = []
    for name, doc, attr in FIELDS:
        family = GaugeMetricFamily(name, doc, labels=LABELS)
        for r in readings:
            value = getattr(r, attr)
            if value is None:
                continue
            owner = owners.get(r.index)
            device = f"nvidia{r.minor if r.minor is not None else r.index}"
            family.add_metric(
                [
                    str(r.index),
                    r.uuid,
                    device,
                    r.name,
                    hostname,
                    owner.job_id if owner else "",
                    owner.user if owner else "",
                    owner.queue if owner else "",
                ],
                value,
            )
        if family.samples:
            families.append(family)
    return families


def gpu_owners(session: Session, node: str) -> dict[int, Owner]:
    """GPU index -> the job holding it on ``node``, from the placements in the store."""
    rows = session.execute(
        select(JobRow.id, User.name, JobRow.queue, JobRow.placement)
        .join(User, User.id == JobRow.user_id)
        .where(JobRow.state.in_(HOLDING_STATES))
    )
    owners = {}
    for job_id, user, queue, placement in rows:
        for index in (placement or {}).get(node, ()):
            owners[int(index)] = Owner(job_id, user, queue)
    return owners


class GpuCollector(Collector):
    """This machine's GPUs (``read``), labelled with the jobs the store placed on them."""

    def __init__(self, store: Store, node: str, read: Callable[[], Sequence[GpuReading]]) -> None:
        self.store, self.node, self.read = store, node, read

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        readings = self.read()
        if not readings:  # no NVML, no driver or no GPU: the families are absent
            return
        with self.store.session() as session:
            owners = gpu_owners(session, self.node)
        yield from dcgm_families(readings, owners, self.node)
