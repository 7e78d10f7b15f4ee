"""``railyard up``: one process with the store, the scheduler loop and the REST API.

Embedded defaults: a SQLite file in the state directory, this machine as the one node
(GPUs from NVML, or declared with ``--gpus``), a ``default`` queue that owns every GPU, and an
admin token written to ``<state_dir>/client.json`` so the CLI on this machine just works.
Stopping the server leaves jobs running (it says which): the next ``railyard up`` adopts
them and says how many. A start that cannot proceed (port in use, store held by another
server, a bad blueprint) is refused before anything is written.

Run as root it is multi-user (each job runs as its user's Unix account; job files in the
spool, ``/var/spool/railyard``); run as anyone else, single-user (see
:mod:`railyard.control.usecases.accounts`). The state directory is 0700 and the store and
``client.json`` 0600 either way: no job, of any user, can read a token from them.
"""

from __future__ import annotations

import gc
import logging
import os
import pwd
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import uvicorn
from fastapi import APIRouter, FastAPI
from sqlalchemy import select
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.orm import Session

from railyard.blueprint.errors import BlueprintError
from railyard.blueprint.partitions import Partition
from railyard.client.client import save_config
from railyard.client.config import client_config_path, default_state_dir
from railyard.control.api.app import create_app
from railyard.control.api.edge import (
    EdgeLimits,
    raise_descriptor_limit,
    server_config,
    within_budget,
)
from railyard.control.errors import ServiceError, Unavailable, describe_failure
from railyard.control.loop.service import Loop, LoopConfig
from railyard.control.loop.sweeps import Expect, floor_expectation
from railyard.control.metrics.prometheus import MetricsConfig
from railyard.control.metrics.sampler import Sampler, SamplerConfig, job_sampler
from railyard.control.process.spool import (
    check_spool_reach,
    claim_spool,
    secure_state_dir,
)
from railyard.control.process.standby import take_lease
from railyard.control.store.database import Store, sqlite_url
from railyard.control.store.lease import Lease, SteppedDown
from railyard.control.store.lock import StoreLock, StoreLocked
from railyard.control.store.paths import (
    database_path,
    default_spool_dir,
    ensure_state_dir,
)
from railyard.control.store.tables import (
    HOLDING_STATES,
    Counter,
    JobRow,
    NodeRow,
    QueueMember,
    QueueRow,
    User,
)
from railyard.control.usecases import pythonreach
from railyard.control.usecases.accounts import RunAs
from railyard.control.usecases.jobs import JOB_COUNTER
from railyard.control.usecases.joined import NOT_JOINED, JoinedNodes
from railyard.control.usecases.loopstatus import START_STALL_S
from railyard.control.usecases.partitions import declare_partitions
from railyard.control.usecases.sizebounds import DEFAULT_LIMITS, SiteLimits
from railyard.control.usecases.users import bootstrap_admin
from railyard.control.usecases.whatif import Simulate
from railyard.exec.backend import (
    Backend,
    BackendKind,
    BackendRequest,
    BackendUnavailable,
    NodeSink,
    OpensSockets,
    backend_kind,
)
from railyard.exec.task.nccl import nccl_env
from railyard.inventory import scheduler_nodes, this_machine
from railyard.probe import detect_gpus, read_gpus, resolve_gpus
from railyard.sched import Node, NodeState, SchedulerConfig
from railyard.sched.health import HealthPolicy

if TYPE_CHECKING:
    from railyard.blueprint import Blueprint

log = logging.getLogger("railyard.server")

DEFAULT_PORT = 8765
VIRTUAL_FLAVOR = "virtual"
SHUTDOWN_GRACE_S = 5.0  # SIGTERM: open requests and connections get this long, then close


