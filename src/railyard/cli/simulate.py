"""`railyard simulate`: run policies side by side on a trace or a synthetic workload.

Thin: parse, build `sim.sweep.Scenario`s, run them (processes, or Ray with ``--ray``), print a
table or JSON, write plots if asked. Bad input is one line on stderr and exit code 2.
Register with ``app.command()(simulate)`` or :func:`register`.
"""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from railyard.blueprint import BlueprintError, load
from railyard.cli.tuning import HELP as TUNING_HELP
from railyard.cli.tuning import tuning
from railyard.client.values import parse_walltime
from railyard.sched.health import HealthPolicy
from railyard.sim.arrivals import rescale_load
from railyard.sim.checkpoints import CheckpointPolicy, IntervalRule
from railyard.sim.cluster import gpu_flavor
from railyard.sim.health import Degradation, HealthWorld
from railyard.sim.images import GB, ImageWorld, parse_image_size
from railyard.sim.jobrecords import parse_window, write_csv
from railyard.sim.plots import HINT as PLOT_HINT
from railyard.sim.plots import have_matplotlib, write_plots
from railyard.sim.sweep import (
    POLICIES,
    Scenario,
    ray_available,
    run_scenario,
    scenario_nodes,
    sweep,
)
from railyard.sim.synthetic import PROFILES, WALLTIME_MODES
from railyard.sim.traces import FORMATS, TraceError, load_trace


def _fail(message: str) -> NoReturn:
    print(f"railyard: {message}", file=sys.stderr)
    raise typer.Exit(2)


