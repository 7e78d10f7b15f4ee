"""``python -m railyard.exec.wrapper --exit-file PATH -- cmd ...``: run one rank's command.

The wrapper leads the rank's process group and starts the command in the same group. The
executor signals the whole group, so the command (and its children) receive every signal
directly; the wrapper only notes the signal and keeps waiting, so it outlives the command and
can write the exit record. Forwarding would deliver each signal twice, so it does not forward.
When the command ends, the wrapper writes :mod:`railyard.exec.exitfile` and ends the same way
(same exit code, or the same signal), so its parent sees what a bare command would show.
Only SIGKILL stops it from writing the record; readers then treat the exit as unknown.

Before running anything it claims the rank's start marker (:mod:`railyard.exec.attempt`). If
the rank of this attempt was claimed before (a relaunch after the control plane crashed) or
sealed (the attempt is over), it says so on stderr and exits 75 without running the command
and without writing an exit record: that belongs to the wrapper that did run it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from types import FrameType

from railyard.exec import procfs
from railyard.exec.attempt import STOOD_DOWN_EXIT, claim, read_claim, start_marker_path
from railyard.exec.exitfile import RankExit, signal_name, write_exit

NOTED_SIGNALS = (
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
)
USAGE = "usage: python -m railyard.exec.wrapper --exit-file PATH -- cmd [args...]"


def parse(argv: list[str]) -> tuple[Path, list[str]]:
    if len(argv) < 4 or argv[0] != "--exit-file" or argv[2] != "--":
        raise SystemExit(USAGE)
    return Path(argv[1]), argv[3:]


def run(exit_file: Path, command: list[str]) -> int:
    """Run ``command``, record its end, and return its exit status for our own exit."""
    received: list[str] = []

    def note(signum: int, _frame: FrameType | None) -> None:
        received.append(signal_name(signum))

    for sig in NOTED_SIGNALS:
        signal.signal(sig, note)  # Python handlers reset to default in the command on exec
    if not claim_rank(exit_file):
        return STOOD_DOWN_EXIT
    try:
        proc = subprocess.Popen(command)
    except OSError as exc:
        print(f"railyard wrapper: cannot run {command[0]!r}: {exc}", file=sys.stderr, flush=True)
        record(exit_file, RankExit(127, None, tuple(received)))
        return 127
    returncode = proc.wait()  # retried across signals (PEP 475)
    record(exit_file, RankExit.from_returncode(returncode, tuple(received)))
    return returncode


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
    exit_file, command = parse(sys.argv[1:] if argv is None else argv)
    return mirror(run(exit_file, command))


if __name__ == "__main__":
    raise SystemExit(main())
