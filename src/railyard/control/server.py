"""``railyard up``: one process with the store, the scheduler loop and the REST API.

Embedded defaults: a SQLite file in the state directory, this machine as the one node
(GPUs from NVML, or declared with ``--gpus``), a ``default`` queue that owns every GPU, and an
admin token written to ``<state_dir>/client.json`` so the CLI on this machine just works.
Stopping the server leaves jobs running: the next ``railyard up`` adopts them.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import uvicorn
from sqlalchemy import select
from sqlalchemy.exc import DBAPIError

from railyard.blueprint.local import catalogue_name
from railyard.control.api import create_app
from railyard.control.client import save_config
from railyard.control.errors import Unavailable, describe_failure
from railyard.control.jobs import JOB_COUNTER
from railyard.control.loop import Loop, LoopConfig
from railyard.control.paths import (
    client_config_path,
    database_path,
    default_state_dir,
    ensure_state_dir,
)
from railyard.control.store import Store, sqlite_url
from railyard.control.tables import Counter, NodeRow, QueueMember, QueueRow, User
from railyard.control.users import bootstrap_admin
from railyard.exec.local import LocalExecutor
from railyard.exec.nccl import nccl_env
from railyard.probe import detect_gpus
from railyard.sched import SchedulerConfig

log = logging.getLogger("railyard.server")

DEFAULT_PORT = 8765
VIRTUAL_FLAVOR = "virtual"


@dataclass(frozen=True)
class UpConfig:
    """Everything ``railyard up`` was told; the defaults are the embedded ones."""

    state_dir: Path = field(default_factory=default_state_dir)
    database_url: str | None = None
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    gpus: int | None = None
    flavor: str | None = None
    node_name: str = field(default_factory=socket.gethostname)
    cycle_interval_s: float = 2.0
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)

    @property
    def url(self) -> str:
        return self.database_url or sqlite_url(database_path(self.state_dir))


def detected_flavor() -> str | None:
    """The catalogue name of this machine's GPUs, when NVML finds known ones."""
    found = detect_gpus()
    return catalogue_name(found[0].name) if found else None


def bootstrap(store: Store, config: UpConfig, gpus: int, flavor: str) -> str | None:
    """First start: an admin with a token and a default queue. Every start: this node.

    Returns the admin token when one was created (it is shown once and saved for the CLI).
    """
    now = time.time()
    token: str | None = None
    with store.session() as s:
        node = s.get(NodeRow, config.node_name)
        if node is None:
            s.add(
                NodeRow(
                    name=config.node_name,
                    flavor=flavor,
                    gpus=gpus,
                    cpu_cores=os.cpu_count() or 1,
                    path=["su0", "su0-lg0"],
                    updated_t_s=now,
                )
            )
        elif (node.gpus, node.flavor) != (gpus, flavor):
            node.gpus, node.flavor, node.updated_t_s = gpus, flavor, now
        if s.get(Counter, JOB_COUNTER) is None:
            s.add(Counter(name=JOB_COUNTER, value=0))
        if s.scalar(select(User).limit(1)) is None:
            admin, token = bootstrap_admin(s, "admin", now)
            if s.get(QueueRow, "default") is None:
                s.add(QueueRow(name="default", nominal_gpus={flavor: gpus}, created_t_s=now))
                s.flush()
                s.add(QueueMember(queue="default", user_id=admin.id))
    return token


def open_store(config: UpConfig) -> Store:
    """The state directory and the store, or one line (``ServiceError``) saying why not."""
    ensure_state_dir(config.state_dir)
    try:
        return Store(config.url)
    except DBAPIError as exc:
        refusal = describe_failure(exc) or Unavailable(str(exc).splitlines()[0])
        raise Unavailable(f"cannot open the store: {refusal.message}", hint=refusal.hint) from None


def serve(config: UpConfig) -> None:
    """Run until interrupted. Jobs keep running when the server stops. A state directory or
    store that cannot be used is a :class:`ServiceError` with one line, before anything runs."""
    store = open_store(config)
    executor = LocalExecutor(config.node_name, gpus=config.gpus)
    flavor = config.flavor or detected_flavor() or VIRTUAL_FLAVOR
    token = bootstrap(store, config, executor.gpus, flavor)
    api_url = f"http://{config.host}:{config.port}"
    if token is not None:
        path = save_config(api_url, token, client_config_path(config.state_dir))
        print(f"admin token (shown once, saved to {path}): {token}", flush=True)
        if config.state_dir != default_state_dir():
            print(f"for the CLI: export RAILYARD_HOME={config.state_dir}", flush=True)
    loop_ = Loop(
        store,
        executor,
        LoopConfig(
            state_dir=config.state_dir,
            cycle_interval_s=config.cycle_interval_s,
            scheduler=config.scheduler,
            nccl_env=nccl_env(0, "roce"),
        ),
    )
    loop_.reconcile()
    stop = threading.Event()
    thread = threading.Thread(target=loop_.run, args=(stop,), name="railyard-loop", daemon=True)
    thread.start()
    app = create_app(store, wake=loop_.wake, state_dir=config.state_dir, loop_health=loop_.health)
    print(
        f"railyard up: {api_url} (node {config.node_name}, {executor.gpus} x {flavor} GPUs, "
        f"store {store.engine.url.render_as_string(hide_password=True)})",
        flush=True,
    )
    try:
        uvicorn.run(app, host=config.host, port=config.port, log_level="warning")
    finally:
        stop.set()
        loop_.wake()
        thread.join(timeout=10)
        store.close()
