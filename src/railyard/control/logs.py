"""Reading a job's logs for `railyard logs`: where each process writes, whose file it must
be, and the text from an offset, here or, through the executor, on another machine."""

from __future__ import annotations

import codecs
import os
import stat
from collections.abc import Callable
from pathlib import Path

from railyard.control.errors import Forbidden
from railyard.control.paths import log_path
from railyard.control.tables import JobRow
from railyard.exec.identity import Account

LOG_CHUNK_BYTES = 1 << 20
# (node, path, offset, limit, owner uid) -> (bytes from offset, file size), None: no file
RemoteLog = Callable[[str, str, int, int, int | None], tuple[bytes, int] | None]


def log_paths(row: JobRow, spool_dir: Path) -> list[Path]:
    """Where each process of the job's current (or last) attempt writes its output."""
    workers = (row.handle or {}).get("workers") or []
    if workers:
        return [Path(w["log_path"]) for w in workers]
    count = 1 if row.script is not None else max(1, row.workers * max(1, row.gpus_per_worker))
    return [log_path(spool_dir, row.id, rank) for rank in range(count)]


def owner_uid(row: JobRow, path: Path, spool_dir: Path) -> int | None:
    """The uid a log outside the spool must belong to (the job's account): the user chose its
    path, so a symlink or someone else's file there must not be read for them."""
    if path.is_relative_to(spool_dir):
        return None  # the spool's directories are the server's: nothing there can be swapped
    if os.geteuid() != 0:
        return os.geteuid()  # single-user mode: the job ran as this very account
    try:
        return Account.lookup(row.unix_user).uid
    except Exception:
        raise Forbidden(
            f"cannot check who owns {path}: no Unix account {row.unix_user!r}"
        ) from None


def read_log(
    path: Path, offset: int, owner_uid: int | None = None, limit: int = LOG_CHUNK_BYTES
) -> tuple[str, int]:
    """Decoded text from ``offset``; a UTF-8 character cut by the chunk end waits for the next
    call, so followers never see mangled characters. With ``owner_uid``, only a regular file
    of that owner is read, never through a symlink."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return "", offset
    except OSError as exc:
        raise Forbidden(f"cannot read {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or (owner_uid is not None and info.st_uid != owner_uid):
            raise Forbidden(f"{path} is not a file of the job's user; not shown")
        if offset > info.st_size:  # past the end (a rotated log, a bad offset): resume at the end
            return "", info.st_size
        f.seek(offset)
        data = f.read(limit)
    return decode(data, offset)


def decode(data: bytes, offset: int) -> tuple[str, int]:
    """Text of `data` read at `offset`; a character cut by the chunk end waits for the next
    call, so followers never see mangled characters."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    text = decoder.decode(data, final=False)
    pending = len(decoder.getstate()[0])  # bytes of a character the next read completes
    return text, offset + len(data) - pending


def read_rank_log(
    row: JobRow,
    rank: int,
    path: Path,
    offset: int,
    spool_dir: Path,
    remote: RemoteLog | None,
) -> tuple[str, int]:
    """A process's log from `offset`: from this machine's disk, or, with `remote` (the Ray
    executor), from the node the rank ran on, with the same ownership rule."""
    uid = owner_uid(row, path, spool_dir)
    workers = (row.handle or {}).get("workers") or []
    node = workers[rank].get("node") if rank < len(workers) else None
    if remote is None or node is None:
        return read_log(path, offset, uid)
    found = remote(str(node), str(path), offset, LOG_CHUNK_BYTES, uid)
    if found is None:
        return "", offset
    data, size = found
    if offset > size:
        return "", size
    return decode(data, offset)
