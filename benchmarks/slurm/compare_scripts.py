"""Submit the same sbatch scripts to Slurm and to railyard, unchanged, and compare the outcome.

Needs what ``compare_env.py`` needs (a working one-node Slurm from ``setup_local_slurm.sh``,
whose partition ``gpu`` is the default, and root). railyard runs from this checkout: a fresh
``railyard up`` with 8 declared H100 GPUs and the same partition (``--partition 'gpu
Default=YES'``). Each script is written once, with the directives real scripts use, and
submitted with ``sbatch --wait`` and ``railyard submit -W`` from a directory of its own.

Per script and system: accepted (the submit's exit status and first line when refused),
tasks (processes that recorded their environment), the final state, the files the job left
in its directory, and the variables that differ between the two runs' processes (ids, pids,
ports and paths apart). Prints a table and writes ``benchmarks/results/slurm_scripts.json``.

    sudo python benchmarks/slurm/compare_scripts.py [--keep DIR] [--only NAME,...]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks.slurm.compare_env import (
    DUMP,
    ROOT,
    Railyard,
    classify,
    job_env,
    load,
    run_report,
)

RESULTS = ROOT / "benchmarks" / "results" / "slurm_scripts.json"
HOST = "{host}"
SCRIPTS: dict[str, str] = {
    "plain": "#SBATCH --job-name=plain\n#SBATCH --gres=gpu:h100:1\n#SBATCH --time=00:10:00\n"
    "{dump}\n",
    "out-pattern": "#SBATCH -J pat\n#SBATCH -o %x-%j.out\n#SBATCH -e %x-%j.err\n"
    "echo to-stdout; echo to-stderr >&2\n{dump}\n",
    "srun-tasks": "#SBATCH --nodes=1 --ntasks-per-node=4 --gres=gpu:h100:4\nsrun {dump}\n",
    "ntasks": "#SBATCH --ntasks=2 --cpus-per-task=2 --mem=2G\nsrun {dump}\n",
    "array": "#SBATCH --array=0-2\n#SBATCH -o arr-%A_%a.out\n#SBATCH --gres=gpu:1\n{dump}\n",
    "partition": "#SBATCH -p gpu\n#SBATCH --qos=normal\n#SBATCH --mail-type=END\n{dump}\n",
    "exit-code": "#SBATCH -J fails\n{dump}\nexit 3\n",
    "export-none": "#SBATCH --export=NONE\n{dump}\n",
    "chdir": "#SBATCH --chdir=/tmp\n#SBATCH -o {out}/chdir.out\npwd\n{dump}\n",
    "mem-per-cpu": "#SBATCH --ntasks=2 --mem-per-cpu=512M\nsrun {dump}\n",
    "mem-per-gpu": "#SBATCH --gres=gpu:h100:2 --mem-per-gpu=1G\n{dump}\n",
    "nodelist": "#SBATCH -w " + HOST + "\n#SBATCH --gres=gpu:1\n{dump}\n",
    "exclusive": "#SBATCH --exclusive\n#SBATCH --nodes=1\n{dump}\n",
    "time-minutes": "#SBATCH --time=1:30\n{dump}\n",
    "deadline": "#SBATCH --time=10 --deadline=now+1hour\n{dump}\n",
    "gpus-per-task": "#SBATCH --ntasks=2 --gpus-per-task=1\nsrun {dump}\n",
    "singleton": "#SBATCH --dependency=singleton -J single\n{dump}\n",
}
"""Each a script body after ``#!/bin/bash``: ``{dump}`` records the process's environment,
``{out}`` is the job's directory, ``{host}`` this machine (Slurm's node and railyard's)."""


