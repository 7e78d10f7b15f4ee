"""Container jobs never make root act on a name, path or host bob chose (issues 52 item 6,
53 items 1, 3 and 7), each attack from bob's own account against a root server:

- an archive of bob's cannot untag, retag or mark an image the node runs for alice;
- a container workdir or mount destination inside a host directory mounted in the container
  (the job's working directory, here /etc) is refused at submit, and nothing is made in /etc;
- an image on a registry bob listens on is refused at submit (a loopback literal), or never
  pulled (a name the admin did not list), and no connection reaches his listener;
- a working directory with ':' or ',' (a volume's separators: ``:U`` would chown a host
  path) is refused at submit in one line, not with a traceback in the job's log.
"""

from __future__ import annotations

import io
import json
import os
import secrets
import shutil
import socket
import subprocess
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.exec.container_image import imported_image
from tests.integration.tenants import NEEDS_ROOT, Site, Tenant, finished, shared_site, submit
from tests.parts import needs

pytestmark = [needs("podman"), *NEEDS_ROOT]

USR = "/usr:/usr:ro"  # the test image links /bin and /lib into /usr
PROBE = ["sh", "-c", "grep ^NAME= /etc/os-release"]


def allow_usr(site: Site) -> None:
    site.server.request("PATCH", "/v1/queues/default", json={"container_mounts": ["/usr"]})


def post(site: Site, token: str, **body: Any) -> Any:
    body.setdefault("gpus", 1)
    body.setdefault("export", "ALL")
    body.setdefault("env", {"PATH": "/usr/local/bin:/usr/bin:/bin"})
    return site.server.call("POST", "/v1/jobs", token=token, json=body)


def assert_refused(response: Any, field: str) -> str:
    """A one-line 422 naming ``field``; its text."""
    assert response.status_code == 422, response.text
    detail: str = response.json()["detail"]
    assert detail.startswith(f"{field}: "), detail
    assert "\n" not in detail, detail
    return detail


def output(site: Site, tenant: Tenant, job_id: str) -> str:
    """What the job wrote, as its user reads it through the API."""
    logs = site.server.call("GET", f"/v1/jobs/{job_id}/logs", token=tenant.token)
    return str(logs.text)


def image_id(name: str) -> str:
    done = subprocess.run(["podman", "image", "inspect", "--format", "{{.Id}}", name],
                          capture_output=True, text=True, check=False)  # fmt: skip
    return done.stdout.strip() if done.returncode == 0 else ""


def give(tenant: Tenant, path: Path) -> Path:
    os.chown(path, tenant.account.pw_uid, tenant.account.pw_gid)
    path.chmod(0o600)
    return path


def retagged_archive(source: Path, target: Path, name: str) -> None:
    """``source`` (a docker-archive) with its image tagged ``name``, as bob can write one."""
    with tarfile.open(source) as tar_in, tarfile.open(target, "w") as tar_out:
        for member in tar_in:
            data = tar_in.extractfile(member) if member.isfile() else None
            if member.name == "manifest.json" and data is not None:
                manifest = json.loads(data.read())
                manifest[0]["RepoTags"] = [name]
                raw = json.dumps(manifest).encode()
                member.size = len(raw)
                data = io.BytesIO(raw)
            tar_out.addfile(member, data)


@pytest.fixture
def victim() -> Iterator[str]:
    """An image of the node's (alice's jobs name it), removed afterwards with what bob's
    archives left."""
    name = f"localhost/ry-victim-{secrets.token_hex(3)}:1"
    imported_image(name, "the victim's image")
    yield name
    listed = subprocess.run(["podman", "images", "--format", "{{.Repository}}:{{.Tag}}"],
                            capture_output=True, text=True, check=False)  # fmt: skip
    ours = [n for n in listed.stdout.split() if n.startswith("localhost/railyard-archive/")]
    subprocess.run(["podman", "rmi", "--force", name, *ours], capture_output=True, check=False)


