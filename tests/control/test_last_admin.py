"""The last admin stays: demoting or removing them is a 409, also when two admins demote each
other at once; ``railyard admin tokens create --local --admin`` makes an admin again. On
SQLite and PostgreSQL."""

from __future__ import annotations

import contextlib
import io
import threading
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update
from tests.control.conftest import Seeder

from railyard.cli.main import main
from railyard.control.adminschemas import UserUpdate
from railyard.control.api.app import create_app
from railyard.control.errors import Conflict
from railyard.control.store.database import Store, sqlite_url
from railyard.control.store.paths import database_path
from railyard.control.store.tables import Token, User
from railyard.control.usecases.auth import authenticate
from railyard.control.usecases.users import update_user, user_by_name

pytestmark = pytest.mark.stores  # its PostgreSQL copies stay in the main tier

LAST = "user 'root' is the last admin (hint: make another user an admin first (railyard admin "
LAST += "users update USER --admin))"


@pytest.fixture
def as_(store: Store, tokens: dict[str, str], tmp_path: Path) -> dict[str, TestClient]:
    app = create_app(store, wake=lambda: None, state_dir=tmp_path)
    return {n: TestClient(app, headers={"Authorization": f"Bearer {t}"}) for n, t in tokens.items()}


def _admins(store: Store) -> list[str]:
    with store.session() as session:
        return list(session.scalars(select(User.name).where(User.is_admin).order_by(User.name)))


def test_the_last_admin_is_not_demoted_nor_removed(
    store: Store, as_: dict[str, TestClient]
) -> None:
    root = as_["root"]
    for refused in (root.patch("/v1/users/root", json={"is_admin": False}),
                    root.delete("/v1/users/root")):  # fmt: skip
        assert refused.status_code == 409
        assert refused.json()["detail"] == LAST
    assert _admins(store) == ["root"]
    assert root.get("/v1/users").status_code == 200


def test_with_two_admins_one_may_go(store: Store, as_: dict[str, TestClient]) -> None:
    root = as_["root"]
    assert root.patch("/v1/users/alice", json={"is_admin": True}).json()["is_admin"] is True
    demoted = root.patch("/v1/users/root", json={"is_admin": False})
    assert demoted.status_code == 200
    assert demoted.json()["is_admin"] is False
    assert _admins(store) == ["alice"]
    assert as_["alice"].delete("/v1/users/alice").status_code == 409
    removed = as_["alice"].delete("/v1/users/bob")
    assert (removed.status_code, removed.json()["name"]) == (200, "bob")
    assert as_["bob"].get("/v1/whoami").status_code == 401  # its tokens went with it
    assert as_["alice"].delete("/v1/users/bob").status_code == 404


def test_a_user_with_jobs_is_not_removed(as_: dict[str, TestClient]) -> None:
    made = as_["bob"].post("/v1/jobs", json={"command": ["true"], "gpus": 1})
    assert made.status_code == 201
    refused = as_["root"].delete("/v1/users/bob")
    assert refused.status_code == 409
    assert refused.json()["detail"].startswith("user 'bob' has jobs in the store (hint: ")


def test_two_admins_demoting_each_other_leave_one(store: Store, seeder: Seeder) -> None:
    seeder.user("ann", admin=True)
    seeder.user("ben", admin=True)
    barrier = threading.Barrier(2)
    outcomes: dict[str, str] = {}

    def demote(actor: str, target: str) -> None:
        try:
            with store.session() as session:
                me = user_by_name(session, actor)
                user_by_name(session, target)
                barrier.wait(timeout=10)  # both read two admins before either writes
                update_user(session, me, target, UserUpdate(is_admin=False), 0.0)
            outcomes[actor] = "demoted"
        except Conflict as exc:
            outcomes[actor] = exc.line()

    threads = [threading.Thread(target=demote, args=p) for p in (("ann", "ben"), ("ben", "ann"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(outcomes.values())[0] == "demoted"
    assert sorted(outcomes.values())[1].endswith("is the last admin (hint: make another user "
                                                  "an admin first (railyard admin users update "
                                                  "USER --admin))")  # fmt: skip
    assert len(_admins(store)) == 1


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["admin", "tokens", "create", "--local", *args])
    return code, out.getvalue(), err.getvalue()


def _is_admin(store: Store, token: str) -> tuple[str, bool]:
    with store.session() as session:
        user = authenticate(session, token)
        assert user is not None
        return user.name, user.is_admin


def test_local_admin_restores_and_creates(store: Store, seeder: Seeder, tmp_path: Path) -> None:
    if store.engine.dialect.name == "postgresql":
        where = ("--database-url", store.engine.url.render_as_string(hide_password=False))
    else:
        store = Store(sqlite_url(database_path(tmp_path)))
        seeder = Seeder(store)
        where = ("--state-dir", str(tmp_path))
    seeder.user("admin")  # lost its admin flag
    code, out, err = _cli("admin", *where)
    assert (code, _is_admin(store, out.strip())) == (0, ("admin", False))  # no --admin: as it is
    code, out, err = _cli("admin", "--admin", *where)
    assert (code, err) == (0, "railyard: made 'admin' an admin again\n")
    assert _is_admin(store, out.strip()) == ("admin", True)
    code, out, err = _cli("--user", "ops", "--admin", *where)
    assert (code, err) == (0, "railyard: created admin 'ops' (Unix account ops)\n")
    assert _is_admin(store, out.strip()) == ("ops", True)
    code, out, err = _cli("ops", "--admin", *where)
    assert (code, err) == (0, "railyard: 'ops' is already an admin\n")
    code, _, err = main_refusal("ops", "--admin")
    assert code == 2
    assert err.startswith("railyard: --admin goes with --local (hint: ")


def main_refusal(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["admin", "tokens", "create", *args])
    return code, out.getvalue(), err.getvalue()


def test_an_admin_whose_tokens_expired_or_were_revoked_does_not_count(
    store: Store, seeder: Seeder, as_: dict[str, TestClient]
) -> None:
    """The guard counts admins who can act (issue 53, item 5): demoting the only admin with a
    live token is a 409 while the other admins' tokens are expired or revoked."""
    seeder.user("ann", admin=True)
    ann = select(User.id).where(User.name == "ann").scalar_subquery()
    root = as_["root"]
    for stale in ({"expires_t_s": 1.0}, {"revoked": True}):
        with store.session() as session:
            session.execute(update(Token).where(Token.user_id == ann).values(**stale))
        refused = root.patch("/v1/users/root", json={"is_admin": False})
        assert refused.status_code == 409
        assert refused.json()["detail"] == (
            "user 'root' is the last admin who holds a valid token (1 other admin without one) "
            "(hint: give another admin a token first (railyard admin tokens create USER): an "
            "admin without a valid token cannot act)"
        )
        assert root.delete("/v1/users/root").status_code == 409
        with store.session() as session:
            session.execute(
                update(Token).where(Token.user_id == ann).values(expires_t_s=None, revoked=False)
            )
    assert root.patch("/v1/users/root", json={"is_admin": False}).status_code == 200
    assert _admins(store) == ["ann"]
