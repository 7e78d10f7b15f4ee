"""The trust boundary: the Ray cluster railyard uses requires a token (issue 20, item 2).

A Ray head runs code for any client that reaches its port, as the user it runs as (root
here). `railyard join --head` must make a token and start Ray with token authentication, so a
client without it (a separate process with its own empty HOME: anyone on the network) cannot
run a task; `railyard join HEAD` refuses to join without the token; `railyard up --ray`
refuses a cluster without authentication unless `--insecure-ray`. Real `ray start` processes
on loopback with free ports, Ray's session files and every HOME in a scratch directory (the
machine's ~/.ray is never touched); each head is stopped by its own process group, never
`ray stop`, which would stop every Ray on the machine.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.server_proc import ServerProcess, free_port
from tests.parts import require

require("ray")

# Ray clusters started with and without tokens (two minutes): the extended tier, which CI runs
# on every landing (.ci/run) like the main one.
pytestmark = [pytest.mark.long, pytest.mark.slow, pytest.mark.heavy]

RAILYARD = [sys.executable, "-m", "railyard"]
RAY = str(Path(sys.executable).parent / "ray")

# A client as anyone who reaches the port would write it: connect, run a task that writes a
# file as whoever the head runs as. Prints RAN <uid> or REFUSED <why>.
CLIENT = """
import os, sys
import ray

@ray.remote(num_cpus=0)
def grab(path):
    with open(path, "w") as out:
        out.write(str(os.getuid()))
    return os.getuid()

try:
    ray.init(address=sys.argv[1], log_to_driver=False)
    print("RAN", ray.get(grab.remote(sys.argv[2]), timeout=60))
except Exception as exc:
    print("REFUSED", type(exc).__name__)
