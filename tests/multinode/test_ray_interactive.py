"""Interactive work on a Ray node (issue 23): a real ``railyard up --ray`` over a local Ray
cluster whose one joined machine ``n1`` is not the server's (the server's machine is Ray's
head, no railyard node), so every job runs there, and its terminal, shells and web app are
reached through ``n1``'s node agent (`exec.terminals.relay`), with the checks made on the node.

``railyard run`` streams output and input and returns the exit code; a ``--pty`` shell echoes
a command through the WebSocket; ``railyard attach`` and ``ssh job-N``'s ``sshd -i`` start on
the node; the dashboard serves a small app running there; and the relay's port gives nothing
to a connection without its secret. (On this one machine the node's files are the server's
too, so each test also asks the job's agent that a relay was opened: the bytes went through
it, not through a socket the server could have opened itself.)
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from railyard.client import frames
from railyard.client.client import Client
from railyard.exec.ray.rayagent import NAMESPACE, NODE_RESOURCE, PIN, agent_name, remote_agent_class
from railyard.exec.ray.rayexec import RayExecutor
from railyard.exec.terminals.jobsocket import JobSocket, SocketUnreachable
from tests.integration.server_proc import ServerProcess
from tests.multinode.conftest import LocalRay
from tests.parts import needs
from tests.waiting import wait_for

pytestmark = [pytest.mark.long, pytest.mark.slow, pytest.mark.heavy]
NODE = "n1"
APP = Path(__file__).parents[1] / "web" / "apps" / "echo_app.py"


@pytest.fixture(scope="module")
def one_node() -> Iterator[LocalRay]:
    made = LocalRay((NODE,))
    try:
        yield made
    finally:
        made.shutdown()


@pytest.fixture(scope="module")
def server(one_node: LocalRay, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    state = tmp_path_factory.mktemp("ray-interactive") / "state"
    state.mkdir()
    proc = ServerProcess(state, gpus=None, extra=(*one_node.up_args, "--terminal-linger", "2"))
    proc.start(timeout_s=90)
    wait_for(lambda: any(n["state"] == "ready" for n in proc.request("GET", "/v1/nodes")))
    try:
        yield proc
    finally:
        proc.stop()


def railyard(
    server: ServerProcess, *args: str, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RAILYARD_URL": server.url, "RAILYARD_TOKEN": server.token}
    return subprocess.run([sys.executable, "-m", "railyard", *args], input=stdin,
                          capture_output=True, text=True, env=env, timeout=90)  # fmt: skip


def job(server: ServerProcess, job_id: str) -> dict[str, Any]:
    found: dict[str, Any] = server.request("GET", f"/v1/jobs/{job_id}")
    return found


def relayed(job_id: str, restart_count: int = 0) -> int:
    """How many relays the job's agent on the node opened (while the job runs)."""
    import ray

    agent = ray.get_actor(agent_name(job_id, restart_count, NODE), namespace=NAMESPACE)
    return int(ray.get(agent.relayed.remote(), timeout=30))


def running(server: ServerProcess, body: dict[str, Any]) -> str:
    [made] = server.request("POST", "/v1/jobs", json=body)
    job_id = str(made["id"])
    wait_for(lambda: job(server, job_id)["state"] == "running")
    assert list(job(server, job_id)["placement"]) == [NODE], job(server, job_id)
    return job_id


def closed_without_a_byte(sock: socket.socket) -> bool:
    """Closed from the other end (a reset: it closed with bytes of ours unread), no byte."""
    sock.settimeout(10)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def read_until(ws: Any, reader: frames.FrameReader, want: bytes) -> tuple[bytes, int | None]:
    """Output until ``want`` shows (or the end); and the exit status if it came."""
    out, code = b"", None
    while want not in out and code is None:
        message = ws.recv(timeout_s=30)
        assert message is not None, out
        for kind, payload in reader.feed(message[1]):
            if kind in (frames.STDOUT, frames.STDERR):
                out += payload
            elif kind == frames.EXIT:
                code = int(payload)
    return out, code


def test_run_streams_output_and_input_and_returns_the_exit_code(server: ServerProcess) -> None:
    script = 'echo "job $SLURM_JOB_ID on $SLURMD_NODENAME"; echo err >&2; exit 3'
    done = railyard(server, "run", "--", "sh", "-c", script)
    assert done.returncode == 3, done.stderr
    found = re.fullmatch(r"job (\d+) on n1\n", done.stdout)
    assert found is not None, done.stdout
    # the task's stderr, then srun's own line for a task that failed
    assert done.stderr.endswith("err\nsrun: error: n1: task 0: Exited with exit code 3\n"), (
        done.stderr
    )
    assert list(job(server, found.group(1))["placement"]) == [NODE]
    piped = railyard(server, "run", "--", "sh", "-c", "read l; echo got $l", stdin="hi\n")
    assert (piped.returncode, piped.stdout) == (0, "got hi\n"), piped.stderr


