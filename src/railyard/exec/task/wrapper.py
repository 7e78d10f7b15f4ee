"""``python -I -m railyard.exec.task.wrapper --exit-file PATH [--task-file PATH] -- cmd ...``: run
one
process of a job and record how it ended.

The wrapper leads the process's group and starts the command in the same group. The executor
signals the whole group, so the command (and its children) receive every signal directly; the
wrapper only notes the signal and keeps waiting, so it outlives the command and can write the
exit record. Forwarding would deliver each signal twice, so it does not forward. When the
command ends, the wrapper writes :mod:`railyard.exec.task.exitfile` and ends the same way (same exit
code, or the same signal), so its parent sees what a bare command would show. Only SIGKILL
stops it from writing the record; readers then treat the exit as unknown.

With a task file (:class:`Task`, written by the executor, readable only by it) the wrapper
does what slurmstepd does between fork and exec: before the fork it joins the step's cgroups
(:mod:`railyard.exec.cgroups.proctrack` tracking, :mod:`railyard.exec.cgroups.devices`
confinement, limits;
the wrapper is counted too, and a wrapper that cannot join runs nothing), or marks itself a
child subreaper where no cgroup could be made and kills what the command left when it ends;
then, in the child, it switches to the job's Unix account (supplementary groups through
``initgroups``, then gid, then uid), sets the umask, changes to the working directory
(``/tmp`` if that fails, as slurmstepd does), opens ``--output``/``--error`` files, writes
the log header, and execs the command with the job's environment. Just before the exec the
child tells the wrapper, over a pipe that the exec closes, the (device, inode) of its stdout
and stderr; the wrapper records them beside the exit record (the executor's directory), and
`railyard logs` shows no other file (:mod:`railyard.exec.logread`). An output file the child
cannot open is named on the spool log, as slurmstepd names it. Everything that
touches a user's path happens after the switch, so a symlink cannot make root read or write
anywhere. The wrapper itself stays with the executor's account, so the job can neither signal
it nor forge its exit record, and it never sees the user's environment: it runs in isolated
mode with a minimal one, and the job's environment travels in the task file.

Why not ``subprocess.Popen(user=..., group=..., extra_groups=..., umask=...)``: Popen changes
directory and opens nothing after it drops privileges, and it cannot open the output files as
the user; the explicit pre-exec step does each of these in slurmstepd's order.

A bare batch script's task file may name a step launcher (``steps``): the wrapper, root and in
the step's cgroups, forks it (:mod:`railyard.exec.task.stepd`) before the script starts, so that
the script's ``srun --container-image`` can have its tasks run in an image, and kills it when
the script ends.

Before it runs anything the wrapper claims the process's start marker
(:mod:`railyard.exec.attempt`). If this process of this attempt was claimed before (a
relaunch after the control plane crashed) or sealed (the attempt is over), it says so on
stderr and exits 75 without running the command and without writing an exit record: that
belongs to the wrapper that did run it. The claim is made before the fork, as the executor's
account, so the job cannot forge or remove it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from dataclasses import replace
from pathlib import Path
from types import FrameType

from railyard.exec import procfs
from railyard.exec.attempt import STOOD_DOWN_EXIT, claim, read_claim, start_marker_path
from railyard.exec.cgroups import cgroup, proctrack
from railyard.exec.task.exitfile import NOTED_SIGNALS, RankExit, signal_name, write_exit
from railyard.exec.task.outputs import (
    STOP_WORDS,
    outputs_record_path,
    record_outputs,
    time_limit_cue_path,
    time_limit_line,
)
from railyard.exec.task.taskfile import Task

TYPE_CHECKING = False  # not typing's: importing typing would cost every rank ~5 ms

# Every rank of every job starts here, in a new interpreter, between the loop's decision and
# the command's first line: what only interactive, container or step tasks need is imported
# by those tasks alone (tests/exec/test_wrapper_imports.py keeps it so).
if TYPE_CHECKING:
    from railyard.exec.terminals import interactive

USAGE = "usage: python -m railyard.exec.task.wrapper --exit-file PATH [--task-file PATH] -- cmd ..."
FALLBACK_DIR = "/tmp"
EXEC_FAILED = 127


def parse(argv: list[str]) -> tuple[Path, Path | None, list[str]]:
    """(exit file, task file or None, command) from the wrapper's arguments."""
    options: dict[str, str] = {}
    i = 0
    while i < len(argv) and argv[i] != "--":
        if argv[i] not in ("--exit-file", "--task-file") or i + 1 >= len(argv):
            raise SystemExit(USAGE)
        options[argv[i]] = argv[i + 1]
        i += 2
    command = argv[i + 1 :]
    if "--exit-file" not in options or not command:
        raise SystemExit(USAGE)
    task = options.get("--task-file")
    return Path(options["--exit-file"]), Path(task) if task else None, command


