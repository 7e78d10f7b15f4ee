"""A rank's rendezvous port comes from below the kernel's ephemeral range: a port from bind-to-0
lies inside it, where any process's outgoing connection (Ray's workers open many) may be given
it in the seconds before torchrun binds it; one was, in CI."""

from __future__ import annotations

import socket

from railyard.exec.task.launch import _ephemeral_low, free_port


def test_a_free_port_is_below_the_ephemeral_range_and_free() -> None:
    low = _ephemeral_low()
    ports = {free_port() for _ in range(20)}
    assert all(1024 <= p < low for p in ports), (low, sorted(ports))
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))  # free: nothing holds it after the pick


def test_a_taken_port_is_never_given() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", free_port()))
        taken = held.getsockname()[1]
        held.listen()
        assert all(free_port() != taken for _ in range(200))
