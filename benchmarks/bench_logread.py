"""What reading a log as the job's user costs (exec/logread.py), per `railyard logs` request.

- ``own account``: the server is the job's account (single-user mode): one open, no fork;
- ``as nobody``: the server is root and the job's account another one: a forked child drops to
  that account, opens the file and hands the descriptor back (``SCM_RIGHTS``).

Each row reads one 1 MiB chunk (the API's chunk) of a recorded output file; the median of
``--repeat`` reads after one warm-up. Needs root for the second row. Run: ``python
benchmarks/bench_logread.py [--repeat 200]``; prints a table and writes
``benchmarks/results/bench_logread.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import time_runs

from railyard.exec.logread import LogSource, read_chunk
from railyard.exec.task.outputs import record_outputs

RESULTS = Path(__file__).parent / "results"
CHUNK_BYTES = 1 << 20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    if args.repeat < 2:
        parser.error(f"--repeat: {args.repeat} reads give no p90 (hint: 2 or more)")
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)
        log = Path(tmp) / "job.out"
        log.write_bytes(b"x" * (2 * CHUNK_BYTES))
        os.chmod(log, 0o644)
        info = log.stat()
        record = Path(tmp) / "rank-0.restart-0.outputs.json"
        record_outputs(record, [(info.st_dev, info.st_ino)])
        rows = {"own account": None}
        if os.geteuid() == 0:
            rows["as nobody"] = "nobody"
        out: dict[str, float] = {}
        print(f"{'reader':<14} {'median ms':>10} {'p90 ms':>8}")
        for name, user in rows.items():
            source = LogSource(str(log), user, str(record))
            samples = time_runs(lambda s=source: read_chunk(s, 0, CHUNK_BYTES), args.repeat)
            median_ms = statistics.median(samples) * 1e3
            p90_ms = statistics.quantiles(samples, n=10)[-1] * 1e3
            out[f"{name} median_ms"], out[f"{name} p90_ms"] = median_ms, p90_ms
            print(f"{name:<14} {median_ms:>10.2f} {p90_ms:>8.2f}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "bench_logread.json").write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
