"""What a `railyard` command costs to start, before and after a change, in the same minutes.

One real `railyard up` on loopback (SQLite, one GPU so ``run -- true`` runs); each case is a
new process of the ``railyard`` console script next to this interpreter, with ``PYTHONPATH``
naming the source tree of each label (``--src before=OTHER/src --src after=src``); the labels
alternate within every round, so both see the same load. Beside the wall time, the process's
CPU time (user + system), which a shared machine's load moves less, and the number of modules
the command imported (``-X importtime``). Medians of ``--repeat`` rounds after one warm-up.

    python benchmarks/bench_cli_startup.py --src before=/tmp/base/src --src after=src
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.bench_cli import RAILYARD, RESULTS, timed
from tests.integration.server_proc import ServerProcess

CASES = {
    "version": ["version"],
    "submit --wrap": ["submit", "--wrap", "true"],
    "queue": ["queue"],
    "run -- true": ["run", "--", "true"],
}


def modules(argv: list[str], env: dict[str, str]) -> int:
    """How many modules the command imports (``python -X importtime``'s lines)."""
    done = subprocess.run([sys.executable, "-X", "importtime", RAILYARD, *argv], env=env,
                          capture_output=True, text=True, check=False)  # fmt: skip
    return sum(1 for line in done.stderr.splitlines() if line.startswith("import time:"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--src", action="append", required=True, help="LABEL=SRC_DIR (repeat)")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    trees = dict(item.split("=", 1) for item in args.src)
    for tree in trees.values():
        compileall.compile_dir(tree, quiet=1)
    figures: dict[str, dict[str, dict[str, list[float]]]] = {
        case: {label: {"wall_s": [], "cpu_s": []} for label in trees} for case in CASES
    }
    counts: dict[str, dict[str, int]] = {case: {} for case in CASES}
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(Path(tmp) / "state", gpus=1)
        server.state_dir.mkdir()
        server.start(timeout_s=120)
        base = dict(os.environ) | {"RAILYARD_URL": server.url, "RAILYARD_TOKEN": server.token}
        base.pop("PYTHONDONTWRITEBYTECODE", None)
        envs = {label: base | {"PYTHONPATH": str(Path(t).resolve())} for label, t in trees.items()}
        os.chdir(tmp)  # where the batch jobs of `submit --wrap` write their slurm-N.out
        try:
            for case, argv in CASES.items():
                for label, env in envs.items():
                    counts[case][label] = modules(argv, env)
            for i in range(args.repeat + 1):
                for case, argv in CASES.items():
                    for label, env in envs.items():
                        wall, cpu = timed([RAILYARD, *argv], env)
                        if i:
                            figures[case][label]["wall_s"].append(wall)
                            figures[case][label]["cpu_s"].append(cpu)
        finally:
            server.stop()
    rows = []
    print(f"{'median, new process':16} " + " ".join(
        f"{label + ' wall ms':>16} {label + ' cpu ms':>15} {label + ' mods':>12}" for label in trees
    ))  # fmt: skip
    for case in CASES:
        row: dict[str, object] = {"case": case}
        cells = []
        for label in trees:
            wall = statistics.median(figures[case][label]["wall_s"])
            cpu = statistics.median(figures[case][label]["cpu_s"])
            row |= {f"{label}_wall_s": wall, f"{label}_cpu_s": cpu,
                    f"{label}_modules": counts[case][label]}  # fmt: skip
            cells.append(f"{wall * 1e3:>16.1f} {cpu * 1e3:>15.1f} {counts[case][label]:>12}")
        rows.append(row)
        print(f"{case:16} " + " ".join(cells))
    out = {"benchmark": "cli_startup", "trees": trees, "repeat": args.repeat,
           "load_avg": os.getloadavg(), "rows": rows}  # fmt: skip
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "bench_cli_startup.json").write_text(json.dumps(out, indent=2))
    print(f"wrote {RESULTS / 'bench_cli_startup.json'}")


if __name__ == "__main__":
    main()
