"""One way of running jobs is one backend: an executor, how the inventory is kept, how logs
are read, and who may join, behind one typed protocol.

The control plane composes a backend by name (:func:`open_backend`) and then speaks only
:class:`Backend`: a new way of running jobs (a container runtime, Kubernetes) is one module
in ``exec`` registered here, never a change to the loop or the server. What a backend learns
about machines it reports through a :data:`NodeSink` the control plane hands it, so no
backend touches the store (``exec`` never imports ``control``).

Imported by the server before any backend is chosen, so it names backends by module path
and imports the chosen one only (Ray is an optional extra).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from railyard.exec.logread import LogSource
from railyard.exec.protocol import Executor
from railyard.exec.terminals.jobsocket import SocketOpener
from railyard.sched import Node

# (node, source, offset, limit) -> (bytes from offset, file size), None: no file yet;
# raises LogRefused for a file that must not be shown
LogReader = Callable[[str, LogSource, int, int], tuple[bytes, int] | None]
# The joined machines that are up now, as scheduler nodes, at a time -> one line per change
# (the control plane's nodes table: joins, rejoins, leaves; `control.joined`)
NodeSink = Callable[[Sequence[Node], float], list[str]]


class BackendUnavailable(Exception):
    """The backend cannot run jobs (its cluster is unreachable, or one railyard must not
    use); one line for ``railyard up``, said before anything is written."""


@dataclass(frozen=True)
class Machine:
    """A machine a backend sees: its railyard name, GPUs and flavor, whether it is up."""

    name: str
    gpus: int
    flavor: str
    alive: bool
    address: str = ""


@dataclass(frozen=True)
class BackendRequest:
    """What ``railyard up`` tells whichever backend it opens.

    ``local``: the node this machine serves (None when machines join instead);
    ``blueprint``: the blueprint's nodes by name (None: no blueprint); ``address`` and
    ``insecure``: where a cluster backend finds its cluster, and whether one without
    authentication is accepted."""

    local: Node | None = None
    blueprint: dict[str, Node] | None = None
    address: str | None = None
    insecure: bool = False


@runtime_checkable
class Backend(Protocol):
    """What the server composes; see the module docstring."""

    @property
    def executor(self) -> Executor:
        """Starts, signals, adopts and watches jobs (:mod:`railyard.exec.protocol`)."""
        ...

    @property
    def log_reader(self) -> LogReader | None:
        """Reads a log on the machine a rank ran on; None: every log is on this machine."""
        ...

    def describe(self) -> str:
        """One line for ``railyard up``: what runs the jobs."""
        ...

    def refresh(self, sink: NodeSink, now_t_s: float) -> None:
        """Report the machines up now to ``sink`` when they may have changed (called by the
        loop's thread each step, after the executor's poll); a fixed inventory does nothing."""
        ...

    def confinement_lines(self) -> tuple[str, ...]:
        """How job processes are tracked and confined, one line each, for ``railyard up``."""
        ...


@runtime_checkable
class OpensSockets(Protocol):
    """A backend whose jobs run on other machines and that reaches their sockets there (an
    interactive job's terminal, a shell in a rank, a web app); a backend without it has every
    job's sockets on this machine."""

    @property
    def socket_opener(self) -> SocketOpener:
        """Connects to a job's socket on the machine it is on (`exec.terminals.jobsocket`)."""
        ...


class BackendKind(Protocol):
    """A registered backend: checked before anything is written, opened after."""

    @property
    def machines_join(self) -> bool:
        """True: the inventory is the machines that join (none served by this process)."""
        ...

    def preflight(self, request: BackendRequest) -> list[str]:
        """Reach what the backend needs (its cluster) or raise :class:`BackendUnavailable`;
        returns lines to print. Runs before the port is bound or the store opened."""
        ...

    def open(self, request: BackendRequest) -> Backend:
        """The backend, once the store is locked (its executor may clean up after a
        previous server)."""
        ...


# name -> "module:attribute" of a BackendKind, imported when chosen; or the kind itself
_REGISTRY: dict[str, str | BackendKind] = {
    "local": "railyard.exec.localbackend:KIND",
    "ray": "railyard.exec.ray.raybackend:KIND",
}


def register(name: str, kind: str | BackendKind) -> None:
    """Make ``kind`` (or the ``module:attribute`` naming it) the backend called ``name``."""
    _REGISTRY[name] = kind


def backend_names() -> list[str]:
    return sorted(_REGISTRY)


def backend_kind(name: str) -> BackendKind:
    """The registered backend ``name``; a ``BackendUnavailable`` line for an unknown one."""
    found = _REGISTRY.get(name)
    if found is None:
        raise BackendUnavailable(
            f"backend {name!r} is not one railyard knows "
            f"(hint: one of {', '.join(backend_names())})"
        )
    if not isinstance(found, str):
        return found
    module, _, attribute = found.partition(":")
    kind: BackendKind = getattr(importlib.import_module(module), attribute)
    return kind


def unregister(name: str) -> None:
    """Forget the backend ``name`` (a test's own)."""
    _REGISTRY.pop(name, None)
