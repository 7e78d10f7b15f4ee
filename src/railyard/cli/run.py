"""``railyard run [options] [--pty] -- CMD``: srun outside an allocation.

Makes an interactive job (the options are submit's), waits for it to start as srun does
("queued and waiting for resources", with the reason), then joins this terminal to the job's
first task through the control plane (:mod:`railyard.exec.terminals.terminal`'s frames over the
API's
WebSocket): stdin, stdout and stderr, and with ``--pty`` a real terminal (raw mode here, the
window size, Ctrl-C and Ctrl-Z as bytes the task's terminal turns into signals). Without
``--pty``, Ctrl-C here is forwarded as SIGINT, as srun forwards it. The exit status is the
task's (128 + N for a signal). Ctrl-C, SIGTERM or a hang-up while waiting, or a hang-up of
this terminal, cancels the job: ending the client ends the job.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import shlex
import signal
import struct
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from railyard.cli.args import Command, Parser, connect, fail
from railyard.cli.jobs import FINISHED, _with_environment, split_submit_argv

if TYPE_CHECKING:
    from collections.abc import Iterator

    from railyard.cli.ranklogs import Output
    from railyard.client.client import Client
    from railyard.client.websocket import WebSocket

USAGE = """usage: {prog} [submit options] [--pty] -- COMMAND [ARGS...]

