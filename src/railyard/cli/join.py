"""``railyard join``: this machine joins the cluster's Ray cluster as a railyard node.

It wraps ``ray start`` with the custom resources the control plane reads (its railyard name,
GPU count and flavor; :mod:`railyard.exec.ray.rayagent`), so node agents can be pinned to it.
Ray does not manage the GPUs (``--num-gpus 0``): railyard places jobs and sets
``CUDA_VISIBLE_DEVICES`` itself. ``ray stop`` leaves; the node then goes down and its jobs
are requeued.

The cluster always requires a token (Ray's ``RAY_AUTH_MODE=token``): Ray runs code for any
client that reaches its ports, as the user Ray runs as (root on a railyard node), and its
GCS and raylet ports listen on every interface whatever address it advertises. ``--head``
makes the token when there is none; a worker without it is refused before ``ray start``.

Ray's temp and session directories are 0777 (Ray makes them so): they go inside a 0700
directory of root's (:mod:`railyard.exec.ray.raydirs`), made or checked before ``ray start``, so
no other account can plant a link where Ray, as root, writes its logs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from railyard.cli.args import Parser, fail
from railyard.cli.configfile import Configured, config_flag
from railyard.exec.ray.rayauth import (
    MODE_ENV,
    TOKEN_ENV,
    TOKEN_HINT,
    ProbeFailed,
    TokenError,
    find_token,
    make_token,
    probe,
    token_file,
)
from railyard.exec.ray.raydirs import (
    RAY_TMPDIR_ENV,
    RayDirError,
    ensure_private_dir,
    ray_base,
    ray_temp_dir,
)

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
DASHBOARD_HOST = "127.0.0.1"  # Ray's dashboard runs jobs too: never on the network by default


def join(args: argparse.Namespace) -> int:
    """Join this machine to the Ray cluster at HEAD (or start the head here with --head).

    The cluster requires a token: --head creates one (0600, at RAY_AUTH_TOKEN_PATH or
    ~/.ray/auth_token) when there is none; copy it to each worker before it joins.
    """
    from railyard.blueprint.local import catalogue_name
    from railyard.exec.ray.rayagent import FLAVOR_RESOURCE, GPUS_RESOURCE, NODE_RESOURCE
    from railyard.probe import detect_gpus

    if (args.address is None) == (not args.head):
        fail("join: give the head's address (HOST:PORT), or --head on the head machine")
    name = args.node_name or socket.gethostname()
    if not NAME_RE.match(name):
        fail(f"join: --node-name: {name!r} is not a node name (hint: letters, digits, . _ -)")
    if args.gpus is not None and args.gpus < 0:
        fail(f"join: --gpus: {args.gpus} is negative (hint: the GPUs this machine has, e.g. 8)")
    if not 0 < args.port < 65536:
        fail(f"join: --port: {args.port} is not a port number (hint: e.g. 6379)")
    extra = _ray_start_args(args.ray_start_args)
    env = dict(os.environ)
    token = _token(args, env)
    bind = args.bind or (_cluster_interface() if args.head else None)
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
    if not args.head:
        _check_head(args.address, env)
    temp_dir = _private_temp_dir(env)
    command = [ray, "start", "--num-gpus", "0", "--resources", json.dumps(resources),
               "--disable-usage-stats", "--temp-dir", str(temp_dir)]  # fmt: skip
    if bind:
        command += ["--node-ip-address", bind]
    if args.head:
        command += ["--head", "--port", str(args.port), "--dashboard-host", DASHBOARD_HOST]
    else:
        command += ["--address", args.address]
    command += extra
    print(f"railyard join: node {name} ({gpus} x {flavor} GPUs): {shlex.join(command)}", flush=True)
    done = subprocess.run(command, check=False, env=env)
    if done.returncode == 0 and args.head:
        where = f"{bind}:{args.port}" if bind else f"THIS-HOST:{args.port}"
        print(
            f"railyard join: this Ray cluster requires its token ({token}): whoever has it runs "
            "code as Ray's user on every node; Ray's ports listen on every interface: "
            "firewall them to the cluster network",
            flush=True,
        )
        copy = f"the same {TOKEN_ENV}" if token == TOKEN_ENV else f"a copy of {token} (0600)"
        print(
            f"railyard join: each worker, and `railyard up --ray {where}`, needs {copy}; "
            f"then on a worker: railyard join {where}",
            flush=True,
        )
    return done.returncode


def _token(args: argparse.Namespace, env: dict[str, str]) -> str:
    """Where the cluster token comes from, made here on the head when there is none; turns
    Ray's token authentication on in ``env`` (for ``ray start`` and all it starts)."""
    mode = env.get(MODE_ENV, "token")
    if mode.lower() != "token":
        fail(f"join: {MODE_ENV}={mode}: railyard's Ray cluster requires a token "
             f"(hint: unset {MODE_ENV})")  # fmt: skip
    try:
        source = find_token(env)
        if source is None and args.head:
            path = token_file(env)
            make_token(path)
            print(f"railyard join: created the cluster token {path} (mode 0600)", flush=True)
            source = str(path)
    except TokenError as exc:
        fail(f"join: {exc}")
    if source is None:
        fail(f"join: no token for the Ray cluster at {args.address}, which requires one "
             f"(hint: {TOKEN_HINT})")  # fmt: skip
    env[MODE_ENV] = "token"
    return source


