"""Gavel's trace files and its published throughput table (Narayanan et al., OSDI 2020).

Gavel (github.com/stanford-futuredata/gavel, MIT licence) gives a job's work as training
steps and its simulator turns steps into time with a table of measured steps per second per
(model, GPUs) on V100, P100 and K80 GPUs (`scheduler/simulation_throughputs.json`, the entry
of a job running alone). railyard ships those rates as `data/gavel_throughputs.csv` and reads
two layouts of Gavel's tab-separated traces:

- the Philly-derived per-VC traces (`scheduler/traces/msr/seed=N/<vc>.trace`), seven fields
  as that repository's parser of the time read them: job_type, command, num_steps_arg,
  needs_data_dir, total_steps, arrival_time (seconds), scale_factor (GPUs). A job of scale
  factor 0 is skipped (Gavel's parser skips it too);
- the later ten-field layout: job_type, command, working_directory, num_steps_arg,
  needs_data_dir, total_steps, scale_factor, priority_weight, SLO, arrival_time; an 11th
  field ``duration_s`` may give the run time.

Run time: total_steps over the table's V100 rate for (job_type, GPUs). The table stops at 8
GPUs: a wider job runs at its model's 8-GPU rate scaled linearly (an assumption; Gavel's
simulator cannot run those jobs). A model the table lacks falls back to `ASSUMED_STEPS_PER_S`
per GPU (an assumption too). Each job is its own user (Gavel's fairness is per job) and gets
Gavel's id, its 0-based position among the jobs kept.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from functools import cache
from importlib import resources
from pathlib import Path

from railyard.sim.workload import TraceJob, Workload

MSR_FIELDS = (
    "job_type", "command", "num_steps_arg", "needs_data_dir", "total_steps", "arrival_time",
    "scale_factor",
)  # fmt: skip
GAVEL_FIELDS = (
    "job_type", "command", "working_directory", "num_steps_arg", "needs_data_dir",
    "total_steps", "scale_factor", "priority_weight", "SLO", "arrival_time",
)  # fmt: skip
ASSUMED_STEPS_PER_S: dict[str, float] = {
    "ResNet-18": 10.0,
    "ResNet-50": 3.0,
    "Transformer": 5.0,
    "LM": 8.0,
    "Recommendation": 20.0,
    "CycleGAN": 2.0,
    "A3C": 4.0,
}
GPU_TYPES = ("v100", "p100", "k80")
TABLE_MAX_GPUS = 8

Fail = Callable[[int, str, str, str], Exception]


@cache
def throughputs(gpu_type: str = "v100") -> dict[tuple[str, int], float]:
    """Steps per second of (job_type, GPUs) running alone on `gpu_type`, from Gavel's table."""
    text = resources.files("railyard.data").joinpath("gavel_throughputs.csv").read_text("utf-8")
    return {
        (row["job_type"], int(row["gpus"])): float(row[f"{gpu_type}_steps_per_s"])
        for row in csv.DictReader(io.StringIO(text))
    }


def steps_per_s(job_type: str, gpus: int, gpu_type: str = "v100") -> tuple[float, bool]:
    """The job's rate and whether Gavel's table gave it (False: an assumed figure)."""
    table = throughputs(gpu_type)
    rate = table.get((job_type, gpus))
    if rate is not None:
        return rate, True
    widest = table.get((job_type, TABLE_MAX_GPUS))
    if widest is not None and gpus > TABLE_MAX_GPUS:
        return widest * gpus / TABLE_MAX_GPUS, False
    assumed = ASSUMED_STEPS_PER_S.get(job_type.split(" (", 1)[0])
    if assumed is None:
        return 0.0, False
    return assumed * gpus, False


def load_gavel(path: Path, fail: Fail) -> Workload:
    """Either layout of Gavel's trace; `fail(line, field, problem, hint)` builds the error."""
    jobs: list[TraceJob] = []
    skipped: dict[str, int] = {}
    with path.open(encoding="utf-8") as fh:
        for line_no, text in enumerate(fh, start=1):
            text = text.rstrip("\r\n")
            if not text.strip() or text.lstrip().startswith("#"):
                continue
            values = text.split("\t")
            if len(values) == len(MSR_FIELDS):
                names: tuple[str, ...] = MSR_FIELDS
            elif len(values) in (len(GAVEL_FIELDS), len(GAVEL_FIELDS) + 1):
                names = (*GAVEL_FIELDS, "duration_s")[: len(values)]
            else:
                hint = (
                    f"Gavel's seven ({', '.join(MSR_FIELDS)}) or ten "
                    f"({', '.join(GAVEL_FIELDS)}[, duration_s])"
                )
                raise fail(line_no, "row", f"{len(values)} tab-separated fields", hint)
            row = dict(zip(names, values, strict=True))
            if names is MSR_FIELDS and row["scale_factor"].strip() == "0":
                why = "no GPUs (scale_factor 0)"  # Gavel's parser of these traces skipped it
                skipped[why] = skipped.get(why, 0) + 1
                continue
            jobs.append(_job(row, str(len(jobs)), _at_line(fail, line_no)))
    return Workload.of(path.stem, jobs, skipped)


def _at_line(fail: Fail, line: int) -> Callable[[str, str, str], Exception]:
    def at(field: str, problem: str, hint: str) -> Exception:
        return fail(line, field, problem, hint)

    return at


def _number(row: dict[str, str], name: str, fail: Callable[[str, str, str], Exception]) -> float:
    try:
        return float(row[name])
    except ValueError:
        raise fail(name, f"not a number: {row[name]!r}", "a plain decimal, e.g. 6.0") from None


def _job(row: dict[str, str], job_id: str, fail: Callable[[str, str, str], Exception]) -> TraceJob:
    gpus = _number(row, "scale_factor", fail)
    if gpus < 1 or gpus != int(gpus):
        got = row["scale_factor"]
        problem = f"must be a whole number >= 1, got {got!r}"
        raise fail("scale_factor", problem, "the job's GPUs, e.g. 4")
    if row["needs_data_dir"] not in ("0", "1"):
        raise fail("needs_data_dir", f"not 0 or 1: {row['needs_data_dir']!r}", "use 0 or 1")
    steps = _number(row, "total_steps", fail)
    if row.get("duration_s"):
        runtime_s = _number(row, "duration_s", fail)
    else:
        rate, _ = steps_per_s(row["job_type"], int(gpus))
        if rate <= 0:
            known = sorted({k for k, _ in throughputs()})
            raise fail("job_type", f"no throughput for {row['job_type']!r}",
                       f"one of Gavel's models ({', '.join(known[:4])}...), or add an 11th "
                       "column duration_s")  # fmt: skip
        runtime_s = steps / rate
    return TraceJob(
        id=job_id,
        submit_s=_number(row, "arrival_time", fail),
        gpus=int(gpus),
        runtime_s=runtime_s,
        user=f"job{job_id}",
    )