def simulate(
    blueprint: Annotated[
        str | None,
        typer.Argument(help="a preset name or a blueprint YAML file (or give --nodes)"),
    ] = None,
    nodes: Annotated[
        int | None, typer.Option(help="a flat cluster of this many nodes, without a blueprint")
    ] = None,
    gpus_per_node: Annotated[int, typer.Option(help="GPUs per node of --nodes")] = 8,
    gpu: Annotated[
        str, typer.Option(help="GPU model of --nodes, e.g. H100, A100, B200 (the catalog's)")
    ] = "H100",
    trace: Annotated[Path | None, typer.Option(help="a job trace file (or PAI folder)")] = None,
    fmt: Annotated[
        str, typer.Option("--format", help=f"trace format: {' | '.join(FORMATS)}")
    ] = "railyard",
    synthetic: Annotated[
        str | None, typer.Option(help=f"synthetic profile: {' | '.join(PROFILES)}")
    ] = None,
    jobs: Annotated[int, typer.Option(help="synthetic jobs")] = 1000,
    max_gpus: Annotated[
        int | None, typer.Option(help="synthetic jobs' largest gang, e.g. 8 (one node)")
    ] = None,
    load_: Annotated[
        float | None,
        typer.Option(
            "--load",
            help="offered load (GPU-hours asked per hour over cluster GPUs): a synthetic "
            "workload's (default 0.9), or a trace's arrivals rescaled to it",
        ),
    ] = None,
    jobs_out: Annotated[
        Path | None,
        typer.Option(help="write one CSV row per job per run (times, waits, evictions, lost work)"),
    ] = None,
    measure_jobs: Annotated[
        str | None,
        typer.Option(
            help="K:L: measure only jobs K..L-1 in arrival order (Gavel's steady-state window)"
        ),
    ] = None,
    walltime: Annotated[
        str, typer.Option(help=f"synthetic walltime estimates: {' | '.join(WALLTIME_MODES)}")
    ] = "noisy",
    policy: Annotated[
        str, typer.Option(help=f"comma-separated: {', '.join(POLICIES)}")
    ] = "fifo,easy,fairshare+easy",
    seed: Annotated[int, typer.Option(help="first seed")] = 0,
    seeds: Annotated[int, typer.Option(help="number of seeds (seed, seed+1, ...)")] = 1,
    failures: Annotated[
        bool, typer.Option("--failures/--no-failures", help="node failures (Llama 3 rate)")
    ] = False,
    checkpoint: Annotated[str, typer.Option(help="young | daly | fixed | none")] = "young",
    checkpoint_cost: Annotated[float, typer.Option(help="seconds per checkpoint")] = 60.0,
    restart_overhead: Annotated[float, typer.Option(help="seconds per restart")] = 300.0,
    coalesce: Annotated[float, typer.Option(help="seconds events wait for one cycle")] = 0.0,
    preemptible: Annotated[
        bool, typer.Option("--preemptible-jobs", help="every job may be preempted (las needs it)")
    ] = False,
    priority_preemption: Annotated[
        bool, typer.Option(help="queues let higher priorities preempt lower ones (opt-in)")
    ] = False,
    default_time: Annotated[
        str | None, typer.Option(help="queues' DefaultTime: the limit of jobs with none")
    ] = None,
    idle_limit: Annotated[
        str | None,
        typer.Option(
            help="queues' idle limit: a session (trace column interactive) unused "
            "this long ends, e.g. 30:00"
        ),
    ] = None,
    quantum: Annotated[float | None, typer.Option(help=TUNING_HELP["quantum"])] = None,
    service_levels: Annotated[str | None, typer.Option(help=TUNING_HELP["service_levels"])] = None,
    victim_searches: Annotated[
        int | None, typer.Option(help=TUNING_HELP["victim_searches"])
    ] = None,
    victim_searches_per_queue: Annotated[
        int | None, typer.Option(help=TUNING_HELP["victim_searches_per_queue"])
    ] = None,
    greedy_hold: Annotated[str | None, typer.Option(help=TUNING_HELP["greedy_hold"])] = None,
    time_slice_by: Annotated[str | None, typer.Option(help=TUNING_HELP["time_slice_by"])] = None,
    starved_unsliced: Annotated[
        str | None, typer.Option(help=TUNING_HELP["starved_unsliced"])
    ] = None,
    unsliced_after: Annotated[str | None, typer.Option(help=TUNING_HELP["unsliced_after"])] = None,
    slice_level_gap: Annotated[
        int | None, typer.Option(help=TUNING_HELP["slice_level_gap"])
    ] = None,
    unsliced_after_restarts: Annotated[
        str | None, typer.Option(help=TUNING_HELP["unsliced_after_restarts"])
    ] = None,
    starving_slices: Annotated[
        bool | None,
        typer.Option("--starving-slices/--no-starving-slices", help=TUNING_HELP["starving_slices"]),
    ] = None,
    starvation_limit: Annotated[
        str | None, typer.Option(help=TUNING_HELP["starvation_limit"])
    ] = None,
    workers: Annotated[int, typer.Option(help="parallel processes")] = 2,
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
    plot: Annotated[Path | None, typer.Option(help="write PNG plots into this folder")] = None,
    health_interval: Annotated[
        str | None,
        typer.Option(help="scheduled health checks of idle nodes, e.g. 6h (none: only at join)"),
    ] = None,
    health_check_time: Annotated[
        float, typer.Option(help="seconds a health check holds its node")
    ] = 180.0,
    slow_node: Annotated[
        list[str] | None,
        typer.Option(help="NODE@HOURS=SPEED: the node turns slow then (repeat), e.g. n3@2=0.5"),
    ] = None,
    health_fail: Annotated[
        str, typer.Option(help="a failed check: drain (jobs finish) or requeue its jobs")
    ] = "drain",
    ray: Annotated[
        str | None, typer.Option(help="run on an existing Ray cluster (address, or 'local')")
    ] = None,
    image_size: Annotated[
        list[str] | None,
        typer.Option(help="NAME=GB: a container image's size (repeat; trace column image)"),
    ] = None,
    image_default_size: Annotated[
        float, typer.Option(help="GB of an image --image-size does not name")
    ] = 10.0,
    image_link_gbps: Annotated[
        float, typer.Option(help="Gb/s a node pulls images at (its front-end port)")
    ] = 100.0,
    registry_gbps: Annotated[
        float, typer.Option(help="Gb/s the registry serves, shared by nodes pulling at once")
    ] = 100.0,
) -> None:
    """Simulate scheduling policies on a virtual clock and compare JCT, waits, utilization."""
    if max_gpus is not None and max_gpus < 1:
        _fail(f"--max-gpus: {max_gpus} is not a gang size (hint: give 1 or more, e.g. 8)")
    if max_gpus is not None and trace is not None:
        _fail("--max-gpus: shapes synthetic jobs only (hint: a trace's gangs are as recorded)")
    cluster = _cluster(blueprint, nodes, gpus_per_node, gpu)
    scenarios = _scenarios(
        cluster, trace, fmt, synthetic, jobs, load_, walltime, policy, seed, seeds, failures,
        checkpoint, checkpoint_cost, restart_overhead, coalesce,
    )  # fmt: skip
    measure: tuple[int, int] | None = None
    if measure_jobs is not None:
        try:
            measure = parse_window(measure_jobs)
        except ValueError as exc:
            _fail(str(exc))
    try:
        default_time_s = parse_walltime(default_time) if default_time is not None else None
    except ValueError as exc:
        _fail(f"--default-time: {exc}")
    try:
        idle_limit_s = parse_walltime(idle_limit) if idle_limit is not None else None
    except ValueError as exc:
        _fail(f"--idle-limit: {exc}")
    try:
        knobs = tuning(
            quantum=quantum,
            service_levels=service_levels,
            victim_searches=victim_searches,
            victim_searches_per_queue=victim_searches_per_queue,
            greedy_hold=greedy_hold,
            time_slice_by=time_slice_by,
            starved_unsliced=starved_unsliced,
            unsliced_after=unsliced_after,
            slice_level_gap=slice_level_gap,
            unsliced_after_restarts=unsliced_after_restarts,
            starving_slices=starving_slices,
            starvation_limit=starvation_limit,
        )
    except ValueError as exc:
        _fail(str(exc))
    images = _images(image_size, image_default_size, image_link_gbps, registry_gbps)
    scenarios = [
        replace(
            s,
            preemptible=preemptible,
            priority_preemption=priority_preemption,
            default_time_s=default_time_s,
            idle_limit_s=idle_limit_s,
            tuning=tuple(knobs.items()),
            health=_health(cluster, health_interval, health_check_time, slow_node, health_fail),
            images=images,
            max_gpus=max_gpus,
            measure=measure,
            job_records=jobs_out is not None,
        )
        for s in scenarios
    ]
    if "las" in {s.policy for s in scenarios} and not preemptible:
        Console(stderr=True).print(
            "railyard: note: las slices only preemptible jobs and this run has none, so it "
            "behaves like fifo-greedy (hint: add --preemptible-jobs, as "
            "benchmarks/compare_policies.py does)",
            highlight=False,
            soft_wrap=True,
        )
    if plot is not None and not have_matplotlib():
        _fail(f"--plot needs matplotlib, which is not installed (hint: {PLOT_HINT})")
    if ray is not None and not ray_available():
        _fail("--ray needs the ray package, which is not installed (hint: pip install ray)")
    err = Console(stderr=True)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=as_json or not err.is_terminal,
    ) as bar:
        task = bar.add_task(f"simulating {len(scenarios)} run(s)", total=len(scenarios))
        if len(scenarios) == 1 and ray is None:

            def step(fraction: float) -> None:
                bar.update(task, completed=fraction)

            results = [run_scenario(scenarios[0], step)]
        else:
            results = sweep(
                scenarios,
                workers=workers,
                ray_address=ray,
                on_done=lambda s, r: bar.advance(task),
            )
    if jobs_out is not None:
        try:
            write_csv(jobs_out, results)
        except OSError as exc:
            _fail(f"--jobs-out: cannot write {jobs_out}: {exc.strerror} (hint: a writable path)")
        for r in results:
            r.pop("job_records", None)
    if as_json:
        print(json.dumps({"runs": results}, indent=2))
    else:
        print_results(Console(), results)
    if plot is not None:
        paths = write_plots(results, plot)
        if not as_json:
            Console().print(f"plots written: {', '.join(str(p) for p in paths)}")


