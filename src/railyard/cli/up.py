"""``railyard up``: the control plane on this machine (store, scheduler loop, REST API)."""

from __future__ import annotations

import argparse
from pathlib import Path

from railyard.cli.args import Command, Parser, fail


def up(args: argparse.Namespace) -> None:
    """Start the control plane: store, scheduler loop and REST API, on this machine.

    Refuses (exit 2, nothing written or launched) when the port is in use or another server
    holds the state directory or database. Stopping it (Ctrl-C) leaves jobs running; the next
    `railyard up` adopts them.
    """
    from railyard.control.errors import ServiceError
    from railyard.control.paths import default_state_dir
    from railyard.control.server import SpoolTaken, StartupError, UpConfig, serve
    from railyard.control.values import parse_walltime
    from railyard.sched import SchedulerConfig

    try:
        estimate_s = parse_walltime(args.default_time) if args.default_time else None
    except ValueError as exc:
        fail(f"up: --default-time: {exc}")
    try:
        scheduler = SchedulerConfig(
            ordering=args.policy,
            backfill=args.backfill,
            preemption=args.preemption,
            default_walltime_s=estimate_s,
        )
    except (KeyError, ValueError) as exc:
        fail(f"up: --policy/--backfill/--preemption: {exc.args[0]} (hint: see railyard up --help)")
    if args.gpus is not None and args.gpus < 0:
        fail("up: --gpus: must be >= 0")
    if not 0 <= args.port <= 65535:
        fail(f"up: --port: {args.port} is not a port number (0-65535)")
    if args.cycle_interval <= 0:
        fail("up: --cycle-interval: must be > 0")
    config = UpConfig(
        state_dir=args.state_dir or default_state_dir(),
        database_url=args.database_url,
        host=args.host,
        port=args.port,
        gpus=args.gpus,
        flavor=args.flavor,
        cycle_interval_s=args.cycle_interval,
        scheduler=scheduler,
        blueprint=args.blueprint,
        spool_dir=args.spool_dir,
        metrics_open=args.metrics_open,
        **({"node_name": args.node_name} if args.node_name else {}),
    )
    try:
        serve(config)
    except (StartupError, SpoolTaken) as exc:
        fail(f"up: {exc}")
    except ServiceError as exc:  # a state directory or store that cannot be used
        fail(f"up: {exc.line()}")


def _up_args(p: Parser) -> None:
    p.add_argument("--gpus", type=int, help="declare this many GPUs (default: what NVML finds)")
    p.add_argument("--flavor", help="GPU flavor name for declared GPUs")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback)")
    p.add_argument("--port", type=int, default=8765, help="API port (default 8765)")
    p.add_argument("--database-url", help="SQLAlchemy URL, e.g. postgresql+psycopg://host/db")
    p.add_argument(
        "--state-dir", type=Path, help="the SQLite store and client.json (default ~/.railyard)"
    )
    p.add_argument(
        "--spool-dir",
        type=Path,
        help="job scripts, logs, checkpoints (default /var/spool/railyard as root, "
        "else STATE_DIR/jobs)",
    )
    p.add_argument(
        "--policy", default="fairshare", help="ordering: fairshare | fifo | priority | las"
    )
    p.add_argument("--backfill", default="easy", help="strict | none | easy | conservative")
    p.add_argument(
        "--preemption",
        default="on",
        help="off | reclaim | on (reclaim, and priority where queues opt in) | las",
    )
    p.add_argument(
        "--default-time",
        help="run-time estimate for jobs with no time limit and no history (D-HH:MM:SS)",
    )
    p.add_argument("--blueprint", help="the cluster's nodes and topology: a preset or YAML file")
    p.add_argument("--node-name", help="which blueprint node this machine is (default: hostname)")
    p.add_argument("--cycle-interval", type=float, default=2.0, help="seconds between idle cycles")
    p.add_argument(
        "--metrics-open",
        action="store_true",
        help="serve /metrics without a token (job names and users: a trusted network only; "
        "by default it needs an admin's token)",
    )


COMMANDS = (Command("up", up, _up_args),)