EXPLAINED: dict[str, str] = {
    **dict.fromkeys(
        ("SLURM_CONF", "SLURM_NODE_ALIASES", "SLURM_WORKING_CLUSTER", "SLURM_SRUN_COMM_HOST",
         "SLURM_SRUN_COMM_PORT", "SLURM_STEP_LAUNCHER_PORT",
         "SLURM_JOB_CPUS_PER_NODE_PACK_GROUP_0", "SLURMD_TRES_BIND"),
        "Slurm's plumbing (slurm.conf, srun's ports and binding): railyard has none",
    ),
    **dict.fromkeys(
        ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
         "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_NAME", "ROLE_WORLD_SIZE", "MASTER_ADDR",
         "MASTER_PORT", "NNODES", "NODE_RANK", "TORCHELASTIC_MAX_RESTARTS",
         "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_RUN_ID"),
        "torchrun's variables in every task: init_process_group('env://') works unlaunched",
    ),
    "SLURM_JOB_ACCOUNT": "the user's sacctmgr account under Slurm; railyard has no accounts "
    "and charges the queue, so it names the queue",
    "SLURM_MEM_PER_CPU (slurm only)": "setup_local_slurm.sh's DefMemPerCPU=1024 (so that jobs "
    "share the node's memory): Slurm exports the default as if asked; railyard has none",
    "CUDA_VISIBLE_DEVICES (railyard only)":
        "a CPU job: an empty list hides every GPU (Slurm relies on cgroups)",
}  # fmt: skip
"""Differences the README's table explains, by variable (or by a variable's one kind of
difference): left out of the per-script count."""


def render(name: str, out: Path, dump_py: Path) -> Path:
    dump = f"{sys.executable} {dump_py} {out}"
    body = SCRIPTS[name].replace(HOST, _host()).format(dump=dump, out=out)
    script = out / f"{name}.sh"
    script.write_text("#!/bin/bash\n" + body)
    return script


def _host() -> str:
    return subprocess.run(["hostname", "-s"], capture_output=True, text=True).stdout.strip()


def left_files(out: Path, script: Path) -> list[str]:
    """What the job wrote in its directory, besides the recorded environments; job numbers
    as ``N`` (``slurm-N.out``), since each system numbers its own jobs."""
    names = (p.name for p in out.iterdir() if p.suffix != ".json" and p != script)
    return sorted(re.sub(r"\d+", "N", name) for name in names)


def run_slurm(name: str, out: Path, dump_py: Path) -> dict[str, Any]:
    script = render(name, out, dump_py)
    done = subprocess.run(["sbatch", "--parsable", "--wait", str(script)], cwd=out,
                          env=job_env(), capture_output=True, text=True, timeout=300)  # fmt: skip
    first = done.stdout.strip().split(";")[0]
    if not first.isdigit():
        return {"accepted": False, "error": done.stderr.strip().splitlines()[:1]}
    shown = subprocess.run(["scontrol", "-o", "show", "job", first], capture_output=True,
                           text=True, timeout=30).stdout  # fmt: skip
    states = re.findall(r"JobState=(\S+)", shown)
    return {"accepted": True, "state": ",".join(sorted(set(states))) or "?",
            "files": left_files(out, script)}  # fmt: skip


def run_railyard(server: Railyard, name: str, out: Path, dump_py: Path) -> dict[str, Any]:
    script = render(name, out, dump_py)
    done = server.cli("submit", "--parsable", "-W", str(script), cwd=out)
    first = done.stdout.strip()
    if not first.isdigit():
        return {"accepted": False, "error": done.stderr.strip().splitlines()[:1]}
    shown = json.loads(server.cli("queue", "-t", "all", "-j", first, "--json").stdout)
    states = {j["state"].upper() for j in shown}
    return {"accepted": True, "state": ",".join(sorted(states)) or "?",
            "files": left_files(out, script)}  # fmt: skip