def _cluster(blueprint: str | None, nodes: int | None, gpus_per_node: int, gpu: str) -> Scenario:
    """The cluster of the flags, as a scenario's cluster fields: a blueprint, or a flat one."""
    if (blueprint is None) == (nodes is None):
        _fail("give a blueprint or --nodes N, not both and not neither "
              "(hint: railyard simulate --nodes 16 --gpus-per-node 8 --trace FILE)")  # fmt: skip
    if nodes is None:
        assert blueprint is not None
        try:
            load(blueprint)
        except BlueprintError as exc:
            _fail(str(exc))
        return Scenario(blueprint=blueprint, policy="")
    if nodes < 1 or gpus_per_node < 1:
        _fail(f"--nodes {nodes} --gpus-per-node {gpus_per_node}: both must be >= 1 "
              "(hint: e.g. --nodes 16 --gpus-per-node 8)")  # fmt: skip
    try:
        flavor = gpu_flavor(gpu)
    except ValueError as exc:
        _fail(f"--gpu: {exc}")
    return Scenario(blueprint="", policy="", nodes=nodes, gpus_per_node=gpus_per_node, gpu=flavor)


def _scenarios(
    cluster: Scenario,
    trace: Path | None,
    fmt: str,
    synthetic: str | None,
    jobs: int,
    load_: float | None,
    walltime: str,
    policy: str,
    seed: int,
    seeds: int,
    failures: bool,
    checkpoint: str,
    checkpoint_cost: float,
    restart_overhead: float,
    coalesce: float,
) -> list[Scenario]:
    """Validate every flag up front, so a bad one fails before any run starts."""
    if (trace is None) == (synthetic is None):
        _fail("give exactly one of --trace FILE or --synthetic PROFILE (hint: --synthetic philly)")
    if synthetic is not None and synthetic not in PROFILES:
        _fail(f"--synthetic: unknown profile {synthetic!r} (hint: one of {', '.join(PROFILES)})")
    if walltime not in WALLTIME_MODES:
        _fail(f"--walltime: {walltime!r} (hint: one of {', '.join(WALLTIME_MODES)})")
    if load_ is not None and not 0 < load_ < math.inf:
        _fail(f"--load: {load_} is not a load (hint: a number > 0, e.g. 0.9)")
    if trace is not None:
        try:
            loaded = load_trace(trace, fmt)  # fail fast on a bad file, with file, line and field
        except TraceError as exc:
            _fail(str(exc))
        if load_ is not None:  # a trace that cannot be rescaled fails here, not in a worker
            try:
                rescale_load(loaded, sum(n.gpus for n in scenario_nodes(cluster)), load_)
            except ValueError as exc:
                _fail(str(exc))
    names = [p.strip() for p in policy.split(",") if p.strip()]
    bad = [p for p in names if p not in POLICIES]
    if bad or not names:
        _fail(f"--policy: unknown {bad or policy!r} (hint: any of {', '.join(POLICIES)})")
    if jobs < 1 or seeds < 1:
        _fail("--jobs and --seeds must be >= 1")
    if checkpoint not in {r.value for r in IntervalRule}:
        _fail(f"--checkpoint: {checkpoint!r} (hint: young, daly, fixed or none)")
    try:
        ckpt = CheckpointPolicy(
            rule=IntervalRule(checkpoint), cost_s=checkpoint_cost, restart_s=restart_overhead
        )
    except ValueError as exc:
        _fail(f"--checkpoint-cost/--restart-overhead: {exc}")
    if coalesce < 0:
        _fail("--coalesce must be >= 0")
    return [
        replace(
            cluster,
            policy=name,
            seed=s,
            trace=str(trace) if trace is not None else None,
            trace_format=fmt,
            synthetic=synthetic,
            jobs=jobs,
            load=load_ if load_ is not None and trace is None else 0.9,
            trace_load=load_ if trace is not None else None,
            walltime=walltime,
            failures=failures,
            coalesce_s=coalesce,
            checkpoint=ckpt,
        )
        for s in range(seed, seed + seeds)
        for name in names
    ]