def _private_temp_dir(env: dict[str, str]) -> Path:
    """Ray's temp directory, inside a base only this account can enter (made or checked
    here); ``RAY_TMPDIR`` in ``env`` set to that base, so what Ray starts agrees."""
    try:
        base, note = ensure_private_dir(ray_base(env))
    except RayDirError as exc:
        fail(f"join: {exc}", 1)
    if note:
        print(f"railyard join: {note}", flush=True)
    env[RAY_TMPDIR_ENV] = str(base)
    return ray_temp_dir(base)


def _check_head(address: str, env: dict[str, str]) -> None:
    """Refuse early, in one line, a head that is down, has no authentication, or refuses this
    machine's token (``ray start`` would retry for minutes)."""
    try:
        found = probe(address, env)
    except ProbeFailed as exc:
        fail(f"join: cannot reach a Ray head at {address}: {exc} (hint: HOST:PORT of "
             "`railyard join --head`)", 1)  # fmt: skip
    if found.mode != "token":
        fail(f"join: the Ray head at {address} runs without token authentication (hint: "
             "restart it with `railyard join --head`)", 1)  # fmt: skip
    if found.token != "accepted":
        fail(f"join: the Ray head at {address} refused this machine's token "
             f"(hint: {TOKEN_HINT})", 1)  # fmt: skip


def _ray_start_args(text: str | None) -> list[str]:
    """Extra ``ray start`` flags (ports, CPUs, object store); none that turns auth off."""
    try:
        words = shlex.split(text or "")
    except ValueError as exc:
        fail(f"join: --ray-start-args: {exc} (hint: quote it as one shell word)")
    for word in words:
        flag = word.split("=", 1)[0]
        if flag in ("--head", "--address", "--port", "--node-ip-address", "--dashboard-host"):
            fail(f"join: --ray-start-args: {flag} is railyard's to set "
                 "(hint: --head, HEAD, --port, --bind)")  # fmt: skip
        if flag == "--temp-dir":
            fail(f"join: --ray-start-args: --temp-dir is railyard's to set (hint: set "
                 f"{RAY_TMPDIR_ENV} to a directory only this account can write)")  # fmt: skip
    return words


def _cluster_interface() -> str | None:
    """This machine's address on the route out (the interface other nodes reach it by), as
    Ray picks it; None when there is no route (Ray then picks)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe_socket:
        try:
            probe_socket.connect(("192.0.2.1", 9))  # TEST-NET-1: nothing is sent on UDP connect
            address: str = probe_socket.getsockname()[0]
        except OSError:
            return None
    return address


def _args(p: Parser) -> None:
    config_flag(p)
    p.add_argument("address", nargs="?", help="the Ray head, HOST:PORT (e.g. 10.0.0.1:6379)")
    p.add_argument("--head", action="store_true", help="start the Ray head here and join it")
    p.add_argument("--port", type=int, default=6379, help="the head's port (with --head)")
    p.add_argument(
        "--bind",
        metavar="ADDRESS",
        help="this node's address on the cluster network, which Ray advertises (default: the "
        "interface of the route out); Ray's ports still listen on every interface",
    )
    p.add_argument("--node-name", help="this node's name (default: hostname; the blueprint's)")
    p.add_argument("--gpus", type=int, help="GPUs this machine offers (default: NVML's count)")
    p.add_argument("--flavor", help="GPU flavor (default: NVML's model, else virtual)")
    p.add_argument(
        "--ray-start-args",
        metavar="FLAGS",
        help="more `ray start` flags, one quoted word (e.g. '--num-cpus 8 --metrics-export-port "
        "8080')",
    )


COMMANDS = (Configured("join", join, _args),)
