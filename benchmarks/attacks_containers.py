"""Campaign attacks on container jobs (issue 52 item 6, issue 53 items 1, 3 and 7): bob, from
his own account, tries to make root's container runtime act on a name, path or host he chose.
Each function returns (what happened, held?); ``ATTACKS`` lists them for
``benchmarks/attack_campaign.py``. The same attacks, one per test, are
``tests/security/test_containers_root.py``.

Standalone, as root with Podman: ``python benchmarks/attacks_containers.py`` prints one line
per attack and exits 1 if any got through.
"""

from __future__ import annotations

import io
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.exec.container_image import imported_image
from tests.integration.tenants import Site, Tenant, finished, shared_site

Attack = Callable[[Site], tuple[str, bool]]
USR = "/usr:/usr:ro"  # the test image links /bin and /lib into /usr
PROBE = ["sh", "-c", "grep ^NAME= /etc/os-release"]
VICTIM_OS = "the victim's image"
JOB_TIMEOUT_S = 180.0


def _post(site: Site, token: str, **body: Any) -> httpx.Response:
    body.setdefault("gpus", 1)
    body.setdefault("export", "ALL")
    body.setdefault("env", {"PATH": "/usr/local/bin:/usr/bin:/bin"})
    response: httpx.Response = site.server.call("POST", "/v1/jobs", token=token, json=body)
    return response


def _said(response: httpx.Response) -> str:
    if response.status_code == 201:
        return "201 accepted"
    try:
        detail = str(response.json().get("detail", ""))
    except (ValueError, AttributeError):
        detail = response.text
    return f"{response.status_code} {detail.splitlines()[0][:70] if detail else ''}".strip()


def _output(site: Site, tenant: Tenant, job_id: str) -> str:
    """What the job wrote, as its user reads it through the API."""
    logs = site.server.call("GET", f"/v1/jobs/{job_id}/logs", token=tenant.token)
    return str(logs.text)


def _image_id(name: str) -> str:
    done = subprocess.run(["podman", "image", "inspect", "--format", "{{.Id}}", name],
                          capture_output=True, text=True, check=False)  # fmt: skip
    return done.stdout.strip() if done.returncode == 0 else ""


def _allow_usr(site: Site) -> None:
    site.server.request("PATCH", "/v1/queues/default", json={"container_mounts": ["/usr"]})


def _give(tenant: Tenant, path: Path) -> None:
    os.chown(path, tenant.account.pw_uid, tenant.account.pw_gid)
    path.chmod(0o600)


def _retag(source: Path, target: Path, name: str) -> None:
    """A docker-archive's image tagged ``name``, as bob can write one."""
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


def _archive_attack(site: Site, same_image: bool) -> tuple[str, bool]:
    """Bob's archive (the node's image itself, or another tagged with its name), then alice's
    job by the node image's name. Held: the name keeps its id and alice's job runs it."""
    _allow_usr(site)
    victim = f"localhost/ry-victim-{secrets.token_hex(3)}:1"
    imported_image(victim, VICTIM_OS)
    before = _image_id(victim)
    archive = site.bob.home / f"mine-{secrets.token_hex(3)}.tar"
    try:
        if same_image:
            subprocess.run(["podman", "save", "--quiet", "-o", str(archive), victim], check=True)
        else:
            other = imported_image(f"localhost/ry-bob-{secrets.token_hex(3)}:1", "EVIL")
            with tempfile.TemporaryDirectory() as tmp:
                saved = Path(tmp) / "bob.tar"
                subprocess.run(["podman", "save", "--quiet", "-o", str(saved), other], check=True)
                subprocess.run(["podman", "rmi", "--force", other], capture_output=True)
                _retag(saved, archive, victim)
        _give(site.bob, archive)
        mine = _post(site, site.bob.token, command=PROBE, workdir=str(site.bob.home),
                     container={"image": f"docker-archive:{archive}", "mounts": [USR]})  # fmt: skip
        if mine.status_code != 201:
            return f"bob's archive refused: {_said(mine)}", False
        finished(site.server, mine.json()[0]["id"], timeout_s=JOB_TIMEOUT_S)
        after = _image_id(victim)
        theirs = _post(site, site.alice.token, command=PROBE, workdir=str(site.alice.home),
                       container={"image": victim, "mounts": [USR]})  # fmt: skip
        job_id = theirs.json()[0]["id"]
        state = finished(site.server, job_id, timeout_s=JOB_TIMEOUT_S)["state"]
        ran = VICTIM_OS in _output(site, site.alice, job_id)
        held = after == before and state == "completed" and ran
        return f"name kept: {after == before}; alice's job {state}, ran the node's: {ran}", held
    finally:
        archive.unlink(missing_ok=True)
        listed = subprocess.run(["podman", "images", "--format", "{{.Repository}}:{{.Tag}}"],
                                capture_output=True, text=True, check=False)  # fmt: skip
        ours = [n for n in listed.stdout.split() if n.startswith("localhost/railyard-archive/")]
        subprocess.run(["podman", "rmi", "--force", victim, *ours], capture_output=True)


def archive_same_image(site: Site) -> tuple[str, bool]:
    return _archive_attack(site, same_image=True)


def archive_takes_name(site: Site) -> tuple[str, bool]:
    return _archive_attack(site, same_image=False)


