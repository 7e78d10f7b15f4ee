"""The last admin stays (issue 20, item 6): demoting or removing the only admin is a 409; with
two admins one may go; bob can neither make himself an admin nor write the store; and a
store left with no admin (as an older version allowed) is recovered by root on the server's
machine with ``railyard admin tokens create --local --admin``, while the server runs."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

from railyard.control.store.paths import database_path
from tests.integration.tenants import NEEDS_ROOT, Site

pytestmark = NEEDS_ROOT

LAST = "is the last admin (hint: make another user an admin first (railyard admin users update "


def _admin_name(site: Site) -> str:
    name: str = site.server.request("GET", "/v1/whoami")["name"]
    return name


def test_the_only_admin_is_not_demoted_nor_removed(site: Site) -> None:
    server, admin = site.server, _admin_name(site)
    demote = server.call("PATCH", f"/v1/users/{admin}", json={"is_admin": False})
    assert demote.status_code == 409
    assert demote.json()["detail"] == f"user {admin!r} {LAST}USER --admin))"
    remove = server.call("DELETE", f"/v1/users/{admin}")
    assert remove.status_code == 409
    assert LAST in remove.json()["detail"]
    assert server.call("GET", "/v1/users").status_code == 200  # still an admin
    bob = site.bob  # neither the API nor the store (what --local opens) lets bob in
    assert server.call("PATCH", "/v1/users/bob", token=bob.token,
                       json={"is_admin": True}).status_code == 403  # fmt: skip
    db = database_path(server.state_dir)
    done = bob.shell(f"{site.python} -c \"import sqlite3; sqlite3.connect('{db}')"
                     ".execute('UPDATE users SET is_admin = 1')\"")  # fmt: skip
    assert done.returncode != 0
    assert "unable to open database file" in done.stderr


def test_two_admins_one_may_go_and_a_lockout_is_recovered_locally(site: Site) -> None:
    server, admin = site.server, _admin_name(site)
    promoted = server.call("PATCH", "/v1/users/alice", json={"is_admin": True})
    assert (promoted.status_code, promoted.json()["is_admin"]) == (200, True)
    alice = site.alice.token
    demoted = server.call("PATCH", f"/v1/users/{admin}", token=alice, json={"is_admin": False})
    assert (demoted.status_code, demoted.json()["is_admin"]) == (200, False)
    assert server.call("PATCH", "/v1/users/alice", token=alice,
                       json={"is_admin": False}).status_code == 409  # fmt: skip
    # a store where no admin is left, as an older railyard let the last admin demote itself
    with sqlite3.connect(database_path(server.state_dir)) as db:
        db.execute("UPDATE users SET is_admin = 0")
    assert server.call("GET", "/v1/users", token=alice).status_code == 403
    assert server.call("GET", "/v1/users").status_code == 403
    done = subprocess.run(
        [sys.executable, "-m", "railyard", "admin", "tokens", "create", "--local", "--admin",
         admin, "--state-dir", str(server.state_dir)],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == f"railyard: made {admin!r} an admin again\n"
    token = done.stdout.strip()
    users = server.call("GET", "/v1/users", token=token)
    assert users.status_code == 200
    assert [u["name"] for u in users.json() if u["is_admin"]] == [admin]
    assert server.call("GET", "/v1/users").status_code == 200  # its old token is an admin's again
