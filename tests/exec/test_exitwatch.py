"""The exit watcher: a callback soon after a watched process exits, for our own children and
for processes that are not (adopted after a restart), without reaping either."""

from __future__ import annotations

import os
import subprocess
import threading

import pytest

from railyard.exec.exitwatch import SUPPORTED, ExitWatcher

pytestmark = pytest.mark.skipif(not SUPPORTED, reason="no pidfd_open on this system")


def test_child_exit_calls_back_and_leaves_the_status_to_its_parent() -> None:
    fired = threading.Event()
    watcher = ExitWatcher(fired.set)
    try:
        child = subprocess.Popen(["sleep", "0.3"])
        watcher.watch(child.pid)
        assert not fired.is_set()  # still running
        assert fired.wait(30)
        # Not reaped by the watcher: the parent still collects the exit status.
        assert child.wait(timeout=5) == 0
    finally:
        watcher.close()


def test_a_process_that_is_not_our_child_is_watched_too() -> None:
    """A grandchild orphaned to init stands for a rank adopted after a restart."""
    fired = threading.Event()
    watcher = ExitWatcher(fired.set)
    try:
        out = subprocess.run(
            ["sh", "-c", "sleep 0.5 >/dev/null 2>&1 & echo $!"],
            capture_output=True,
            text=True,
            check=True,
        )
        pid = int(out.stdout)
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # really not ours
        watcher.watch(pid)
        assert fired.wait(30)
    finally:
        watcher.close()


def test_a_process_already_gone_calls_back_at_once() -> None:
    fired = threading.Event()
    watcher = ExitWatcher(fired.set)
    try:
        child = subprocess.Popen(["true"])
        child.wait()  # reaped: the pid no longer exists
        watcher.watch(child.pid)
        assert fired.is_set()
    finally:
        watcher.close()


def test_close_stops_the_thread_and_ignores_later_watches() -> None:
    calls: list[int] = []
    watcher = ExitWatcher(lambda: calls.append(1))
    child = subprocess.Popen(["sleep", "30"])
    try:
        watcher.watch(child.pid)
        watcher.close()
        assert not watcher._thread.is_alive()
        watcher.watch(child.pid)  # after close: a no-op, no error
    finally:
        child.kill()
        child.wait()
    assert calls == []
