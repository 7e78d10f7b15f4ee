"""The node agent: a Ray actor pinned to one node that runs that node's share of one attempt.

One detached, named actor per (job, attempt, node) (`railyard-<job>-<attempt>-<node>`),
pinned by the node's own custom resource (`railyard_node:<name>`, which `railyard join`
declares), so it can only run there. It holds a `LocalExecutor` scoped to its node, so the
ranks placed there start exactly as local ranks do: the job's Unix account, the launch
contract of :mod:`railyard.exec.task.launch` (wired to the first node's address and port), start
markers so a rank runs at most once, exit records, process groups for signals. Detached: the
agent outlives the control plane's driver, so a restarted control plane finds it by name and
adopts what runs.

It also opens one-shot relays to a job's sockets on its node (`relay`): the terminal of
``railyard run``, a shell or ``sshd -i`` of ``railyard attach`` and ``ssh job-N``, a web app,
checked here exactly as the control plane checks them on its own machine
(:mod:`railyard.exec.terminals.jobsocket`, :mod:`railyard.exec.terminals.relay`). An agent
belongs to one attempt
and is killed when its end is reported, so its relays end with the job.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Sequence
from typing import Any

from railyard.exec.local import LocalExecutor
from railyard.exec.logread import LogRefused, LogSource, read_chunk
from railyard.exec.protocol import ExecutorError, ExitReport, JobHandle, LaunchSpec
from railyard.exec.task.launch import free_port
from railyard.exec.terminals.jobsocket import (
    CONNECT_WAIT_S,
    JobSocket,
    SocketUnreachable,
    connect_here,
)
from railyard.exec.terminals.relay import Opened, Relays
from railyard.exec.usage import NodeReading
from railyard.probe import read_gpus

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
        self.relays = Relays()

    def endpoint(self) -> tuple[str, int]:
        """This node's address as other nodes reach it, and a port free here now."""
        address = _node_address()
        return address, free_port(socket.gethostbyname(address) if address else "0.0.0.0")

    def relay(self, target: JobSocket) -> Opened | tuple[str, bool]:
        """Connect to ``target`` on this node, with the checks made on the control plane's
        own machine, and relay it on a fresh port of this node's address for the control
        plane, which alone learns the secret; else ``(why, whether to try again soon)``.
        A terminal is tried once (the control plane tries again: this actor's calls run one
        at a time, and poll must not wait); a new shell is waited for, never started twice."""
        wait_s = CONNECT_WAIT_S if target.kind == "attach" else 0.0
        try:
            sock = asyncio.run(connect_here(target, wait_s))
        except SocketUnreachable as exc:
            return exc.why, exc.retry
        try:
            return self.relays.open(sock, socket.gethostbyname(_node_address()))
        except OSError as exc:
            return f"the node cannot listen for its relay ({exc.strerror or exc})", False

    def relayed(self) -> int:
        """How many relays this agent opened (tests ask)."""
        return self.relays.opened

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

    def discard(self, job_id: str) -> bool:
        """Kill what this agent runs of ``job_id`` and remove its groups: called before the
        control plane lets this agent go (see `LocalExecutor.discard`)."""
        return self.executor.discard(job_id)

    def discard_shares(self, parts: Sequence[JobHandle]) -> bool:
        """End this node's ``parts`` of attempts whose own agent here died (reported lost): the
        ranks still running are adopted by pid and start time, then killed with their step's
        groups; a part whose ranks are gone has its groups removed."""
        self.executor.adopt(parts)
        return all([self.executor.discard(part.job_id) for part in parts])

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

    def sample(self, job_id: str, gpus: Sequence[int]) -> NodeReading:
        """The job's processes here and its GPUs (``gpus``: NVML indices on this node), for
        the control plane's sampler (`control.metrics.sampler`)."""
        held = set(gpus)
        readings = tuple(r for r in read_gpus() if r.index in held) if held else ()
        return NodeReading(self.node, self.executor.usage(job_id), readings)

    def process_groups(self) -> list[int]:
        """The process groups of the ranks this agent runs (tests kill them with the node)."""
        return self.executor.process_groups()


def _node_address() -> str:
    import ray

    address: str = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
    return address


def remote_agent_class() -> Any:
    """`NodeAgent` as a Ray actor class (imported here only: Ray is an optional extra)."""
    import ray

    return ray.remote(num_cpus=0, max_restarts=0)(NodeAgent)
