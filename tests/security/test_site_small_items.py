"""Issue 58's small items, one test each, against a root server and bob's account: a missing
container image ends the job with reason ImagePullFailed, `admin users add` refuses a name
with no Unix account, `cancel 99999` names the id once, an `attach` refusal is printed after
the terminal is restored, and `jupyter --python` with a Python that has no JupyterLab says so
and exits non-zero."""

from __future__ import annotations

import os
import pty
import secrets
import select
import shutil
import subprocess
import sys
import time

import pytest

from tests.integration.tenants import NEEDS_ROOT, Site, finished, submit
from tests.parts import needs

pytestmark = NEEDS_ROOT


def railyard(
    site: Site, *args: str, token: str | None = None, cwd: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RAILYARD_URL": site.server.url,
           "RAILYARD_TOKEN": token or site.server.token}  # fmt: skip
    return subprocess.run([sys.executable, "-m", "railyard", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip


@needs("podman")
def test_a_missing_image_ends_the_job_with_image_pull_failed(site: Site) -> None:
    image = f"docker.io/library/ry-missing-{secrets.token_hex(4)}:1"
    job_id = submit(site.server, site.bob.token, command=["true"], workdir=str(site.bob.home),
                    container={"image": image})  # fmt: skip
    ended = finished(site.server, job_id, timeout_s=180)
    assert ended["state"] == "failed"
    assert ended["reason"].startswith(f"ImagePullFailed: image {image}: not on this node"), ended


def test_users_add_refuses_a_name_with_no_unix_account(site: Site) -> None:
    name = f"nosuch{secrets.token_hex(3)}"
    done = railyard(site, "admin", "users", "add", name)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith(
        f"railyard: unix_user: user {name!r} maps to Unix account {name!r}, which does not exist"
    )
    assert name not in railyard(site, "admin", "users", "list").stdout
    mapped = railyard(site, "admin", "users", "add", name, "--unix-user", "nobody")
    assert mapped.returncode == 0, mapped.stderr


def test_cancel_of_an_unknown_job_names_it_once(site: Site) -> None:
    done = railyard(site, "cancel", "99999")
    assert done.returncode == 1
    assert done.stderr == "railyard: no job '99999'\n"


def test_an_attach_refusal_is_printed_after_the_terminal_is_restored(site: Site) -> None:
    """In raw mode a newline is not turned into CR LF: a refusal printed then stair-steps."""
    pid, master = pty.fork()
    if pid == 0:  # the child: railyard attach on the new terminal
        os.environ.update(RAILYARD_URL=site.server.url, RAILYARD_TOKEN=site.server.token)
        os.execv(sys.executable, [sys.executable, "-m", "railyard", "attach", "99999"])
    seen = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
    _, status = os.waitpid(pid, 0)
    os.close(master)
    assert os.waitstatus_to_exitcode(status) == 1
    assert b"railyard: no job '99999'\r\n" in seen, seen


def test_jupyter_with_a_python_without_jupyterlab_says_so(site: Site) -> None:
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None:
        pytest.skip("needs /usr/bin/python3")
    has = subprocess.run([python, "-c", "import jupyterlab"], capture_output=True, check=False)
    if has.returncode == 0:
        pytest.skip(f"{python} has JupyterLab here")
    done = railyard(site, "jupyter", "--python", python, "-t", "5:00", token=site.bob.token,
                    cwd=str(site.bob.home))  # fmt: skip
    assert done.returncode != 0, done.stdout
    assert "serves JupyterLab" not in done.stdout
    assert f"railyard: {python} has no JupyterLab" in done.stderr
