"""Group commit of single submissions: concurrent ``POST /v1/jobs`` share one transaction.

Each submit alone paid for its own transaction: the write lock, the reads admission makes
(queues, membership, nodes), a job-number ``UPDATE``, the event ``INSERT`` and the commit
(on PostgreSQL, a WAL flush). Measured with cProfile, those were nearly all of a single
submit's CPU time, while a batch of 1,000 pays them once. Here the requests that arrive
while one transaction runs wait for it and then go together in the next, as a batch does
(the classic group commit of databases): one request's thread leads, stores the group,
commits, and hands the lead to the oldest request still waiting.

Every request keeps its own answer: admission only reads, so a job that is refused (422,
403) is left out of the group and fails alone, never another's; the others are stored and
answered 201 only after the commit (durable first, as before). A failure of the
transaction itself (the store busy, the disk full) is every member's failure, as it would
have been for each alone, and ``RetryRoute`` runs each request again.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from sqlalchemy.exc import SQLAlchemyError

from railyard.control.store.bulk import JobView
from railyard.control.store.database import Store
from railyard.control.store.effects import wants_wake
from railyard.control.store.sharedreads import SharedReads
from railyard.control.store.tables import User
from railyard.control.submission import JobSubmit
from railyard.control.usecases.accounts import RunAs
from railyard.control.usecases.admission import Admitted, admit
from railyard.control.usecases.jobs import store_admitted
from railyard.control.usecases.sizebounds import DEFAULT_LIMITS, SiteLimits

_In = TypeVar("_In")
_Out = TypeVar("_Out")

MAX_GROUP = 256  # requests in one transaction: a bound on how long the write lock is held


@dataclass
class Pending(Generic[_In, _Out]):
    """One request in a group: what it asks, and its own result or error once stored."""

    request: _In
    result: _Out | None = None
    error: BaseException | None = None
    lead: bool = False  # woken to lead the next group, not with a result
    done: threading.Event = field(default_factory=threading.Event)
    on_done: Callable[[], None] | None = None  # wakes an event loop's waiter (``arun``)

    def notify(self) -> None:
        self.done.set()
        if self.on_done is not None:
            self.on_done()

    def outcome(self) -> _Out:
        if self.error is not None:
            raise self.error
        assert self.result is not None, "a group left a request without an answer"
        return self.result


class GroupCommit(Generic[_In, _Out]):
    """Runs ``store_group`` over the requests queued meanwhile, one group at a time.

    ``store_group`` must give every member a ``result`` or an ``error`` (and raise nothing
    for one member's fault); an exception it raises becomes every unanswered member's error.
    Call :meth:`run` from a worker thread: it blocks until the request's group committed."""

    def __init__(self, store_group: Callable[[Sequence[Pending[_In, _Out]]], None]) -> None:
        self._store_group = store_group
        self._lock = threading.Lock()
        self._queue: list[Pending[_In, _Out]] = []
        self._leading = False

    def run(self, request: _In) -> _Out:
        mine: Pending[_In, _Out] = Pending(request)
        if not self._join(mine):
            mine.done.wait()
            if not mine.lead:
                return mine.outcome()
        self._lead()
        return mine.outcome()

    async def arun(self, request: _In) -> _Out:
        """:meth:`run` from an event loop: the request waits as a coroutine, not in a worker
        thread of its own, and a worker thread is taken only to lead a group (one hop per
        group, not per request). A cancelled caller still leads the group it was handed."""
        return await asyncio.shield(asyncio.ensure_future(self._arun(request)))

    async def _arun(self, request: _In) -> _Out:
        loop = asyncio.get_running_loop()
        woken = asyncio.Event()

        def wake() -> None:
            loop.call_soon_threadsafe(woken.set)

        mine: Pending[_In, _Out] = Pending(request, on_done=wake)
        if not self._join(mine):
            await woken.wait()
            if not mine.lead:
                return mine.outcome()
        await loop.run_in_executor(None, self._lead)
        return mine.outcome()

    def _join(self, mine: Pending[_In, _Out]) -> bool:
        """Queue ``mine``; True if it is to lead (no group is being stored)."""
        with self._lock:
            self._queue.append(mine)
            lead = not self._leading
            self._leading = True
        return lead

    def _lead(self) -> None:
        """Store the queued requests (the leader's own is first), then pass the lead on."""
        with self._lock:
            group, self._queue = self._queue[:MAX_GROUP], self._queue[MAX_GROUP:]
        try:
            self._store_group(group)
        except BaseException as exc:  # the transaction failed: so did each member
            for pending in group:
                if pending.result is None and pending.error is None:
                    pending.error = exc
        finally:
            with self._lock:
                if self._queue:
                    self._queue[0].lead = True
                    self._queue[0].notify()
                else:
                    self._leading = False
            for pending in group:
                pending.lead = False
                pending.notify()


@dataclass(frozen=True)
class SubmitRequest:
    """One ``POST /v1/jobs`` of a single job: who asks, and what."""

    user: User
    spec: JobSubmit


Submitted = tuple[Sequence[JobView], float]  # the stored rows, and the submit's time
SubmitGroup = GroupCommit[SubmitRequest, Submitted]


@dataclass(frozen=True)
class SubmitStore:
    """Stores a group of single submissions in one write transaction (``store_group`` of a
    :class:`GroupCommit`): each admitted alone, each user's jobs stored in one
    ``store_admitted`` (one number ``UPDATE``, one ``INSERT`` per table)."""

    store: Store
    wake: Callable[[], None]
    spool_dir: Path
    clock: Callable[[], float]
    known_flavors: Callable[[], set[str]] | None = None
    run_as: RunAs | None = None
    wake_prompt: Callable[[], None] | None = None  # a group of interactive submits only
    limits: SiteLimits = DEFAULT_LIMITS  # the site's bounds on a job's size
    shared: SharedReads = field(default_factory=SharedReads)  # admission's reads, kept

    def __call__(self, group: Sequence[Pending[SubmitRequest, Submitted]]) -> None:
        flavors = self.known_flavors() if self.known_flavors else None
        stored: list[tuple[Pending[SubmitRequest, Submitted], Sequence[JobView]]] = []
        with self.store.session(write=True) as session:
            self.shared.attach(session)
            now_t_s = self.clock()
            by_user: dict[int, tuple[User, list[tuple[Pending[Any, Any], Admitted]]]] = {}
            last: tuple[int, JobSubmit, Admitted] | None = None
            for pending in group:
                user, spec = pending.request.user, pending.request.spec
                if last is not None and last[0] == user.id and last[1] == spec:
                    job = last[2]  # as admission.admit_batch: equal specs, one admission
                else:
                    try:
                        job = admit(session, user, spec, now_t_s, known_flavors=flavors,
                                    run_as=self.run_as, limits=self.limits)  # fmt: skip
                    except SQLAlchemyError:  # the transaction's failure: every member's
                        raise
                    except Exception as exc:  # admission only reads: this one fails alone
                        pending.error = exc
                        continue
                    last = (user.id, spec, job)
                by_user.setdefault(user.id, (user, []))[1].append((pending, job))
            for user, members in by_user.values():
                rows = store_admitted(
                    session, user, [job for _, job in members], now_t_s, self.spool_dir
                )
                stored += zip([p for p, _ in members], rows, strict=True)
            wake = wants_wake(session)
        for pending, job_rows in stored:  # committed: now each may answer 201
            pending.result = (job_rows, now_t_s)
        if wake:
            interactive = all(p.request.spec.terminal for p, _ in stored)
            (self.wake_prompt if interactive and self.wake_prompt else self.wake)()
