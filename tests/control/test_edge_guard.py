"""The connection guard of the API's edge (`control.api.edge`) on its own, with transports that
only record being closed: who makes room for a newcomer, when one is refused, the header
deadline and bound, and the descriptor budget. (Against a real server and a real attacker:
tests/security/test_edge.py.)"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from railyard.control.api.edge import (
    RESERVED_FDS,
    ConnectionGuard,
    EdgeLimits,
    descriptor_budget,
    within_budget,
)


class Transport(asyncio.Transport):
    def __init__(self, host: str, port: int) -> None:
        super().__init__()
        self.peer, self.closed = (host, port), False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.peer if name == "peername" else default

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


class Clock:
    def __init__(self) -> None:
        self.t_s = 0.0

    def __call__(self) -> float:
        return self.t_s


def run(body: Callable[[], None]) -> None:
    async def inside() -> None:
        body()

    asyncio.run(inside())


def guard(clock: Clock, **limits: Any) -> ConnectionGuard:
    return ConnectionGuard(EdgeLimits(**{"max_connections": 4, **limits}), clock)


def test_a_newcomer_closes_the_oldest_waiting_connection_never_a_busy_one() -> None:
    def body() -> None:
        clock = Clock()
        g = guard(clock)
        ts = [Transport("10.0.0.1", port) for port in range(4)]
        conns = []
        for t in ts:
            clock.t_s += 1
            conns.append(g.admit(t))
        g.started(("10.0.0.1", 0))  # the oldest is busy with a request: it stays
        newcomer = Transport("10.0.0.2", 9)
        assert g.admit(newcomer) is not None
        assert [t.closed for t in ts] == [False, True, False, False]
        for port in (2, 3):
            g.started(("10.0.0.1", port))
        g.started(("10.0.0.2", 9))
        refused = Transport("10.0.0.3", 1)  # none waits: the newcomer is refused
        assert g.admit(refused) is None
        assert refused.closed
        assert (g.evicted, g.refused, len(g.live)) == (1, 1, 4)
        g.answered(("10.0.0.1", 0))  # answered: it waits again, and goes first
        assert g.admit(Transport("10.0.0.3", 2)) is not None
        assert ts[0].closed

    run(body)


def test_a_peer_at_its_cap_makes_room_from_its_own_connections() -> None:
    def body() -> None:
        g = guard(Clock(), max_connections=10, max_connections_per_peer=2)
        mine = [Transport("10.0.0.1", 1), Transport("10.0.0.1", 2)]
        other = Transport("10.0.0.2", 1)
        g.admit(other)
        for t in mine:
            g.admit(t)
        g.admit(Transport("10.0.0.1", 3))
        assert (mine[0].closed, mine[1].closed, other.closed) == (True, False, False)
        assert g.per_peer["10.0.0.1"] == 2

    run(body)


def test_headers_that_take_too_long_or_grow_too_large_close_the_connection() -> None:
    def body() -> None:
        clock = Clock()
        g = guard(clock, header_timeout_s=10.0, max_header_bytes=100)
        slow, quick, big = Transport("a", 1), Transport("a", 2), Transport("a", 3)
        conn_slow, conn_quick, conn_big = g.admit(slow), g.admit(quick), g.admit(big)
        assert conn_slow
        assert conn_quick
        assert conn_big
        g.started(("a", 2))
        assert g.received(conn_big, 90)
        assert g.received(conn_big, 90)
        assert not g.received(conn_big, 1)
        clock.t_s = 11.0
        g._swept()
        assert (slow.closed, quick.closed, big.closed, g.timed_out) == (True, False, True, 2)
        assert g.received(conn_quick, 10_000)  # a body is not headers

    run(body)


def test_the_budget_stays_under_the_descriptor_limit() -> None:
    limits, said = within_budget(EdgeLimits(max_connections=100_000), 4096)
    assert limits.max_connections == descriptor_budget(4096) == (4096 - RESERVED_FDS) // 2
    assert said is not None
    assert "--max-connections 100000" in said
    assert within_budget(EdgeLimits(max_connections=50), 4096) == (
        EdgeLimits(max_connections=50, max_connections_per_peer=50),
        None,
    )