def _images(
    sizes: list[str] | None, default_gb: float, link_gbps: float, registry_gbps: float
) -> ImageWorld:
    """What a cold start costs, from the flags (each checked, with a hint)."""
    named: dict[str, float] = {}
    for text in sizes or []:
        try:
            name, size_bytes = parse_image_size(text)
        except ValueError as exc:
            _fail(f"--image-size: {exc}")
        named[name] = size_bytes
    try:
        return ImageWorld(named, default_gb * GB, link_gbps, registry_gbps)
    except ValueError as exc:
        _fail(f"--image-default-size, --image-link-gbps, --registry-gbps: {exc}")


def _health(
    cluster: Scenario,
    interval: str | None,
    check_s: float,
    slow: list[str] | None,
    fail_action: str,
) -> HealthWorld | None:
    """The scheduled checks and slow nodes of the flags (None: no health checks, and then no
    --slow-node either, which would have nothing to find it)."""
    if interval is None and not slow:
        return None
    if fail_action not in ("drain", "requeue"):
        _fail(f"--health-fail: {fail_action!r} (hint: drain or requeue)")
    if not check_s >= 0:
        _fail("--health-check-time must be >= 0 seconds")
    interval_s: float | None = None
    if interval is not None and interval != "none":
        match = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd]?)", interval.strip())
        if match is None or float(match.group(1)) <= 0:
            _fail(f"--health-interval: bad duration {interval!r} (hint: e.g. 6h, 90m or none)")
        interval_s = (
            float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]
        )
    names = [n.name for n in scenario_nodes(cluster)]
    slow_nodes = []
    for spec in slow or []:
        match = re.fullmatch(r"([^@]+)@(\d+(?:\.\d+)?)=(0?\.\d+)", spec.strip())
        if match is None:
            _fail(f"--slow-node: {spec!r} is not NODE@HOURS=SPEED (hint: e.g. {names[0]}@2=0.5)")
        if match.group(1) not in names:
            _fail(f"--slow-node: no node {match.group(1)!r} in {cluster.cluster} "
                  f"(hint: {', '.join(names[:4])}, ...)")  # fmt: skip
        try:
            slow_nodes.append(
                Degradation(float(match.group(2)) * 3600, match.group(1), float(match.group(3)))
            )
        except ValueError as exc:
            _fail(f"--slow-node: {spec!r}: {exc}")
    policy = HealthPolicy(
        interval_s=interval_s,
        gate_joins=interval is not None,
        check_s=check_s,
        fail_requeues=fail_action == "requeue",
    )
    if interval is None:  # slow nodes, and no checks to find them: the cost of not looking
        policy = replace(policy, gate_joins=False)
    return HealthWorld(policy, tuple(slow_nodes))


