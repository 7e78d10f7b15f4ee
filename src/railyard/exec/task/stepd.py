"""The step launcher of a bare batch step: ``srun --container-image=...`` steps, run as root
the way the job's own containers are (slurmstepd's part, for Pyxis's srun options).

The batch step's wrapper is root and has joined the step's cgroups when it forks this
launcher, before the script runs: so the launcher, its step handlers and every ``podman run``
they start are the job's (cancel, time limits and ``cgroup.kill`` end them with it), and the
containers' cgroups go below the step's (``--cgroup-parent``). It listens on a Unix socket in
root's :data:`~railyard.exec.task.steps.SOCKET_DIR`, the socket file the job's user's alone (0600).
Each connection gets a handler process of its own, which

1. checks the peer (``SO_PEERCRED``): the job's uid, and a process of the step's tracking
   cgroup itself (a container's processes, other jobs of the same user and other users are
   refused);
2. reads the request (:class:`~railyard.exec.task.steps.StepRequest`) and srun's stdout and stderr
   descriptors (``SCM_RIGHTS``: the tasks write where a bare step's would, and root opens no
   path of the user's);
3. refuses, in one line, what the job's own ``--container-*`` options could not have
   (:func:`~railyard.exec.task.steps.request_problem`), else starts each task through the
   wrapper's own container path (:func:`railyard.exec.task.wrapper.exec_as` with the task's
   :class:`~railyard.exec.containers.container.ContainerTask`: mounts opened as the user and kept
   to the
   queue's prefixes, the job's GPUs alone, the user's uid with no new privileges);
4. waits for the tasks as srun waits for bare ones (the first failure stops the others and is
   the step's code), passes on the signals srun received where its bare tasks would have had
   them, ends the step if srun goes away, and answers ``exit N``.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
import stat
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from railyard.exec.cgroups import proctrack
from railyard.exec.containers.container import remove_containers
from railyard.exec.task.exitfile import NOTED_SIGNALS
from railyard.exec.task.steps import (
    SOCKET_DIR,
    StepLauncher,
    read_request,
    request_problem,
    step_task,
)
from railyard.exec.task.taskfile import Task

ExecAs = Callable[[Task, list[str]], None]  # the wrapper's exec_as: never returns
CRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
PASSED = {str(int(s)) for s in NOTED_SIGNALS}  # the signals srun passes on
MAX_STEPS = 64  # steps of one job at once
GONE_GRACE_S = 10.0  # srun went away: its tasks' containers get this long after SIGTERM


def start(task: Task, exec_as: ExecAs) -> int | None:
    """Fork the launcher (the caller is root, in the step's cgroups); its pid, or None (said
    on stderr) when it cannot listen, so srun's container steps say they are unavailable."""
    launcher = task.steps
    assert launcher is not None
    try:
        listener = listen(launcher, task)
    except OSError as exc:
        print(f"railyard wrapper: no container steps ({launcher.socket}: {exc})", file=sys.stderr,
              flush=True)  # fmt: skip
        return None
    pid = os.fork()
    if pid == 0:
        try:
            serve(listener, task, launcher, exec_as)
        finally:
            os._exit(0)
    listener.close()
    return pid


def stop(pid: int | None, launcher: StepLauncher) -> None:
    """The script ended: no new steps (what runs still ends with the job's cgroup)."""
    with contextlib.suppress(OSError):
        os.unlink(launcher.socket)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def listen(launcher: StepLauncher, task: Task) -> socket.socket:
    """The socket, in root's directory, given to the job's user alone."""
    with contextlib.suppress(FileExistsError):
        SOCKET_DIR.mkdir(mode=0o711)
    found = os.lstat(SOCKET_DIR)
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.geteuid():
        raise OSError(f"{SOCKET_DIR} is not a directory of this account's")
    os.chmod(SOCKET_DIR, 0o711, follow_symlinks=False)
    path = Path(launcher.socket)
    path.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    old = os.umask(0o177)
    try:
        listener.bind(str(path))
    finally:
        os.umask(old)
    if task.account is not None:
        os.chown(path, task.account.uid, task.account.gid, follow_symlinks=False)
    listener.listen(16)
    return listener


def serve(listener: socket.socket, task: Task, launcher: StepLauncher, exec_as: ExecAs) -> None:
    """Accept steps until killed; each in a handler process of its own, at most
    :data:`MAX_STEPS` at once (a script cannot make root fork without bound)."""
    for sig in NOTED_SIGNALS:  # the job's signals are for its tasks (podman proxies them)
        signal.signal(sig, signal.SIG_IGN)
    handlers: set[int] = set()
    while True:
        while handlers:  # reap the handlers that ended; wait for one while at the cap
            pid, _ = os.waitpid(-1, 0 if len(handlers) >= MAX_STEPS else os.WNOHANG)
            if pid == 0:
                break
            handlers.discard(pid)
        conn, _ = listener.accept()
        pid = os.fork()
        if pid == 0:
            listener.close()
            code = 0
            try:
                handle(conn, task, launcher, exec_as)
            except BaseException as exc:  # the handler must not return into the loop
                say(f"railyard: step launcher: {exc}")
                code = 1
            finally:
                os._exit(code)
        handlers.add(pid)
        conn.close()