"""


SIDE_PORTS = ("node-manager-port", "object-manager-port", "metrics-export-port",
              "dashboard-agent-listen-port", "dashboard-agent-grpc-port",
              "runtime-env-agent-port")  # fmt: skip


def ray_ports(head_port: int) -> str:
    """`ray start` flags that keep this head's side ports off those of other Rays here, each
    its own: a free port is not held, so two draws can give the same one (Ray then refuses
    to start: "is trying to use a port number ... used by other components")."""
    ports: list[int] = []
    while len(ports) < len(SIDE_PORTS):
        port = free_port()
        if port != head_port and port not in ports:
            ports.append(port)
    flags = " ".join(f"--{flag} {port}" for flag, port in zip(SIDE_PORTS, ports, strict=True))
    return flags + " --num-cpus 1 --include-dashboard false"


class Scratch:
    """A short scratch directory (Ray's socket paths must fit 107 bytes) with HOMEs in it,
    and every process group started from it, killed at the end."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="ryauth-", dir="/tmp"))
        os.chmod(self.root, 0o700)
        self.groups: list[int] = []

    def home(self, name: str) -> Path:
        path = self.root / name
        path.mkdir(mode=0o700, exist_ok=True)
        return path

    def env(self, home: Path, **extra: str) -> dict[str, str]:
        """This process's environment without any Ray token, with its own HOME and temp dir."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_AUTH", "RAY_ADDRESS"))}
        return {**env, "HOME": str(home), "RAY_TMPDIR": str(self.root / "rt"), **extra}

    def run(
        self, argv: list[str], env: dict[str, str], timeout_s: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run a command in a process group of its own (Ray's daemons stay in it)."""
        proc = subprocess.Popen(
            argv,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.groups.append(proc.pid)
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        return subprocess.CompletedProcess(argv, proc.returncode, out, err)

    def close(self) -> None:
        for group in self.groups:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
        deadline = time.monotonic() + 15
        while any(self._alive(g) for g in self.groups) and time.monotonic() < deadline:
            time.sleep(0.2)
        shutil.rmtree(self.root, ignore_errors=True)

    @staticmethod
    def _alive(group: int) -> bool:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return False
        return True


@pytest.fixture(scope="module")
def scratch() -> Iterator[Scratch]:
    made = Scratch()
    try:
        yield made
    finally:
        made.close()


@pytest.fixture(scope="module")
def head(scratch: Scratch) -> tuple[str, Path, str]:
    """`railyard join --head` on loopback: (its address, its token file, what join printed)."""
    home = scratch.home("head")
    port = free_port()
    done = scratch.run(
        [
            *RAILYARD,
            "join",
            "--head",
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            "--node-name",
            "head",
            "--gpus",
            "0",
            "--ray-start-args",
            ray_ports(port),
        ],
        scratch.env(home),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return f"127.0.0.1:{port}", home / ".ray" / "auth_token", done.stdout


@pytest.fixture(scope="module")
def open_head(scratch: Scratch) -> str:
    """A head started by hand without authentication, as Ray allows (RAY_AUTH_MODE=disabled)."""
    port = free_port()
    env = scratch.env(scratch.home("open"), RAY_AUTH_MODE="disabled")
    done = scratch.run(
        [
            RAY,
            "start",
            "--head",
            "--port",
            str(port),
            "--num-gpus",
            "0",
            "--disable-usage-stats",
            *ray_ports(port).split(),
        ],
        env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return f"127.0.0.1:{port}"


def client(scratch: Scratch, address: str, name: str, **env: str) -> tuple[str, Path]:
    """Run CLIENT as a separate process with an empty HOME of its own: (its verdict, the file
    its task would write)."""
    home = scratch.home(name)
    marker = home / "ran"
    done = scratch.run(
        [sys.executable, "-c", CLIENT, address, str(marker)], scratch.env(home, **env)
    )
    lines = done.stdout.strip().splitlines()
    return (lines[-1] if lines else f"no verdict: {done.stderr[-500:]}"), marker


def test_join_head_makes_a_0600_token_and_starts_ray_with_it(head: tuple[str, Path, str]) -> None:
    address, token, said = head
    assert token.stat().st_mode & 0o777 == 0o600
    assert len(token.read_text()) == 64
    assert int(token.read_text(), 16) >= 0
    assert f"created the cluster token {token} (mode 0600)" in said
    assert "listen on every interface" in said  # Ray's ports: said, never silently
    assert f"railyard join {address}" in said


@pytest.mark.parametrize("token", ["none", "wrong"])
def test_a_client_without_the_token_cannot_run_a_task(
    scratch: Scratch, head: tuple[str, Path, str], token: str
) -> None:
    env = {} if token == "none" else {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "0" * 64}
    verdict, marker = client(scratch, head[0], f"attacker-{token}", **env)
    assert verdict.startswith("REFUSED"), verdict
    assert not marker.exists()


def test_with_the_token_a_client_runs_a_task(scratch: Scratch, head: tuple[str, Path, str]) -> None:
    verdict, marker = client(
        scratch, head[0], "holder", RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(head[1])
    )
    assert verdict == f"RAN {os.getuid()}"
    assert marker.read_text() == str(os.getuid())


def test_join_without_the_token_is_refused_in_one_line(
    scratch: Scratch, head: tuple[str, Path, str]
) -> None:
    done = scratch.run(
        [*RAILYARD, "join", head[0], "--node-name", "w0", "--gpus", "0"],
        scratch.env(scratch.home("w0")),
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("railyard: join: no token")
    assert "hint:" in done.stderr
    assert "ray start" not in done.stdout


def test_join_with_a_wrong_token_is_refused_in_one_line(
    scratch: Scratch, head: tuple[str, Path, str]
) -> None:
    home = scratch.home("w1")
    (home / "token").write_text("0" * 64)
    (home / "token").chmod(0o600)
    done = scratch.run(
        [*RAILYARD, "join", head[0], "--node-name", "w1", "--gpus", "0"],
        scratch.env(home, RAY_AUTH_TOKEN_PATH=str(home / "token")),
    )
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1
    assert "refused this machine's token" in done.stderr


def test_up_refuses_a_cluster_without_authentication(scratch: Scratch, open_head: str) -> None:
    state = scratch.root / "up-open"
    done = scratch.run(
        [
            *RAILYARD,
            "up",
            "--ray",
            open_head,
            "--state-dir",
            str(state),
            "--port",
            str(free_port()),
            "--spool-dir",  # never the machine's /var/spool/railyard
            str(scratch.root / "spool-open"),
        ],
        scratch.env(scratch.home("op")),
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1
    assert "without token authentication" in done.stderr
    assert "--insecure-ray" in done.stderr
    assert not (state / "client.json").exists()  # refused before anything was written
    assert not (scratch.root / "spool-open").exists()


def test_up_takes_a_cluster_without_authentication_with_insecure_ray(
    tmp_path: Path, open_head: str
) -> None:
    server = ServerProcess(tmp_path, gpus=None, extra=("--ray", open_head, "--insecure-ray"))
    try:
        server.start(timeout_s=120)
        assert server.request("GET", "/v1/nodes") is not None
    finally:
        server.stop()
    assert "NO token authentication (--insecure-ray)" in (tmp_path / "server.log").read_text()


def test_up_needs_the_token_of_a_cluster_with_authentication(
    scratch: Scratch, head: tuple[str, Path, str]
) -> None:
    state = scratch.root / "up-token"
    where = ["--state-dir", str(state), "--spool-dir", str(scratch.root / "spool-token")]
    done = scratch.run(
        [*RAILYARD, "up", "--ray", head[0], *where, "--port", str(free_port())],
        scratch.env(scratch.home("op2")),  # --spool-dir: never the machine's /var/spool/railyard
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1
    assert "requires its token and none was found" in done.stderr
    assert not (state / "client.json").exists()
    assert not (scratch.root / "spool-token").exists()


def test_up_connects_with_the_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, head: tuple[str, Path, str]
) -> None:
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(head[1]))
    server = ServerProcess(tmp_path, gpus=None, extra=("--ray", head[0]))
    try:
        server.start(timeout_s=120)
        names = [n["name"] for n in server.request("GET", "/v1/nodes")]
        assert "head" in names
    finally:
        server.stop()
    assert "requires its token (token authentication on)" in (tmp_path / "server.log").read_text()
