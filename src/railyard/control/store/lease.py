"""Which server is active on a PostgreSQL store: a lease row with fencing, timed by the
database's clock.

Two or more ``railyard up --standby`` on one PostgreSQL database: one holds the lease and runs
the loop and the API; the others answer 503 (`control.process.standby`) and try to take it every
``RETRY_S``. The lease (table ``leases``, one row) names its holder (``host/boot/pid/start``,
`store.database.process_identity`) and an ``epoch`` that grows by one at every takeover; it
lapses ``LEASE_S`` after its last renewal *by the database's clock* (``clock_timestamp()``),
and the holder renews it every ``RENEW_S`` (Kubernetes' leases: 15/10/2 s; ours 8/2/1, so a
takeover comes in at most about 9 s). A standby takes it when it has lapsed, or at once when
its holder is a dead process of this machine (kill -9, a crash: the same boot and pid
namespace, no live process with that pid and start time), so a restart or a standby on the
same machine does not wait.

Fencing is in the database: every transaction of the active that wrote anything checks,
just before it commits (:meth:`Lease.check`, a ``before_commit`` hook on the store), that the
row still names this process and its epoch, and takes a ``FOR KEY SHARE`` lock on it. A
takeover locks the row ``FOR UPDATE``, which waits for those commits to end, and a check
after a takeover finds another epoch and raises :class:`NotLeaseHolder`: the transaction is
rolled back, and a stale active (frozen by SIGSTOP past its lease, then continued) commits
nothing. Renewals are ``NO KEY UPDATE``s, which a ``KEY SHARE`` does not block, so the
writers never hold up the lease. A stale transaction that never ends (its process frozen
between check and commit) would hold up a takeover too: after ``TAKEOVER_LOCK_TIMEOUT`` the
taker ends the lapsed holder's sessions (``pg_terminate_backend``, found by their
``application_name``).

What is outside the database cannot be fenced by it: a launch. The active launches only while
its lease is surely its own by its own monotonic clock (:meth:`Lease.valid`: less than
``LEASE_S`` since a renewal began), which ends before any standby may take over; on one
machine the executor's start markers make a second launch of one attempt a no-op anyway.

A server that finds it lost the lease steps down: it stops its loop and its API and exits
(status 75, "try again"): its jobs keep running and the new active adopts them as a restart
does; a supervisor that restarts it (``Restart=always``) brings it back as a standby.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Connection, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from railyard.control.errors import Unavailable
from railyard.control.store.database import (
    application_name,
    machine_scope,
    migrate,
    process_identity,
    process_start_ticks,
)

log = logging.getLogger("railyard.lease")

LEASE_NAME = "control"
LEASE_S = 8.0  # a lease lapses this long after its last renewal (the database's clock)
RENEW_S = 2.0  # the active renews this often
RETRY_S = 1.0  # a standby tries to take over this often; a failed renewal is retried so
TAKEOVER_LOCK_TIMEOUT = "2s"  # a takeover waits this long for the row, then ends stale sessions
STEP_DOWN_EXIT = 75  # EX_TEMPFAIL: `railyard up` lost its lease and stepped down
_NOW = "extract(epoch from clock_timestamp())"


class NotLeaseHolder(Unavailable):
    """A commit of a server that is no longer the active one: rolled back (503)."""


class SteppedDown(Exception):
    """This server lost its lease and stopped; its jobs run on under the new active."""


@dataclass(frozen=True)
class Holder:
    """The lease as the database has it now; ``now_t_s`` is the database's clock."""

    holder: str
    owner: str
    url: str
    epoch: int
    expires_t_s: float
    now_t_s: float

    @property
    def live(self) -> bool:
        return bool(self.holder) and self.expires_t_s > self.now_t_s


def dead_here(holder: str) -> bool:
    """True when ``holder`` is a process of this machine, boot and pid namespace that no
    longer runs (no process with its pid and start time)."""
    scope, _, rest = holder.rpartition("/")  # scope/pid, then the start time
    scope, _, pid = scope.rpartition("/")
    if scope != machine_scope() or not pid.isdigit():
        return False
    return process_start_ticks(int(pid)) != rest


