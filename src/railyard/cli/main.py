"""The ``railyard`` command: a table of commands, each loaded only when it runs.

Users call ``submit``, ``queue`` and ``show`` in loops and scripts, as they call Slurm's
commands, so a call must cost milliseconds: the control-plane commands are plain
:mod:`argparse` over a standard-library HTTP client, and nothing here imports FastAPI,
SQLAlchemy, pydantic, numpy or the scheduler unless the command needs it
(``benchmarks/bench_cli.py`` measures it; ``tests/cli/test_cli_imports.py`` keeps it so).
The design commands (``plan``, ``perf``, ``simulate`` ...) compute for seconds and keep their
typer apps (:mod:`railyard.cli.design`).
"""

from __future__ import annotations

import os
import sys

from railyard import __version__
from railyard.cli.text import PrintableStream

TYPE_CHECKING = False  # typing's own costs `railyard version` 2 ms of its 50 (-X importtime)
if TYPE_CHECKING:
    from railyard.cli.args import Command

# name -> (module defining it (its COMMANDS), its summary), in the order `railyard --help`
# lists them. The summary is the first line of the command's docstring, spelled here so that
# `railyard --help` imports no command (tests/cli/test_cli_imports.py keeps the two equal).
CONTROL = {
    "up": ("up", "Start the control plane: store, scheduler loop and REST API, on this machine."),
    "join": (
        "join",
        "Join this machine to the Ray cluster at HEAD (or start the head here with --head).",
    ),
    "login": (
        "login",
        "Save a server's URL and your token in ~/.railyard (0600), checked against the server.",
    ),
    "logout": ("login", "Forget the saved server and token (~/.railyard/client.json)."),
    "submit": (
        "jobs",
        "Submit a job: a batch script (#SBATCH / #RAILYARD directives), or a command after --.",
    ),
    "run": (
        "run",
        "Run a command as a job with this terminal joined to it (srun); --pty for a shell.",
    ),
    "alloc": (
        "run",
        "Hold an allocation and open a shell in it (salloc): srun there starts its steps.",
    ),
    "attach": (
        "run",
        "A shell inside a running job, as its user, in its cgroup (srun --overlap --pty).",
    ),
    "jupyter": (
        "apps",
        "Start JupyterLab (or --app CMD) as a job, served to you at /ui/jobs/N/app/.",
    ),
    "ssh-config": (
        "ssh",
        "Print an OpenSSH Host block: `ssh job-N` reaches your running job N (editors too).",
    ),
    "proxy": (
        "ssh",
        "Carry one SSH connection to a running job of yours (an OpenSSH ProxyCommand).",
    ),
    "queue": (
        "jobs",
        "Jobs waiting and running, like squeue: why each pending job waits is in REASON.",
    ),
    "show": (
        "showjob",
        "Everything about one job; an array's id shows a summary of its tasks and each task.",
    ),
    "history": (
        "history",
        "Jobs that ran or are running, like sacct: state, exit code, elapsed, GPU-hours.",
    ),
    "report": ("report", "GPU-hours by user, queue and account per period, like sreport."),
    "stats": ("stats", "What a running or recent job's GPUs and processes used, like sstat."),
    "cancel": (
        "jobctl",
        "Cancel jobs: pending ones end at once, running ones are stopped by the scheduler loop.",
    ),
    "hold": (
        "jobctl",
        "Keep pending jobs from starting (scontrol hold); an array's id holds its pending tasks.",
    ),
    "release": ("jobctl", "Let held jobs start again (scontrol release)."),
    "requeue": (
        "jobctl",
        "Stop running jobs and queue them again, one restart more (scontrol requeue).",
    ),
    "requeuehold": (
        "jobctl",
        "Stop running jobs and queue them again held (scontrol requeuehold): `requeue --hold`.",
    ),
    "update": (
        "jobctl",
        "Change a job's time limit (pending or running), priority or dependency (scontrol update).",
    ),
    "logs": ("jobs", "Print one rank's log; with -f, keep printing until the job finishes."),
    "nodes": ("cluster", "Nodes, their GPUs in use, and draining."),
    "queues": ("cluster", "Queues: quota per flavor, GPUs in use and borrowed, fair-share usage."),
    "sinfo": (
        "sinfo",
        "Partitions and nodes as sinfo shows them: a line per partition and state (-N: per node).",
    ),
    "sprio": (
        "shares",
        "Pending jobs' priority factors as the scheduler orders by them, like sprio.",
    ),
    "sshare": (
        "shares",
        "Fair-share figures per queue and user, like sshare -a (RawUsage in GPU-seconds).",
    ),
    "health": (
        "health",
        "Check this node against its own baseline (NHC-style; --drain acts on the result).",
    ),
    "config": (
        "settings",
        "Check or show the configuration file (/etc/railyard/railyard.toml or --config).",
    ),
    "admin": ("admin", "Administer users, tokens and queues (admin token needed)."),
}
DESIGN = {
    "plan": "Bill of materials, cost, power and network figures of a cluster.",
    "topology": "Export the topology tree the scheduler places on (Slurm, Kueue, or plain).",
    "presets": "List the blueprints shipped with railyard.",
    "perf": "Predict collectives, training steps and checkpoints.",
    "simulate": "Simulate scheduling policies on a virtual clock (the digital twin).",
}
ABOUT = "railyard: plan, predict, schedule and operate shared GPU training clusters."


def command(name: str) -> Command:
    import importlib  # not for `railyard version` (importlib's package brings warnings)

    module = importlib.import_module(f"railyard.cli.{CONTROL[name][0]}")
    commands: tuple[Command, ...] = module.COMMANDS
    return next(c for c in commands if c.name == name)


def root_help() -> str:
    def section(title: str, rows: list[tuple[str, str]]) -> list[str]:
        return [f"{title}:", *(f"  {name:<11}{summary}" for name, summary in rows), ""]

    lines = ["usage: railyard COMMAND [ARGS...]", "", ABOUT, ""]
    lines += section("operate a cluster", [(n, summary) for n, (_, summary) in CONTROL.items()])
    lines += section("plan and predict", list(DESIGN.items()))
    lines += section("other", [("version", "Print the railyard version.")])
    lines.append("`railyard COMMAND --help` shows a command's options.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run ``railyard ARGV``; returns the exit code (0 done, 1 refused, 2 bad input). What it
    prints goes through :class:`PrintableStream`: a user's control characters, wherever a
    command prints them, reach the terminal escaped."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = PrintableStream(out), PrintableStream(err)
    try:
        return _main(argv)
    finally:
        sys.stdout, sys.stderr = out, err


def _main(argv: list[str] | None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        if not args or args[0] in ("-h", "--help", "help"):
            print(root_help())
            return 0 if args else 2
        name, rest = args[0], args[1:]
        if name in ("version", "--version"):
            print(__version__)
            return 0
        if name in DESIGN:
            from railyard.cli import design

            return design.run(args)
        if name not in CONTROL:
            from difflib import get_close_matches  # a typo alone pays for difflib

            close = get_close_matches(name, [*CONTROL, *DESIGN, "version"], n=1)
            hint = f"did you mean {close[0]!r}?" if close else "see railyard --help"
            print(f"railyard: unknown command {name!r} (hint: {hint})", file=sys.stderr)
            return 2
        return command(name).invoke(rest)
    except SystemExit as exc:  # argparse's --help and errors, and fail()
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `railyard history | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # what a shell reports for SIGPIPE


def entry() -> None:
    """The console script: ``railyard``."""
    sys.exit(main())