def test_a_pty_shell_on_the_node_echoes_through_its_agent_s_relay(server: ServerProcess) -> None:
    job_id = running(server, {"command": ["sh"], "terminal": "pty"})
    with Client(server.url, server.token) as client:
        ws = client.terminal(job_id)
        reader = frames.FrameReader()
        ws.send_binary(frames.frame(frames.STDIN, b"echo round-$((6*7)) $(tty)\n"))
        out, _ = read_until(ws, reader, b"round-42 /dev/pts/")
        assert relayed(job_id) == 1
        ws.send_binary(frames.frame(frames.STDIN, b"exit 3\n"))
        out, code = read_until(ws, reader, b"\0never")
        assert code == 3, out
        ws.close()
    wait_for(lambda: job(server, job_id)["state"] == "failed")


def test_attach_starts_a_shell_in_the_rank_on_the_node(server: ServerProcess) -> None:
    job_id = running(server, {"command": ["sleep", "60"]})
    script = "echo rank $SLURM_PROCID of job $SLURM_JOB_ID on $SLURMD_NODENAME\nexit 4\n"
    done = railyard(server, "attach", job_id, stdin=script)
    assert (done.returncode, done.stdout) == (4, f"rank 0 of job {job_id} on n1\n"), done.stderr
    assert relayed(job_id) == 1
    server.request("DELETE", f"/v1/jobs/{job_id}")


@needs("sshd")
def test_ssh_reaches_sshd_started_in_the_rank_on_the_node(server: ServerProcess) -> None:
    job_id = running(server, {"command": ["sleep", "60"]})
    with Client(server.url, server.token) as client:
        ws = client.ssh(job_id)
        out, _ = read_until(ws, frames.FrameReader(), b"SSH-2.0-")
        assert b"SSH-2.0-OpenSSH" in out  # sshd -i's greeting, from the node
        ws.close()
    assert relayed(job_id) == 1
    server.request("DELETE", f"/v1/jobs/{job_id}")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the app runs as the job's account")
def test_the_dashboard_serves_an_app_running_on_the_node(server: ServerProcess) -> None:
    from tests.security.test_dashboard_session import logged_in
    from tests.web.test_app_proxy import get_when_up, start_app

    job_id = start_app(server, f"exec {shlex.quote(sys.executable)} {APP}")
    assert list(job(server, job_id)["placement"]) == [NODE]
    owner = logged_in(server.url, server.token)
    got = get_when_up(owner, f"/ui/jobs/{job_id}/app/info?x=1")
    assert got.status_code == 200, got.text
    assert got.json()["path"] == f"/ui/jobs/{job_id}/app/info?x=1"
    assert relayed(job_id) >= 1
    server.request("DELETE", f"/v1/jobs/{job_id}")


def test_the_relay_gives_nothing_without_its_secret(server: ServerProcess, tmp_path: Path) -> None:
    """A node agent relays a socket of the test's own; a wrong secret gets no byte and ends
    it; the right one gets a stream; a job with no agent on the node gets one line."""
    import ray

    name = f"railyard-relaytest-{secrets.token_hex(3)}"
    agent = (
        remote_agent_class()
        .options(name=name, namespace=NAMESPACE, resources={f"{NODE_RESOURCE}{NODE}": PIN})
        .remote(NODE, 0)
    )
    path = tmp_path / "terminal-0.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(2)
    target = JobSocket("t", 0, NODE, "terminal", str(path))
    try:
        opened = ray.get(agent.relay.remote(target), timeout=60)
        job_side, _ = listener.accept()
        job_side.sendall(b"output waiting for its client")
        wrong = socket.create_connection((opened.host, opened.port), timeout=10)
        wrong.sendall(secrets.token_bytes(32))
        assert closed_without_a_byte(wrong)
        assert closed_without_a_byte(job_side)  # and the job's side closed: nothing sent to it
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((opened.host, opened.port), timeout=10)

        from railyard.exec.terminals.relay import dial

        right = dial(ray.get(agent.relay.remote(target), timeout=60))
        job_side, _ = listener.accept()
        right.sendall(b"ping")
        assert job_side.recv(4) == b"ping"
        job_side.sendall(b"pong")
        right.settimeout(10)
        assert right.recv(4) == b"pong"
        right.close()
        with pytest.raises(SocketUnreachable, match="no agent on n1"):
            RayExecutor().open_socket(JobSocket("999999", 0, NODE, "terminal", str(path)), 0.1)
    finally:
        ray.kill(agent)
        listener.close()
