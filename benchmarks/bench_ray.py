"""Launch and failure timings of `railyard up --ray` on a local multi-node Ray cluster.

Measures, on Ray's own test cluster (a head and two joined nodes as `railyard join` declares
them, all on this machine) with a real `railyard up --ray` server:

- submit to all ranks running: from `railyard submit` (the CLI, as a user types it) to the
  last rank's first line, for a 1-node 1-task job and a 2-node job (one task per node);
- the same script through `ray job submit --no-wait` (Ray's CLI; needs `ray[default]` for the
  job server), from the command to the script's first line;
- node loss to requeue: from a node leaving Ray (its raylet and ranks killed) to the job
  recorded as requeued (`restart_count` 1 in the API).

Prints a table and writes benchmarks/results/bench_ray.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import ray
from ray.cluster_utils import Cluster

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.integration.server_proc import ServerProcess
from tests.multinode.conftest import join_resources

STAMP = "import os, sys, time; open(os.path.join(sys.argv[1], 'r%s-%s' % (os.environ.get('RANK', '0'), os.getpid())), 'w').write(repr(time.time()))"  # noqa: E501


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait(done: Any, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark step timed out")
        time.sleep(0.02)


def stamps(out: Path, expected: int) -> float:
    wait(lambda: len(list(out.iterdir())) >= expected)
    time.sleep(0.05)
    return max(float(p.read_text() or 0) for p in out.iterdir())


def railyard_launch(server: ServerProcess, env: dict[str, str], nodes: int, out: Path) -> float:
    args = [sys.executable, "-m", "railyard", "submit", "--nodes", str(nodes),
            "--gpus-per-node", "1", "--ntasks-per-node", "1", "--",
            sys.executable, "-c", STAMP, str(out)]  # fmt: skip
    t0 = time.time()
    subprocess.run(args, env=env, check=True, capture_output=True)
    return stamps(out, nodes) - t0


def ray_job_launch(dashboard: str, out: Path) -> float:
    args = ["ray", "job", "submit", "--address", dashboard, "--no-wait", "--",
            sys.executable, "-c", STAMP, str(out)]  # fmt: skip
    t0 = time.time()
    subprocess.run(args, check=True, capture_output=True, env={**os.environ})
    return stamps(out, 1) - t0


def node_loss(server: ServerProcess, cluster: Cluster, nodes: dict[str, Any], env: dict[str, str],
              victim: str) -> float:  # fmt: skip
    body = {"command": [sys.executable, "-c", "import time; time.sleep(600)"], "nodes": 2,
            "gpus_per_node": 1, "ntasks_per_node": 1, "requeue": True}  # fmt: skip
    [made] = server.request("POST", "/v1/jobs", json=body)
    job_id = made["id"]
    wait(lambda: server.request("GET", f"/v1/jobs/{job_id}")["state"] == "running")
    placement = server.request("GET", f"/v1/jobs/{job_id}")["placement"]
    victim = [n for n in placement if n in nodes][-1]
    groups = [
        pg
        for entry in ray.util.list_named_actors(all_namespaces=True)
        if entry["name"].endswith(f"-{victim}") and entry["name"].startswith(f"railyard-{job_id}-")
        for pg in ray.get(ray.get_actor(entry["name"], namespace=entry["namespace"])
                          .process_groups.remote())
    ]  # fmt: skip
    t0 = time.time()
    cluster.remove_node(nodes.pop(victim))
    for pgid in groups:
        os.killpg(pgid, signal.SIGKILL)
    wait(lambda: server.request("GET", f"/v1/jobs/{job_id}")["restart_count"] >= 1)
    took = time.time() - t0
    server.call("DELETE", f"/v1/jobs/{job_id}")
    nodes[victim] = cluster.add_node(num_cpus=1, resources=join_resources(victim, 2))
    cluster.wait_for_nodes()
    wait(lambda: any(n["name"] == victim and n["state"] == "ready"
                     for n in server.request("GET", "/v1/nodes")))  # fmt: skip
    return took


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"median_s": statistics.median(ordered), "p90_s": ordered[int(0.9 * (len(ordered) - 1))],
            "runs": len(ordered)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    have_job_server = shutil.which("ray") is not None and _has_dashboard()
    dash_port = free_port()
    base = tempfile.mkdtemp(prefix="ryray-", dir="/tmp")  # 0700: `up --ray` refuses 0777 sessions
    head: dict[str, Any] = {"num_cpus": 1, "temp_dir": os.path.join(base, "ray")}
    if have_job_server:
        head |= {"include_dashboard": True, "dashboard_port": dash_port}
    cluster = Cluster(initialize_head=True, head_node_args=head)
    nodes = {n: cluster.add_node(num_cpus=1, resources=join_resources(n, 2)) for n in ("b1", "b2")}
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, namespace="railyard", log_to_driver=False)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp) / "state"
        state.mkdir()
        server = ServerProcess(state, gpus=None, extra=("--ray", cluster.address),
                               cycle_interval_s=2.0)  # fmt: skip
        server.start(timeout_s=90)
        env = {**os.environ, "RAILYARD_URL": server.url, "RAILYARD_TOKEN": server.token}
        try:
            for label, count in (("railyard, 1 node x 1 task", 1), ("railyard, 2 nodes", 2)):
                runs = []
                for i in range(args.runs):
                    out = Path(tmp) / f"{count}-{i}"
                    out.mkdir()
                    runs.append(railyard_launch(server, env, count, out))
                results[label] = summary(runs)
            if have_job_server:
                runs = []
                for i in range(args.runs):
                    out = Path(tmp) / f"ray-{i}"
                    out.mkdir()
                    runs.append(ray_job_launch(f"http://127.0.0.1:{dash_port}", out))
                results["ray job submit, 1 process"] = summary(runs)
            losses = [node_loss(server, cluster, nodes, env, "b2") for _ in range(3)]
            results["node loss to requeue"] = summary(losses)
        finally:
            server.stop()
            ray.shutdown()
            cluster.shutdown()
    print(f"{'what':<30}{'median s':>10}{'p90 s':>10}{'runs':>6}")
    for label, r in results.items():
        print(f"{label:<30}{r['median_s']:>10.2f}{r['p90_s']:>10.2f}{r['runs']:>6}")
    out_dir = Path(__file__).parent / "results"
    out_dir.mkdir(exist_ok=True)
    (out_dir / "bench_ray.json").write_text(json.dumps(results, indent=2) + "\n")


def _has_dashboard() -> bool:
    try:
        import aiohttp  # noqa: F401  (ray[default]: the job server needs it)
    except ImportError:
        print("note: ray[default] is not installed; `ray job submit` is not compared")
        return False
    return True


if __name__ == "__main__":
    main()