def run(exit_file: Path, command: list[str], task: Task | None = None) -> int:
    """Run ``command``, record its end, and return its exit status for our own exit."""
    received: list[str] = []
    ends: interactive.Ends | None = None
    child = 0

    def note(signum: int, _frame: FrameType | None) -> None:
        received.append(signal_name(signum))
        if ends is not None:
            ends.forward(child, signum)
        if signum == signal.SIGTERM and task is not None and child:
            say_time_limit(exit_file, task)

    for sig in NOTED_SIGNALS:
        signal.signal(sig, note)  # Python handlers reset to default in the command on exec
    if not claim_rank(exit_file):
        return STOOD_DOWN_EXIT
    reason: str | None = None
    if task is None:
        import subprocess

        try:
            proc = subprocess.Popen(command)
        except OSError as exc:
            print(
                f"railyard wrapper: cannot run {command[0]!r}: {exc}", file=sys.stderr, flush=True
            )
            record(exit_file, RankExit(EXEC_FAILED, None, tuple(received)))
            return EXEC_FAILED
        returncode = proc.wait()  # retried across signals (PEP 475)
    else:
        if not enter_step(task):  # untracked or unconfined: do not run at all
            record(exit_file, RankExit(EXEC_FAILED, None, tuple(received)))
            return EXEC_FAILED
        if task.terminal is not None:
            from railyard.exec.terminals import interactive

            ends, server = interactive.open_ends(task)
        launcher = None
        if task.steps is not None:
            from railyard.exec.task import stepd
            from railyard.exec.task.steps import SOCKET_VAR

            launcher = stepd.start(task, exec_as)
            if launcher is not None:  # srun finds it by this
                task = replace(task, env={**task.env, SOCKET_VAR: task.steps.socket})
        report, told = os.pipe()  # the child tells which files it opened, then execs (CLOEXEC)
        why_read, why = os.pipe() if task.container is not None else (-1, -1)  # why it refused
        pid = child = os.fork()
        if pid == 0:  # the child: never returns
            os.close(report)
            exec_as(task, command, told, ends, why)
        os.close(told)
        if why >= 0:
            os.close(why)
        note_outputs(exit_file, report)
        if ends is not None:
            returncode = interactive.relay(ends, server, pid, task)
        else:
            returncode = wait_child(pid)
        if task.steps is not None:
            stepd.stop(launcher, task.steps)
        if task.subreaper:
            proctrack.kill_descendants()  # what the command left behind ends with it
        reason = read_reason(why_read) if why_read >= 0 else None
    record(exit_file, RankExit.from_returncode(returncode, tuple(received), reason))
    return returncode


