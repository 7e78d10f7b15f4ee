"""The executor's one error type, in a module of its own: every rank's wrapper may raise it
(`exec.task.identity`) without importing the executor protocol at each start-up."""

from __future__ import annotations


class ExecutorError(RuntimeError):
    """A request an executor cannot honour: a node it lacks, GPUs it lacks, a job still running
    another attempt."""
