"""Injected faults for the loop's tests: a store whose chosen writes fail, an executor that
refuses chosen launches, and a clock the test moves."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.exc import OperationalError

from railyard.control.store.database import Store
from railyard.exec.protocol import Executor, ExecutorError, JobHandle, LaunchSpec


class Clock:
    """A wall clock that only moves when the test says so."""

    def __init__(self) -> None:
        self.t_s = time.time()

    def __call__(self) -> float:
        return self.t_s

    def advance(self, seconds: float) -> None:
        self.t_s += seconds


def _mentions(parameters: Any, word: str) -> bool:
    values = parameters.values() if isinstance(parameters, dict) else parameters
    return any(v == word or (isinstance(v, list | tuple) and word in v) for v in values or ())


class FailingWrites:
    """Makes the store's writes (INSERT/UPDATE) fail, as a locked database does: the
    ``nth`` matching write from now fails, and the ``times - 1`` matching ones after it.
    A write matches when it contains ``text`` (if given) and names ``job_id`` (if given);
    ``heads`` widens "write" to other statements (``("SELECT",)``: a read in a phase that
    only reads, as a busy store fails it too)."""

    def __init__(
        self,
        nth: int = 1,
        *,
        times: int = 1,
        text: str = "",
        job_id: str = "",
        heads: tuple[str, ...] = ("INSERT", "UPDATE"),
    ) -> None:
        self.nth, self.times, self.text, self.job_id = nth, times, text, job_id
        self.heads = heads
        self.seen = 0
        self.failed = 0

    def before(self, conn: Any, cursor: Any, statement: str, parameters: Any, context: Any,
               executemany: bool) -> None:  # fmt: skip
        head = statement.lstrip().split(None, 1)[0].upper()
        if head not in self.heads or self.text not in statement:
            return
        sets = parameters if executemany else [parameters]  # one statement, many rows
        if self.job_id and not any(_mentions(p, self.job_id) for p in sets):
            return
        self.seen += 1
        if self.seen >= self.nth and self.failed < self.times:
            self.failed += 1
            locked = Exception("database is locked (injected)")
            raise OperationalError(statement, parameters, locked)


@contextmanager
def failing_writes(store: Store, faults: FailingWrites) -> Iterator[FailingWrites]:
    event.listen(store.engine, "before_cursor_execute", faults.before)
    try:
        yield faults
    finally:
        event.remove(store.engine, "before_cursor_execute", faults.before)


class RefusingExecutor:
    """An executor that refuses the next ``refusals[job]`` launches of a job, then launches
    through ``inner`` (a real `LocalExecutor`)."""

    def __init__(self, inner: Executor, refusals: dict[str, int]) -> None:
        self.inner, self.refusals = inner, refusals
        self.refused: list[str] = []

    def start(self, spec: LaunchSpec) -> JobHandle:
        if self.refusals.get(spec.job_id, 0) > 0:
            self.refusals[spec.job_id] -= 1
            self.refused.append(spec.job_id)
            raise ExecutorError(f"job {spec.job_id}: refused (injected)")
        return self.inner.start(spec)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