def handle(conn: socket.socket, task: Task, launcher: StepLauncher, exec_as: ExecAs) -> None:
    uid = task.account.uid if task.account is not None else os.getuid()
    peer_pid, problem = peer_problem(conn, uid, Path(launcher.track_group))
    if problem is not None:
        say(f"railyard: step launcher: refused a connection: {problem}")
        answer(conn, f"error {problem}")
        return
    try:
        request, fds = read_request(conn)
    except ValueError as exc:
        answer(conn, f"error {exc}")
        return
    problem = request_problem(request, launcher)
    if problem is not None:
        answer(conn, f"error {problem}")
        return
    tasks = [step_task(launcher, request, rank) for rank, _ in request.tasks]
    with open(launcher.names_file, "a", encoding="utf-8") as names:  # root's records
        names.write("".join(f"{t.name}\n" for t in tasks))
    preempt = task.env.get("RAILYARD_PREEMPT_SIGNAL", "SIGUSR1")
    ignore = (preempt,) if task.env.get("RAILYARD_SIGNAL_BATCH_SHELL") == "1" else ()
    started: list[tuple[int, int, str]] = []
    for (rank, env), ctask in zip(request.tasks, tasks, strict=True):
        one = replace(task, env=env, cwd=request.cwd, stdout=None, stderr=None, header="",
                      ignore_signals=ignore, container=ctask, steps=None)  # fmt: skip
        pid = os.fork()
        if pid == 0:
            conn.close()
            null = os.open(os.devnull, os.O_RDONLY)
            for fd, target in ((null, 0), (fds[0], 1), (fds[1], 2)):
                os.dup2(fd, target)
            exec_as(one, list(request.command))
            os._exit(127)
        started.append((rank, pid, ctask.name))
    for fd in fds:
        os.close(fd)
    # A signal srun gets reaches its bare tasks (its children, in its process group); the
    # containers' runtimes are in the wrapper's group: srun's signals are passed on when
    # srun is in another group (`timeout srun ...`), else the group's signal reached them.
    forward = os.getpgid(peer_pid) != os.getpgrp()
    code, note = wait_tasks(conn, started, forward=forward)
    answer(conn, f"exit {code} {note}".rstrip())


def peer_problem(conn: socket.socket, uid: int, track_group: Path) -> tuple[int, str | None]:
    """The peer's pid, and why it may not ask for steps (None: it may): it must be the job's
    uid and a process of the step's tracking group itself (not of a container's below)."""
    cred = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, CRED.size)
    pid, peer_uid, _ = CRED.unpack(cred)
    if peer_uid != uid:
        return pid, f"uid {peer_uid} is not the job's"
    if pid not in proctrack.procs(track_group):
        return pid, f"pid {pid} is not a process of this job"
    return pid, None


def wait_tasks(
    conn: socket.socket, started: list[tuple[int, int, str]], *, forward: bool = False
) -> tuple[int, str]:
    """srun's rule: wait for every task; the first failure terminates the rest and is the
    step's code (128+N for signal N), with srun's line for it. srun gone (killed, or the
    script ended): SIGTERM every task, then remove their containers after
    :data:`GONE_GRACE_S`. ``forward``: pass on the signals srun says it received."""
    selector = selectors.DefaultSelector()
    selector.register(conn, selectors.EVENT_READ, None)
    live: dict[int, tuple[int, str]] = {}
    for rank, pid, name in started:
        pidfd = os.pidfd_open(pid)
        selector.register(pidfd, selectors.EVENT_READ, pid)
        live[pid] = (rank, name)
    first_failure = 0
    note = ""
    deadline: float | None = None
    while live:
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        events = selector.select(timeout)
        if deadline is not None and time.monotonic() >= deadline:
            remove_containers([name for _, name in live.values()])
            deadline = None
        for key, _ in events:
            if key.data is None:
                said = _recv(conn)
                if said:  # "signal N" lines
                    for line in said.decode(errors="replace").split("\n"):
                        what, _, number = line.partition(" ")
                        if forward and what == "signal" and number in PASSED:
                            signal_all(live, int(number))
                    continue
                selector.unregister(conn)  # srun is gone
                first_failure = first_failure or 128 + signal.SIGTERM
                deadline = time.monotonic() + GONE_GRACE_S
                signal_all(live, signal.SIGTERM)
                continue
            pid = key.data
            selector.unregister(key.fileobj)
            os.close(key.fd)
            rank, _ = live.pop(pid)
            _, status = os.waitpid(pid, 0)
            returncode = os.waitstatus_to_exitcode(status)
            code = returncode if returncode >= 0 else 128 - returncode
            if code and not first_failure:
                how = "Exited with exit code" if returncode >= 0 else "Killed by signal"
                note = f"task {rank}: {how} {abs(returncode)}"
                first_failure = code
                signal_all(live, signal.SIGTERM)
    return first_failure, note


def signal_all(live: dict[int, tuple[int, str]], sig: int) -> None:
    for pid in live:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)  # podman passes it to the task


def _recv(conn: socket.socket) -> bytes:
    try:
        return conn.recv(4096)
    except OSError:
        return b""


def answer(conn: socket.socket, line: str) -> None:
    with contextlib.suppress(OSError):
        conn.sendall(line.encode() + b"\n")


def say(line: str) -> None:
    with contextlib.suppress(OSError):
        os.write(2, (line + "\n").encode())
