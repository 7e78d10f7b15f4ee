"""The directory Ray keeps its sessions in (issue 53, item 2): made 0700, or checked before
Ray starts or a driver connects; another account's directory, a symlink, or an ancestor
another account may write is refused in one line; group or other access on a directory of
ours is taken away. Real directories; chown to ``nobody`` needs root."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from railyard.exec.ray.raydirs import RayDirError, ensure_private_dir, is_private, ray_base

NOBODY = 65534
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chowns to another account")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_missing_base_is_made_0700_with_its_parents(tmp_path: Path) -> None:
    base, note = ensure_private_dir(tmp_path / "a" / "b")
    assert (base, note) == (tmp_path / "a" / "b", None)
    assert _mode(base) == _mode(base.parent) == 0o700
    assert is_private(base / "ray" / "session_x" / "logs")


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory others may enter (pytest's own tmp is inside a 0700 one)."""
    path = Path(tempfile.mkdtemp(prefix="raydirs-", dir="/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_a_base_others_may_enter_is_made_0700(open_dir: Path) -> None:
    base = open_dir / "rt"
    base.mkdir()
    base.chmod(0o777)  # as Ray leaves its temp dir
    assert not is_private(base / "ray" / "session_x")
    made, note = ensure_private_dir(base)
    assert note == f"Ray's directory {base} was mode 0777: made 0700"
    assert _mode(made) == 0o700
    assert is_private(base / "ray" / "session_x")


def test_a_symlinked_base_is_used_by_its_real_path(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    assert ensure_private_dir(tmp_path / "link") == (real, None)


@needs_root
def test_another_accounts_base_is_refused(tmp_path: Path) -> None:
    base = tmp_path / "theirs"
    base.mkdir(mode=0o700)
    os.chown(base, NOBODY, NOBODY)
    with pytest.raises(RayDirError) as refused:
        ensure_private_dir(base)
    assert str(refused.value).startswith(f"Ray's directory {base} belongs to uid {NOBODY}")
    assert "\n" not in str(refused.value)
    assert _mode(base) == 0o700  # nothing changed


@needs_root
def test_a_base_under_a_directory_another_account_writes_is_refused(tmp_path: Path) -> None:
    parent = tmp_path / "shared"
    parent.mkdir(mode=0o777)
    parent.chmod(0o777)  # no sticky bit: anyone may rename what is in it
    with pytest.raises(RayDirError, match="above Ray's directory, is writable by other"):
        ensure_private_dir(parent / "rt")
    assert not (parent / "rt").exists()
    parent.chmod(0o1777)  # sticky, as /tmp: fine
    assert ensure_private_dir(parent / "rt")[0] == parent / "rt"
    os.chown(parent, NOBODY, NOBODY)
    with pytest.raises(RayDirError, match=f"uid {NOBODY}"):
        ensure_private_dir(parent / "rt")


def test_the_base_is_ray_tmpdir_else_railyards_own() -> None:
    assert ray_base({"RAY_TMPDIR": "/srv/r"}) == Path("/srv/r")
    expected = "/run/railyard-ray" if os.geteuid() == 0 else f"/tmp/railyard-ray-{os.geteuid()}"
    assert ray_base({}) == Path(expected)