@dataclass(frozen=True)
class UpConfig:
    """Everything ``railyard up`` was told; the defaults are the embedded ones."""

    state_dir: Path = field(default_factory=default_state_dir)
    database_url: str | None = None
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    gpus: int | None = None
    cpus: int | None = None  # this machine's CPUs for scheduling (Slurm's CPUs=); None: counted
    flavor: str | None = None
    node_name: str = field(default_factory=socket.gethostname)
    cycle_interval_s: float = 2.0
    start_stall_s: float = START_STALL_S  # /healthz fails: no start this long while some wait
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    blueprint: str | None = None
    spool_dir: Path | None = None
    metrics_open: bool = False  # /metrics without a token (a trusted network only)
    health_fail_requeues: bool = False  # a failed health check requeues the node's jobs
    health: HealthPolicy | None = None  # checks the scheduler runs on idle nodes
    health_checks: tuple[str, ...] = ()  # which (empty: all)
    health_across_floor_gbps: float | None = None  # across-node tests' floor (else the twin)
    health_across_interval_s: float | None = None  # sweep idle nodes this often (None: never)
    terminal_linger_s: float = 30.0  # an interactive job outlives its lost client this long
    samples: SamplerConfig = field(default_factory=SamplerConfig)  # interval 0: no sampler
    backend: str | None = None  # how jobs run (`railyard.exec.backend`); None: local or ray
    ray_address: str | None = None  # run jobs on a Ray cluster (address, or "auto")
    ray_insecure: bool = False  # accept a Ray cluster without token authentication
    # Slurm partitions to declare as queues, without a blueprint (`up --partition`)
    partitions: tuple[tuple[str, Partition], ...] = ()
    extra_routers: tuple[APIRouter, ...] = ()  # the dashboard, from `railyard up`
    whatif: Simulate | None = None  # the twin the what-if routes run, from `railyard up`
    container_registries: tuple[str, ...] = ()  # containers pull only from these (`up`)
    limits: SiteLimits = DEFAULT_LIMITS  # a job's largest size (`up --max-tasks-per-job`...)
    edge: EdgeLimits = field(default_factory=EdgeLimits)  # connections, timeouts (control.api.edge)
    standby: bool = False  # PostgreSQL: wait for the active's lease (`control.standby`)

    @property
    def backend_name(self) -> str:
        """The backend asked for; without one, Ray when given an address, else local."""
        if self.backend is not None:
            return self.backend
        return "ray" if self.ray_address is not None else "local"

    @property
    def url(self) -> str:
        return self.database_url or sqlite_url(database_path(self.state_dir))

    def spool(self, run_as: RunAs) -> Path:
        return self.spool_dir or default_spool_dir(self.state_dir, multi_user=run_as.multi_user)


def across_expectation(config: UpConfig) -> Expect | None:
    """What an across-node test is judged against: the admin's floor, else the twin's figure
    for the group on the blueprint's fabric, else nothing (`control.sweeps`)."""
    if config.health_across_floor_gbps is not None:
        return floor_expectation(config.health_across_floor_gbps)
    if config.blueprint is None:
        return None
    from railyard.health.expect import group_expectation  # the twin: with a blueprint alone

    return group_expectation(load_blueprint(config.blueprint))


def load_blueprint(name: str) -> Blueprint:
    """``--blueprint``'s cluster, or :class:`StartupError`; the YAML loader loads here alone."""
    from railyard.blueprint import load

    try:
        return load(name).blueprint
    except BlueprintError as exc:
        raise StartupError(str(exc)) from None


def detected_flavor() -> str | None:
    """The catalogue name of this machine's GPUs, when NVML finds known ones."""
    if not (found := detect_gpus()):
        return None
    from railyard.blueprint.local import catalogue_name  # the catalogue: where NVML finds GPUs

    return catalogue_name(found[0].name)


