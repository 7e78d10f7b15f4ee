"""`railyard up --ray ADDRESS`: the Ray executor, the inventory kept in step with the
machines that joined, and logs read on the machine a rank ran on."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import replace

from railyard.control.logs import RemoteLog
from railyard.control.rayauth import MODE_ENV, TOKEN_HINT, ProbeFailed, probe
from railyard.control.raynodes import RayInventory
from railyard.control.store import Store
from railyard.exec.logread import LogSource
from railyard.exec.rayagent import NAMESPACE
from railyard.exec.rayexec import RayExecutor, RayNode, ray_nodes
from railyard.sched import Node

log = logging.getLogger("railyard.ray")
REFRESH_S = 1.0  # how often the loop asks Ray which machines are up


def _unless_lost(executor: RayExecutor, node: RayNode) -> RayNode:
    """A node whose agent died is down until a probe answers, even while Ray still lists it
    (its health checks take a while to declare a machine dead)."""
    if node.name not in executor.suspect:
        return node
    if node.alive and executor.probe(node.name):
        executor.suspect.discard(node.name)
        return node
    return replace(node, alive=False)


class RayUnreachable(Exception):
    """No Ray cluster at the address, or one railyard must not use; one line for `railyard up`."""


def connect(address: str, insecure: bool = False) -> str:
    """Join the Ray cluster as a driver, before `railyard up` writes anything; says in one
    line how the cluster is protected.

    A cluster without token authentication runs code for anyone who reaches its ports, as
    the user Ray runs as: refused unless the operator accepts that (``--insecure-ray``). Its
    GCS is asked without a token (:func:`railyard.control.rayauth.probe`), since a client
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


def ray_cluster(
    store: Store, address: str, blueprint: list[Node] | None, gate: bool
) -> tuple[RayExecutor, Callable[[], None], RemoteLog, str]:
    """Connect as a driver, sync the inventory once, and return what the server wires in."""
    executor = RayExecutor(address)
    inventory = RayInventory({n.name: n for n in blueprint} if blueprint else None, gate)
    last = [0.0]

    seen_lost: set[str] = set()

    def refresh() -> None:
        now = time.time()
        lost = executor.suspect - seen_lost  # a machine just lost: sync now, not in a second
        seen_lost.intersection_update(executor.suspect)
        seen_lost.update(lost)
        if now - last[0] < REFRESH_S and not lost:
            return
        last[0] = now
        try:
            found = ray_nodes()
        except Exception as exc:  # the GCS is briefly unreachable: try next step
            log.warning("ray: cannot list nodes: %s", exc)
            return
        found = [_unless_lost(executor, n) for n in found]
        with store.session() as session:
            for line in inventory.sync(session, found, now):
                log.info("ray: %s", line)

    refresh()
    joined = [n.name for n in ray_nodes() if n.alive]
    shown = ", ".join(joined[:6]) + (", ..." if len(joined) > 6 else "")
    what = f"Ray cluster at {address}, {len(joined)} machine(s) joined: {shown or 'none yet'}"

    def remote_log(
        node: str, source: LogSource, offset: int, limit: int
    ) -> tuple[bytes, int] | None:
        return executor.read_log(
            node, source.path, offset, limit, source.user, source.outputs, source.anchor
        )

    return executor, refresh, remote_log, what
