"""``railyard join``: this machine joins the cluster's Ray cluster as a railyard node.

It wraps ``ray start`` with the custom resources the control plane reads (its railyard name,
GPU count and flavor; :mod:`railyard.exec.rayagent`), so node agents can be pinned to it.
Ray does not manage the GPUs (``--num-gpus 0``): railyard places jobs and sets
``CUDA_VISIBLE_DEVICES`` itself. ``ray stop`` leaves; the node then goes down and its jobs
are requeued.
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
from pathlib import Path

from railyard.cli.args import Command, Parser, fail

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


def join(args: argparse.Namespace) -> int:
    """Join this machine to the Ray cluster at HEAD (or start the head here with --head)."""
    from railyard.blueprint.local import catalogue_name
    from railyard.exec.rayagent import FLAVOR_RESOURCE, GPUS_RESOURCE, NODE_RESOURCE
    from railyard.probe import detect_gpus

    if (args.address is None) == (not args.head):
        fail("join: give the head's address (HOST:PORT), or --head on the head machine")
    name = args.node_name or socket.gethostname()
    if not NAME_RE.match(name):
        fail(f"join: --node-name: {name!r} is not a node name (hint: letters, digits, . _ -)")
    if args.gpus is not None and args.gpus < 0:
        fail(f"join: --gpus: {args.gpus} is negative (hint: the GPUs this machine has, e.g. 8)")
    found = detect_gpus()
    gpus = args.gpus if args.gpus is not None else len(found)
    flavor = args.flavor or (catalogue_name(found[0].name) if found else None) or "virtual"
    if not NAME_RE.match(flavor):
        fail(f"join: --flavor: {flavor!r} is not a flavor name (hint: e.g. H100-SXM-80GB)")
    resources = {f"{NODE_RESOURCE}{name}": 1000, f"{FLAVOR_RESOURCE}{flavor}": 1}
    if gpus:
        resources[GPUS_RESOURCE] = gpus
    ray = shutil.which("ray", path=str(Path(sys.executable).parent)) or shutil.which("ray")
    if ray is None:
        fail("join: the ray command is not installed (hint: pip install 'railyard[ray]')")
    command = [ray, "start", "--num-gpus", "0", "--resources", json.dumps(resources),
               "--disable-usage-stats"]  # fmt: skip
    if args.head:
        command += ["--head", "--port", str(args.port)]
    else:
        command += ["--address", args.address]
    env = dict(os.environ)
    token_file = Path(env.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")
    if not args.head and "RAY_AUTH_MODE" not in env and ("RAY_AUTH_TOKEN" in env
                                                         or token_file.exists()):  # fmt: skip
        env["RAY_AUTH_MODE"] = "token"  # the head made one: present it (Ray 2.5x+ token auth)
    print(f"railyard join: node {name} ({gpus} x {flavor} GPUs): {' '.join(command)}", flush=True)
    done = subprocess.run(command, check=False, env=env)
    if done.returncode == 0 and args.head and token_file.exists():
        print(
            f"railyard join: workers need this cluster's token: copy {token_file} to the same "
            "path on each worker (or export RAY_AUTH_TOKEN) before `railyard join HEAD:PORT`",
            flush=True,
        )
    return done.returncode


def _args(p: Parser) -> None:
    p.add_argument("address", nargs="?", help="the Ray head, HOST:PORT (e.g. 10.0.0.1:6379)")
    p.add_argument("--head", action="store_true", help="start the Ray head here and join it")
    p.add_argument("--port", type=int, default=6379, help="the head's port (with --head)")
    p.add_argument("--node-name", help="this node's name (default: hostname; the blueprint's)")
    p.add_argument("--gpus", type=int, help="GPUs this machine offers (default: NVML's count)")
    p.add_argument("--flavor", help="GPU flavor (default: NVML's model, else virtual)")


COMMANDS = (Command("join", join, _args),)
