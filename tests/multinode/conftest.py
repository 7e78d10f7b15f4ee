"""One local multi-node Ray cluster per test module (Ray's own test utility: several raylets
on this machine), each worker node joined as railyard's `join` declares it. Skipped, with the
reason, where Ray is not installed."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.parts import require

require("ray")
import ray  # noqa: E402
from ray._common.utils import get_default_ray_temp_dir  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

from railyard.exec.ray.rayagent import GPUS_RESOURCE, NODE_RESOURCE  # noqa: E402

NODES = ("n1", "n2", "n3")
ADD_TRIES = 3
GPUS = 2


def join_resources(name: str, gpus: int = GPUS, flavor: str = "virtual") -> dict[str, float]:
    return {f"{NODE_RESOURCE}{name}": 1000.0, GPUS_RESOURCE: float(gpus),
            f"railyard_flavor:{flavor}": 1.0}  # fmt: skip


class LocalRay:
    """A head (the driver's, no railyard node) and joined nodes (three of 2 declared GPUs by
    default), as `railyard join` declares them."""

    def __init__(self, names: tuple[str, ...] = NODES, gpus: int = GPUS) -> None:
        self.gpus = gpus
        # Ray's sessions (0777) inside a 0700 directory, as `railyard join` keeps them:
        # `railyard up --ray` refuses a session other accounts can enter (issue 53, item 2)
        self.base = tempfile.mkdtemp(prefix="ryray-", dir="/tmp")
        head = {"num_cpus": 1, "include_dashboard": False,  # as CI, where ray[default] is not
                "temp_dir": os.path.join(self.base, "ray")}  # fmt: skip
        # Ray's test Cluster writes the head's address to the default temp dir whatever
        # temp_dir says, and fails where no Ray ran before (a fresh machine): make it.
        os.makedirs(get_default_ray_temp_dir(), exist_ok=True)
        self.cluster = Cluster(initialize_head=True, head_node_args=head)
        self.nodes: dict[str, Any] = {}
        for name in names:
            self.add(name)
        self.cluster.wait_for_nodes()
        if ray.is_initialized():  # an earlier test in this process left its own Ray session
            ray.shutdown()
        ray.init(address=self.cluster.address, namespace="railyard", log_to_driver=False)

    @property
    def address(self) -> str:
        return str(self.cluster.address)

    @property
    def up_args(self) -> tuple[str, ...]:
        """`railyard up`'s flags for this cluster: Ray's test Cluster has no token
        authentication (on this machine's loopback only), so --insecure-ray accepts that."""
        return ("--ray", self.address, "--insecure-ray")

    def add(self, name: str) -> Any:
        """Start node ``name``. On this shared 2-core machine a raylet sometimes misses Ray's
        30 s registration deadline while another module's cluster is busy ("timed out during
        startup"): that start is tried again, twice at most; any other error is raised."""
        for attempt in range(ADD_TRIES):
            try:
                node = self.cluster.add_node(num_cpus=1, resources=join_resources(name, self.gpus))
                break
            except Exception as exc:
                if "timed out during startup" not in str(exc) or attempt == ADD_TRIES - 1:
                    raise
                time.sleep(2.0)
        self.nodes[name] = node
        return node

    def remove(self, name: str) -> None:
        self.cluster.remove_node(self.nodes.pop(name))

    def shutdown(self) -> None:
        ray.shutdown()
        self.cluster.shutdown()
        shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture(scope="module")
def local_ray() -> Iterator[LocalRay]:
    made = LocalRay()
    try:
        yield made
    finally:
        made.shutdown()
