"""The node agent: a Ray actor pinned to one node that runs that node's share of one attempt.

One detached, named actor per (job, attempt, node) (`railyard-<job>-<attempt>-<node>`),
pinned by the node's own custom resource (`railyard_node:<name>`, which `railyard join`
declares), so it can only run there. It holds a `LocalExecutor` scoped to its node, so the
ranks placed there start exactly as local ranks do: the job's Unix account, the launch
contract of :mod:`railyard.exec.launch` (wired to the first node's address and port), start
markers so a rank runs at most once, exit records, process groups for signals. Detached: the
agent outlives the control plane's driver, so a restarted control plane finds it by name and
adopts what runs.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from typing import Any

from railyard.exec.launch import free_port
from railyard.exec.local import LocalExecutor
from railyard.exec.logread import LogRefused, LogSource, read_chunk
from railyard.exec.protocol import ExecutorError, ExitReport, JobHandle, LaunchSpec

NODE_RESOURCE = "railyard_node:"  # + node name: one per joined machine
GPUS_RESOURCE = "railyard_gpus"  # its GPU count
FLAVOR_RESOURCE = "railyard_flavor:"  # + flavor
PIN = 0.001  # how much of the node's resource an agent takes: pins it, never fills it
NAMESPACE = "railyard"


def agent_name(job_id: str, restart_count: int, node: str) -> str:
    return f"railyard-{job_id}-{restart_count}-{node}"


class NodeAgent:
    """Runs on `node`; every method is called by the control plane through Ray."""

    def __init__(self, node: str, gpus: int, term_grace_s: float = 10.0) -> None:
        self.node = node
        self.executor = LocalExecutor(
            node, gpus=gpus, term_grace_s=term_grace_s, one_node_of_many=True
        )

    def endpoint(self) -> tuple[str, int]:
        """This node's address as other nodes reach it, and a port free here now."""
        import ray

        address: str = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
        return address, free_port(socket.gethostbyname(address) if address else "0.0.0.0")

    def start(self, spec: LaunchSpec) -> JobHandle:
        return self.executor.start(spec)

    def poll(self) -> list[ExitReport]:
        return self.executor.poll()

    def running(self) -> bool:
        return bool(self.executor.running())

    def ready(self) -> dict[str, tuple[int, float]]:
        return self.executor.ready()

    def request_checkpoint_stop(self, job_id: str, grace_s: float) -> None:
        self.executor.request_checkpoint_stop(job_id, grace_s)

    def cancel(self, job_id: str) -> None:
        self.executor.cancel(job_id)

    def signal(self, job_id: str, signal_name: str | None) -> None:
        self.executor.signal(job_id, signal_name)

    def adopt(self, handles: Sequence[JobHandle]) -> list[ExitReport]:
        return self.executor.adopt(handles)

    def read(
        self,
        path: str,
        offset: int,
        limit: int,
        user: str | None = None,
        outputs: str | None = None,
        anchor: str | None = None,
    ) -> tuple[bytes, int] | str | None:
        """Bytes of a log file on this node from `offset`, and its size; None: no such file
        yet; a string: why it is not shown. Read as `user` with the rule the control plane
        applies to its own disk (:func:`railyard.exec.logread.read_chunk`)."""
        try:
            return read_chunk(LogSource(path, user, outputs, anchor), offset, limit)
        except (LogRefused, ExecutorError) as exc:
            return str(exc)

    def process_groups(self) -> list[int]:
        """The process groups of the ranks this agent runs (tests kill them with the node)."""
        return self.executor.process_groups()


def remote_agent_class() -> Any:
    """`NodeAgent` as a Ray actor class (imported here only: Ray is an optional extra)."""
    import ray

    return ray.remote(num_cpus=0, max_restarts=0)(NodeAgent)
