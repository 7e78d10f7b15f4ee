"""Issue 57's habits of a user switching from Slurm 22.05, end to end: a submission through
``jobs.submit``, the scheduler loop, the LocalExecutor and real processes (SQLite only: the
store's part is covered on both databases elsewhere)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.control.loop_helpers import Cluster

from railyard.client.scripts import parse_script


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    made = Cluster(tmp_path)
    yield made
    made.store.close()


@pytest.mark.parametrize(("mode", "kept"), [("append", True), ("truncate", False)])
def test_open_mode_appends_to_or_truncates_the_output_file(
    cluster: Cluster, mode: str, kept: bool
) -> None:
    """sbatch --open-mode=append writes after what the file held; truncate starts it over."""
    out = cluster.out / "train.out"
    out.write_text("from an earlier run\n")
    script = f"#!/bin/bash\n#SBATCH --open-mode={mode}\necho second run\n"
    options = parse_script(script, "job.sh").options
    [job_id] = cluster.submit(script=script, output=str(out), **options)
    cluster.run(job_id)
    expected = ("from an earlier run\n" if kept else "") + "second run\n"
    assert out.read_text() == expected


def test_open_mode_is_checked_at_parse() -> None:
    with pytest.raises(ValueError, match="--open-mode: expected append or truncate"):
        parse_script("#!/bin/bash\n#SBATCH --open-mode=sideways\nrun\n", "job.sh")