def say_time_limit(exit_file: Path, task: Task) -> None:
    """At the time limit (the executor's cue beside the exit record, once), write
    slurmstepd's line where the job's stderr goes: a child that becomes the job's user opens
    the user's file (never root), or writes to the spool log the wrapper holds."""
    cue = time_limit_cue_path(exit_file)
    try:
        why = cue.read_text(errors="replace").strip()
        os.unlink(cue)  # once: the executor may stop the rank again
    except OSError:
        return
    line = time_limit_line(task.env.get("SLURM_JOB_ID", "?"), task.env.get("SLURMD_NODENAME",
                           "?"), time.strftime("%Y-%m-%dT%H:%M:%S"),
                           why if why in STOP_WORDS else "TIME LIMIT")  # fmt: skip
    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            become_user(task)
            target = task.stderr or task.stdout
            fd = 2
            if target:
                with contextlib.suppress(OSError):
                    os.chdir(task.cwd)
                fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            os.write(fd, line.encode())
        finally:
            os._exit(0)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def enter_step(task: Task) -> bool:
    """Join the step's cgroups (or become a subreaper) before any fork, so that every process
    of the command is tracked and confined; False, said on stderr, if that failed."""
    for group in task.cgroups:
        try:
            cgroup.join(Path(group))
        except OSError as exc:
            print(f"railyard wrapper: cannot join {group}: {exc}", file=sys.stderr, flush=True)
            return False
    if task.subreaper and not proctrack.become_subreaper():
        print("railyard wrapper: cannot become a child subreaper", file=sys.stderr, flush=True)
        return False
    return True


def wait_child(pid: int) -> int:
    """The child's end as ``Popen.returncode`` spells it (negative: killed by that signal)."""
    _, status = os.waitpid(pid, 0)  # retried across signals (PEP 475)
    return os.waitstatus_to_exitcode(status)


def note_outputs(exit_file: Path, report: int) -> None:
    """Record the (device, inode) of the files the child's output goes to, as it reports them
    before its exec: `railyard logs` shows only those (:mod:`railyard.exec.logread`)."""
    chunks = []
    with os.fdopen(report, "rb") as pipe:
        while chunk := pipe.read(4096):  # EOF at the child's exec (or its end)
            chunks.append(chunk)
    if not chunks:
        return  # it never opened its output: nothing of it may be shown
    try:
        files = [(int(d), int(i)) for d, i in (p.split(b":") for p in b"".join(chunks).split())]
        record_outputs(outputs_record_path(exit_file), files)
    except (OSError, ValueError) as exc:
        print(f"railyard wrapper: cannot record the output files: {exc}", file=sys.stderr)


def read_reason(fd: int) -> str | None:
    """What the child said before it gave up (nothing: it exec'd, the pipe closed unread)."""
    with os.fdopen(fd, "rb") as pipe:
        said = pipe.read(1000).decode(errors="replace").strip()
    return said or None


def exec_as(
    task: Task,
    command: list[str],
    told: int | None = None,
    ends: interactive.Ends | None = None,
    why: int = -1,
) -> None:
    """In the forked child: become the job's process, then exec. Exits 127 on any failure.
    ``told``: where to write the (device, inode) of stdout and stderr once they are open;
    ``ends``: an interactive task's terminal, taken as 0, 1, 2 after the log header."""
    refused: type[Exception] = _NeverRaised
    if task.container is not None:
        from railyard.exec.containers import containerrun

        refused = containerrun.Refused
    try:
        for sig in NOTED_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        for name in task.ignore_signals:
            signal.signal(signal.Signals[name], signal.SIG_IGN)
        account = task.account
        groups: list[int] = []
        if task.container is not None and os.geteuid() == 0:
            containerrun.private_namespace()  # where its mount sources are staged
        if account is not None and not account.is_self:
            if task.container is not None:  # the runtime needs root: switch back there
                groups = containerrun.become_user_effective(account)
            else:
                become_user(task)
        os.umask(task.umask)
        env = dict(task.env)
        try:
            os.chdir(task.cwd)
        except OSError as exc:
            _say(f"railyard: could not chdir to {task.cwd}: {exc.strerror}: going to /tmp instead")
            os.chdir(FALLBACK_DIR)
        env["PWD"] = os.getcwd()
        if task.header and task.stdout:  # the job's own --output file holds only its output,
            os.write(1, task.header.encode())  # as Slurm's: the header stays in railyard's log
        if not _redirect(task):
            return  # named the file; the finally below exits 127
        if told is not None:
            os.write(
                told, " ".join(f"{i.st_dev}:{i.st_ino}" for i in map(os.fstat, (1, 2))).encode()
            )
            os.close(told)
        if task.header and not task.stdout:
            os.write(1, task.header.encode())
        if ends is not None:
            ends.become_child()
        env["SLURM_TASK_PID"] = str(os.getpid())
        if task.container is not None:
            containerrun.exec_podman(task.container, account, groups or [os.getgid()], command,
                                     env, interactive=ends is not None, pty=task.pty)  # fmt: skip
        os.execvpe(command[0], command, env)
    except refused as exc:
        _say(f"railyard: {exc}")
        reason = getattr(exc, "reason", None)
        if reason and why >= 0:
            os.write(why, f"{reason}: {exc}".encode()[:1000])
    except OSError as exc:
        _say(f"railyard: cannot run {command[0]!r}: {exc.strerror or exc}")
    except BaseException as exc:  # anything at all: the child must not return into the wrapper
        _say(f"railyard: cannot start {command[0]!r}: {exc}")
    finally:
        os._exit(EXEC_FAILED)