Run COMMAND as a job and join this terminal to its first task (srun outside an allocation):
waits for the job to start, then relays stdin, stdout and stderr; --pty gives the task a real
terminal (railyard run --pty bash). The options are submit's (--gpus, --time, --queue, ...).
Exits with the task's status. Ctrl-C, SIGTERM or a hang-up while it waits cancels the job.
Inside an allocation (railyard alloc's shell, a batch script) it starts a step of that
allocation, as srun there."""
ALLOC_USAGE = """usage: {prog} [submit options] [COMMAND [ARGS...]]

Hold an allocation (the options are submit's: --nodes, --gpus, --time, ...) and run COMMAND,
by default your shell, on its first node with the job's SLURM_* variables (salloc); srun there
starts steps across the allocation. Leaving the shell releases it."""


def _which(program: str) -> str | None:
    """``shutil.which``, paid for only inside an allocation (shutil brings zlib, bz2, lzma)."""
    import shutil

    return shutil.which(program)


def alloc_script(command: str) -> str:
    """The allocation's script: the shell (``command``) with srun as the bash function the
    executor exports (``exec.task.launch.srun_function``), which /bin/sh drops from the environment
    (its name is no shell name); a function comes before PATH, so a .bashrc that sets PATH
    outright still reaches the job's srun."""
    function = '"BASH_FUNC_srun%%=() {  \\"$RAILYARD_SRUN\\" \\"\\$@\\"\n}"'
    return (
        f'#!/bin/sh\nif [ -n "$RAILYARD_SRUN" ]; then\n  exec env {function} {command}\nfi\n'
        f"exec {command}\n"
    )


POLL_S = 0.25
IN_ALLOCATION = "RAILYARD_ALLOCATION"  # set by the executor in a batch step (exec.task.launch)
JOB_SRUN = "RAILYARD_SRUN"  # the job's srun, by path (exec.task.launch.SRUN_VAR)
FIRST_POLL_S = 0.01
OWN_SWITCHES = ("--pty", "-l", "--label")  # run's own, srun's: not submit options


def run(args: argparse.Namespace) -> int:
    """Run a command as a job with this terminal joined to it (srun); --pty for a shell."""

    srun = os.environ.get(JOB_SRUN) or (_which("srun") if os.environ.get(IN_ALLOCATION) else None)
    if os.environ.get(IN_ALLOCATION) and srun:
        # Inside an allocation (alloc's shell, a batch script): a step of it, as srun there;
        # the job's own srun by its path, whatever a .bashrc made of PATH.
        argv = [w for w in args.argv if w != "--pty"]
        os.execv(srun, ["srun", *argv])
    head = args.argv[: args.argv.index("--")] if "--" in args.argv else args.argv
    pty = "--pty" in head  # ours, not sbatch options: taken out before those are read
    label = bool({"-l", "--label"} & set(head))
    argv = [w for w in head if w not in OWN_SWITCHES] + args.argv[len(head) :]
    options, rest, own = split_submit_argv(argv)
    if "--help" in own:
        print(USAGE.format(prog=args.prog))
        return 0
    if not rest:
        fail("nothing to run (hint: railyard run [options] [--pty] -- COMMAND)")
    notes: list[str] = []
    body = {**one_job_body(options, notes, "an interactive job runs once"), "command": rest}
    body.setdefault("name", Path(rest[0]).name)
    body["terminal"] = "pty" if pty else "pipes"
    return _submit_and_join(body, notes, pty, label=label)


def alloc(args: argparse.Namespace) -> int:
    """Hold an allocation and open a shell in it (salloc): srun there starts its steps."""

    options, rest, own = split_submit_argv(args.argv)
    if "--help" in own:
        print(ALLOC_USAGE.format(prog=args.prog))
        return 0
    notes: list[str] = []
    body = one_job_body(options, notes, "an allocation is one job")
    pty = os.isatty(0)
    shell = shlex.quote(os.environ.get("SHELL") or "/bin/bash")
    # a terminal gets an interactive shell; piped commands a plain one (no prompt, no job
    # control, as salloc's shell reads a pipe)
    command = shlex.join(rest) if rest else f"{shell} -i" if pty else shell
    # The allocation's first node runs this as a batch step, so the shell has the job's
    # SLURM_* variables and an srun that starts steps across the allocation.
    body.update(script=alloc_script(command), terminal="pty" if pty else "pipes")
    body.setdefault("name", "interactive")
    return _submit_and_join(body, notes, pty, salloc=True)


def one_job_body(options: list[str], notes: list[str], one: str) -> dict[str, Any]:
    """The submit options of one job (run, alloc, jupyter); ``--array`` is refused, saying
    ``one`` (what the job is)."""
    from railyard.client import scripts

    try:
        body: dict[str, Any] = scripts.parse_args(options, notes)
    except (scripts.OptionError, scripts.ScriptError) as exc:
        fail(str(exc))
    if "array" in body:
        fail(f"--array: {one} (hint: railyard submit --array)")
    return body


def attach(args: argparse.Namespace) -> int:
    """A shell inside a running job, as its user, in its cgroup (srun --overlap --pty)."""
    with connect() as client:
        pty = os.isatty(0)
        ws = client.terminal(args.job, args.rank, pty=pty)
        code = Session(ws, pty, lambda: None).run()
    return 1 if code is None else code


def _attach_args(p: Parser) -> None:
    p.add_argument("job", help="a running job of yours")
    p.add_argument("--rank", type=int, default=0, help="which task's node, cgroup and environment")


def _submit_and_join(
    body: dict[str, Any], notes: list[str], pty: bool, *, salloc: bool = False, label: bool = False
) -> int:
    """Submit, wait, join; salloc's lines around an allocation (``Granted job allocation N``,
    ``Relinquishing job allocation N``), srun's ``task 0: Exited with exit code N``."""
    from railyard.client import scripts

    body = _with_environment(body, notes, scripts.resolve_export)
    for note in notes:
        print(f"railyard: note: {note}", file=sys.stderr)
    with connect() as client:
        (job,) = client.submit(body)
        job_id = job["id"]
        try:
            with _ended_by_signals():
                state = _wait_started(client, job_id)
        except (KeyboardInterrupt, _Ended) as exc:
            _cancel_now(client, job_id)
            print(f"\nrailyard: job {job_id}: cancelled while waiting", file=sys.stderr)
            # srun's and salloc's status for a Ctrl-C; a kill's own (128 + N) for the others
            return 128 + exc.signum if isinstance(exc, _Ended) else 1
        if state in FINISHED:
            return _ended(client, job_id)
        if salloc:
            print(f"salloc: Granted job allocation {job_id}", file=sys.stderr, flush=True)
        try:
            return _joined(client, job_id, pty, salloc, label)
        finally:
            if salloc:
                print(f"salloc: Relinquishing job allocation {job_id}", file=sys.stderr)


def _joined(client: Client, job_id: str, pty: bool, salloc: bool, label: bool = False) -> int:
    """The first task through the terminal; without --pty the others' output beside it, as
    srun relays every task's (``cli.ranklogs``), each line after its rank with -l."""
    from railyard.cli import ranklogs
    from railyard.cli.jobformat import task_count
    from railyard.client import tasklabels

    ntasks = 1 if pty or salloc else task_count(client.job(job_id))
    label = label and not (pty or salloc)
    # one task unlabelled: its bytes as they come (a prompt without a newline shows at once)
    out = ranklogs.Output() if ntasks > 1 or label else None
    others = ranklogs.OtherRanks(connect, job_id, ntasks, out, label) if out else None
    prefix = tasklabels.label_of(0, ntasks) if label else b""
    session = Session(client.terminal(job_id), pty, lambda: client.cancel(job_id), out, prefix)
    if others is not None:
        others.start()
    code = session.run()
    if out is not None:
        out.flush(0)  # the first task's output ended with it
    if others is not None and out is not None:
        try:
            with _ended_by_signals():
                others.join()
        except (KeyboardInterrupt, _Ended) as exc:  # the first task ended, others run
            _cancel_now(client, job_id)
            return 128 + (exc.signum if isinstance(exc, _Ended) else signal.SIGINT)
        finally:
            out.flush()
        if ntasks > 1 and (code == 0 or (code or 0) > 128) and not session.terminal_gone:
            # another task may have failed (and had the first one stopped): the job's status
            job = client.job(job_id)
            if job["state"] != "cancelled" and not (job.get("signal") or job.get("exit_signal")):
                return _ended(client, job_id)
    if session.terminal_gone:  # cancelled; nobody is left to read a word more
        return 129
    if code is None:  # the connection ended without the task's end: ask the store
        return _ended(client, job_id)
    if code > 128 and _stopped_by(client, job_id):  # stopped: who, as slurmstepd's "DUE TO"
        return code
    if code and not salloc:  # srun's line for a task that failed or was killed
        node = next(iter(client.job(job_id)["placement"] or {"?": []}))
        how = f"Killed by signal {code - 128}" if code > 128 else f"Exited with exit code {code}"
        print(f"srun: error: {node}: task 0: {how}", file=sys.stderr)
    return code


def _stopped_by(client: Client, job_id: str) -> bool:
    """A line naming why the job was stopped (a time or idle limit, a cancel, a preemption),
    when it was stopped rather than ending on its own; False when it was not."""
    job = client.job(job_id)
    if job["state"] not in ("running", "completed", "failed") and job["reason"]:
        print(f"railyard: job {job_id} {job['state'].upper()}: {job['reason']}", file=sys.stderr)
        return True
    return False


def _cancel_now(client: Client, job_id: str) -> None:
    """Cancel the job the wait was for; on a new connection if the signal cut the old one
    in the middle of a request (its answer would be read as this one's)."""
    try:
        client.cancel(job_id)
    except Exception:  # whatever the cut left; the second try says why
        with connect() as fresh:
            fresh.cancel(job_id)


class _Ended(Exception):
    """SIGTERM or SIGHUP while the job waits: this client ends, and the job with it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _ended_by_signals() -> Iterator[None]:
    """`timeout`'s SIGTERM or a hang-up raise :class:`_Ended` instead of killing this
    process outright: a job whose client was killed while it waited started later anyway,
    with nobody attached, and held its GPUs (srun gives the allocation up when it dies)."""

    def end(signum: int, _frame: object) -> None:
        raise _Ended(signum)

    caught = (signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.getsignal(sig) for sig in caught}
    for sig in caught:
        signal.signal(sig, end)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _wait_started(client: Client, job_id: str) -> str:
    """Poll until the job runs (or ended); say why it waits, as srun does."""
    said, pause_s = "", FIRST_POLL_S
    while True:
        job = client.job(job_id)
        if job["state"] not in ("pending", "starting"):
            if said:
                print(f"railyard: job {job_id} has been allocated resources", file=sys.stderr)
            return job["state"]
        if job["state"] == "pending" and job["reason"] != said:
            why = f" ({job['reason']})" if job["reason"] else ""
            print(f"railyard: job {job_id} queued and waiting for resources{why}", file=sys.stderr)
            said = job["reason"] or "waiting"
        time.sleep(pause_s)  # a free cluster starts it within a loop step: look again soon
        pause_s = min(POLL_S, pause_s * 1.5)


def _ended(client: Client, job_id: str) -> int:
    job = client.job(job_id)
    for _ in range(40):  # the task ended: its row settles at the loop's next step
        if job["state"] in FINISHED:
            break
        time.sleep(POLL_S)
        job = client.job(job_id)
    if job["state"] != "completed":
        why = f": {job['reason']}" if job["reason"] else ""
        print(f"railyard: job {job_id} {job['state'].upper()}{why}", file=sys.stderr)
    code = job.get("exit_code")
    return code if isinstance(code, int) and code >= 0 else 1


class Session:
    """This terminal joined to the task until it ends: its exit status, or None when the
    connection ended first."""

    def __init__(
        self, ws: WebSocket, pty: bool, cancel: Any, out: Output | None = None, prefix: bytes = b""
    ) -> None:
        from railyard.client import frames

        self.ws, self.pty, self.cancel, self.t = ws, pty, cancel, frames
        self.out, self.prefix = out, prefix  # where the task's lines go, after what
        self.code: int | None = None
        self.refusal: str | None = None  # the server's refusal, said once the terminal is back
        self.tty = False
        self.terminal_gone = False  # this terminal hung up under us (its input ended or EIO)
        self.done = threading.Event()
        self.wake_r, self.wake_w = os.pipe()

    def run(self) -> int | None:
        tty = self.tty = self.pty and os.isatty(0)
        saved = _raw(0) if tty else None
        caught = (signal.SIGWINCH, signal.SIGINT, signal.SIGHUP, signal.SIGTERM)
        previous = {sig: signal.getsignal(sig) for sig in caught}
        try:
            signal.signal(signal.SIGWINCH, lambda *_: self._window())
            signal.signal(signal.SIGHUP, lambda *_: self._hang_up())
            signal.signal(signal.SIGTERM, lambda *_: self._hang_up())
            if not tty:  # with a raw terminal Ctrl-C is a byte the task's terminal sees
                signal.signal(signal.SIGINT, lambda *_: self._send(self.t.SIGNAL, b"SIGINT"))
            self._window()
            reader = threading.Thread(target=self._receive, daemon=True)
            reader.start()
            self._pump_stdin()
            reader.join(5)
        finally:
            if saved is not None and not self.terminal_gone:
                import termios

                with contextlib.suppress(termios.error, OSError):
                    termios.tcsetattr(0, termios.TCSADRAIN, saved)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self.ws.close()
        if self.refusal is not None:  # after the terminal is restored: a raw one would stair-step
            print(f"railyard: {self.refusal}", file=sys.stderr)
        if self.code is None:
            return None
        return self.code if self.code >= 0 else 128 - self.code

    def _send(self, kind: bytes, payload: bytes = b"") -> None:
        with contextlib.suppress(OSError):
            self.ws.send_binary(self.t.frame(kind, payload))

    def _window(self) -> None:
        if self.pty:
            with contextlib.suppress(OSError):
                size = os.get_terminal_size(1 if os.isatty(1) else 0)
                self._send(self.t.WINDOW, struct.pack(">HH", size.lines, size.columns))

    def _hang_up(self) -> None:
        """This terminal went away (or we were told to end): the job ends with us."""
        with contextlib.suppress(Exception):
            self.cancel()
        self.done.set()
        os.write(self.wake_w, b"x")

    def _pump_stdin(self) -> None:
        stdin_open = True
        while not self.done.is_set():
            watched = [self.wake_r] + ([0] if stdin_open else [])
            ready, _, _ = select.select(watched, [], [])
            if 0 in ready:
                try:
                    data = os.read(0, self.t.CHUNK_BYTES)
                except OSError:  # EIO: the terminal was hung up
                    data = b""
                if data:
                    self._send(self.t.STDIN, data)
                elif self.tty:
                    # A raw terminal's Ctrl-D is a byte, so its end of input is its end: it
                    # was closed (su, which holds SIGHUP back, or a dead ssh): end with it.
                    self.terminal_gone = True
                    self._hang_up()
                else:
                    stdin_open = False
                    self._send(self.t.STDIN_END)

    def _receive(self) -> None:
        frames = self.t.FrameReader()
        try:
            while (message := self.ws.recv()) is not None:
                kind, payload = message
                if kind == "text":
                    self.refusal = _refused(payload)
                    break
                for what, data in frames.feed(payload):
                    if what in (self.t.STDOUT, self.t.STDERR):
                        fd = 1 if what == self.t.STDOUT else 2
                        if self.out is not None and not self.pty:  # whole lines, beside others'
                            self.out.write(0, fd, data, self.prefix)
                        else:
                            _write(fd, data)
                    elif what == self.t.EXIT:
                        self.code = int(data)
        except (OSError, ValueError) as exc:
            print(f"\r\nrailyard: the connection ended: {exc}", file=sys.stderr)
        finally:
            self.done.set()
            os.write(self.wake_w, b"x")


def _refused(payload: bytes) -> str:
    """The server's one-line refusal from a text frame."""
    try:
        return str(json.loads(payload)["detail"])
    except (ValueError, KeyError, TypeError):
        return payload.decode(errors="replace")


def _write(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]


def _raw(fd: int) -> list[Any]:
    import termios
    import tty

    saved = termios.tcgetattr(fd)
    tty.setraw(fd, termios.TCSANOW)
    return saved


COMMANDS = (
    Command("run", run, None),
    Command("alloc", alloc, None),
    Command("attach", attach, _attach_args),
)
