"""`railyard up --ray ADDRESS`: jobs run on a Ray cluster by :class:`RayExecutor`, the
inventory is the machines that joined (matched to the blueprint's nodes when there is one),
logs are read on the machine a rank ran on, and interactive jobs' sockets are reached there
(a relay through the node's agent).

Connecting happens before `railyard up` writes anything (:meth:`RayKind.preflight`), and
refuses a cluster without token authentication unless the operator accepts it. The driver
keeps its files (its core-worker log first) in the session directory of the node it joins,
which must lie inside a directory only root can enter (:mod:`railyard.exec.ray.raydirs`, made so
by `railyard join`): a session another account can enter is refused (one line) and the
driver let go, since a link planted there would have root write where its owner chose.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from railyard.exec.backend import (
    Backend,
    BackendRequest,
    BackendUnavailable,
    LogReader,
    Machine,
    NodeSink,
)
from railyard.exec.logread import LogSource
from railyard.exec.ray.rayagent import NAMESPACE
from railyard.exec.ray.rayauth import MODE_ENV, TOKEN_HINT, ProbeFailed, probe
from railyard.exec.ray.raydirs import is_private
from railyard.exec.ray.rayexec import RayExecutor, ray_nodes
from railyard.exec.terminals.jobsocket import SocketOpener
from railyard.sched import Node

log = logging.getLogger("railyard.ray")
REFRESH_S = 1.0  # how often the loop asks Ray which machines are up
DEFAULT_ADDRESS = "auto"


class RayUnreachable(BackendUnavailable):
    """No Ray cluster at the address, or one railyard must not use; one line for `railyard up`."""


def _unless_lost(executor: RayExecutor, node: Machine) -> Machine:
    """A node whose agent died is down until a probe answers, even while Ray still lists it
    (its health checks take a while to declare a machine dead)."""
    if node.name not in executor.suspect:
        return node
    if node.alive and executor.probe(node.name):
        executor.suspect.discard(node.name)
        return node
    return replace(node, alive=False)


@dataclass
class RayBackend:
    """Ray's executor, its joined machines and their logs (one calling thread: the loop's)."""

    address: str
    blueprint: dict[str, Node] | None = None  # None: each machine is a node of its own
    _executor: RayExecutor | None = None
    refused: set[str] = field(default_factory=set)  # names said once, never scheduled
    _last_t_s: float = float("-inf")
    _seen_lost: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self._executor is None:
            self._executor = RayExecutor(self.address)

    @property
    def executor(self) -> RayExecutor:
        assert self._executor is not None
        return self._executor

    @property
    def log_reader(self) -> LogReader | None:
        return self._read_log

    @property
    def socket_opener(self) -> SocketOpener:
        """A job's terminal, shells and app on its node, through the node's agent."""
        return self.executor.open_socket

    def describe(self) -> str:
        joined = [n.name for n in ray_nodes() if n.alive]
        shown = ", ".join(joined[:6]) + (", ..." if len(joined) > 6 else "")
        return f"Ray cluster at {self.address}, {len(joined)} machine(s) joined: " + (
            shown or "none yet"
        )

    def refresh(self, sink: NodeSink, now_t_s: float) -> None:
        """At most every ``REFRESH_S``, or at once when the executor just lost a machine."""
        suspect = self.executor.suspect
        lost = suspect - self._seen_lost
        self._seen_lost.intersection_update(suspect)
        self._seen_lost.update(lost)
        if now_t_s - self._last_t_s < REFRESH_S and not lost:
            return
        self._last_t_s = now_t_s
        try:
            found = ray_nodes()
        except Exception as exc:  # the GCS is briefly unreachable: try next step
            log.warning("ray: cannot list nodes: %s", exc)
            return
        found = [_unless_lost(self.executor, n) for n in found]
        for line in sink(joined_nodes(found, self.blueprint, self.refused), now_t_s):
            log.info("ray: %s", line)

    def confinement_lines(self) -> tuple[str, ...]:
        return ("process tracking and GPU confinement: chosen by each node's agent on its machine",)

    def _read_log(
        self, node: str, source: LogSource, offset: int, limit: int
    ) -> tuple[bytes, int] | None:
        return self.executor.read_log(
            node, source.path, offset, limit, source.user, source.outputs, source.anchor
        )


def admits(blueprint: dict[str, Node] | None, machine: Machine) -> str | None:
    """With a blueprint, only the machines named as its nodes take jobs; else any."""
    if blueprint is None or machine.name in blueprint:
        return None
    some = ", ".join(sorted(blueprint)[:4])
    return (
        f"a machine joined Ray as {machine.name!r}, which the blueprint has no node of; "
        f"it takes no job (hint: railyard join --node-name one of {some}, ...)"
    )


def joined_nodes(
    found: list[Machine], blueprint: dict[str, Node] | None, refused: set[str]
) -> list[Node]:
    """The machines up now that may take jobs, as scheduler nodes: the blueprint's node of
    that name, else one of its own leaf group. A refused machine is logged once (its name
    added to ``refused``)."""
    joined: list[Node] = []
    for machine in found:
        if not machine.alive:
            continue
        why = admits(blueprint, machine)
        if why is None:
            joined.append(
                blueprint[machine.name]
                if blueprint is not None
                else Node(machine.name, machine.flavor, machine.gpus, path=("su0", machine.name))
            )
        elif machine.name not in refused:
            refused.add(machine.name)
            log.warning("%s", why)
    return joined


def connect(address: str, insecure: bool = False) -> str:
    """Join the Ray cluster as a driver; says in one line how the cluster is protected.

    A cluster without token authentication runs code for anyone who reaches its ports, as
    the user Ray runs as: refused unless the operator accepts that (``--insecure-ray``). Its
    GCS is asked without a token (:func:`railyard.exec.ray.rayauth.probe`), since a client
    holding one is answered either way.
    """
    try:
        found = probe(address)
    except ProbeFailed as exc:
        raise RayUnreachable(
            f"--ray {address}: cannot reach a Ray cluster: {exc} (hint: start the head with "
            "`railyard join --head`, or give --ray HOST:PORT)"
        ) from None
    if found.mode != "token":
        if not insecure:
            raise RayUnreachable(
                f"--ray {address}: the Ray cluster at {found.address} runs without token "
                "authentication: anyone who reaches its ports runs code as its user (hint: "
                "start it with `railyard join --head`, or accept that with --insecure-ray)"
            )
        line = (f"Ray cluster at {found.address} has NO token authentication (--insecure-ray): "
                "anyone who reaches its ports runs code as its user")  # fmt: skip
    elif found.token != "accepted":
        what = "none was found" if found.token == "missing" else "it refused this one"
        raise RayUnreachable(
            f"--ray {address}: the Ray cluster at {found.address} requires its token and "
            f"{what} (hint: {TOKEN_HINT})"
        )
    else:
        os.environ[MODE_ENV] = "token"  # before Ray reads it: this driver presents the token
        line = f"Ray cluster at {found.address} requires its token (token authentication on)"
    _init(address)
    return line


def _init(address: str) -> None:
    import ray

    try:
        ray.init(address=address, namespace=NAMESPACE, log_to_driver=False,
                 logging_level=logging.ERROR)  # fmt: skip
    except (ConnectionError, RuntimeError, ValueError, ray.exceptions.RayError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise RayUnreachable(
            f"--ray {address}: cannot reach a Ray cluster: {first} (hint: start the head with "
            "`railyard join --head`, or give --ray HOST:PORT)"
        ) from None
    session = Path(_session_dir(ray))
    if not is_private(session):  # what Ray chose after all: a directory others may enter
        ray.shutdown()
        raise RayUnreachable(
            f"--ray {address}: Ray's session directory {session} is not this account's alone "
            f"(hint: start Ray with `railyard join`, which keeps it in a 0700 directory)"
        )


def _session_dir(ray: Any) -> str:
    """The connected driver's session directory (Ray keeps it on its node object)."""
    return str(ray._private.worker.global_worker.node.get_session_dir_path())


@dataclass(frozen=True)
class RayKind:
    """`railyard up --ray ADDRESS`: machines come up as they join."""

    machines_join: bool = True

    def preflight(self, request: BackendRequest) -> list[str]:
        return [connect(request.address or DEFAULT_ADDRESS, insecure=request.insecure)]

    def open(self, request: BackendRequest) -> Backend:
        return RayBackend(request.address or DEFAULT_ADDRESS, request.blueprint)


KIND = RayKind()
