"""``railyard up``: one process with the store, the scheduler loop and the REST API.

Embedded defaults: a SQLite file in the state directory, this machine as the one node
(GPUs from NVML, or declared with ``--gpus``), a ``default`` queue that owns every GPU, and an
admin token written to ``<state_dir>/client.json`` so the CLI on this machine just works.
Stopping the server leaves jobs running: the next ``railyard up`` adopts them.

Run as root it is multi-user (each job runs as its user's Unix account; job files in the
spool, ``/var/spool/railyard``); run as anyone else, single-user (see
:mod:`railyard.control.accounts`). The state directory is 0700 and the store and
``client.json`` 0600 either way: no job, of any user, can read a token from them.
"""

from __future__ import annotations

import logging
import os
import pwd
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import uvicorn
from sqlalchemy import select
from sqlalchemy.orm import Session

from railyard.blueprint.local import catalogue_name
from railyard.control.accounts import RunAs
from railyard.control.api import create_app
from railyard.control.client import save_config
from railyard.control.jobs import JOB_COUNTER
from railyard.control.loop import Loop, LoopConfig
from railyard.control.paths import (
    SECRET_FILE_MODE,
    SPOOL_DIR_MODE,
    STATE_DIR_MODE,
    client_config_path,
    database_path,
    default_spool_dir,
    default_state_dir,
    spool_owner_path,
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
    spool_dir: Path | None = None

    @property
    def url(self) -> str:
        return self.database_url or sqlite_url(database_path(self.state_dir))

    def spool(self, run_as: RunAs) -> Path:
        return self.spool_dir or default_spool_dir(self.state_dir, multi_user=run_as.multi_user)


class SpoolTaken(Exception):
    """The spool directory serves another state directory; one line for the CLI."""


def claim_spool(spool_dir: Path, state_dir: Path) -> None:
    """Create the spool (0711: job users pass through, nobody lists) and mark it as this state
    directory's; refuse one that serves another (its job ids would collide with ours)."""
    spool_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(spool_dir, SPOOL_DIR_MODE)
    marker = spool_owner_path(spool_dir)
    mine = str(state_dir.resolve())
    try:
        owner = marker.read_text().strip()
    except FileNotFoundError:
        marker.write_text(mine + "\n")
        return
    if owner != mine:
        raise SpoolTaken(
            f"spool directory {spool_dir} holds the jobs of state directory {owner} "
            f"(hint: give this one its own: railyard up --spool-dir DIR)"
        )


def secure_state_dir(state_dir: Path) -> None:
    """The state directory (0700) and the store files in it (0600): the server's alone."""
    state_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(state_dir, STATE_DIR_MODE)
    db = database_path(state_dir)
    for path in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        if path.exists():
            os.chmod(path, SECRET_FILE_MODE)


def detected_flavor() -> str | None:
    """The catalogue name of this machine's GPUs, when NVML finds known ones."""
    found = detect_gpus()
    return catalogue_name(found[0].name) if found else None


def bootstrap(
    store: Store, config: UpConfig, gpus: int, flavor: str, unix_user: str | None = None
) -> str | None:
    """First start: an admin with a token and a default queue. Every start: this node.

    The admin's jobs run as ``unix_user``, the account that started the server. Returns the
    admin token when one was created (it is shown once and saved for the CLI).
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
            admin, token = bootstrap_admin(s, "admin", now, unix_user=unix_user)
            if s.get(QueueRow, "default") is None:
                s.add(QueueRow(name="default", nominal_gpus={flavor: gpus}, created_t_s=now))
                s.flush()
                s.add(QueueMember(queue="default", user_id=admin.id))
        elif unix_user is not None:
            adopt_bootstrap_admin(s, unix_user)
    return token


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


def serve(config: UpConfig) -> None:
    """Run until interrupted. Jobs keep running when the server stops."""
    os.umask(0o077)  # what the server writes is its own unless it says otherwise
    run_as = RunAs.this_process()
    spool = config.spool(run_as)
    secure_state_dir(config.state_dir)
    claim_spool(spool, config.state_dir)
    store = Store(config.url)
    secure_state_dir(config.state_dir)  # the store's files exist now
    executor = LocalExecutor(config.node_name, gpus=config.gpus)
    flavor = config.flavor or detected_flavor() or VIRTUAL_FLAVOR
    token = bootstrap(store, config, executor.gpus, flavor, unix_user=run_as.server_account)
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
            spool_dir=spool,
            cycle_interval_s=config.cycle_interval_s,
            scheduler=config.scheduler,
            nccl_env=nccl_env(0, "roce"),
        ),
    )
    loop_.reconcile()
    stop = threading.Event()
    thread = threading.Thread(target=loop_.run, args=(stop,), name="railyard-loop", daemon=True)
    thread.start()
    app = create_app(
        store, wake=loop_.wake, state_dir=config.state_dir, spool_dir=spool, run_as=run_as
    )
    print(
        f"railyard up: {api_url} (node {config.node_name}, {executor.gpus} x {flavor} GPUs, "
        f"store {store.engine.url.render_as_string(hide_password=True)})",
        flush=True,
    )
    print(f"railyard up: {run_as.describe()}; job files in {spool}", flush=True)
    try:
        uvicorn.run(app, host=config.host, port=config.port, log_level="warning")
    finally:
        stop.set()
        loop_.wake()
        thread.join(timeout=10)
        store.close()
