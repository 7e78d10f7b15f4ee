"""``railyard up``: the control plane on this machine (store, scheduler loop, REST API)."""

from __future__ import annotations

import argparse
import gc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from railyard.cli.args import Parser, fail, parse_duration
from railyard.cli.configfile import Configured, config_flag
from railyard.cli.tuning import HELP as TUNING_HELP
from railyard.cli.tuning import tuning
from railyard.client.bounds import DEFAULT_MAX_JOBS_PER_USER, DEFAULT_MAX_TASKS_PER_JOB
from railyard.client.values import MAX_ARRAY_TASKS

if TYPE_CHECKING:
    from railyard.blueprint.partitions import Partition
    from railyard.control.api.edge import EdgeLimits
    from railyard.sched.health import HealthPolicy


def up(args: argparse.Namespace) -> None:
    """Start the control plane: store, scheduler loop and REST API, on this machine.

    Refuses (exit 2, nothing written or launched) when the port is in use or another server
    holds the state directory or database. Stopping it (Ctrl-C) leaves jobs running; the next
    `railyard up` adopts them.
    """
    with _without_gc():
        from railyard.client.config import default_state_dir
        from railyard.client.values import parse_walltime
        from railyard.control.errors import ServiceError
        from railyard.control.metrics.sampler import SamplerConfig
        from railyard.control.process.spool import SpoolTaken
        from railyard.control.server import StartupError, UpConfig, serve
        from railyard.control.store.lease import STEP_DOWN_EXIT, SteppedDown
        from railyard.control.usecases.sizebounds import SiteLimits
        from railyard.sched import SchedulerConfig
        from railyard.web.routes import router as dashboard
        from railyard.web.whatif import twin

    try:
        estimate_s = parse_walltime(args.default_time) if args.default_time else None
    except ValueError as exc:
        fail(f"up: --default-time: {exc}")
    try:
        knobs = tuning(
            quantum=args.quantum,
            service_levels=args.service_levels,
            victim_searches=args.victim_searches,
            victim_searches_per_queue=args.victim_searches_per_queue,
            greedy_hold=args.greedy_hold,
            time_slice_by=args.time_slice_by,
            starved_unsliced=args.starved_unsliced,
            unsliced_after=args.unsliced_after,
            slice_level_gap=args.slice_level_gap,
            unsliced_after_restarts=args.unsliced_after_restarts,
            starving_slices=args.starving_slices,
            starvation_limit=args.starvation_limit,
        )
    except ValueError as exc:
        fail(f"up: {exc}")
    try:
        scheduler = SchedulerConfig.of(
            ordering=args.policy,
            backfill=args.backfill,
            preemption=args.preemption,
            default_walltime_s=estimate_s,
            **knobs,
        )
    except (KeyError, ValueError) as exc:
        fail(f"up: --policy/--backfill/--preemption: {exc.args[0]} (hint: see railyard up --help)")
    if args.gpus is not None and args.gpus < 0:
        fail("up: --gpus: must be >= 0")
    if args.cpus is not None and not 1 <= args.cpus <= 1_000_000:
        fail("up: --cpus: must be between 1 and 1000000")
    if not 0 <= args.port <= 65535:
        fail(f"up: --port: {args.port} is not a port number (0-65535)")
    if args.cycle_interval <= 0:
        fail("up: --cycle-interval: must be > 0")
    if not 0 < args.start_stall <= 86400:
        fail("up: --start-stall: must be in (0, 86400] seconds")
    if not 0 < args.terminal_linger <= 86400:
        fail("up: --terminal-linger: must be in (0, 86400] seconds")
    if not 0 <= args.sample_interval <= 3600:
        fail("up: --sample-interval: must be in [0, 3600] seconds (0: no sampling)")
    samples = SamplerConfig(
        interval_s=args.sample_interval,
        retention_s=parse_duration(args.sample_retention, "up: --sample-retention"),
    )
    health = _health_policy(args)
    floor = args.health_across_floor
    if floor is not None and not 0 < floor < 1e6:
        fail(f"up: --health-across-floor: {floor:g} GB/s is out of range (hint: e.g. 40)")
    partitions = _partitions(args)
    try:
        limits = SiteLimits(args.max_tasks_per_job, args.max_array_size, args.max_jobs_per_user)
    except ValueError as exc:
        fail(f"up: --{str(exc).replace('_', '-')}")
    edge = _edge_limits(args)
    if args.standby and not (args.database_url or "").startswith("postgres"):
        fail("up: --standby: needs a PostgreSQL store; SQLite serves one server "
             "(hint: --database-url postgresql+psycopg://HOST/DB on every server)")  # fmt: skip
    if args.ray is not None:
        _check_ray(args)
    elif args.insecure_ray:
        fail("up: --insecure-ray: only with --ray (hint: railyard up --ray HOST:PORT)")
    config = UpConfig(
        state_dir=args.state_dir or default_state_dir(),
        database_url=args.database_url,
        standby=args.standby,
        host=args.host,
        port=args.port,
        gpus=args.gpus,
        cpus=args.cpus,
        flavor=args.flavor,
        cycle_interval_s=args.cycle_interval,
        start_stall_s=args.start_stall,
        terminal_linger_s=args.terminal_linger,
        samples=samples,
        scheduler=scheduler,
        blueprint=args.blueprint,
        spool_dir=args.spool_dir,
        metrics_open=args.metrics_open,
        health_fail_requeues=args.health_fail == "requeue",
        health=health,
        health_across_floor_gbps=floor,
        health_across_interval_s=parse_duration(
            args.health_across_interval, "up: --health-across-interval"
        )
        if args.health_across_interval
        else None,
        ray_address=args.ray,
        ray_insecure=args.insecure_ray,
        partitions=partitions,
        limits=limits,
        extra_routers=() if args.no_dashboard else (dashboard(scheduler),),
        whatif=twin(scheduler),
        health_checks=tuple(args.health_checks.split(","))
        if health and args.health_checks not in ("all", "")
        else (),
        container_registries=_registries(args.container_registry or ()),
        edge=edge,
        **({"node_name": args.node_name} if args.node_name else {}),
    )
    try:
        serve(config)
    except (StartupError, SpoolTaken) as exc:
        fail(f"up: {exc}")
    except SteppedDown as exc:  # its jobs run on under the new active
        fail(f"up: {exc}; stepped down", STEP_DOWN_EXIT)
    except ServiceError as exc:  # a state directory or store that cannot be used
        fail(f"up: {exc.line()}")


