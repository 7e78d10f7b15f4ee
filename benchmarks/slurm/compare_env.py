"""Run the same jobs under Slurm (sbatch/srun) and railyard, and compare what every process sees.

Needs a working one-node Slurm on this machine (``benchmarks/slurm/setup_local_slurm.sh``: Debian
12's slurm-wlm 22.05 with ``Gres=gpu:h100:8`` over inert device files) and root (Slurm runs the
jobs as their submitter; railyard's server as root runs them as the same account). railyard
runs from this checkout: a fresh ``railyard up`` with 8 declared H100 GPUs.

Scenarios (each written once, run by both):

- ``command``: ``srun --gres=gpu:h100:4 --ntasks-per-node=4 CMD`` / ``railyard submit`` the same;
- ``batch``: a script with ``--gres=gpu:h100:2`` that records its own environment;
- ``batch-srun``: the same with ``--ntasks-per-node=2`` and ``srun python dump.py``;
- ``array``: ``--array=0-3%2 --gres=gpu:1``;
- ``torchrun``: ``--ntasks-per-node=1`` and ``srun torchrun --nnodes $SLURM_NNODES ...``.

Every process writes its environment; for each process present in both runs (the batch step,
task N, torchrun worker N) each variable is classed as the same value, the same after
normalising what must differ (job ids, pids, ports), Slurm-only or railyard-only. Prints a
table and writes ``benchmarks/results/slurm_compare.json``.

    sudo python benchmarks/slurm/compare_env.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "slurm_compare.json"
BIN = Path(sys.executable).parent
DUMP = """import json, os, sys
env = dict(os.environ)
if "TORCHELASTIC_USE_AGENT_STORE" in env:
    label = "worker-" + env["RANK"]
elif "SLURM_STEP_ID" in env:
    label = "task-" + env["SLURM_PROCID"]
else:
    label = "batch"
if "SLURM_ARRAY_TASK_ID" in env:
    label = "a" + env["SLURM_ARRAY_TASK_ID"] + "-" + label
open(os.path.join(sys.argv[1], label + ".json"), "w").write(json.dumps(env))
"""
WATCHED = re.compile(
    r"^(SLURM_|SLURMD_|CUDA_VISIBLE_DEVICES$|GPU_DEVICE_ORDINAL$|ENVIRONMENT$|TMPDIR$|RANK$|"
    r"LOCAL_RANK$|WORLD_SIZE$|LOCAL_WORLD_SIZE$|GROUP_RANK$|GROUP_WORLD_SIZE$|ROLE_|MASTER_|"
    r"NODE_RANK$|NNODES$|TORCHELASTIC_)"
)
# Values that differ by nature between two runs on two systems: ids, pids, ports, names.
VOLATILE = {
    "SLURM_JOB_ID", "SLURM_JOBID", "SLURM_ARRAY_JOB_ID", "SLURM_TASK_PID", "MASTER_PORT",
    "SLURM_SRUN_COMM_PORT", "SLURM_STEP_LAUNCHER_PORT", "SLURM_CLUSTER_NAME",
    "SLURM_JOB_PARTITION", "TORCHELASTIC_RUN_ID", "SLURM_WORKING_CLUSTER", "SLURM_CONF",
    "SLURM_SUBMIT_DIR", "SLURM_NODE_ALIASES", "TORCHELASTIC_ERROR_FILE",
    # the user's sacctmgr account under Slurm; railyard charges the queue (compare_habits case 8)
    "SLURM_JOB_ACCOUNT",
}  # fmt: skip
TORCHRUN = (
    'srun bash -c \'torchrun --nnodes "$SLURM_NNODES" --node-rank "$SLURM_NODEID" '
    "--nproc-per-node 2 "
    '--master-addr "${{MASTER_ADDR:-$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)}}" '
    '--master-port "${{MASTER_PORT:-29533}}" {dump_py} {out}\'\n'
)
SCENARIOS: dict[str, dict[str, Any]] = {
    "command": {"srun": ["--gres=gpu:h100:4", "--ntasks-per-node=4"]},
    "batch": {"script": "#SBATCH --gres=gpu:h100:2\n{dump}\n"},
    "batch-srun": {"script": "#SBATCH --gres=gpu:h100:2 --ntasks-per-node=2\nsrun {dump}\n"},
    "array": {"script": "#SBATCH --array=0-3%2\n#SBATCH --gres=gpu:1\n{dump}\n"},
    "torchrun": {"script": "#SBATCH --gres=gpu:h100:2 --ntasks-per-node=1\n" + TORCHRUN},
}


def slurm_version() -> str | None:
    try:
        out = subprocess.run(["sinfo", "--version"], capture_output=True, text=True, timeout=10)
        ready = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True,
                               timeout=10)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode or ready.returncode or not re.search(r"idle|mix", ready.stdout):
        return None
    return out.stdout.strip()


def job_env() -> dict[str, str]:
    """What both systems get from the submitter: this venv first on PATH (for torchrun)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "RAILYARD_"))}
    env["PATH"] = f"{BIN}:{env.get('PATH', '/usr/bin:/bin')}"
    return env


