"""The two systems as a user types at them, for ``compare_habits.py``: one verb, Slurm's word
on one side and railyard's on the other, so each case is written once.

A case gets a :class:`System` and a directory of its own, runs what a user would, and returns
what that user sees (``seen``: compared between the systems) and figures kept for the record
(``detail``: times, raw lines; not compared). Job numbers differ by nature: :meth:`System.norm`
writes each job the case made as ``J1``, ``J2``... in the order it made them.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Seen = dict[str, Any]
Case = Callable[["System", Path], tuple[Seen, Seen]]
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY"}


@dataclass
class System:
    """``slurm`` or ``railyard``: how each of a user's verbs is spelled there."""

    name: str
    env: dict[str, str]
    railyard: str = "railyard"
    ids: list[str] = field(default_factory=list)

    def words(self, verb: str) -> list[str]:
        if self.name == "slurm":
            return {
                "sbatch": ["sbatch"], "squeue": ["squeue"], "sacct": ["sacct"],
                "scancel": ["scancel"], "requeue": ["scontrol", "requeue"],
                "show-job": ["scontrol", "show", "job"], "sinfo": ["sinfo"],
                "sprio": ["sprio"], "sshare": ["sshare"],
            }[verb]  # fmt: skip
        return [self.railyard] + {
            "sbatch": ["submit"], "squeue": ["queue"], "sacct": ["history"],
            "scancel": ["cancel"], "requeue": ["requeue"], "show-job": ["show", "job"],
            "sinfo": ["nodes"], "sprio": ["sprio"], "sshare": ["sshare"],
        }[verb]  # fmt: skip

    def do(
        self, verb: str, *args: str, cwd: Path | None = None, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.words(verb), *args], cwd=cwd, env=self.env,
                              capture_output=True, text=True, timeout=timeout)  # fmt: skip

    def srun(self, opts: list[str], command: list[str]) -> list[str]:
        """srun outside an allocation: ``srun OPTS CMD`` / ``railyard run OPTS -- CMD``."""
        if self.name == "slurm":
            return ["srun", *opts, *command]
        return [self.railyard, "run", *opts, "--", *command]

    def salloc(self, opts: list[str], command: list[str]) -> list[str]:
        if self.name == "slurm":
            return ["salloc", *opts, *command]
        return [self.railyard, "alloc", *opts, "--", *command]

    def submit(self, *args: str, cwd: Path) -> str:
        """``sbatch --parsable ARGS``: the new job's number (remembered for :meth:`norm`)."""
        done = self.do("sbatch", "--parsable", *args, cwd=cwd)
        job = done.stdout.strip().split(";")[0]
        if not job.isdigit():
            raise RuntimeError(f"{self.name}: submit {args}: {done.stderr.strip()}")
        self.ids.append(job)
        return job

    def state(self, job: str) -> str:
        """The job's state in capitals (an array's: its tasks' states joined)."""
        if self.name == "slurm":
            shown = subprocess.run(["scontrol", "-o", "show", "job", job], env=self.env,
                                   capture_output=True, text=True, timeout=30).stdout  # fmt: skip
            return ",".join(sorted(set(re.findall(r"JobState=(\S+)", shown)))) or "?"
        out = self.do("squeue", "-t", "all", "-j", job, "--json").stdout
        return ",".join(sorted({j["state"].upper() for j in json.loads(out)})) or "?"

    def wait_state(self, job: str, wanted: set[str], limit_s: float = 240) -> str:
        deadline = time.monotonic() + limit_s
        while True:
            state = self.state(job)
            if set(state.split(",")) <= wanted or time.monotonic() > deadline:
                return state
            time.sleep(0.5)

    def wait_ended(self, job: str, limit_s: float = 240) -> str:
        return self.wait_state(job, ENDED, limit_s)

    def cancel_all(self) -> None:
        for job in self.ids:
            self.do("scancel", job)

    def norm(self, text: str) -> str:
        """Job numbers as J1, J2... (the order this case submitted them) where a job number
        stands: ``JOB N``, ``job allocation N``, ``afterok:N``, a sacct row's ``N|``/``N.``;
        times as T. (A bare number is left alone: railyard's first jobs are 1, 2...)"""
        text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", "T", text)  # first: 12:34 is no job
        for i, job in enumerate(self.ids, 1):
            text = re.sub(rf"((?:JOB|[Jj]ob allocation|JobId=|:)\s?){job}(?!\d)", rf"\g<1>J{i}",
                          text)  # fmt: skip
            text = re.sub(rf"(?m)^{job}(?=[|.])", f"J{i}", text)
        return text


def wait_file(path: Path, text: str, limit_s: float = 120) -> bool:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return True
        time.sleep(0.3)
    return False


def script(directory: Path, name: str, body: str) -> str:
    path = directory / name
    path.write_text("#!/bin/bash\n" + body)
    return str(path)
