"""Reading a job's logs for `railyard logs`: where each process writes, and the text from an
offset, read with the job's user's rights (:mod:`railyard.exec.logread`), here or, through
the executor, on the machine the process ran on."""

from __future__ import annotations

import codecs
from pathlib import Path

from railyard.control.errors import Forbidden
from railyard.control.store.paths import attempts_dir, log_path
from railyard.control.store.tables import JobRow, JobState
from railyard.exec.backend import LogReader
from railyard.exec.logread import LogRefused, LogSource, read_chunk
from railyard.exec.protocol import ExecutorError
from railyard.exec.task.outputs import outputs_record_path

LOG_CHUNK_BYTES = 1 << 20
RemoteLog = LogReader  # a backend's reader of logs on the machine a rank ran on


def log_paths(row: JobRow, spool_dir: Path) -> list[Path]:
    """Where each process of the job's current (or last) attempt writes its output."""
    workers = (row.handle or {}).get("workers") or []
    if workers:
        return [Path(w["log_path"]) for w in workers]
    count = 1 if row.script is not None else max(1, row.workers * max(1, row.gpus_per_worker))
    return [log_path(spool_dir, row.id, rank) for rank in range(count)]


def log_source(row: JobRow, rank: int, path: Path, spool_dir: Path) -> LogSource:
    """How rank ``rank``'s log may be read: the spool log (the executor's own file, in its own
    directories) from the spool down without following symlinks; any other path (the user's
    ``--output``) as the job's Unix account, and only the file its wrapper recorded."""
    if path == log_path(spool_dir, row.id, rank):
        return LogSource(str(path), None, None, anchor=str(spool_dir))
    workers = (row.handle or {}).get("workers") or []
    exit_path = workers[rank].get("exit_path") if rank < len(workers) else None
    if not exit_path:
        raise Forbidden(f"{path}: no record of the job's output files; not shown")
    outputs = str(outputs_record_path(Path(exit_path)))
    return LogSource(str(path), row.unix_user or None, outputs)


def read_log(
    source: LogSource | Path, offset: int, limit: int = LOG_CHUNK_BYTES
) -> tuple[str, int]:
    """Decoded text from ``offset`` of a log on this machine's disk; see :func:`decode`. A
    bare path is a file the server itself wrote, opened from its directory, not followed if
    it is a symlink."""
    if isinstance(source, Path):
        source = LogSource(str(source), None, None, anchor=str(source.parent))
    try:
        found = read_chunk(source, offset, limit)
    except (LogRefused, ExecutorError) as exc:
        raise Forbidden(str(exc)) from None
    return _text(found, offset)


def decode(data: bytes, offset: int) -> tuple[str, int]:
    """Text of `data` read at `offset`; a character cut by the chunk end waits for the next
    call, so followers never see mangled characters."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    text = decoder.decode(data, final=False)
    pending = len(decoder.getstate()[0])  # bytes of a character the next read completes
    return text, offset + len(data) - pending


def node_of(row: JobRow, rank: int) -> str | None:
    """The machine rank ``rank`` of the job's current (or last) attempt runs on; None: not
    known (no handle yet)."""
    workers = (row.handle or {}).get("workers") or []
    node = workers[rank].get("node") if 0 <= rank < len(workers) else None
    return str(node) if node else None


def records_of(row: JobRow, rank: int, state_dir: Path) -> Path:
    """The records directory of rank ``rank``'s attempt on its machine (where its exit
    record, and an interactive task's socket, are): the executor's ``attempts/<job>``, or
    a directory per node in it where nodes may share a file system (Ray's agents)."""
    workers = (row.handle or {}).get("workers") or []
    exit_path = workers[rank].get("exit_path") if 0 <= rank < len(workers) else None
    return Path(exit_path).parent if exit_path else attempts_dir(state_dir, row.id)


def read_rank_log(
    row: JobRow,
    rank: int,
    path: Path,
    offset: int,
    spool_dir: Path,
    remote: RemoteLog | None,
) -> tuple[str, int]:
    """A process's log from `offset`: from this machine's disk, or, with `remote` (the Ray
    executor), from the node the rank ran on, with the same rule. An ended job whose
    ``--output`` file is not there (it could not be opened, and its wrapper said why in the
    spool log) shows its spool log instead: the executor's own file, of the job's own
    attempt, never the path the user named."""
    spool_log = log_path(spool_dir, row.id, rank)
    if path != spool_log and offset == 0 and JobState(row.state).finished:
        found = _found(row, rank, path, offset, spool_dir, remote)  # a refusal stays one
        if found is not None:
            return _text(found, offset)
        path = spool_log
    return _text(_found(row, rank, path, offset, spool_dir, remote), offset)


def _found(
    row: JobRow,
    rank: int,
    path: Path,
    offset: int,
    spool_dir: Path,
    remote: RemoteLog | None,
) -> tuple[bytes, int] | None:
    """The bytes of one log from `offset` and its size; None: no such file."""
    source = log_source(row, rank, path, spool_dir)
    node = node_of(row, rank)
    try:
        if remote is None or node is None:
            return read_chunk(source, offset, LOG_CHUNK_BYTES)
        return remote(str(node), source, offset, LOG_CHUNK_BYTES)
    except (LogRefused, ExecutorError) as exc:
        raise Forbidden(str(exc)) from None


def _text(found: tuple[bytes, int] | None, offset: int) -> tuple[str, int]:
    if found is None:
        return "", offset
    data, size = found
    if offset > size:  # past the end (a rotated log, a bad offset): resume at the end
        return "", size
    return decode(data, offset)
