"""A site installs railyard as a service (issue 58, item 3): the systemd units it ships, with
Delegate=yes, installed by one command; railyard's cgroups nested under the group systemd
delegated to it on cgroup v2; a consistent backup of a running server's store, and a restore
refused while a server runs on it."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from railyard.exec.cgroups import delegation, proctrack
from tests.integration.server_proc import ServerProcess


def railyard(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "railyard", *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_install_service_writes_both_units_delegated_with_this_python(tmp_path: Path) -> None:
    dry = railyard("admin", "install-service", "--dry-run", "--root", str(tmp_path))
    assert dry.returncode == 0, dry.stderr
    assert not (tmp_path / "etc").exists()
    done = railyard("admin", "install-service", "--root", str(tmp_path))
    assert done.returncode == 0, done.stderr
    units = tmp_path / "etc/systemd/system"
    server, node = (units / "railyard.service").read_text(), (units / "railyard-node.service")
    assert f"ExecStart={sys.executable} -m railyard up\n" in server
    assert f"ExecStart={sys.executable} -m railyard join\n" in node.read_text()
    for text in (server, node.read_text()):
        assert "\nDelegate=yes\n" in text
        assert "\nKillMode=process\n" in text  # a restart leaves jobs running to be adopted
        assert "@" not in text.replace("[email", "")
    assert stat.S_IMODE(node.stat().st_mode) == 0o644
    verify = shutil.which("systemd-analyze")
    if verify is not None:  # it parses units without a running systemd
        checked = subprocess.run([verify, "verify", *map(str, units.iterdir())],
                                 capture_output=True, text=True, check=False)  # fmt: skip
        assert checked.returncode == 0, checked.stderr


def fake_cgroup_v2(tmp_path: Path, own: str) -> tuple[Path, Path]:
    """A cgroup v2 mount (directories and files as the kernel shows them) and a
    /proc/self/cgroup placing this process at ``own``."""
    mount = tmp_path / "cgroup"
    group = mount / own.lstrip("/")
    for level in (mount, group):
        level.mkdir(parents=True, exist_ok=True)
        for name in ("cgroup.controllers", "cgroup.procs", "cgroup.kill", "cgroup.subtree_control"):
            (level / name).write_text("")
    proc = tmp_path / "proc_self_cgroup"
    proc.write_text(f"0::{own}\n")
    return mount, proc


def test_cgroups_nest_under_the_group_systemd_delegated(tmp_path: Path) -> None:
    mount, proc = fake_cgroup_v2(tmp_path, "/system.slice/railyard.service")
    group = delegation.delegated_group(mount, proc, delegated=lambda _: True)
    assert group == mount / "system.slice/railyard.service"
    leaf = delegation.enter_supervisor(group)
    assert (leaf / "cgroup.procs").read_text() == str(os.getpid())
    (leaf / "cgroup.controllers").write_text("")  # the kernel fills a new group so
    # moved already (a second executor in the same process): the same service group
    proc.write_text("0::/system.slice/railyard.service/supervisor\n")
    assert delegation.delegated_group(mount, proc, delegated=lambda _: True) == group
    (group / "railyard").mkdir()
    (group / "railyard/cgroup.kill").write_text("")
    tracking = proctrack.choose((group,), tmp_path / "no-freezer")
    assert tracking == proctrack.Tracking("cgroup2", group / "railyard")


@pytest.mark.parametrize(
    ("own", "delegated", "v2"),
    [
        ("/system.slice/railyard.service", False, True),  # no Delegate=yes: not ours to write
        ("/user.slice/user-0.slice/session-3.scope", True, True),  # a login shell
        ("/", True, True),  # a container's own namespace root
        ("/system.slice/railyard.service", True, False),  # cgroup v1 or hybrid
    ],
)
def test_today_s_layout_is_kept_elsewhere(
    tmp_path: Path, own: str, delegated: bool, v2: bool
) -> None:
    mount, proc = fake_cgroup_v2(tmp_path, own)
    if not v2:
        (mount / "cgroup.controllers").unlink()
    assert delegation.delegated_group(mount, proc, delegated=lambda _: delegated) is None


def users(server: ServerProcess) -> set[str]:
    return {u["name"] for u in server.request("GET", "/v1/users")}


def test_backup_while_running_and_restore_refused_until_it_stops(
    tmp_path: Path, database_url: str | None
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    server = ServerProcess(state, gpus=1, database_url=database_url)
    store = ["--state-dir", str(state), *(["--database-url", database_url] if database_url else [])]
    server.start(timeout_s=120)
    try:
        server.request("POST", "/v1/users", json={"name": "before", "unix_user": "root"})
        copy = tmp_path / "backup.db"
        done = railyard("admin", "backup", str(copy), *store)
        assert done.returncode == 0, done.stderr
        assert stat.S_IMODE(copy.stat().st_mode) == 0o600
        server.request("POST", "/v1/users", json={"name": "after", "unix_user": "root"})
        refused = railyard("admin", "restore", str(copy), *store)
        assert refused.returncode == 1
        assert "in use by another railyard server" in refused.stderr
        assert "after" in users(server)
    finally:
        server.stop()
    restored = railyard("admin", "restore", str(copy), *store)
    assert restored.returncode == 0, restored.stderr
    server.start(timeout_s=120)
    try:
        assert {"before", "after"} & users(server) == {"before"}
    finally:
        server.stop()
