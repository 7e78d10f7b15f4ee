"""A lost client ends its interactive task after exactly one linger (issue 58, item 6): the
relay hangs the command up a linger after the client went, and, the command ended by that, does
not wait a second linger for a client to deliver its output to (it used to: twice the linger).
The relay's own clock is a counter here, so the rule is checked without timing anything."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

from railyard.exec.terminals import terminal

LINGER_S = 30.0


class Clock:
    """A clock that moves one second each time it is read: the relay's loop advances it."""

    def __init__(self) -> None:
        self.t_s = 0.0
        self.lock = threading.Lock()

    def __call__(self) -> float:
        with self.lock:
            self.t_s += 1.0
            return self.t_s


def test_a_hung_up_task_ends_without_a_second_linger(tmp_path: Path) -> None:
    server = terminal.listen(tmp_path / "t.sock")
    clock = Clock()
    hung_up: list[float] = []
    relay = terminal.Relay(
        server, {}, -1, lambda sig: hung_up.append(clock.t_s) if sig == signal.SIGHUP else None,
        linger_s=LINGER_S, clock=clock,
    )  # fmt: skip
    alone_since = relay.alone_since  # no client ever came (or it was lost at once)
    code = relay.run(lambda: -signal.SIGHUP if hung_up else None)
    server.close()
    ended_t_s = clock.t_s
    assert code == -signal.SIGHUP
    assert hung_up[0] - alone_since >= LINGER_S  # it had its linger
    assert ended_t_s - hung_up[0] < LINGER_S  # and no second one


def test_a_task_that_ends_on_its_own_waits_for_its_client(tmp_path: Path) -> None:
    """A short command ends before its client connects: its output waits a linger for it."""
    server = terminal.listen(tmp_path / "t.sock")
    clock = Clock()
    relay = terminal.Relay(server, {}, -1, lambda sig: None, linger_s=5.0, clock=clock)
    started = clock.t_s
    assert relay.run(lambda: 0) == 0
    server.close()
    assert clock.t_s - started >= 5.0
