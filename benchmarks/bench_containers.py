"""What a container adds to a task's start (issue 24): ``true`` as a bare task and in an image
already on the node (Debian's Podman, runc), side by side under the local executor.

Each run is one job of one task, timed from ``LocalExecutor.start`` to its exit report; bare
and containerised runs alternate so that both see the same machine. The image is the tests'
own (``tests/exec/container_image.py``: imported offline, the host's ``/usr`` mounted).
Target: under 1 s added at the median when the image is cached. A first run that loads an
archive (``docker-archive:``) is timed once, apart, to show a cold start.

Run as root: ``python benchmarks/bench_containers.py [--runs 10]``; prints a table and writes
``benchmarks/results/bench_containers.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.exec.container_image import imported_image

from railyard.exec import LaunchSpec, LocalExecutor
from railyard.exec.containers.container import ContainerSpec, Mount

RESULTS = Path(__file__).parent / "results" / "bench_containers.json"
TARGET_ADDED_S = 1.0


def one_run(executor: LocalExecutor, work: Path, job_id: str, image: str | None) -> float:
    container = ContainerSpec(image=image, mounts=(Mount("/usr", "/usr", True),)) if image else None
    spec = LaunchSpec(
        job_id=job_id, command=("true",), placement={"n0": ()}, gpus_per_worker=0, workers=1,
        log_dir=work / job_id / "logs", checkpoint_dir=work / job_id / "ckpt", workdir=work,
        container=container, container_allowed=("/usr",),
    )  # fmt: skip
    began = time.perf_counter()
    executor.start(spec)
    while True:
        reports = executor.poll()
        if reports:
            assert reports[0].exit_code == 0, (job_id, reports)
            return time.perf_counter() - began
        time.sleep(0.005)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    image = imported_image()
    executor = LocalExecutor("n0", gpus=0)
    bare: list[float] = []
    contained: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        one_run(executor, work, "warm-bare", None)
        one_run(executor, work, "warm-ctr", image)
        for i in range(args.runs):
            bare.append(one_run(executor, work, f"bare-{i}", None))
            contained.append(one_run(executor, work, f"ctr-{i}", image))
        archive = work / "image.tar"
        subprocess.run(["podman", "save", "--quiet", "--output", str(archive), image],
                       check=True)  # fmt: skip
        subprocess.run(["touch", str(archive)], check=True)  # a new file: not in the cache
        cold = one_run(executor, work, "cold", f"docker-archive:{archive}")
        warm_archive = one_run(executor, work, "warm-archive", f"docker-archive:{archive}")
    added = statistics.median(contained) - statistics.median(bare)
    rows = [
        ("bare task, start to exit (median)", statistics.median(bare)),
        ("in a cached image (median)", statistics.median(contained)),
        ("added by the container (median)", added),
        ("from a docker-archive, first run (loads it)", cold),
        ("the same archive again (cached)", warm_archive),
    ]
    for label, seconds in rows:
        print(f"{label:<46} {seconds * 1000:9.0f} ms")
    met = added < TARGET_ADDED_S
    print(f"target: under {TARGET_ADDED_S:.0f} s added when cached: {'met' if met else 'NOT met'}")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({
        "runs": args.runs, "bare_s": bare, "container_s": contained,
        "added_median_s": added, "archive_cold_s": cold, "archive_cached_s": warm_archive,
        "target_added_s": TARGET_ADDED_S, "met": met,
    }, indent=1) + "\n")  # fmt: skip


if __name__ == "__main__":
    main()