def script_text(spec: dict[str, Any], out: Path, dump_py: Path) -> str:
    dump = f"{sys.executable} {dump_py} {out}"
    return "#!/bin/bash\n" + spec["script"].format(dump=dump, dump_py=dump_py, out=out)


def run_slurm(name: str, spec: dict[str, Any], out: Path, dump_py: Path) -> None:
    env = job_env()
    if "srun" in spec:
        cmd = ["srun", *spec["srun"], sys.executable, str(dump_py), str(out)]
        subprocess.run(cmd, cwd=out, env=env, check=True, timeout=300)
        return
    script = out / f"{name}.sh"
    script.write_text(script_text(spec, out, dump_py))
    subprocess.run(["sbatch", "--wait", "-D", str(out), str(script)], env=env, check=True,
                   timeout=300, capture_output=True)  # fmt: skip


class Railyard:
    """A fresh ``railyard up`` from this checkout, and its CLI."""

    def __init__(
        self,
        home: Path,
        up_args: tuple[str, ...] = (),
        base: tuple[str, ...] = ("--gpus", "8", "--flavor", "H100-SXM-80GB"),
    ) -> None:
        """``base``: the node's GPUs as declared (none with a blueprint, which says them)."""
        self.home = home
        home.mkdir(parents=True)
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.env = {**job_env(), "RAILYARD_HOME": str(home)}
        log = (home / "server.log").open("wb")
        self.proc = subprocess.Popen(
            [str(BIN / "railyard"), "up", *base, "--port", str(port), "--state-dir", str(home),
             "--spool-dir", str(home / "spool"), "--cycle-interval", "0.2", *up_args],
            stdout=log, stderr=subprocess.STDOUT, env=self.env,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while not (home / "client.json").exists() or self.cli("queue").returncode:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError((home / "server.log").read_text())
            time.sleep(0.3)

    def cli(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(BIN / "railyard"), *args], env=self.env, cwd=cwd,
                              capture_output=True, text=True, timeout=120)  # fmt: skip

    def run(self, name: str, spec: dict[str, Any], out: Path, dump_py: Path) -> None:
        if "srun" in spec:
            args = [*spec["srun"], "--", sys.executable, str(dump_py), str(out)]
        else:
            script = out / f"{name}.sh"
            script.write_text(script_text(spec, out, dump_py))
            args = [str(script)]
        done = self.cli("submit", *args, cwd=out)
        if done.returncode:
            raise RuntimeError(done.stderr)
        deadline = time.monotonic() + 300
        while json.loads(self.cli("queue", "--json").stdout):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name}: railyard jobs did not finish")
            time.sleep(0.3)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def load(directory: Path) -> dict[str, dict[str, str]]:
    return {
        p.stem: {k: v for k, v in json.loads(p.read_text()).items() if WATCHED.match(k)}
        for p in sorted(directory.glob("*.json"))
    }


