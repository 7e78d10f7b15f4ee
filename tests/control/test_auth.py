"""Tokens: format, hashing, revocation; 401 and 403 from the API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from railyard.control.api.app import create_app
from railyard.control.store.database import Store
from railyard.control.store.tables import Token
from railyard.control.usecases.auth import PREFIX, authenticate, hash_token, new_token


def test_tokens_are_prefixed_random_and_hashed() -> None:
    tokens = {new_token() for _ in range(100)}
    assert len(tokens) == 100
    token = tokens.pop()
    assert token.startswith(PREFIX)
    assert len(token) == len(PREFIX) + 43  # 32 bytes, base64url without padding
    assert len(hash_token(token)) == 64
    assert hash_token(token) != token


def test_authenticate(store: Store, seeder: Any) -> None:
    token = seeder.user("alice")
    with store.session() as session:
        user = authenticate(session, token)
        assert user is not None
        assert user.name == "alice"
        stored = session.scalars(select(Token.token_hash)).all()
        assert token not in stored  # only the hash is kept
        assert authenticate(session, token + "x") is None
        assert authenticate(session, "not-a-token") is None
        assert authenticate(session, new_token()) is None
        session.scalars(select(Token)).one().revoked = True
        session.flush()
        assert authenticate(session, token) is None


@pytest.fixture
def clients(store: Store, tokens: dict[str, str], tmp_path: Path) -> dict[str, TestClient]:
    app = create_app(store, wake=lambda: None, state_dir=tmp_path)
    out = {n: TestClient(app, headers={"Authorization": f"Bearer {t}"}) for n, t in tokens.items()}
    out["anon"] = TestClient(app)
    out["bad"] = TestClient(app, headers={"Authorization": f"Bearer {new_token()}"})
    out["basic"] = TestClient(app, headers={"Authorization": "Basic YWxpY2U6eA=="})
    return out


@pytest.mark.parametrize("who", ["anon", "bad", "basic"])
def test_401_without_a_valid_token(clients: dict[str, TestClient], who: str) -> None:
    response = clients[who].get("/v1/jobs")
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert response.json()["detail"] in ("missing bearer token", "invalid or revoked token")
    assert clients[who].get("/healthz").status_code == 200  # health needs no token


def test_revoked_token_is_refused(clients: dict[str, TestClient]) -> None:
    root = clients["root"]
    created = root.post("/v1/tokens", json={"user": "alice", "label": "laptop"}).json()
    assert created["token"].startswith(PREFIX)
    headers = {"Authorization": f"Bearer {created['token']}"}
    assert root.get("/v1/whoami", headers=headers).json()["name"] == "alice"
    listed = root.get("/v1/tokens").json()
    assert all("token" not in t for t in listed)  # plaintext is shown once
    revoked = root.delete(f"/v1/tokens/{created['id']}").json()
    assert revoked["revoked"] is True
    assert root.get("/v1/whoami", headers=headers).status_code == 401
    assert root.delete("/v1/tokens/999").status_code == 404


ADMIN_ROUTES = [
    ("GET", "/v1/users", None),
    ("POST", "/v1/users", {"name": "eve"}),
    ("GET", "/v1/tokens", None),
    ("POST", "/v1/tokens", {"user": "alice"}),
    ("DELETE", "/v1/tokens/1", None),
    ("POST", "/v1/queues", {"name": "mine"}),
    ("PATCH", "/v1/queues/default", {"weight": 9}),
    ("POST", "/v1/queues/default/members", {"user": "alice"}),
    ("DELETE", "/v1/queues/default/members/bob", None),
    ("POST", "/v1/nodes/n01/drain", {"reason": "mine"}),
    ("POST", "/v1/nodes/n01/resume", None),
]


@pytest.mark.parametrize(("method", "path", "body"), ADMIN_ROUTES)
def test_403_for_non_admins_on_admin_routes(
    clients: dict[str, TestClient], method: str, path: str, body: dict[str, Any] | None
) -> None:
    response = clients["alice"].request(method, path, json=body)
    assert response.status_code == 403, response.text
    assert response.json()["detail"] == "user 'alice' is not an admin"


def test_admin_adds_users(clients: dict[str, TestClient]) -> None:
    root = clients["root"]
    made = root.post("/v1/users", json={"name": "eve", "is_admin": False})
    assert made.status_code == 201
    assert root.post("/v1/users", json={"name": "eve"}).status_code == 409
    bad = root.post("/v1/users", json={"name": "e ve"})
    assert bad.status_code == 422
    assert bad.json()["detail"].startswith("name: 'e ve' is not allowed here (hint: ")
    names = [u["name"] for u in root.get("/v1/users").json()]
    assert names == ["root", "alice", "bob", "eve"]