def inventory(config: UpConfig, machines_join: bool) -> tuple[list[Node], Node | None]:
    """Every node the scheduler knows, and the one this machine serves.

    With a blueprint, its nodes (names, flavors, topology paths: `railyard.inventory`) and
    this machine is the one named `node_name`; the others have no live machine here and are
    registered `down`. Without one, this machine alone, with its GPUs from NVML or `--gpus`.
    Under a backend whose machines join (Ray: `--ray`) this machine serves none: the
    blueprint's nodes (or none) are the inventory, and machines come up as they join.
    """
    if machines_join:
        if config.blueprint is None:
            return [], None
        return scheduler_nodes(load_blueprint(config.blueprint)), None
    if config.blueprint is None:
        gpus = resolve_gpus(config.gpus)
        flavor = config.flavor or detected_flavor() or VIRTUAL_FLAVOR
        # GiB, the unit a job's --mem is booked in (admission.MIB_PER_GB), so the two compare
        mem_gb = (os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")) / 2**30
        cpus = config.cpus or os.cpu_count() or 1
        node = this_machine(config.node_name, flavor, gpus, cpus, mem_gb)
        return [node], node
    nodes = scheduler_nodes(load_blueprint(config.blueprint))  # only loading raises BlueprintError
    by_name = {n.name: n for n in nodes}
    if config.node_name not in by_name:
        first = ", ".join(sorted(by_name)[:4])
        raise StartupError(
            f"--node-name: {config.node_name!r} is not a GPU node of {config.blueprint} "
            f"(hint: one of {first}{', ...' if len(by_name) > 4 else ''})"
        )
    local = by_name[config.node_name]
    if config.cpus is not None:
        raise StartupError(
            f"--cpus: {local.name}'s cores are its node type's cpu_cores in {config.blueprint} "
            "(hint: leave --cpus out with --blueprint)"
        )
    if config.gpus is not None and config.gpus != local.gpus:
        raise StartupError(
            f"--gpus: {config.gpus}, but {local.name} has {local.gpus} in the blueprint "
            "(hint: leave --gpus out with --blueprint)"
        )
    return nodes, local


def bootstrap(
    store: Store,
    nodes: list[Node],
    local: Node | None,
    unix_user: str | None = None,
    partitions: Mapping[str, Partition] | None = None,
) -> str | None:
    """First start: an admin with a token and a default queue. Every start: the inventory,
    this machine ready (unless an admin drained it), other blueprint nodes down, and the
    declared partitions as queues below ``default`` (`usecases.partitions`).

    The admin's jobs run as ``unix_user``, the account that started the server. Returns the
    admin token when one was created (it is shown once and saved for the CLI).
    """
    now = time.time()
    token: str | None = None
    with store.session() as s:
        for n in nodes:
            row = s.get(NodeRow, n.name)
            if row is None:
                row = NodeRow(name=n.name, state=NodeState.READY.value, reason="", updated_t_s=now)
                s.add(row)
            row.flavor, row.gpus, row.path = n.flavor, n.gpus, list(n.path)
            row.cpu_cores, row.mem_gb, row.updated_t_s = n.cpu_cores, n.mem_gb, now
            row.features = sorted(n.features) or None
            if local is None or n.name != local.name:  # joining brings them up
                row.state, row.reason = NodeState.DOWN.value, NOT_JOINED
            elif row.state == NodeState.DOWN.value:
                row.state, row.reason = NodeState.READY.value, ""
        if s.get(Counter, JOB_COUNTER) is None:
            s.add(Counter(name=JOB_COUNTER, value=0))
        if s.scalar(select(User).limit(1)) is None:
            admin, token = bootstrap_admin(s, "admin", now, unix_user=unix_user)
            if s.get(QueueRow, "default") is None:
                nominal: dict[str, int] = {}
                for n in nodes:
                    nominal[n.flavor] = nominal.get(n.flavor, 0) + n.gpus
                s.add(QueueRow(name="default", nominal_gpus=nominal, created_t_s=now))
                s.flush()
                s.add(QueueMember(queue="default", user_id=admin.id))
        elif unix_user is not None:
            adopt_bootstrap_admin(s, unix_user)
        for line in declare_partitions(s, partitions or {}, now):
            log.info("%s", line)
    return token


def declared_partitions(config: UpConfig) -> dict[str, Partition]:
    """The blueprint's partitions, else those of ``up --partition`` (never both: `up`)."""
    if config.blueprint is None:
        return dict(config.partitions)
    declared = dict(load_blueprint(config.blueprint).partitions)
    if declared and config.partitions:
        raise StartupError("--partition: the blueprint declares partitions (hint: its partitions:)")
    return declared or dict(config.partitions)


def adopt_bootstrap_admin(session: Session, unix_user: str) -> None:
    """A store from before Unix accounts mapped its admin to an account named "admin"; when
    no such account exists, the admin is the account that starts ``railyard up``."""
    admin = session.scalars(select(User).where(User.name == "admin")).one_or_none()
    if admin is None or admin.unix_user != "admin":
        return
    try:
        pwd.getpwnam("admin")
    except KeyError:
        admin.unix_user = unix_user
        log.info("user admin now runs jobs as Unix account %s", unix_user)


class StartupError(Exception):
    """``railyard up`` cannot start; nothing was written or launched. One line."""


def bind(host: str, port: int) -> socket.socket:
    """The API's listening socket, bound before anything else so a port in use changes
    nothing (uvicorn serves on it)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise StartupError(f"--host {host}: {exc.strerror or exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        hint = "stop what listens there, or choose another --port"
        raise StartupError(
            f"cannot listen on {host}:{port}: {exc.strerror} (hint: {hint})"
        ) from None
    return sock


def _live_jobs(store: Store) -> tuple[list[str], list[str]]:
    """Ids of jobs holding GPUs: (with a recorded handle, decided but not yet launched)."""
    with store.session() as s:
        rows = s.execute(select(JobRow.id, JobRow.handle).where(JobRow.state.in_(HOLDING_STATES)))
        live = [(job_id, handle is not None) for job_id, handle in rows]
    return [j for j, h in live if h], [j for j, h in live if not h]


def _jobs(count: int) -> str:
    return f"{count} job" if count == 1 else f"{count} jobs"


def _ids(ids: list[str], most: int = 10) -> str:
    shown = ", ".join(ids[:most])
    return shown + (f" and {len(ids) - most} more" if len(ids) > most else "")


def open_store(config: UpConfig) -> Store:
    """The state directory and the store, or one line (``ServiceError``) saying why not."""
    ensure_state_dir(config.state_dir)
    try:
        return Store(config.url)
    except DBAPIError as exc:
        refusal = describe_failure(exc) or Unavailable(str(exc).splitlines()[0])
        raise Unavailable(f"cannot open the store: {refusal.message}", hint=refusal.hint) from None


def serve(config: UpConfig) -> None:
    """Run until interrupted. Jobs keep running when the server stops.

    Order matters: the backend is reached, the port bound and the store locked before
    anything is written, so a refused start (:class:`StartupError`) changes nothing: no
    token, no client.json, no job.
    """
    try:
        kind = backend_kind(config.backend_name)
    except BackendUnavailable as exc:
        raise StartupError(str(exc)) from None
    nodes, local = inventory(config, kind.machines_join)  # a bad blueprint: nothing touched
    partitions = declared_partitions(config)
    request = backend_request(config, nodes, local)
    try:
        # no cluster there, or one without a token: nothing touched yet either
        for line in kind.preflight(request):
            print(f"railyard up: {line}", flush=True)
    except BackendUnavailable as exc:
        raise StartupError(str(exc)) from None
    os.umask(0o077)  # what the server writes is its own unless it says otherwise
    api_url = f"http://{config.host}:{config.port}"
    sock = bind(config.host, config.port)
    try:
        ensure_state_dir(config.state_dir)  # writable, or one line before anything is made
    except ServiceError:
        sock.close()
        raise
    lock = StoreLock(config.state_dir, config.database_url, shared=config.standby)
    try:
        lock.acquire(f"pid {os.getpid()}, {api_url}")
        lease = take_lease(config.database_url, config.standby, sock, api_url)
    except StoreLocked as exc:
        sock.close()
        raise StartupError(str(exc)) from None
    except OSError as exc:
        sock.close()
        raise StartupError(
            f"cannot use state directory {config.state_dir}: {exc.strerror}"
        ) from None
    except OperationalError as exc:
        sock.close()
        raise StartupError(f"cannot open the store: {_first_line(exc)}") from None
    try:
        if lease is None or lease.held:
            service = compose(config, kind, request, nodes, local, partitions, lease=lease)
            _serve_locked(config, sock, api_url, service)
    finally:
        sock.close()
        lock.release()
        if lease is not None:  # a planned stop: a standby takes over at its next try
            lease.release()
            lease.close()


def backend_request(config: UpConfig, nodes: list[Node], local: Node | None) -> BackendRequest:
    """What the chosen backend is told: this machine's node, the blueprint's, the cluster."""
    blueprint = {n.name: n for n in nodes} if config.blueprint is not None else None
    return BackendRequest(
        local=local, blueprint=blueprint, address=config.ray_address, insecure=config.ray_insecure
    )


def _first_line(exc: OperationalError) -> str:
    return str(exc.orig or exc).strip().splitlines()[0]


@dataclass
class Service:
    """What `railyard up` composed: the store, the backend, the loop over them and the API.
    Nothing runs until :func:`serve` starts the loop's thread and the HTTP server."""

    store: Store
    backend: Backend
    loop: Loop
    app: FastAPI
    run_as: RunAs
    spool: Path
    token: str | None  # the admin token when this start made one (shown once)
    sampler: Sampler | None = None  # this machine's jobs' resource history
    lease: Lease | None = None  # PostgreSQL: the active's lease, checked at every commit


def joined_sink(store: Store, source: str, gate: bool) -> NodeSink:
    """Where a backend reports the machines up now: the nodes table (`control.joined`)."""
    nodes = JoinedNodes(source, gate)

    def sink(joined: Sequence[Node], now_t_s: float) -> list[str]:
        with store.session() as session:
            return nodes.sync(session, joined, now_t_s)

    return sink


def compose(
    config: UpConfig,
    kind: BackendKind,
    request: BackendRequest,
    nodes: list[Node],
    local: Node | None,
    partitions: Mapping[str, Partition] | None = None,
    *,
    lease: Lease | None = None,
) -> Service:
    """Open the store, bootstrap it, open the backend and wire the loop and the API to it,
    through the :class:`Backend` protocol alone (the one composition root)."""
    run_as = RunAs.this_process()
    spool = config.spool(run_as)
    secure_state_dir(config.state_dir)
    claim_spool(spool, config.state_dir)
    store = open_store(config)
    if lease is not None:  # before the first write: a stale active's commits are refused
        store.fence_with(lease.check)
    secure_state_dir(config.state_dir)  # the store's files exist now
    token = bootstrap(store, nodes, local, unix_user=run_as.server_account, partitions=partitions)
    run_as = check_spool_reach(store, spool, run_as)
    run_as = replace(run_as, container_registries=config.container_registries)
    try:
        backend = kind.open(request)
    except BackendUnavailable as exc:
        store.close()
        raise StartupError(str(exc)) from None
    gate = config.health is not None and config.health.gate_joins
    sink = joined_sink(store, config.backend_name, gate)
    backend.refresh(sink, time.time())  # the machines already joined, before adoption
    loop_ = Loop(
        store,
        backend.executor,
        LoopConfig(
            state_dir=config.state_dir,
            spool_dir=spool,
            cycle_interval_s=config.cycle_interval_s,
            start_stall_s=config.start_stall_s,
            scheduler=config.scheduler,
            nccl_env=nccl_env(0, "roce"),
            health=config.health,
            health_checks=config.health_checks,
            across_expect=across_expectation(config),
            across_interval_s=config.health_across_interval_s,
            terminal_linger_s=config.terminal_linger_s,
        ),
        refresh=lambda: backend.refresh(sink, time.time()),
    )
    app = create_app(
        store,
        wake=loop_.wake,
        wake_prompt=loop_.wake_prompt,
        state_dir=config.state_dir,
        spool_dir=spool,
        run_as=run_as,
        loop_health=loop_.health,
        metrics=MetricsConfig(
            open_access=config.metrics_open,
            loop=loop_.metrics,
            loop_health=loop_.health,
            read_gpus=read_gpus if local is not None else None,
            node_name=local.name if local is not None else "",
        ),
        health_fail_requeues=config.health_fail_requeues,
        remote_log=backend.log_reader,
        remote_socket=backend.socket_opener if isinstance(backend, OpensSockets) else None,
        extra_routers=config.extra_routers,
        across=loop_.across,
        ordering=config.scheduler.ordering,
        starvation_limit_s=config.scheduler.starvation_limit_s,
        whatif=config.whatif,
        limits=replace(config.limits, queue_quotas=config.scheduler.admission == "quota"),
    )
    if lease is not None:  # a launch is outside the store: only while surely active
        loop_.starter.may_launch = lease.valid
    sampler = job_sampler(store, local, backend.executor, read_gpus, config.samples)
    return Service(store, backend, loop_, app, run_as, spool, token, sampler, lease)


def _serve_locked(config: UpConfig, sock: socket.socket, api_url: str, service: Service) -> None:
    store, loop_, run_as, spool, token = (
        service.store, service.loop, service.run_as, service.spool, service.token
    )  # fmt: skip
    if token is not None:
        path = save_config(api_url, token, client_config_path(config.state_dir))
        print(f"admin token (shown once, saved to {path}): {token}", flush=True)
        if run_as.multi_user:
            print(
                f"user admin runs its jobs as Unix account {run_as.server_account} (uid 0); "
                "to change it: railyard admin users update admin --unix-user ACCOUNT",
                flush=True,
            )
        if config.state_dir != default_state_dir():
            print(f"for the CLI: export RAILYARD_HOME={config.state_dir}", flush=True)
    adopt, restart = _live_jobs(store)
    settled = loop_.reconcile()
    if adopt or restart:
        print(
            f"railyard up: adopted {_jobs(len(adopt) - len(settled))} still running, settled "
            f"{len(settled)} that ended while the server was down, restarted {len(restart)} "
            f"that were starting ({_ids(adopt + restart)})",
            flush=True,
        )
    what = service.backend.describe()  # before the loop's thread uses the backend
    stop = threading.Event()
    if service.lease is not None:
        service.lease.start(stop)
    gc.freeze()  # the start's objects live as long as the server: no collection walks them again
    thread = threading.Thread(target=loop_.run, args=(stop,), name="railyard-loop", daemon=True)
    thread.start()
    if service.sampler is not None:
        service.sampler.start(stop)
    store_url = store.engine.url.render_as_string(hide_password=True)
    print(f"railyard up: {api_url} ({what}, store {store_url})", flush=True)
    print(f"railyard up: {run_as.describe()}; job files in {spool}", flush=True)
    if run_as.multi_user:
        pythonreach.warn_in_background(store)
    for line in service.backend.confinement_lines():
        print(f"railyard up: {line}", flush=True)
    if config.extra_routers:
        print(f"railyard up: dashboard at {api_url}/ui/ (log in with a token)", flush=True)
    if config.metrics_open:
        print(f"railyard up: {api_url}/metrics is open to anyone who can reach it", flush=True)
    # a request or connection still open at SIGTERM (a stalled client, a terminal) does not
    # keep the server up past its grace; the loop's thread is a daemon and never waited on
    grace = int(SHUTDOWN_GRACE_S)
    edge, lowered = within_budget(config.edge, raise_descriptor_limit())
    if lowered:
        print(f"railyard up: {lowered}", flush=True)
    server = uvicorn.Server(server_config(service.app, edge, graceful_s=grace)[0])
    if service.lease is not None:  # lost: stop serving and exit, the jobs run on
        service.lease.on_lost(lambda: setattr(server, "should_exit", True))
    try:
        server.run(sockets=[sock])
    finally:
        stop.set()
        loop_.wake()
        thread.join(timeout=SHUTDOWN_GRACE_S)
        left, _ = _live_jobs(store)
        store.close()
        if left:
            print(
                f"railyard down: {_jobs(len(left))} left running ({_ids(left)}); they keep "
                "running, and the next `railyard up` on this state directory adopts them",
                flush=True,
            )
        else:
            print("railyard down: no jobs running", flush=True)
    if service.lease is not None and service.lease.lost:
        raise SteppedDown(f"lost the lease (epoch {service.lease.epoch}) to another server")