def compare(work: Path, version: str, names: list[str]) -> dict[str, Any]:
    dump_py = work / "dump.py"
    dump_py.write_text(DUMP)
    # As setup_local_slurm.sh declares the node: 16 CPUs (CPUs=16), partition gpu the default.
    server = Railyard(work / "railyard-home", ("--cpus", "16", "--partition", "gpu Default=YES"))
    report: dict[str, Any] = {"slurm": version, "railyard": server.cli("version").stdout.strip(),
                              "scripts": {}}  # fmt: skip
    try:
        for name in names:
            result: dict[str, Any] = {}
            dirs = {}
            for system in ("slurm", "railyard"):
                out = work / system / name
                out.mkdir(parents=True)
                dirs[system] = out
                ran = (run_slurm(name, out, dump_py) if system == "slurm"
                       else run_railyard(server, name, out, dump_py))  # fmt: skip
                ran["tasks"] = len(list(out.glob("*.json")))
                result[system] = ran
            slurm, railyard = load(dirs["slurm"]), load(dirs["railyard"])
            differ: dict[str, list[str]] = {}
            for process in sorted(slurm.keys() & railyard.keys()):
                c = classify(slurm[process], railyard[process])
                found = c["differs"] + [f"{k} (slurm only)" for k in c["slurm only"]]
                found += [f"{k} (railyard only)" for k in c["railyard only"]]
                differ[process] = found
            result["differ"] = differ
            report["scripts"][name] = result
    finally:
        server.stop()
    return report


def print_report(report: dict[str, Any]) -> None:
    print(f"{report['slurm']} vs railyard {report['railyard']}")
    cols = f"{'script':16} {'accepted':>9} {'tasks':>7} {'final state':>23} {'differ':>6}  files"
    print("(each column slurm/railyard; differ: variables of one process that differ, besides")
    print(" ids, pids, ports and the differences explained below the table)")
    print(cols)
    for name, r in report["scripts"].items():
        s, y = r["slurm"], r["railyard"]
        accepted = f"{_yes(s['accepted'])}/{_yes(y['accepted'])}"
        tasks = f"{s['tasks']}/{y['tasks']}"
        state = f"{s.get('state', '-')}/{y.get('state', '-')}"
        differ = max((len(_unexplained(v)) for v in r["differ"].values()), default=0)
        files = (
            "same" if s.get("files") == y.get("files") else f"{s.get('files')} / {y.get('files')}"
        )
        print(f"{name:16} {accepted:>9} {tasks:>7} {state:>23} {differ:>6}  {files}")
    for name, r in report["scripts"].items():
        for system in ("slurm", "railyard"):
            if not r[system]["accepted"]:
                print(f"  {name}: {system} refused: {' '.join(r[system]['error'])}")
        for process, found in r["differ"].items():
            if _unexplained(found):
                print(f"  {name}/{process}: {', '.join(_unexplained(found))}")
    seen = {f for r in report["scripts"].values() for v in r["differ"].values() for f in v}
    by_reason: dict[str, set[str]] = {}
    for found in seen:
        reason = _reason(found)
        if reason is not None:
            by_reason.setdefault(reason, set()).add(_variable(found))
    for reason, names in by_reason.items():
        print(f"  explained, not counted: {', '.join(sorted(names))}: {reason}")


def _variable(found: str) -> str:
    return found.split(" ")[0].rstrip(":")


def _reason(found: str) -> str | None:
    return EXPLAINED.get(found) or EXPLAINED.get(_variable(found))


def _unexplained(found: list[str]) -> list[str]:
    return [f for f in found if _reason(f) is None]


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="keep the jobs' files in this directory")
    parser.add_argument("--only", help="these scripts, comma-separated (default: all)")
    args = parser.parse_args(argv)
    names = args.only.split(",") if args.only else list(SCRIPTS)
    unknown = [n for n in names if n not in SCRIPTS]
    if unknown:
        print(f"--only: unknown script {unknown[0]!r} (hint: {', '.join(SCRIPTS)})",
              file=sys.stderr)  # fmt: skip
        return 2
    return run_report(
        args.keep, RESULTS, lambda work, version: compare(work, version, names), print_report
    )


if __name__ == "__main__":
    raise SystemExit(main())
