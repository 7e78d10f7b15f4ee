"""How fast the `railyard` command answers, beside Slurm's commands in the same minutes.

Against a real `railyard up` on loopback (SQLite), each a new process as users type it (the
``railyard`` console script next to this interpreter):

- ``railyard --help``, ``version``, ``submit --hold --wrap true``, ``queue`` and ``run -- true``,
  each beside its Slurm peer (``sbatch --help``, ``sbatch --version``, ``sbatch --hold --wrap
  true``, ``squeue``, ``srun true``) when a Slurm controller answers here
  (``benchmarks/slurm/setup_local_slurm.sh``); the runs alternate, one of each per round, so
  both see the same load. Target (issue 21): within 2x of Slurm.
- the floor under any Python command: the interpreter starting and doing nothing
  (``python -c pass``), and with ``-I -S`` (no site, no ``.pth`` files);
- single submissions per second through the REST API, one request per job: over one
  keep-alive connection, and with a new connection per job.

Beside each wall time, the CPU time of the process itself (user + system): on a shared machine
the wall time follows everyone's load, the CPU time is what the command costs. Submitted jobs
are held on both systems, so they never run; ``run -- true`` and ``srun true`` run one job
each, on the node left free. Each figure is the median of ``--repeat`` rounds (after one warm-up).

    python benchmarks/bench_cli.py [--repeat 30] [--src OTHER_CHECKOUT/src --label before]

prints a table and writes ``benchmarks/results/bench_cli[-LABEL].json``. The Slurm jobs it
submitted are cancelled at the end.
"""

from __future__ import annotations

import argparse
import compileall
import http.client
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.integration.server_proc import ServerProcess

RESULTS = Path(__file__).parent / "results"
RAILYARD = str(Path(sys.executable).with_name("railyard"))
SLURM_JOB_NAME = "railyard-bench-cli"

# figure -> (railyard's command, Slurm's peer or None); issue 57 item 12's four and --help
CASES: dict[str, tuple[list[str], list[str] | None]] = {
    "--help": ([RAILYARD, "--help"], ["sbatch", "--help"]),
    "version": ([RAILYARD, "version"], ["sbatch", "--version"]),
    "submit --wrap": (
        [RAILYARD, "submit", "--hold", "-J", SLURM_JOB_NAME, "-o", "/dev/null", "--wrap", "true"],
        ["sbatch", "--hold", "-J", SLURM_JOB_NAME, "-o", "/dev/null", "--wrap", "true"],
    ),
    "queue": ([RAILYARD, "queue"], ["squeue"]),
    "run -- true": ([RAILYARD, "run", "--", "true"], ["srun", "true"]),
    "python -c pass": ([sys.executable, "-c", "pass"], None),
    "python -I -S -c pass": ([sys.executable, "-I", "-S", "-c", "pass"], None),
}
Samples = dict[str, list[float]]


def slurm_answers() -> bool:
    """A controller is up and answers ``squeue`` here."""
    if shutil.which("sbatch") is None or shutil.which("squeue") is None:
        return False
    try:
        return subprocess.run(["squeue", "-h"], capture_output=True, timeout=10).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one run of ``cmd`` as a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr[-500:]!r}")
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def rounds(env: dict[str, str], repeat: int, slurm: bool) -> dict[str, dict[str, Samples]]:
    """``repeat`` rounds, each running every command once, railyard's and Slurm's in turn."""
    out: dict[str, dict[str, Samples]] = {}
    for figure, (_, peer) in CASES.items():
        out[figure] = {"railyard": {"wall_s": [], "cpu_s": []}}
        if slurm and peer is not None:
            out[figure]["slurm"] = {"wall_s": [], "cpu_s": []}
    for i in range(repeat + 1):  # round 0 warms the page cache
        for figure, (ours, peer) in CASES.items():
            for side, cmd in (("railyard", ours), ("slurm", peer)):
                if side not in out[figure] or cmd is None:
                    continue
                wall, cpu = timed(cmd, env)
                if i:
                    out[figure][side]["wall_s"].append(wall)
                    out[figure][side]["cpu_s"].append(cpu)
    return out


