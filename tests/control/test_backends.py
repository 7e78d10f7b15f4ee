"""Adding a way of running jobs is one backend, nothing in the loop: a backend defined here (a
real :class:`LocalExecutor` under another name, whose one machine joins as ``spare-0``) is
registered by name and composed by `railyard up`'s composition root, and a job submitted
through the API runs on it, its node brought up by the backend's refresh and its log read
through the backend's log reader."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from railyard.control.server import (
    StartupError,
    UpConfig,
    backend_request,
    compose,
    inventory,
    serve,
)
from railyard.control.store.tables import EventRow, JobRow, NodeRow
from railyard.exec.backend import (
    Backend,
    BackendRequest,
    LogReader,
    Machine,
    NodeSink,
    backend_kind,
    register,
    unregister,
)
from railyard.exec.local import LocalExecutor
from railyard.exec.logread import LogSource, read_chunk
from railyard.sched import Node

SPARE = Node("spare-0", "virtual", 1, path=("su0", "spare-0"))


class SpareBackend:
    """One machine that joins; counts what the server asked of it."""

    def __init__(self) -> None:
        self._executor = LocalExecutor(SPARE.name, gpus=SPARE.gpus, term_grace_s=2.0)
        self.refreshes = 0
        self.reads = 0

    @property
    def executor(self) -> LocalExecutor:
        return self._executor

    @property
    def log_reader(self) -> LogReader | None:
        return self._read

    def describe(self) -> str:
        return "the spare backend"

    def refresh(self, sink: NodeSink, now_t_s: float) -> None:
        self.refreshes += 1
        seen = [Machine(SPARE.name, 1, "virtual", True), Machine("stray", 8, "virtual", True)]
        sink([SPARE for m in seen if m.name == SPARE.name], now_t_s)  # a stray is not spare

    def confinement_lines(self) -> tuple[str, ...]:
        return tuple(self._executor.containment.lines())

    def _read(self, node: str, source: LogSource, offset: int, limit: int) -> tuple[bytes, int]:
        assert node == SPARE.name
        self.reads += 1
        return read_chunk(source, offset, limit)


@dataclass
class SpareKind:
    machines_join: bool = True
    opened: list[SpareBackend] = field(default_factory=list)

    def preflight(self, request: BackendRequest) -> list[str]:
        return ["spare backend reached"]

    def open(self, request: BackendRequest) -> Backend:
        self.opened.append(SpareBackend())
        return self.opened[-1]


@pytest.fixture
def spare() -> Iterator[SpareKind]:
    kind = SpareKind()
    register("spare", kind)
    yield kind
    unregister("spare")
    for backend in kind.opened:
        for job_id in backend.executor.running():
            backend.executor.cancel(job_id)


def test_a_backend_registered_by_name_runs_a_job_through_the_server(
    spare: SpareKind, tmp_path: Path
) -> None:
    assert isinstance(spare.open(BackendRequest()), Backend)  # the protocol, checked
    config = UpConfig(state_dir=tmp_path / "state", spool_dir=tmp_path / "spool", backend="spare")
    kind = backend_kind(config.backend_name)
    nodes, local = inventory(config, kind.machines_join)
    assert (nodes, local) == ([], None)  # its machines join: this one serves none
    service = compose(config, kind, backend_request(config, nodes, local), nodes, local)
    backend = service.backend
    assert isinstance(backend, SpareBackend)
    assert backend.refreshes == 1
    with service.store.session() as s:
        assert [(n.name, n.state) for n in s.scalars(select(NodeRow))] == [("spare-0", "ready")]
        assert "spare: node spare-0 joined (1 x virtual)" in s.scalars(select(EventRow.message))
    assert service.token is not None
    admin = TestClient(service.app, headers={"Authorization": f"Bearer {service.token}"})
    command = ["sh", "-c", "echo ran on $SLURMD_NODENAME"]
    body = {"command": command, "gpus": 1, "env": {"PATH": "/usr/bin:/bin"}, "export": "ALL",
            "workdir": str(tmp_path)}  # fmt: skip
    response = admin.post("/v1/jobs", json=body)
    assert response.status_code == 201, response.text
    [job] = response.json()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        service.loop.step()
        with service.store.session() as s:
            row = s.get(JobRow, job["id"])
            assert row is not None
            if row.state == "completed":
                break
        time.sleep(0.05)
    assert row.state == "completed", row.reason
    assert backend.refreshes > 1  # the loop refreshes through the protocol each step
    logs = admin.get(f"/v1/jobs/{job['id']}/logs").json()
    assert logs["text"].endswith("\nran on spare-0\n")
    assert backend.reads == 1  # the node's log came through the backend's reader
    service.store.close()


def test_an_unknown_backend_is_refused_in_one_line_before_anything_is_written(
    tmp_path: Path,
) -> None:
    with pytest.raises(StartupError) as refused:
        serve(UpConfig(state_dir=tmp_path / "state", backend="kube"))
    assert (
        str(refused.value) == "backend 'kube' is not one railyard knows (hint: one of local, ray)"
    )
    assert not (tmp_path / "state").exists()
