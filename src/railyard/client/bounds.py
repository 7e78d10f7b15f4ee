"""The numbers behind every bound of the API (see :mod:`railyard.control.store.limits` for why).

Standard library only, so the CLI's value parsers (:mod:`railyard.client.values`) apply the
same bounds without importing pydantic.
"""

from __future__ import annotations

INT32_MAX = 2**31 - 1
KiB = 1024
MiB = 1024 * KiB

MAX_REQUEST_BYTES = 16 * MiB  # a request body; larger is 413
MAX_COMMAND_ARGS = 4096
MAX_CANCEL_IDS = 1000  # ids one cancel request takes (one transaction); a CLI pages more
MAX_SAMPLE_POINTS = 10_000  # buckets of a job's resource history in one answer
SAMPLE_ROW_BUDGET = 200_000  # rows of it one request aggregates at most
MAX_ARG_BYTES = 128 * KiB  # MAX_ARG_STRLEN
MAX_COMMAND_BYTES = 256 * KiB  # all arguments together
MAX_ENV_ENTRIES = 1024
MAX_ENV_BYTES = 256 * KiB  # all NAME=VALUE strings together
MAX_ENV_NAME = 256
MAX_SCRIPT_BYTES = 1 * MiB
MAX_SUBMIT_STORED_BYTES = 64 * MiB  # command + env + script, times the array's tasks
MAX_JOB_GPUS = 1 << 20  # workers x GPUs per worker
DEFAULT_MAX_TASKS_PER_JOB = 4096
"""Ranks one job may start unless the site says otherwise (``up --max-tasks-per-job``): 512
nodes of 8 GPUs, one task per GPU. The loop's launch work grows with them."""
DEFAULT_MAX_JOBS_PER_USER = 50_000
"""Jobs one plain user may have pending or running, array tasks one by one, unless the site
says otherwise (``up --max-jobs-per-user``; Slurm's MaxSubmitJobsPerUser): five full arrays.
Without it one user queued 530,000 tasks a batch at a time, and another user's 1-GPU job
took 11-49 s to start instead of 0.1 s."""
MAX_WALLTIME_S = 10 * 366 * 86400.0
MAX_GRACE_S = 65535.0  # Slurm's --signal @time is 16 bits
MAX_WEIGHT = 1e6
MIN_WEIGHT = 1e-3  # with MAX_WEIGHT: fair-share ratios stay finite for any set of siblings
MAX_QUOTA_FLAVORS = 64
MAX_NAME = 256  # a job's name; a node's drain reason
MAX_QUEUE_NAME = 128
MAX_USER_NAME = 64
MAX_FLAVOR = 64
MAX_LABEL = 128
MAX_WORKDIR = 1024
MAX_SHORT = 64  # the small spellings: time, signal, priority, topology
MAX_ARRAY_SPEC = 1024
MAX_LOG_OFFSET = 2**63 - 1
MAX_TOKEN_LIFETIME_S = 10 * 366 * 86400.0

QUEUE_NAME_PATTERN = r"^[A-Za-z0-9_.-]+$"
USER_NAME_PATTERN = r"^[A-Za-z0-9_.@-]+$"
JOB_ID_PATTERN = r"^[0-9]{1,10}(_[0-9]{1,10})?$"

JOBS_PAGE = 1000
"""``GET /v1/jobs`` answers at most this many jobs when no ``limit`` is asked, with a ``Link:
<...>; rel="next"`` header (and ``X-Next-Cursor``) naming the next page's ``after``: 30,400
jobs in one answer took 3.6-14 s. `Client.jobs` follows it to the end."""
MAX_JOBS_LISTED = 100_000  # the most one GET /v1/jobs answers with (?limit=)
