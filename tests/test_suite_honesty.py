"""The suite is honest anywhere (issue 58, item 5): a part a plain user has but not on PATH
(sshd, in /usr/sbin) is found; what a plain user lacks (a readable kernel log, a writable cgroup)
is a part whose tests skip saying so; and a server's start waits as long as the machine's load
stretches it, not a fixed 30 s."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import parts, waiting


@pytest.fixture
def fresh_parts() -> object:
    parts.present.cache_clear()
    yield None
    parts.present.cache_clear()


@pytest.mark.usefixtures("fresh_parts")
def test_a_daemon_is_found_off_a_plain_users_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """sshd is /usr/sbin/sshd: a plain user's PATH (Debian's /usr/local/bin:/usr/bin:/bin)
    lacks /usr/sbin, and its tests said "needs sshd (apt-get install openssh-server)"."""
    sbin = tmp_path / "sbin"
    sbin.mkdir()
    (sbin / "ry-daemon").write_text("#!/bin/sh\n")
    (sbin / "ry-daemon").chmod(0o755)
    monkeypatch.setattr(parts, "SBIN", (str(sbin),))
    monkeypatch.setenv("PATH", "/usr/local/bin:/usr/bin:/bin")
    monkeypatch.setitem(parts.PARTS, "ry-daemon", parts.Part(parts._daemon("ry-daemon"), "", True))
    assert parts.present("ry-daemon")
    assert parts.PARTS["sshd"].present.__qualname__ == parts._daemon("x").__qualname__


@pytest.mark.usefixtures("fresh_parts")
def test_what_a_plain_user_lacks_is_a_named_part() -> None:
    for name in ("kernel-log", "tracking-cgroup"):
        assert not parts.PARTS[name].ci  # CI's non-root sample skips them, it does not fail
        if os.geteuid() == 0:
            assert parts.present(name), f"root has {name}"
        else:
            reason = parts.missing(name)
            assert reason is None or reason.startswith(f"needs {name}, which is not here")


def test_a_wait_stretches_with_the_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (1.0, 1.0, 1.0))
    assert waiting.scaled(30.0) == 30.0  # a quiet machine: as written
    monkeypatch.setattr(os, "getloadavg", lambda: (8.0, 6.0, 4.0))
    assert waiting.scaled(30.0) == 120.0  # 4 runnable processes a core: four times as long
    monkeypatch.setattr(os, "getloadavg", lambda: (500.0, 1.0, 1.0))
    assert waiting.scaled(30.0) == 30.0 * waiting.MAX_LOAD_FACTOR  # still a bound for a hang