def become_user(task: Task) -> None:
    """Switch for good to the job's Unix account: supplementary groups, gid, then uid."""
    account = task.account
    if account is not None and not account.is_self:
        os.initgroups(account.name, account.gid)
        os.setresgid(account.gid, account.gid, account.gid)
        os.setresuid(account.uid, account.uid, account.uid)


class _NeverRaised(Exception):
    """What a task without a container refuses with: nothing."""


def _redirect(task: Task) -> bool:
    """Open the user's output files, as the user, onto fd 1 and 2; False (and, as
    slurmstepd, a line naming the file on the spool log) when one cannot be opened."""
    # O_APPEND always: the tasks of a command job may share one file, and each write must land
    # at its end. Only the first task truncates (a new job writes over an old file, as sbatch).
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | (os.O_TRUNC if task.truncate else 0)
    for name, path, targets in (
        ("stdout", task.stdout, (1,) if task.stderr else (1, 2)),
        ("stderr", task.stderr, (2,)),
    ):
        if not path:
            continue
        try:
            fd = os.open(path, flags, 0o666)  # the submitter's umask (set above) rules, as sbatch
        except OSError as exc:
            _say(f"railyard: error: Could not open {name} file {path}: {exc.strerror or exc}")
            return False
        for target in targets:
            os.dup2(fd, target)
        os.close(fd)
    return True


def _say(line: str) -> None:
    with contextlib.suppress(OSError):
        os.write(2, (line + "\n").encode())


def claim_rank(exit_file: Path) -> bool:
    """Claim this rank of this attempt; False (and a line on stderr) if it is not ours to run."""
    marker = start_marker_path(exit_file)
    pid = os.getpid()
    try:
        if claim(marker, pid, procfs.start_time_ticks(pid)):
            return True
    except OSError as exc:  # no claim, no run: a start we cannot record could happen twice
        print(f"railyard wrapper: cannot claim {marker}: {exc}", file=sys.stderr, flush=True)
        return False
    owner = read_claim(marker)
    why = "sealed: the attempt is over" if owner is None or owner.sealed else f"pid {owner.pid}"
    print(
        f"railyard wrapper: this rank of this attempt was already started ({why}; {marker}); "
        "not running it again",
        file=sys.stderr,
        flush=True,
    )
    return False


def record(exit_file: Path, rank_exit: RankExit) -> None:
    """Write the exit record (recreating its directory if it was removed meanwhile); failing
    to must not change our exit."""
    try:
        exit_file.parent.mkdir(parents=True, exist_ok=True)
        write_exit(exit_file, rank_exit)
    except OSError as exc:
        print(f"railyard wrapper: cannot write {exit_file}: {exc}", file=sys.stderr, flush=True)


def mirror(returncode: int) -> int:
    """End like the command did: re-raise its fatal signal, else return its exit code."""
    if returncode >= 0:
        return returncode
    signum = -returncode
    sys.stdout.flush()
    sys.stderr.flush()
    if signum not in (signal.SIGKILL, signal.SIGSTOP):
        signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    return 128 + signum  # the signal's default action does not terminate


def main(argv: list[str] | None = None) -> int:
    exit_file, task_file, command = parse(sys.argv[1:] if argv is None else argv)
    task = Task.read(task_file) if task_file is not None else None
    return mirror(run(exit_file, command, task))


if __name__ == "__main__":
    raise SystemExit(main())
