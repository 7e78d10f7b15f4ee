"""Finding a wrapper's children (the batch shell a ``--signal=B:`` signal goes to) through
``/proc``: the kernel's children list, or a scan for their parent where it is missing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from railyard.exec import procfs


def test_children_by_the_kernels_list_and_by_a_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    child = subprocess.Popen(["sleep", "30"])
    try:
        assert child.pid in procfs.children(os.getpid())
        read_text = Path.read_text

        def no_children_file(path: Path, *args: object, **kw: object) -> str:
            if path.name == "children":
                raise FileNotFoundError(path)  # a kernel without CONFIG_PROC_CHILDREN
            return read_text(path, *args, **kw)  # type: ignore[arg-type]

        monkeypatch.setattr(Path, "read_text", no_children_file)
        assert child.pid in procfs.children(os.getpid())
        assert child.pid not in procfs.children(child.pid)
    finally:
        child.kill()
        child.wait()
    assert child.pid not in procfs.children(os.getpid())
