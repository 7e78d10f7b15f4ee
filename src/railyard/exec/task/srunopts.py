"""The job's srun options beyond a step's shape and GPUs: those taken and noted (harmless
here, or the job's already), those refused with why, and the step's files (``-o``, ``-e``,
``-i``), opened by srun as the job's user, as slurmstepd opens them.

Real scripts write ``srun -c $SLURM_CPUS_PER_TASK python train.py`` (srun 22.05 no longer
takes the job's ``--cpus-per-task`` by itself), ``srun --exclusive -n1 ... &`` for steps side
by side, and ``srun -o step-%t.out``; each line failed with "unrecognized arguments".
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import ExitStack
from typing import IO

from railyard.client.filenames import expand_pattern

NOTED_SWITCHES = {  # taken without a value, with a note
    "--unbuffered": "srun does not buffer output",
    "-u": "srun does not buffer output",
    "--exclusive": "steps at once already get different GPUs; CPUs are the job's",
    "--overlap": "steps share the job's CPUs here",
    "-v": "srun says what it does only on errors here",
    "--verbose": "srun says what it does only on errors here",
    "-Q": "srun says only errors here",
    "--quiet": "srun says only errors here",
}
NOTED_VALUED = {  # taken with their value (--name=value or --name value), with a note
    "--mpi": "railyard starts tasks itself; no PMI",
    "--cpu-bind": "tasks are not bound to CPUs",
    "--export": "tasks get the batch script's environment",
    "--mem": "a step shares its job's memory limit",
    "--mem-per-cpu": "a step shares its job's memory limit",
    "--mem-per-gpu": "a step shares its job's memory limit",
    "-J": "a step has its job's name",
    "--job-name": "a step has its job's name",
    "-t": "a step ends with its job's time limit",
    "--time": "a step ends with its job's time limit",
    "-m": "tasks are laid out in blocks over the nodes",
    "--distribution": "tasks are laid out in blocks over the nodes",
    "--hint": "tasks are not bound to CPUs",
    "--gpu-bind": "a task sees the step's GPUs, as CUDA_VISIBLE_DEVICES names them",
    "-W": "a task that fails stops the others at once here",
    "--wait": "a task that fails stops the others at once here",
    "--cpu-freq": "CPU frequencies are the node's",
    "--network": "the job's network is the node's",
    "--comment": "steps keep no comment",
    "--propagate": "tasks get the batch script's limits",
}
REFUSED = {
    "--multi-prog": "one command per step here (hint: branch on $SLURM_PROCID in it)",
    "--het-group": "railyard jobs have one component",
    "--jobid": "a step runs in its own job (hint: railyard attach JOB from a login node)",
}
VALUED = ("-n", "-N", "--ntasks", "--nodes", "--ntasks-per-node", "-G", "-c", "--cpus-per-task",
          "-o", "--output", "-e", "--error", "-i", "--input", "-w", "--nodelist")  # fmt: skip
"""Options srun reads itself whose value may be the next word."""


def pattern_fields(environ: Mapping[str, str]) -> dict[str, str]:
    """The job's values for ``%j %A %a %x %u`` in a step's file names."""
    return {
        "j": environ.get("SLURM_JOB_ID", ""),
        "A": environ.get("SLURM_ARRAY_JOB_ID", ""),
        "a": environ.get("SLURM_ARRAY_TASK_ID", ""),
        "x": environ.get("SLURM_JOB_NAME", ""),
        "u": environ.get("SLURM_JOB_USER") or environ.get("USER", ""),
    }


class StepFiles:
    """Each task's stdin, stdout and stderr as ``-i``/``-o``/``-e`` name them (None: srun's
    own); an output name that expands alike for several tasks is opened once and shared, as
    one ``-o step.out`` collects every task's lines; an input is opened for each task, which
    reads all of it."""

    def __init__(
        self,
        environ: Mapping[str, str],
        output: str | None,
        error: str | None,
        stdin: str | None,
        step_id: int,
    ) -> None:
        self._fields = pattern_fields(environ)
        self._output, self._error, self._stdin, self._step = output, error, stdin, str(step_id)
        self._open: dict[tuple[str, str], IO[bytes]] = {}
        self._stack = ExitStack()

    def for_task(
        self, rank: int, node: str, node_index: int
    ) -> tuple[IO[bytes] | int | None, IO[bytes] | None, IO[bytes] | None]:
        """(stdin, stdout, stderr) for Popen; OSError names a file that cannot be opened."""
        out = self._file(self._output, "wb", rank, node, node_index)
        err = self._file(self._error, "wb", rank, node, node_index) if self._error else out
        if self._stdin == "none":
            from subprocess import DEVNULL

            return DEVNULL, out, err
        return self._file(self._stdin, "rb", rank, node, node_index), out, err

    def _file(
        self, pattern: str | None, mode: str, rank: int, node: str, node_index: int
    ) -> IO[bytes] | None:
        if pattern is None:
            return None
        path = expand_pattern(pattern, self._fields, node=node, node_index=node_index,
                              task=rank, step=self._step)  # fmt: skip
        key = (path, mode)
        if mode == "rb":  # each task reads the whole file, from its own offset
            return self._stack.enter_context(open(path, mode))
        if key not in self._open:
            self._open[key] = self._stack.enter_context(open(path, mode))  # noqa: SIM115
        return self._open[key]

    def close(self) -> None:
        """Srun's copies: the tasks hold their own."""
        self._stack.close()
