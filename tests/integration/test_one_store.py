"""One store, one server, whatever path or URL reaches it: two real `railyard up` processes.

SQLite: the lock sits beside the database file (``<db>.lock``), its path resolved, so another
state directory naming the first server's database by a relative path or through a symlinked
directory is refused with one line, exit 2, nothing written. PostgreSQL: the advisory lock is
the database's, so another spelling of its URL (``localhost`` for ``127.0.0.1``) is refused too.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from tests.integration.server_proc import ServerProcess, free_port
from tests.integration.test_up import up

pytestmark = pytest.mark.stores  # its PostgreSQL copies stay in the main tier


@pytest.fixture
def first(tmp_path: Path, database_url: str | None) -> ServerProcess:
    server = ServerProcess(tmp_path / "a", database_url=database_url)
    server.state_dir.mkdir()
    server.start()
    yield server  # type: ignore[misc]
    server.stop()


def _other_spellings(first: ServerProcess, tmp_path: Path) -> list[str]:
    """URLs that reach the first server's store by another path or host."""
    if first.database_url is not None:
        url = make_url(first.database_url)
        other_host = "localhost" if url.host in ("127.0.0.1", None) else "127.0.0.1"
        return [url.set(host=other_host).render_as_string(hide_password=False)]
    db = first.state_dir / "railyard.db"
    link = tmp_path / "link"
    link.symlink_to(first.state_dir, target_is_directory=True)
    return [f"sqlite:///{os.path.relpath(db)}", f"sqlite:///{link / 'railyard.db'}"]


def test_a_second_server_on_the_same_database_by_another_spelling_is_refused(
    first: ServerProcess, tmp_path: Path
) -> None:
    (job,) = first.request("POST", "/v1/jobs", json={"command": ["sleep", "30"]})
    for n, url in enumerate(_other_spellings(first, tmp_path)):
        other_dir = tmp_path / f"b{n}"
        second = up(other_dir, free_port(), url)
        assert second.returncode == 2, second.stdout + second.stderr
        assert second.stdout == ""
        assert second.stderr.count("\n") == 1, second.stderr
        assert "is in use by another railyard server" in second.stderr
        if first.database_url is None:  # the line names the database file, resolved
            assert f"database {first.state_dir / 'railyard.db'} is in use" in second.stderr
        assert not (other_dir / "client.json").exists()
    jobs = first.request("GET", "/v1/jobs")
    assert [j["id"] for j in jobs] == [job["id"]]
    first.request("DELETE", f"/v1/jobs/{job['id']}")


def test_the_database_lock_is_freed_when_its_server_stops(
    first: ServerProcess, tmp_path: Path
) -> None:
    """The next server on that database (from another state directory) starts."""
    if first.database_url is not None:
        pytest.skip("PostgreSQL's advisory lock is covered by tests/integration/test_up.py")
    first.stop()
    url = f"sqlite:///{first.state_dir / 'railyard.db'}"
    second = ServerProcess(tmp_path / "b", database_url=url)
    second.state_dir.mkdir()
    second.start()
    try:
        # the store's admin token is the first server's (client.json is written only once)
        assert second.request("GET", "/v1/jobs", token=first.token) == []
    finally:
        second.stop()
