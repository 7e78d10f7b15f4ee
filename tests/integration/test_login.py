"""`railyard login`: a user connects in one command and every client command uses the saved
login; RAILYARD_URL/RAILYARD_TOKEN override it; errors tell a user to ask an admin for a token
and log in, not to run `railyard up` (issue 58, item 1)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from railyard.client.config import ConfigError, write_login
from tests.integration.server_proc import ServerProcess


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    made = ServerProcess(tmp_path_factory.mktemp("state"), gpus=1)
    made.start(timeout_s=120)
    try:
        yield made
    finally:
        made.stop()


def carol_token(server: ServerProcess) -> str:
    if not any(u["name"] == "carol" for u in server.request("GET", "/v1/users")):
        server.request("POST", "/v1/users", json={"name": "carol", "unix_user": "root"})
    token: str = server.request("POST", "/v1/tokens", json={"user": "carol"})["token"]
    return token


def railyard(
    home: Path, *args: str, stdin: str = "", **env: str
) -> subprocess.CompletedProcess[str]:
    """The CLI as a user whose only configuration is what it saved under ``home``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAILYARD_")}
    return subprocess.run(
        [sys.executable, "-m", "railyard", *args],
        input=stdin, capture_output=True, text=True, timeout=60, check=False,
        env={**clean, "HOME": str(home), **env},
    )  # fmt: skip


def test_login_saves_a_checked_token_that_every_command_then_uses(
    server: ServerProcess, tmp_path: Path
) -> None:
    token = carol_token(server)
    before = railyard(tmp_path, "queue")
    assert before.returncode == 1
    assert "railyard login" in before.stderr
    assert "railyard up" not in before.stderr

    done = railyard(tmp_path, "login", server.url, "--token-stdin", stdin=token + "\n")
    assert done.returncode == 0, done.stderr
    assert "as carol" in done.stdout
    saved = tmp_path / ".railyard" / "client.json"
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    assert stat.S_IMODE(saved.parent.stat().st_mode) == 0o700
    assert token not in done.stdout + done.stderr

    queue = railyard(tmp_path, "queue")
    assert queue.returncode == 0, queue.stderr

    overridden = railyard(tmp_path, "queue", RAILYARD_TOKEN="not-a-token")
    assert overridden.returncode == 1
    assert "ask your railyard admin for a token" in overridden.stderr

    assert railyard(tmp_path, "logout").returncode == 0
    assert not saved.exists()
    after = railyard(tmp_path, "queue")
    assert after.returncode == 1
    assert "railyard login" in after.stderr


def test_a_refused_token_is_not_saved(server: ServerProcess, tmp_path: Path) -> None:
    done = railyard(tmp_path, "login", server.url, "--token-stdin", stdin="wrong\n")
    assert done.returncode == 1
    assert "refused the token" in done.stderr
    assert "ask your railyard admin" in done.stderr
    assert not (tmp_path / ".railyard" / "client.json").exists()


def test_login_without_a_terminal_or_a_url_says_what_to_do(tmp_path: Path) -> None:
    no_url = railyard(tmp_path, "login", "--token-stdin", stdin="x\n")
    assert no_url.returncode == 2
    assert "which server" in no_url.stderr
    no_tty = railyard(tmp_path, "login", "http://127.0.0.1:9")
    assert no_tty.returncode == 2
    assert "--token-stdin" in no_tty.stderr


@pytest.mark.parametrize("unsafe", ["symlink", "group-writable", "other-writable"])
def test_a_token_is_never_written_into_a_directory_others_control(
    tmp_path: Path, unsafe: str
) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    state = tmp_path / "state"
    if unsafe == "symlink":
        state.symlink_to(real)
    else:
        state.mkdir()
        state.chmod(0o770 if unsafe == "group-writable" else 0o703)
    with pytest.raises(ConfigError, match="refusing to keep a token there"):
        write_login("http://127.0.0.1:9", "secret", state)
    assert not (real / "client.json").exists()
    assert not (state / "client.json").exists()
