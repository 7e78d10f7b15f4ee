"""The embedded backend: this machine is the one node, its jobs run by :class:`LocalExecutor`,
its logs on its own disk, and no other machine joins."""

from __future__ import annotations

from dataclasses import dataclass

from railyard.exec.backend import (
    Backend,
    BackendRequest,
    BackendUnavailable,
    LogReader,
    NodeSink,
)
from railyard.exec.local import LocalExecutor
from railyard.sched import Node


class LocalBackend:
    """This machine as node ``node`` (its GPUs counted or declared in the node)."""

    def __init__(self, node: Node, executor: LocalExecutor | None = None) -> None:
        self.node = node
        self._executor = executor or LocalExecutor(node.name, gpus=node.gpus)

    @property
    def executor(self) -> LocalExecutor:
        return self._executor

    @property
    def log_reader(self) -> LogReader | None:
        return None  # every rank ran here: the server reads its logs itself

    def describe(self) -> str:
        return f"node {self.node.name}, {self._executor.gpus} x {self.node.flavor} GPUs"

    def refresh(self, sink: NodeSink, now_t_s: float) -> None:
        """The inventory is fixed at start (`railyard up` registers this machine)."""

    def confinement_lines(self) -> tuple[str, ...]:
        return tuple(self._executor.containment.lines())


@dataclass(frozen=True)
class LocalKind:
    """`railyard up` without ``--ray``."""

    machines_join: bool = False

    def preflight(self, request: BackendRequest) -> list[str]:
        return []

    def open(self, request: BackendRequest) -> Backend:
        if request.local is None:
            raise BackendUnavailable("the local backend needs this machine's node")
        return LocalBackend(request.local)


KIND = LocalKind()
