"""Token expiry, the last admin token, and recovery with ``railyard admin tokens create
--local`` straight on the store (SQLite file and PostgreSQL URL)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tests.control.conftest import Seeder

from railyard.cli.main import main
from railyard.control.api.app import create_app
from railyard.control.store.database import Store, sqlite_url
from railyard.control.store.paths import database_path
from railyard.control.usecases.auth import authenticate

pytestmark = pytest.mark.stores  # its PostgreSQL copies stay in the main tier


class Clock:
    def __init__(self, t_s: float) -> None:
        self.t_s = t_s

    def __call__(self) -> float:
        return self.t_s


def test_expired_token_is_401_with_when(
    store: Store, tokens: dict[str, str], tmp_path: Path
) -> None:
    clock = Clock(1_000_000.0)
    app = create_app(store, wake=lambda: None, state_dir=tmp_path, clock=clock)
    root = TestClient(app, headers={"Authorization": f"Bearer {tokens['root']}"})
    made = root.post("/v1/tokens", json={"user": "alice", "expires_in_s": 3600}).json()
    assert made["expires_t_s"] == 1_003_600.0
    alice = TestClient(app, headers={"Authorization": f"Bearer {made['token']}"})
    assert alice.get("/v1/whoami").json()["name"] == "alice"
    clock.t_s += 3600
    response = alice.get("/v1/whoami")
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert response.json()["detail"] == (
        f"token {made['id']} expired at 1970-01-12T14:46:40+00:00 "
        "(hint: an admin creates a new one)"
    )
    assert root.post("/v1/tokens", json={"user": "alice", "expires_in_s": 0}).status_code == 422


def test_the_last_valid_admin_token_cannot_be_revoked(
    store: Store, tokens: dict[str, str], tmp_path: Path
) -> None:
    app = create_app(store, wake=lambda: None, state_dir=tmp_path)
    root = TestClient(app, headers={"Authorization": f"Bearer {tokens['root']}"})
    [mine] = [t for t in root.get("/v1/tokens").json() if t["user"] == "root"]
    refused = root.delete(f"/v1/tokens/{mine['id']}")
    assert refused.status_code == 409
    assert "railyard admin tokens create --local" in refused.json()["detail"]
    spare = root.post("/v1/tokens", json={"user": "root", "label": "spare"}).json()
    assert root.delete(f"/v1/tokens/{mine['id']}").json()["revoked"] is True
    assert root.get("/v1/whoami").status_code == 401
    spare_client = TestClient(app, headers={"Authorization": f"Bearer {spare['token']}"})
    assert spare_client.delete(f"/v1/tokens/{spare['id']}").status_code == 409


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["admin", *args])
    return code, out.getvalue(), err.getvalue()


def test_local_recovery_on_a_state_directory(tmp_path: Path) -> None:
    store = Store(sqlite_url(database_path(tmp_path)))
    Seeder(store).user("admin", admin=True)
    code, out, _ = _cli("tokens", "create", "--local", "--state-dir", str(tmp_path))
    assert code == 0
    with store.session() as session:
        user = authenticate(session, out.strip())
        assert user is not None
        assert (user.name, user.is_admin) == ("admin", True)
    code, out, _ = _cli(
        "tokens", "create", "--local", "--user", "admin", "--expires", "2h", "--json",
        "--state-dir", str(tmp_path),
    )  # fmt: skip
    assert code == 0
    made = json.loads(out)
    assert made["user"] == "admin"
    assert made["expires_t_s"] is not None
    store.close()


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("--local", "--user", "nobody"), "railyard: no user 'nobody'\n"),
        (("--local", "--state-dir", "/nonexistent"), "railyard: no store at /nonexistent/"),
        (("alice", "--expires", "3x"), "railyard: --expires: bad duration '3x'"),
        (("alice", "--state-dir", "/tmp"), "railyard: --state-dir and --database-url go with"),
    ],
)
def test_local_recovery_refusals(tmp_path: Path, args: tuple[str, ...], error: str) -> None:
    store = Store(sqlite_url(database_path(tmp_path)))
    store.close()
    extra = () if "--state-dir" in args or "--local" not in args else ("--state-dir", str(tmp_path))
    code, _, err = _cli("tokens", "create", *args, *extra)
    assert code == 2
    assert err.startswith(error)


def test_local_recovery_on_postgresql(store: Store) -> None:
    if store.engine.dialect.name != "postgresql":
        pytest.skip("the SQLite case is test_local_recovery_on_a_state_directory")
    Seeder(store).user("admin", admin=True)
    url = store.engine.url.render_as_string(hide_password=False)
    code, out, _ = _cli("tokens", "create", "--local", "--database-url", url)
    assert code == 0
    with store.session() as session:
        user = authenticate(session, out.strip())
        assert user is not None
        assert user.name == "admin"
