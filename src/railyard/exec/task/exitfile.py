"""The file in which a rank's wrapper records how its command ended.

It is what lets a restarted control plane learn the exit code of a process that is not its
child. Written once, atomically (temporary file, then ``os.replace``), so a reader sees either
nothing or the whole record.
"""

from __future__ import annotations

import json
import os
import signal
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RankExit:
    """How one rank ended. ``exit_code`` is None when it died by ``signal`` or is unknown."""

    exit_code: int | None
    signal: str | None
    signals_received: tuple[str, ...] = ()
    reason: str | None = None  # why it could not start, when the wrapper knows (ImagePullFailed)

    @property
    def clean(self) -> bool:
        return self.exit_code == 0

    @property
    def known(self) -> bool:
        return self.exit_code is not None or self.signal is not None

    @classmethod
    def from_returncode(
        cls, returncode: int, received: tuple[str, ...] = (), reason: str | None = None
    ) -> RankExit:
        """From ``Popen.returncode``: negative means killed by that signal."""
        if returncode < 0:
            return cls(None, signal_name(-returncode), received, reason)
        return cls(returncode, None, received, reason)


UNKNOWN = RankExit(None, None)


# The signals the wrapper catches and records in ``signals_received`` (it forwards none: a
# signal to the rank's group reaches the command too), so that an exit after the preempt signal
# or SIGTERM is told from one nobody asked for.
NOTED_SIGNALS = (
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
)


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"SIG{signum}"


def write_exit(path: Path, record: RankExit) -> None:
    data = {
        "exit_code": record.exit_code,
        "signal": record.signal,
        "signals_received": list(record.signals_received),
        **({"reason": record.reason} if record.reason else {}),
    }
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data) + "\n")
    os.replace(tmp, path)


def read_exit(path: Path) -> RankExit | None:
    """The record, or None when the wrapper never wrote one (it was SIGKILLed, or is running)."""
    try:
        data = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    code = data.get("exit_code")
    sig = data.get("signal")
    return RankExit(
        exit_code=int(code) if code is not None else None,
        signal=str(sig) if sig is not None else None,
        signals_received=tuple(str(s) for s in data.get("signals_received", ())),
        reason=str(data["reason"])[:250] if data.get("reason") else None,
    )