def _made_in_etc(site: Site, container: Callable[[Path], dict[str, Any]]) -> tuple[str, bool]:
    """Bob's job with --chdir /etc and ``container(path)``; held: refused, nothing made."""
    _allow_usr(site)
    made = Path("/etc") / f"ry-{secrets.token_hex(4)}"
    response = _post(site, site.bob.token, command=["/nonexistent"], workdir="/etc",
                     container=container(made))  # fmt: skip
    if response.status_code == 201:
        finished(site.server, response.json()[0]["id"], timeout_s=JOB_TIMEOUT_S)
    created = made.exists()
    if made.is_dir():
        shutil.rmtree(made, ignore_errors=True)
    elif created:
        made.unlink()
    what = f"ROOT MADE {made}" if created else "nothing made in /etc"
    return f"{_said(response)}; {what}", response.status_code == 422 and not created


def workdir_in_etc(site: Site) -> tuple[str, bool]:
    def container(made: Path) -> dict[str, Any]:
        return {"image": imported_image(), "mounts": [USR], "workdir": f"{made}/sub"}

    return _made_in_etc(site, container)


def mount_dst_in_etc(site: Site) -> tuple[str, bool]:
    def container(made: Path) -> dict[str, Any]:
        return {"image": imported_image(), "mounts": [USR, f"/usr/bin/true:{made}:ro"]}

    return _made_in_etc(site, container)


def _listen_as(tenant: Tenant, python: str) -> tuple[subprocess.Popen[str], int, Path]:
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
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline()), dialled


def _registry_attack(site: Site, host: str | None) -> tuple[str, bool]:
    """Bob's image on ``host``:PORT (bob listens there; None: 127.0.0.1). Held: nothing
    connects, and a loopback literal is refused at submit."""
    proc, port, dialled = _listen_as(site.bob, site.python)
    try:
        image = f"{host or '127.0.0.1'}:{port}/x:1"
        response = _post(site, site.bob.token, command=["true"], workdir=str(site.bob.home),
                         container={"image": image})  # fmt: skip
        state = "refused"
        if response.status_code == 201:
            job_id = response.json()[0]["id"]
            state = finished(site.server, job_id, timeout_s=JOB_TIMEOUT_S)["state"]
        time.sleep(0.5)  # a connection in flight lands before the verdict
        dialled_now = dialled.exists()
        submit_ok = response.status_code == 422 if host is None else True
        said = f"{_said(response)}; job {state}; "
        return said + ("ROOT DIALLED BOB" if dialled_now else "no connection"), (
            submit_ok and not dialled_now
        )
    finally:
        proc.kill()
        proc.wait()


def loopback_registry(site: Site) -> tuple[str, bool]:
    return _registry_attack(site, None)


def unlisted_registry(site: Site) -> tuple[str, bool]:
    return _registry_attack(site, socket.gethostname())  # resolves to this machine


def colon_chdir(site: Site) -> tuple[str, bool]:
    """--chdir with ':U' (a volume's chown flag) for a container job; held: one-line 422."""
    cwd = site.bob.home / "x:U"
    cwd.mkdir(exist_ok=True)
    os.chown(cwd, site.bob.account.pw_uid, site.bob.account.pw_gid)
    response = _post(site, site.bob.token, command=["true"], workdir=str(cwd),
                     container={"image": imported_image(), "mounts": [USR]})  # fmt: skip
    if response.status_code == 201:
        job_id = response.json()[0]["id"]
        finished(site.server, job_id, timeout_s=JOB_TIMEOUT_S)
        traceback = "Traceback" in _output(site, site.bob, job_id)
        return f"accepted; traceback in the log: {traceback}", False
    return _said(response), response.status_code == 422


ATTACKS: list[tuple[str, str, Attack]] = [
    ("container: bob's archive holds the node's image", "the name stays; alice's job runs",
     archive_same_image),
    ("container: bob's archive tagged with the node image's name",
     "the name stays; alice's job runs", archive_takes_name),
    ("container: --chdir /etc --container-workdir /etc/X/sub", "422, nothing made in /etc",
     workdir_in_etc),
    ("container: mount /usr/bin/true:/etc/X with --chdir /etc", "422, nothing made in /etc",
     mount_dst_in_etc),
    ("container: image 127.0.0.1:PORT/x (bob listens)", "422, no connection",
     loopback_registry),
    ("container: image HOSTNAME:PORT/x, not listed (bob listens)", "no connection",
     unlisted_registry),
    ("container: --chdir DIR/x:U", "422 in one line", colon_chdir),
]  # fmt: skip


def main() -> None:
    if os.geteuid() != 0 or shutil.which("podman") is None:
        sys.exit("attacks_containers: run as root, with podman installed")
    held_all = True
    with tempfile.TemporaryDirectory() as tmp, shared_site(Path(tmp)) as site:
        for name, expected, fn in ATTACKS:
            try:
                result, held = fn(site)
            except Exception as exc:  # an attack that breaks the harness is a row too
                result, held = f"error: {type(exc).__name__}: {exc}"[:90], False
            held_all &= held
            print(f"{'held' if held else 'BROKE':>5}  {name} ({expected}): {result}", flush=True)
    sys.exit(0 if held_all else 1)


if __name__ == "__main__":
    main()
