"""Where Ray keeps its sessions on a railyard node: a directory only Ray's own account (root)
can enter, checked before Ray starts or a driver connects.

Ray makes its temp directory and every session directory under it mode 0777 without the
sticky bit (``ray._common.utils.try_make_directory_shared``), so that several users can share
one Ray. On a railyard node Ray runs as root: a user who can enter those directories could
plant a symlink named like the next log file Ray opens (``python-core-driver-<id>_<pid>.log``)
and have root append to, or create, any file. `railyard join` therefore puts Ray's temp
directory (``ray start --temp-dir``) inside a *base* directory of its own, mode 0700: what
Ray chmods below it stays out of every other account's reach, and whatever Ray writes there
(its logs, sockets, session files) no one else can have planted a link for. A driver
(`railyard up --ray`) joins the session of its node's raylet, wherever that was started:
once connected it checks the session lies in such a directory (:func:`is_private`), and lets
Ray go otherwise.

The base is ``$RAY_TMPDIR`` when set (Ray's own variable: ``ray start`` and the driver then
agree on it), else ``/run/railyard-ray`` for root and ``/tmp/railyard-ray-<uid>`` for another
account. :func:`ensure_private_dir` makes it, or checks it: a symlink, another owner, or an
ancestor another account may rename it in refuses (one line); group or other access on a
directory of ours is taken away (and said).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

RAY_TMPDIR_ENV = "RAY_TMPDIR"  # Ray's: the parent of its temp dir ("<RAY_TMPDIR>/ray")
ROOT_BASE = Path("/run/railyard-ray")
PRIVATE_MODE = 0o700


class RayDirError(Exception):
    """The directory Ray would keep its sessions in is not railyard's alone; one line."""


def ray_base(env: Mapping[str, str]) -> Path:
    """The private directory Ray's temp directory goes in (absolute)."""
    given = env.get(RAY_TMPDIR_ENV)
    if given:
        return Path(os.path.abspath(given))
    uid = os.geteuid()
    return ROOT_BASE if uid == 0 else Path(f"/tmp/railyard-ray-{uid}")


def ray_temp_dir(base: Path) -> Path:
    """Ray's temp directory (``--temp-dir``) inside ``base``: Ray's own default spelling."""
    return base / "ray"


def ensure_private_dir(given: Path) -> tuple[Path, str | None]:
    """Make ``given`` (0700, with missing parents 0700) or check that it is a real directory
    of this account's with no access for anyone else, under ancestors no other account can
    write (a sticky one, like /tmp, is fine). Returns its path with symlinks resolved (the
    one to use: a link could be pointed elsewhere after the check) and a line when it had to
    take access away; :class:`RayDirError` when it cannot be made safe."""
    uid = os.geteuid()
    path = Path(os.path.realpath(given))
    _check_ancestors(path.parent, uid)
    try:
        os.makedirs(path.parent, mode=PRIVATE_MODE, exist_ok=True)
        os.mkdir(path, PRIVATE_MODE)
    except FileExistsError:
        pass
    except OSError as exc:
        raise RayDirError(
            f"cannot make Ray's directory {path}: {exc.strerror} (hint: set {RAY_TMPDIR_ENV} "
            "to a directory this account can create)"
        ) from None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        what = "a symlink" if os.path.islink(path) else exc.strerror
        raise RayDirError(
            f"Ray's directory {path} is {what}, not a directory of its own (hint: remove it, "
            f"or set {RAY_TMPDIR_ENV} to a 0700 directory of this account's)"
        ) from None
    try:
        found = os.fstat(fd)
        if found.st_uid != uid:
            raise RayDirError(
                f"Ray's directory {path} belongs to uid {found.st_uid}, not to this account "
                f"(uid {uid}): its owner could plant links where Ray writes (hint: remove it, "
                f"or set {RAY_TMPDIR_ENV} to a 0700 directory of this account's)"
            )
        mode = stat.S_IMODE(found.st_mode)
        if mode & 0o077:
            os.fchmod(fd, PRIVATE_MODE)
            return path, f"Ray's directory {path} was mode {mode:04o}: made 0700"
        return path, None
    finally:
        os.close(fd)


def _check_ancestors(parent: Path, uid: int) -> None:
    """No existing ancestor of the directory may be writable by another account (unless
    sticky, where others cannot rename what is ours), nor belong to one: else the directory
    could be swapped for theirs after the check."""
    for directory in (parent, *parent.parents):
        try:
            found = os.lstat(directory)  # resolved: a link here is one made since
        except FileNotFoundError:
            continue  # made below, 0700
        except OSError as exc:
            raise RayDirError(f"cannot check {directory}: {exc.strerror}") from None
        mode = found.st_mode
        if stat.S_ISLNK(mode):
            raise RayDirError(f"{directory}, above Ray's directory, became a symlink")
        others_write = mode & (stat.S_IWGRP | stat.S_IWOTH) and not mode & stat.S_ISVTX
        if found.st_uid not in (0, uid) or others_write:
            raise RayDirError(
                f"{directory}, above Ray's directory, is writable by other accounts or "
                f"belongs to one (uid {found.st_uid}, mode {stat.S_IMODE(mode):04o}) (hint: "
                f"set {RAY_TMPDIR_ENV} to a directory under one only this account can write)"
            )


def is_private(path: Path) -> bool:
    """Whether ``path`` lies inside a directory of this account's that no one else may enter
    (what a connected driver's session directory is checked against)."""
    uid = os.geteuid()
    for directory in (path, *path.parents):
        try:
            found = os.stat(directory)
        except FileNotFoundError:
            continue  # not made yet: what holds it counts
        except OSError:
            return False
        if found.st_uid == uid and not stat.S_IMODE(found.st_mode) & 0o077:
            try:
                _check_ancestors(directory.parent, uid)
            except RayDirError:
                return False
            return True
    return False
