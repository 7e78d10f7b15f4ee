"""Container paths at submit (issue 53 item 1): a destination inside another mount is refused
where the runtime would create it as root on the host; a directory mounted at its own path
inside a mounted one (a home's subtree: a venv, a data set) exists already and is taken."""

from __future__ import annotations

from pathlib import Path

import pytest

from railyard.control.errors import Invalid
from railyard.control.submission import JobSubmit
from railyard.control.usecases.containers import _check_paths
from railyard.exec.containers.container import parse_mounts


def check(workdir: Path, *mounts: str) -> None:
    spec = JobSubmit(command=["true"], workdir=str(workdir),
                     container={"image": "img", "mounts": list(mounts)})  # fmt: skip
    _check_paths(spec, parse_mounts(",".join(mounts)), "")


def test_a_directory_at_its_own_path_inside_the_working_directory_is_taken(
    tmp_path: Path,
) -> None:
    inner = tmp_path / "venv"
    inner.mkdir()
    check(tmp_path, f"{inner}:{inner}")  # nothing to make: it is there, seen through the cwd


def test_another_source_or_a_new_path_inside_the_working_directory_is_refused(
    tmp_path: Path,
) -> None:
    inner = tmp_path / "venv"
    inner.mkdir()
    with pytest.raises(Invalid, match="would create it there as root") as other:
        check(tmp_path, f"/usr:{inner}")  # another source over a directory of the cwd
    with pytest.raises(Invalid, match="would create it there as root") as new:
        check(tmp_path, f"{inner}:{tmp_path / 'made-by-root'}")
    assert other.value.field == new.value.field == "container_mounts"