def _h(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 3600:.2f}"


def print_results(console: Console, results: list[dict[str, Any]]) -> None:
    """One row per run; times in hours."""
    first = results[0]
    table = Table(
        title=f"{first['workload']} on {first['blueprint']} ({first['gpus']} GPUs), hours",
        caption="JCT mean / p50 / p99, wait = queueing mean / p99; util over the makespan; "
        "1-LG: multi-node starts within one leaf group",
    )
    for col in ("policy", "seed", "jobs", "JCT", "p50", "p99", "wait", "w p99"):
        table.add_column(col, justify="left" if col == "policy" else "right", no_wrap=True)
    for col in ("util", "goodput", "preempt", "fails", "1-LG"):
        table.add_column(col, justify="right")
    for r in results:
        jct, wait, multi = r["jct"], r["queueing"], r["multi_node"]
        lg = multi["within_leaf_group"]
        table.add_row(
            r["policy"],
            str(r["seed"]),
            str(r["jobs"]),
            _h(jct.get("mean_s")),
            _h(jct.get("median_s")),
            _h(jct.get("p99_s")),
            _h(wait.get("mean_s")),
            _h(wait.get("p99_s")),
            f"{r['utilization']:.3f}",
            f"{r['goodput']:.3f}",
            str(r["preemptions"]),
            str(r["node_failures"]),
            "-" if lg is None else f"{lg:.2f}",
        )
    console.print(table)
    sizes = Table(title="mean JCT by job size (GPUs), hours")
    sizes.add_column("policy")
    classes = ["1", "2-8", "9-64", "65+"]
    for c in classes:
        sizes.add_column(c, justify="right")
    for r in results:
        by = r["by_size"]
        sizes.add_row(
            f"{r['policy']} s{r['seed']}",
            *(_h(by[c]["jct"].get("mean_s")) if c in by else "-" for c in classes),
        )
    console.print(sizes)
    checked = [r for r in results if r.get("health")]
    if checked:
        health = Table(title="health checks and slow nodes")
        for col in ("policy", "checks", "check GPU-h", "slow found", "found after h",
                    "slowed GPU-h"):  # fmt: skip
            health.add_column(col, justify="left" if col == "policy" else "right", no_wrap=True)
        for r in checked:
            h = r["health"]
            health.add_row(
                f"{r['policy']} s{r['seed']}", f"{h['checks']:.0f}",
                f"{h['check_gpu_s'] / 3600:.1f}", f"{h['slow_nodes_found']:.0f}",
                _h(h["mean_detection_s"]), f"{h['slowed_gpu_s'] / 3600:.1f}",
            )  # fmt: skip
        console.print(health)
    pulled = [r for r in results if r.get("images")]
    if pulled:
        table = Table(title="container images (trace column image)")
        for col in ("policy", "jobs", "cold starts", "mean pull s", "pull GPU-h"):
            table.add_column(col, justify="left" if col == "policy" else "right", no_wrap=True)
        for r in pulled:
            i = r["images"]
            table.add_row(f"{r['policy']} s{r['seed']}", str(i["jobs"]), str(i["cold_starts"]),
                          f"{i['pull_s_mean']:.0f}", f"{i['pull_gpu_h']:.2f}")  # fmt: skip
        console.print(table)
    sessions = [r for r in results if r.get("interactive")]
    if sessions:
        table = Table(title="interactive sessions (trace column interactive), hours")
        for col in ("policy", "sessions", "wait", "w p99", "idle-stopped", "held GPU-h"):
            table.add_column(col, justify="left" if col == "policy" else "right", no_wrap=True)
        for r in sessions:
            i = r["interactive"]
            table.add_row(
                f"{r['policy']} s{r['seed']}", str(i["jobs"]), _h(i["queueing"].get("mean_s")),
                _h(i["queueing"].get("p99_s")), str(i["idle_stopped"]), f"{i['held_gpu_h']:.1f}",
            )  # fmt: skip
        console.print(table)


def register(app: typer.Typer) -> None:
    """Add `simulate` to ``app`` (the ``railyard`` command)."""
    app.command()(simulate)