def alice_runs(site: Site, image: str) -> None:
    """Alice's job by ``image``'s name runs the node's image."""
    job_id = submit(site.server, site.alice.token, command=PROBE, workdir=str(site.alice.home),
                    container={"image": image, "mounts": [USR]})  # fmt: skip
    ended = finished(site.server, job_id, timeout_s=180)
    text = output(site, site.alice, job_id)
    assert ended["state"] == "completed", text
    assert "the victim's image" in text, text


@pytest.mark.parametrize("kind", ["same image", "name taken"])
def test_bobs_archive_cannot_untag_or_take_a_node_image(
    site: Site, victim: str, tmp_path: Path, kind: str
) -> None:
    """52.6: bob loads an archive holding the node's image (same id), or another image tagged
    with its name; the node's image keeps its name and id, and alice's job by that name runs
    it (it used to fail "cannot pull" until an admin removed a marker)."""
    allow_usr(site)
    before = image_id(victim)
    archive = site.bob.home / "mine.tar"
    if kind == "same image":
        subprocess.run(["podman", "save", "--quiet", "-o", str(archive), victim], check=True)
    else:
        other = imported_image(f"localhost/ry-bob-{secrets.token_hex(3)}:1", "EVIL")
        saved = tmp_path / "bob.tar"
        subprocess.run(["podman", "save", "--quiet", "-o", str(saved), other], check=True)
        subprocess.run(["podman", "rmi", "--force", other], capture_output=True, check=False)
        retagged_archive(saved, archive, victim)
    give(site.bob, archive)
    mine = submit(site.server, site.bob.token, command=PROBE, workdir=str(site.bob.home),
                  container={"image": f"docker-archive:{archive}", "mounts": [USR]})  # fmt: skip
    ended = finished(site.server, mine, timeout_s=180)
    assert ended["state"] == "completed", output(site, site.bob, mine)
    assert image_id(victim) == before, f"{victim} now names {image_id(victim)!r}"
    alice_runs(site, victim)


def test_a_container_workdir_inside_the_mounted_cwd_is_refused(site: Site) -> None:
    """53.1: --chdir /etc mounts the host's /etc; a workdir below it would be made there by
    root (a root-owned /etc/x/sub). Refused at submit, naming the option; nothing made."""
    allow_usr(site)
    made = Path("/etc") / f"ry-{secrets.token_hex(4)}"
    response = post(site, site.bob.token, command=["/nonexistent"], workdir="/etc",
                    container={"image": imported_image(), "mounts": [USR],
                               "workdir": f"{made}/sub"})  # fmt: skip
    if response.status_code == 201:  # the unchanged code: let it run, then look
        finished(site.server, response.json()[0]["id"], timeout_s=180)
    created = made.exists()
    shutil.rmtree(made, ignore_errors=True)
    assert not created, f"root made {made} for bob"
    assert "inside /etc" in assert_refused(response, "container_workdir")


def test_a_mount_destination_inside_the_mounted_cwd_is_refused(site: Site) -> None:
    """53.1: with /usr allowed, /usr/bin/true:/etc/NAME:ro would leave an empty root-owned
    /etc/NAME on the host (an /etc/nologin locks every login out)."""
    allow_usr(site)
    made = Path("/etc") / f"ry-{secrets.token_hex(4)}"
    response = post(site, site.bob.token, command=["/nonexistent"], workdir="/etc",
                    container={"image": imported_image(),
                               "mounts": [USR, f"/usr/bin/true:{made}:ro"]})  # fmt: skip
    if response.status_code == 201:
        finished(site.server, response.json()[0]["id"], timeout_s=180)
    created = made.exists()
    if created:
        made.unlink()
    assert not created, f"root made {made} for bob"
    assert str(made) in assert_refused(response, "container_mounts")