def api_submits(server: ServerProcess, count: int, *, keep_alive: bool) -> float:
    """Submissions per second, one ``POST /v1/jobs`` per job, one client after another
    (``http.client``, so the figure is the server's, not a client library's set-up)."""
    headers = {"Authorization": f"Bearer {server.token}", "Content-Type": "application/json"}
    body = json.dumps({"command": ["true"], "priority": "low", "hold": True})  # never runs
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    start = time.perf_counter()
    for _ in range(count):
        if not keep_alive:
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        conn.request("POST", "/v1/jobs", body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        if response.status != 201:
            raise RuntimeError(f"submit answered {response.status}")
    conn.close()
    return count / (time.perf_counter() - start)


def table_rows(figures: dict[str, dict[str, Samples]]) -> list[dict[str, Any]]:
    rows = []
    for figure, sides in figures.items():
        ours = sides["railyard"]
        peer = sides.get("slurm")
        wall = statistics.median(ours["wall_s"])
        peer_wall = statistics.median(peer["wall_s"]) if peer else None
        rows.append(
            {
                "figure": figure,
                "railyard_wall_s": wall,
                "railyard_cpu_s": statistics.median(ours["cpu_s"]),
                "slurm_wall_s": peer_wall,
                "slurm_cpu_s": statistics.median(peer["cpu_s"]) if peer else None,
                "ratio": wall / peer_wall if peer_wall else None,
            }
        )
    return rows


def print_table(rows: list[dict[str, Any]], api: dict[str, float]) -> None:
    def ms(value: float | None) -> str:
        return "" if value is None else f"{value * 1e3:.1f}"

    print(f"{'median of a new process':24} {'wall ms':>8} {'cpu ms':>7} "
          f"{'Slurm wall':>10} {'Slurm cpu':>9} {'ratio':>6}")  # fmt: skip
    for r in rows:
        ratio = "" if r["ratio"] is None else f"{r['ratio']:.1f}x"
        print(
            f"{r['figure']:24} {ms(r['railyard_wall_s']):>8} {ms(r['railyard_cpu_s']):>7} "
            f"{ms(r['slurm_wall_s']):>10} {ms(r['slurm_cpu_s']):>9} {ratio:>6}"
        )
    for name, value in api.items():
        print(f"{name:40} {value:>9.0f}")


def cancel_slurm_jobs() -> None:
    subprocess.run(["scancel", "--name", SLURM_JOB_NAME], capture_output=True, check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--api-jobs", type=int, default=500)
    parser.add_argument("--src", type=Path, help="run this src directory instead")
    parser.add_argument("--label", default="", help="suffix of the results file")
    parser.add_argument("--no-slurm", action="store_true", help="skip Slurm even if it runs")
    args = parser.parse_args()
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: every module has its bytecode
    if args.src is not None:
        env["PYTHONPATH"] = str(args.src.resolve())
        os.environ["PYTHONPATH"] = env["PYTHONPATH"]  # the server process too
    compileall.compile_dir(args.src or Path(__file__).parents[1] / "src", quiet=1)
    slurm = not args.no_slurm and slurm_answers()
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(Path(tmp) / "state", gpus=8, cycle_interval_s=2.0)  # up default
        server.state_dir.mkdir()
        server.start()
        env |= {"RAILYARD_HOME": str(server.state_dir), "COLUMNS": "160"}
        env.pop("RAILYARD_URL", None)
        env.pop("RAILYARD_TOKEN", None)
        try:
            figures = rounds(env, args.repeat, slurm)
            api = {
                "API submissions/s, keep-alive": api_submits(
                    server, args.api_jobs, keep_alive=True
                ),
                "API submissions/s, new connection": api_submits(
                    server, args.api_jobs, keep_alive=False
                ),
            }
        finally:
            server.stop()
            if slurm:
                cancel_slurm_jobs()
    rows = table_rows(figures)
    print_table(rows, api)
    samples = {
        f: {side: {k: [round(x, 5) for x in v] for k, v in s.items()} for side, s in sides.items()}
        for f, sides in figures.items()
    }
    out = {
        "benchmark": "cli",
        "src": str(args.src or "installed"),
        "slurm": slurm,
        "repeat": args.repeat,
        "load_avg": os.getloadavg(),
        "rows": rows,
        "api": api,
        "samples": samples,
    }
    name = f"bench_cli{'-' + args.label if args.label else ''}.json"
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / name).write_text(json.dumps(out, indent=2))
    print(f"wrote {RESULTS / name}")


if __name__ == "__main__":
    main()