class Lease:
    """This process's claim on a store's lease: take it, renew it, check it at every commit."""

    def __init__(
        self,
        url: str,
        owner: str,
        api_url: str,
        *,
        lease_s: float = LEASE_S,
        renew_s: float = RENEW_S,
        retry_s: float = RETRY_S,
        identity: str | None = None,
    ) -> None:
        self.identity = identity or process_identity()
        self.owner, self.api_url = owner, api_url
        self.lease_s, self.renew_s, self.retry_s = lease_s, renew_s, retry_s
        self.engine = create_engine(
            url,
            poolclass=NullPool,  # a connection a killed session broke is never reused
            connect_args={"application_name": application_name(self.identity)},
        )
        self.where = make_url(url).render_as_string(hide_password=True)
        self.epoch: int | None = None  # held: the epoch this process took
        self.active: Holder | None = None  # the holder last seen while not holding
        self._valid_until = 0.0  # time.monotonic(): the lease is surely ours until then
        self._lost = threading.Event()
        self._callbacks: list[Callable[[], None]] = []

    # -- taking ---------------------------------------------------------------------------------

    def migrate(self) -> None:
        """The schema at its newest (the ``leases`` table), before anything else is read."""
        migrate(self.engine)

    def acquire(self) -> Holder | None:
        """Take the lease when it is free, lapsed or held by a dead process of this machine;
        None when taken (``self.epoch`` is ours), else the live holder."""
        began = time.monotonic()
        try:
            with self.engine.connect() as conn, conn.begin():
                conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{TAKEOVER_LOCK_TIMEOUT}'")
                conn.execute(
                    text(
                        "INSERT INTO leases (name, holder, owner, url, epoch, acquired_t_s, "
                        "expires_t_s) VALUES (:n, '', '', '', 0, 0, 0) ON CONFLICT DO NOTHING"
                    ),
                    {"n": LEASE_NAME},
                )
                current = self._read(conn, lock=True)
                if current.live and not dead_here(current.holder):
                    self.active = current
                    return current
                epoch = current.epoch + 1
                conn.execute(
                    text(
                        f"UPDATE leases SET holder = :me, owner = :owner, url = :url, "
                        f"epoch = :epoch, acquired_t_s = {_NOW}, "
                        f"expires_t_s = {_NOW} + :lease_s WHERE name = :n"
                    ),
                    {"me": self.identity, "owner": self.owner, "url": self.api_url,
                     "epoch": epoch, "lease_s": self.lease_s, "n": LEASE_NAME},
                )  # fmt: skip
                conn.execute(
                    text(
                        "INSERT INTO lease_epochs (epoch, holder, owner, acquired_t_s, "
                        f"previous_expires_t_s) VALUES (:epoch, :me, :owner, {_NOW}, :prev)"
                    ),
                    {"epoch": epoch, "me": self.identity, "owner": self.owner,
                     "prev": current.expires_t_s or None},
                )  # fmt: skip
        except DBAPIError as exc:
            if _sqlstate(exc) != "55P03":  # not a lock timeout: the store's failure
                raise
            return self._unblock()
        self.epoch, self.active = epoch, None
        self._valid_until = began + self.lease_s
        log.info("lease: active, epoch %d (was %s)", epoch, current.owner or "free")
        return None

    def _unblock(self) -> Holder | None:
        """The row stayed locked past the timeout: if its lease lapsed, its holder is stale
        and frozen inside a transaction; end its sessions so the next try gets the row."""
        with self.engine.connect() as conn:
            current = self._read(conn, lock=False)
            if not current.live and current.holder and current.holder != self.identity:
                ended = conn.execute(
                    text(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                        "WHERE application_name = :app AND pid <> pg_backend_pid()"
                    ),
                    {"app": application_name(current.holder)},
                ).scalar_one()
                log.warning("lease: ended %d sessions of stale holder %s", ended, current.owner)
        self.active = current
        return current

    def wait_active(self, stop: threading.Event) -> bool:
        """As a standby: try every ``retry_s`` until the lease is ours (True) or ``stop``."""
        while not stop.is_set():
            try:
                if self.acquire() is None:
                    return True
            except DBAPIError as exc:
                log.warning("lease: cannot reach the store: %s", _first_line(exc))
            stop.wait(self.retry_s)
        return False

    def read(self) -> Holder:
        with self.engine.connect() as conn:
            return self._read(conn, lock=False)

    @staticmethod
    def _read(conn: Connection, *, lock: bool) -> Holder:
        row = conn.execute(
            text(
                f"SELECT holder, owner, url, epoch, expires_t_s, {_NOW} FROM leases "
                f"WHERE name = :n{' FOR UPDATE' if lock else ''}"
            ),
            {"n": LEASE_NAME},
        ).one()
        return Holder(row[0], row[1], row[2], int(row[3]), float(row[4]), float(row[5]))

    # -- holding --------------------------------------------------------------------------------

    @property
    def held(self) -> bool:
        return self.epoch is not None and not self._lost.is_set()

    def valid(self) -> bool:
        """Surely ours now: held, and renewed less than ``lease_s`` ago by this process's
        clock (no standby may take it before). Launches wait for this."""
        return self.held and time.monotonic() < self._valid_until

    def renew(self) -> bool | None:
        """Push the expiry ``lease_s`` past the database's now: True; False: lost (another
        took it); None: the store could not be reached (tried again; a lease that lapsed
        meanwhile is renewed still, when nobody took it)."""
        began = time.monotonic()
        try:
            with self.engine.begin() as conn:
                renewed = conn.execute(
                    text(
                        f"UPDATE leases SET expires_t_s = {_NOW} + :lease_s WHERE name = :n "
                        "AND holder = :me AND epoch = :epoch RETURNING epoch"
                    ),
                    {"lease_s": self.lease_s, "n": LEASE_NAME, "me": self.identity,
                     "epoch": self.epoch},
                ).first()  # fmt: skip
        except DBAPIError as exc:
            log.warning("lease: renewal failed: %s", _first_line(exc))
            return None
        if renewed is None:
            self.lose("another server took the lease")
            return False
        self._valid_until = began + self.lease_s
        return True

    def keep(self, stop: threading.Event) -> None:
        """Renew every ``renew_s`` (after a failure, every ``retry_s``) until lost or ``stop``."""
        while not stop.is_set() and not self._lost.is_set():
            ok = self.renew()
            stop.wait(self.renew_s if ok else self.retry_s)

    def start(self, stop: threading.Event) -> threading.Thread:
        thread = threading.Thread(target=self.keep, args=(stop,), name="railyard-lease",
                                  daemon=True)  # fmt: skip
        thread.start()
        return thread

    def check(self, session: Session) -> None:
        """The fence, run just before each of the store's commits: a transaction that wrote
        commits only while the lease row names this process and its epoch (and holds it
        ``FOR KEY SHARE`` until it commits, so a takeover waits for it)."""
        session.flush()  # the ORM's pending rows are written after before_commit otherwise
        conn = session.connection()
        if conn.exec_driver_sql("SELECT txid_current_if_assigned()").scalar() is None:
            return  # it wrote nothing
        mine = conn.execute(
            text(
                "SELECT epoch FROM leases WHERE name = :n AND holder = :me AND epoch = :epoch "
                "FOR KEY SHARE"
            ),
            {"n": LEASE_NAME, "me": self.identity, "epoch": self.epoch},
        ).first()
        if mine is None:
            self.lose("a commit found another server's epoch")
            raise NotLeaseHolder(
                f"this railyard server lost its lease (epoch {self.epoch}) and is stepping "
                "down; nothing was changed",
                hint="retry on the active server",
            )

    def lose(self, why: str) -> None:
        if self._lost.is_set():
            return
        log.error("lease: lost (epoch %s): %s; stepping down", self.epoch, why)
        self._lost.set()
        for callback in self._callbacks:
            callback()

    @property
    def lost(self) -> bool:
        return self._lost.is_set()

    def on_lost(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the lease is lost (at once if it already is)."""
        self._callbacks.append(callback)
        if self._lost.is_set():
            callback()

    def release(self) -> None:
        """A planned stop: the lease lapses now, so a standby takes over at its next try."""
        self._valid_until = 0.0
        if self.epoch is None or self._lost.is_set():
            return
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    text(
                        f"UPDATE leases SET expires_t_s = {_NOW} WHERE name = :n "
                        "AND holder = :me AND epoch = :epoch"
                    ),
                    {"n": LEASE_NAME, "me": self.identity, "epoch": self.epoch},
                )
        except DBAPIError as exc:  # it lapses by itself
            log.warning("lease: release failed: %s", _first_line(exc))

    def close(self) -> None:
        self.engine.dispose()


def _sqlstate(exc: DBAPIError) -> str:
    return str(getattr(exc.orig, "sqlstate", "") or "")


def _first_line(exc: DBAPIError) -> str:
    return (str(exc.orig or exc).strip().splitlines() or [type(exc).__name__])[0]