@contextmanager
def _without_gc() -> Iterator[None]:
    """The server's imports without the cyclic collector: they make some million objects that
    live as long as the process, which its passes would walk again and again for nothing
    (~90 ms of a start's CPU). It is on again before anything runs, whatever happened."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def _registries(hosts: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """``--container-registry``: each a HOST or HOST:PORT, no scheme and no path."""
    for host in hosts:
        if not host or "/" in host or any(c.isspace() for c in host):
            fail(f"up: --container-registry: {host!r} is not a registry host (hint: e.g. nvcr.io)")
    return tuple(h.lower() for h in hosts)


def _partitions(args: argparse.Namespace) -> tuple[tuple[str, Partition], ...]:
    """``--partition`` lines (slurm.conf's), each a queue below ``default``; a blueprint
    declares its own in ``partitions:`` instead."""
    from railyard.blueprint.partitions import parse_partition

    lines: list[str] = args.partition or []
    if lines and args.blueprint and _blueprint_partitions(args.blueprint):
        fail("up: --partition: the blueprint declares partitions (hint: its partitions: section)")
    declared: dict[str, Partition] = {}
    for line in lines:
        try:
            name, partition = parse_partition(line)
        except ValueError as exc:
            fail(f"up: --partition: {exc}")
        if name in declared:
            fail(f"up: --partition: {name} is declared twice (hint: one line per partition)")
        if partition.pool is not None:
            fail(f"up: --partition: {name}: Pool= needs a blueprint's node pools "
                 "(hint: declare it in the blueprint's partitions:)")  # fmt: skip
        defaults = [n for n, p in declared.items() if p.default]
        if partition.default and defaults:
            fail(f"up: --partition: {name}: a second Default=YES (after {defaults[0]})")
        declared[name] = partition
    return tuple(declared.items())


def _blueprint_partitions(name: str) -> list[str]:
    """The partitions a blueprint declares (none where it cannot be read: `serve` says why)."""
    from railyard.blueprint import BlueprintError, load

    try:
        return list(load(name).blueprint.partitions)
    except BlueprintError:
        return []


def _edge_limits(args: argparse.Namespace) -> EdgeLimits:
    """The API's connection caps and timeouts (`control.api.edge`)."""
    from railyard.control.api.edge import EdgeLimits

    for flag, count in (("--max-connections", args.max_connections),
                        ("--max-connections-per-peer", args.max_connections_per_peer)):  # fmt: skip
        if count is not None and not 1 <= count <= 1_000_000:  # None: the budget's
            fail(f"up: {flag}: {count} is not between 1 and 1000000")
    for flag, t_s in (("--header-timeout", args.header_timeout),
                      ("--body-timeout", args.body_timeout)):  # fmt: skip
        if not 0 < t_s <= 3600:
            fail(f"up: {flag}: must be in (0, 3600] seconds")
    return EdgeLimits(
        max_connections=args.max_connections,
        max_connections_per_peer=args.max_connections_per_peer,
        header_timeout_s=args.header_timeout,
        body_timeout_s=args.body_timeout,
    )


def _check_ray(args: argparse.Namespace) -> None:
    """With --ray, machines declare themselves when they join: no local GPUs or node name."""
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        fail("up: --ray needs the ray package (hint: pip install 'railyard[ray]')")
    for flag, value in (("--gpus", args.gpus), ("--cpus", args.cpus), ("--flavor", args.flavor),
                        ("--node-name", args.node_name)):  # fmt: skip
        if value is not None:
            fail(
                f"up: {flag}: with --ray each machine declares itself when it joins "
                "(hint: railyard join HEAD --node-name N --gpus G --flavor F on that machine)"
            )


def _health_policy(args: argparse.Namespace) -> HealthPolicy | None:
    """The scheduled checks (`sched.health.HealthPolicy`), or None when --health-checks is off."""
    if args.health_checks in (None, "none"):
        if args.health_interval is not None:
            fail("up: --health-interval needs --health-checks (hint: --health-checks all)")
        return None
    # the checks, and the twin they are judged by, load only for a server that runs them
    from railyard.health.checks import CHECKS
    from railyard.sched.health import HealthPolicy

    if args.health_checks != "all":
        names = [n.strip() for n in args.health_checks.split(",")]
        unknown = [n for n in names if n not in CHECKS]
        if unknown or not names:
            fail(f"up: --health-checks: unknown check {unknown[0] if unknown else ''!r} "
                 f"(hint: all, none, or some of {', '.join(CHECKS)})")  # fmt: skip
    interval_s = (
        parse_duration(args.health_interval, "up: --health-interval")
        if args.health_interval
        else 6 * 3600.0
    )
    return HealthPolicy(
        interval_s=interval_s,
        gate_joins=not args.no_health_gate,
        fail_requeues=args.health_fail == "requeue",
    )


def _up_args(p: Parser) -> None:
    config_flag(p)
    p.add_argument("--gpus", type=int, help="declare this many GPUs (default: what NVML finds)")
    p.add_argument(
        "--cpus", type=int, help="declare this many CPUs, as Slurm's CPUs= (default: counted)"
    )
    p.add_argument("--flavor", help="GPU flavor name for declared GPUs")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback)")
    p.add_argument("--port", type=int, default=8765, help="API port (default 8765)")
    p.add_argument("--database-url", help="SQLAlchemy URL, e.g. postgresql+psycopg://host/db")
    p.add_argument(
        "--standby",
        action="store_true",
        help="PostgreSQL: when another server is active, wait and take over when it stops "
        "(run every server of the group with it)",
    )
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
    p.add_argument("--quantum", type=float, metavar="S", help=TUNING_HELP["quantum"])
    p.add_argument("--service-levels", metavar="H,H", help=TUNING_HELP["service_levels"])
    p.add_argument("--victim-searches", type=int, metavar="N", help=TUNING_HELP["victim_searches"])
    p.add_argument(
        "--victim-searches-per-queue",
        type=int,
        metavar="N",
        help=TUNING_HELP["victim_searches_per_queue"],
    )
    p.add_argument("--greedy-hold", metavar="TIME", help=TUNING_HELP["greedy_hold"])
    p.add_argument("--time-slice-by", metavar="RANK", help=TUNING_HELP["time_slice_by"])
    p.add_argument("--starved-unsliced", metavar="TIME", help=TUNING_HELP["starved_unsliced"])
    p.add_argument("--unsliced-after", metavar="TIME", help=TUNING_HELP["unsliced_after"])
    p.add_argument("--slice-level-gap", type=int, metavar="N", help=TUNING_HELP["slice_level_gap"])
    p.add_argument(
        "--unsliced-after-restarts", metavar="N", help=TUNING_HELP["unsliced_after_restarts"]
    )
    p.add_argument(
        "--starving-slices",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=TUNING_HELP["starving_slices"],
    )
    p.add_argument("--starvation-limit", metavar="TIME", help=TUNING_HELP["starvation_limit"])
    p.add_argument("--blueprint", help="the cluster's nodes and topology: a preset or YAML file")
    p.add_argument(
        "--partition",
        action="append",
        metavar="LINE",
        help="a Slurm partition as a queue below default, as slurm.conf says it (repeat): "
        "'PartitionName=debug MaxTime=30:00 DefaultTime=10:00 Default=NO'",
    )
    p.add_argument("--node-name", help="which blueprint node this machine is (default: hostname)")
    p.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run jobs on the machines of a Ray cluster: its address, or auto (RAY_ADDRESS or "
        "the head on this machine); machines join with `railyard join`",
    )
    p.add_argument(
        "--insecure-ray",
        action="store_true",
        help="with --ray, accept a Ray cluster without token authentication (anyone who "
        "reaches its ports runs code as its user: a trusted network only)",
    )
    p.add_argument("--cycle-interval", type=float, default=2.0, help="seconds between idle cycles")
    p.add_argument(
        "--start-stall",
        type=float,
        default=30.0,
        help="/healthz fails when no job started for this many seconds while some could "
        "(decided to start and not launched yet)",
    )
    p.add_argument(
        "--terminal-linger",
        type=float,
        default=30.0,
        help="seconds a `railyard run` job outlives its lost client (then it is hung up)",
    )
    p.add_argument(
        "--sample-interval",
        type=float,
        default=10.0,
        help="seconds between readings of running jobs' GPUs and processes, kept for the "
        "job page and `railyard stats` (0: none)",
    )
    p.add_argument(
        "--sample-retention",
        default="7d",
        help="how long those readings are kept (e.g. 7d, 12h; default 7d)",
    )
    p.add_argument(
        "--metrics-open",
        action="store_true",
        help="serve /metrics without a token (job names and users: a trusted network only; "
        "by default it needs an admin's token)",
    )
    p.add_argument(
        "--no-dashboard", action="store_true", help="do not serve the web dashboard at /ui/"
    )
    p.add_argument(
        "--max-connections", type=int, metavar="N",
        help="API connections at most, all clients together (default: what the descriptor "
        "limit serves, raised to its hard limit at start, up to 16384); past it the oldest "
        "connection still waiting for a request is closed",
    )  # fmt: skip
    p.add_argument(
        "--max-connections-per-peer", type=int, default=1024, metavar="N",
        help="API connections at most from one address (default 1024)",
    )  # fmt: skip
    p.add_argument(
        "--header-timeout", type=float, default=15.0, metavar="S",
        help="seconds a connection may take to send a request's headers (default 15)",
    )  # fmt: skip
    p.add_argument(
        "--body-timeout", type=float, default=30.0, metavar="S",
        help="seconds a request's body may pause between two pieces (default 30)",
    )  # fmt: skip
    p.add_argument(
        "--health-fail",
        choices=("drain", "requeue"),
        default="drain",
        help="what a failed health check does to a node's running jobs: let them finish "
        "(drain, the default) or requeue them from their checkpoints (requeue); a fatal "
        "error (XID 79, uncorrectable ECC) always requeues",
    )
    p.add_argument(
        "--health-checks",
        metavar="CHECKS",
        help="run these health checks (comma-separated, or all) on each node when it has no "
        "job: at start before it takes work, then every --health-interval (default: none)",
    )
    p.add_argument(
        "--health-interval", metavar="DURATION", help="between checks of a node (default 6h)"
    )
    p.add_argument(
        "--no-health-gate",
        action="store_true",
        help="let a node take jobs before its first health check",
    )
    p.add_argument(
        "--health-across-floor", type=float, metavar="GBPS",
        help="judge across-node all_reduce tests (railyard health --across) against this bus "
        "bandwidth, GB/s, instead of the twin's prediction for the blueprint's fabric",
    )  # fmt: skip
    p.add_argument(
        "--max-tasks-per-job", type=int, metavar="N", default=DEFAULT_MAX_TASKS_PER_JOB,
        help="refuse at submit a job of more tasks (ranks) than this, whatever the nodes "
        f"could hold (default {DEFAULT_MAX_TASKS_PER_JOB})",
    )  # fmt: skip
    p.add_argument(
        "--max-array-size", type=int, metavar="N", default=MAX_ARRAY_TASKS,
        help="refuse at submit an array of more tasks than this (Slurm's MaxArraySize, "
        f"counted in tasks; default and most {MAX_ARRAY_TASKS})",
    )  # fmt: skip
    p.add_argument(
        "--max-jobs-per-user", type=int, metavar="N", default=DEFAULT_MAX_JOBS_PER_USER,
        help="refuse at submit a plain user's job past this many of theirs pending or running, "
        "array tasks counted one by one (Slurm's MaxSubmitJobsPerUser; default "
        f"{DEFAULT_MAX_JOBS_PER_USER})",
    )  # fmt: skip
    p.add_argument(
        "--health-across-interval", metavar="DURATION",
        help="also sweep the idle ready nodes with across-node all_reduce tests this often, "
        "from the start (e.g. 24h; default: only when asked)",
    )  # fmt: skip
    p.add_argument(
        "--container-registry", action="append", metavar="HOST",
        help="a registry containers may pull from (repeat; HOST or HOST:PORT); default: none, "
        "jobs run the images the nodes have. A loopback or private host must be listed here",
    )  # fmt: skip


COMMANDS = (Configured("up", up, _up_args),)