def classify(slurm: dict[str, str], railyard: dict[str, str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"same": [], "differs by nature": [], "differs": [],
                                 "slurm only": [], "railyard only": []}  # fmt: skip
    for key in sorted(slurm.keys() | railyard.keys()):
        if key not in railyard:
            out["slurm only"].append(key)
        elif key not in slurm:
            out["railyard only"].append(key)
        elif slurm[key] == railyard[key]:
            out["same"].append(key)
        elif key in VOLATILE:
            out["differs by nature"].append(key)
        else:
            out["differs"].append(f"{key}: slurm {slurm[key]!r}, railyard {railyard[key]!r}")
    return out


def compare(work: Path, version: str, names: list[str] | None = None) -> dict[str, Any]:
    """Run ``names`` (default: every scenario) under both systems; the comparison, per process."""
    dump_py = work / "dump.py"
    dump_py.write_text(DUMP)
    server = Railyard(work / "railyard-home")
    report: dict[str, Any] = {"slurm": version, "railyard": server.cli("version").stdout.strip(),
                              "torch": torch_version(), "scenarios": {}}  # fmt: skip
    try:
        for name in names or list(SCENARIOS):
            spec = SCENARIOS[name]
            dirs = {}
            for system in ("slurm", "railyard"):
                out = work / system / name
                out.mkdir(parents=True)
                dirs[system] = out
                if system == "slurm":
                    run_slurm(name, spec, out, dump_py)
                else:
                    server.run(name, spec, out, dump_py)
            slurm, railyard = load(dirs["slurm"]), load(dirs["railyard"])
            both = sorted(slurm.keys() & railyard.keys())
            report["scenarios"][name] = {
                "processes": {"slurm": sorted(slurm), "railyard": sorted(railyard)},
                "compared": {p: classify(slurm[p], railyard[p]) for p in both},
            }
    finally:
        server.stop()
    return report


def torch_version() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return str(torch.__version__)


def print_report(report: dict[str, Any]) -> None:
    print(f"{report['slurm']} vs railyard {report['railyard']} (torch {report['torch']})")
    header = f"{'scenario':11} {'process':14} {'same':>5} {'nature':>6} {'differ':>6} "
    print(header + f"{'slurm only':>10} {'ry only':>7}")
    for name, scenario in report["scenarios"].items():
        procs = scenario["processes"]
        if procs["slurm"] != procs["railyard"]:
            print(
                f"{name:11} processes differ: slurm {procs['slurm']}, railyard {procs['railyard']}"
            )
        for proc, c in scenario["compared"].items():
            print(
                f"{name:11} {proc:14} {len(c['same']):5} {len(c['differs by nature']):6} "
                f"{len(c['differs']):6} {len(c['slurm only']):10} {len(c['railyard only']):7}"
            )
    for name, scenario in report["scenarios"].items():
        for proc, c in scenario["compared"].items():
            for kind in ("differs", "slurm only", "railyard only"):
                if c[kind]:
                    print(f"  {name}/{proc} {kind}: {', '.join(c[kind])}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="keep the jobs' files in this directory")
    args = parser.parse_args(argv)
    return run_report(args.keep, RESULTS, compare, print_report)


def run_report(
    keep: Path | None,
    results: Path,
    run: Callable[[Path, str], dict[str, Any]],
    show: Callable[[dict[str, Any]], None],
) -> int:
    """Both comparisons' main: ``run(work, slurm_version)`` in a scratch directory (or
    ``keep``), then the table and the JSON; exit 2 without a working Slurm."""
    version = slurm_version()
    if version is None:
        print("no working Slurm here (see benchmarks/slurm/setup_local_slurm.sh)", file=sys.stderr)
        return 2
    work = keep or Path(tempfile.mkdtemp(prefix="railyard-slurm-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        report = run(work, version)
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)
    show(report)
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps(report, indent=1) + "\n")
    print(f"written {results.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