@contextmanager
def listener(tenant: Tenant, python: str) -> Iterator[tuple[int, Path]]:
    """A TCP listener of ``tenant``'s on every address; its port, and the file it writes when
    a connection arrives."""
    dialled = tenant.home / f"dialled-{secrets.token_hex(3)}"
    code = (
        "import socket, sys\n"
        "s = socket.socket(); s.bind(('0.0.0.0', 0)); s.listen(8)\n"
        "print(s.getsockname()[1], flush=True)\n"
        "c, peer = s.accept(); open(sys.argv[1], 'w').write(repr(peer))\n"
    )
    proc = subprocess.Popen(
        ["runuser", "-u", tenant.account.pw_name, "--", python, "-c", code, str(dialled)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        yield int(proc.stdout.readline()), dialled
    finally:
        proc.kill()
        proc.wait()


def test_a_loopback_registry_is_refused_at_submit(site: Site) -> None:
    """53.3: an image on 127.0.0.1:PORT (or its spellings) would make root's podman dial bob's
    listener; refused at submit, saying why, and nothing connects."""
    with listener(site.bob, site.python) as (port, dialled):
        for image in (f"127.0.0.1:{port}/x", f"127.1:{port}/x", f"docker://[::1]:{port}/x",
                      f"localhost:{port}/x:1"):  # fmt: skip
            response = post(site, site.bob.token, command=["true"], workdir=str(site.bob.home),
                            container={"image": image})  # fmt: skip
            if response.status_code == 201:
                finished(site.server, response.json()[0]["id"], timeout_s=180)
            assert not dialled.exists(), f"{image}: root's podman connected to bob's listener"
            detail = assert_refused(response, "container_image")
            assert "loopback" in detail, detail


def test_an_unlisted_registry_is_never_pulled(site: Site) -> None:
    """53.3: a registry name the admin did not list (this machine's own name, which resolves
    to loopback) is not looked at, at submit; the node does not pull it, and says so."""
    host = socket.gethostname()
    with listener(site.bob, site.python) as (port, dialled):
        job_id = submit(site.server, site.bob.token, command=["true"],
                        workdir=str(site.bob.home),
                        container={"image": f"{host}:{port}/x:1"})  # fmt: skip
        ended = finished(site.server, job_id, timeout_s=180)
        assert not dialled.exists(), "root's podman connected to bob's listener"
    text = output(site, site.bob, job_id)
    assert ended["state"] == "failed", text
    assert f"this cluster does not pull from {host}:{port}" in text, text


def test_a_registry_the_admin_lists_is_pulled_from(tmp_path: Path) -> None:
    """The other side of 53.3: ``up --container-registry HOST:PORT`` lets jobs name an image
    there, loopback or not, and the node dials it (here: a listener standing in for one)."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.listen(1)
    probe.settimeout(180)
    with probe, shared_site(tmp_path, extra=("--container-registry", f"127.0.0.1:{port}")) as site:
        job_id = submit(site.server, site.bob.token, command=["true"],
                        workdir=str(site.bob.home),
                        container={"image": f"127.0.0.1:{port}/x:1"})  # fmt: skip
        connection, _ = probe.accept()  # the pull, as the admin allowed
        connection.close()
        probe.close()
        text = output(site, site.bob, job_id)
        assert finished(site.server, job_id, timeout_s=180)["state"] == "failed", text


@pytest.mark.parametrize("name", ["a:b", "x:U", "c,d"])
def test_a_cwd_with_a_volume_separator_is_refused(site: Site, name: str) -> None:
    """53.7: --chdir with ':' used to print a traceback in the job's log; refused in one line
    (a ':U' would have the runtime chown the host directory)."""
    cwd = site.bob.home / name
    cwd.mkdir(exist_ok=True)
    os.chown(cwd, site.bob.account.pw_uid, site.bob.account.pw_gid)
    response = post(site, site.bob.token, command=["true"], workdir=str(cwd),
                    container={"image": imported_image(), "mounts": [USR]})  # fmt: skip
    if response.status_code == 201:
        job_id = response.json()[0]["id"]
        finished(site.server, job_id, timeout_s=180)
        log = cwd / f"slurm-{job_id}.out"
        assert "Traceback" not in (log.read_text() if log.exists() else "")
    assert "':' or ','" in assert_refused(response, "workdir")
