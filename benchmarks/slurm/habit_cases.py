"""Issue 57's items 1-11 and issue 56's throttled array, each once, run against both systems
by ``compare_habits.py`` (see :mod:`benchmarks.slurm.habits` for the verbs)."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path

from benchmarks.slurm.habits import Case, Seen, System, script, wait_file


def open_mode_append(s: System, d: Path) -> tuple[Seen, Seen]:
    """1. ``--open-mode=append`` keeps what the output file held."""
    (d / "log.txt").write_text("before\n")
    done = s.do("sbatch", "-W", "-o", "log.txt", "--open-mode=append", "--wrap", "echo run", cwd=d)
    return {"rc": done.returncode, "log.txt": (d / "log.txt").read_text()}, {}


def partition_list(s: System, d: Path) -> tuple[Seen, Seen]:
    """2. ``-p gpu,debug``: the first partition that can run the job."""
    done = s.do(
        "sbatch",
        "-W",
        "-p",
        "gpu,debug",
        "-o",
        "p.out",
        "--wrap",
        "echo $SLURM_JOB_PARTITION",
        cwd=d,
    )
    out = (d / "p.out").read_text() if (d / "p.out").exists() else None
    return {"rc": done.returncode, "p.out": out}, {"stderr": done.stderr.strip()}


def srun_gpus(s: System, d: Path) -> tuple[Seen, Seen]:
    """3. ``srun -n1 --gpus=1`` and ``--gres=gpu:1`` inside a 2-GPU job."""
    body = (
        "#SBATCH --gres=gpu:h100:2 -o s.out\n"
        "srun -n1 --gpus=1 bash -c 'echo gpus=$CUDA_VISIBLE_DEVICES'; echo rc=$?\n"
        "srun -n1 --gres=gpu:1 bash -c 'echo gres=$CUDA_VISIBLE_DEVICES'; echo rc=$?\n"
    )
    done = s.do("sbatch", "-W", script(d, "s.sh", body), cwd=d)
    lines = (d / "s.out").read_text().splitlines()
    # Slurm's srun, when the previous step still holds its GPU for a moment, says "step
    # creation temporarily disabled, retrying" and "Step created": timing, not an answer
    said = [x for x in lines if "step creation temporarily" in x or "Step created" in x]
    kept = [x for x in lines if x not in said]
    return {"rc": done.returncode, "s.out": kept}, {"srun retry lines": said}


def export_none_plus(s: System, d: Path) -> tuple[Seen, Seen]:
    """4. ``--export=NONE,FOO=bar``: FOO set, the submitter's variables gone."""
    s.env["SUBMITTER_VAR"] = "here"
    try:
        done = s.do(
            "sbatch",
            "-W",
            "--export=NONE,FOO=bar",
            "-o",
            "e.out",
            "--wrap",
            "echo FOO=${FOO-unset} SUBMITTER_VAR=${SUBMITTER_VAR-unset}",
            cwd=d,
        )
    finally:
        del s.env["SUBMITTER_VAR"]
    out = (d / "e.out").read_text() if (d / "e.out").exists() else None
    return {"rc": done.returncode, "e.out": out}, {"stderr": done.stderr.strip()}


def requeue(s: System, d: Path) -> tuple[Seen, Seen]:
    """5. ``scontrol requeue``: the job runs again, restart count 1; its output starts over,
    or keeps the first run's with ``--open-mode=append`` (both jobs at once)."""
    body = (
        "echo start restarts=${SLURM_RESTART_COUNT:-0}\n"
        'if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then sleep 120; fi\n'
    )
    seen: Seen = {}
    jobs = {
        mode: s.submit(
            "-o",
            f"rq-{mode}.out",
            "--requeue",
            f"--open-mode={mode}",
            script(d, f"rq-{mode}.sh", body),
            cwd=d,
        )
        for mode in ("truncate", "append")
    }
    for mode, job in jobs.items():
        wait_file(d / f"rq-{mode}.out", "start")
        seen[f"{mode}: requeue rc"] = s.do("requeue", job).returncode
    t0 = time.monotonic()
    for mode, job in jobs.items():
        seen[f"{mode}: state"] = s.wait_ended(job, 200)
        restarts = re.search(r"Restarts=(\d+)", s.do("show-job", job).stdout)
        seen[f"{mode}: Restarts"] = restarts.group(1) if restarts else None
        lines = s.norm((d / f"rq-{mode}.out").read_text()).splitlines()
        seen[f"{mode}: the script's output"] = [x for x in lines if "slurmstepd" not in x]
        seen[f"{mode}: slurmstepd's lines"] = [x for x in lines if "slurmstepd" in x]
    return seen, {"requeue to end s": round(time.monotonic() - t0, 1)}


def cancel_signal_batch(s: System, d: Path) -> tuple[Seen, Seen]:
    """6. ``scancel --signal=USR1 --batch``: the script's trap fires; no ``B:`` asked."""
    body = (
        "#SBATCH -o sig.out\n"
        "trap 'echo got USR1; exit 0' USR1\n"
        "echo ready\nsleep 100 & wait\necho after\n"
    )
    job = s.submit(script(d, "sig.sh", body), cwd=d)
    wait_file(d / "sig.out", "ready")
    t0 = time.monotonic()
    asked = s.do("scancel", "--signal=USR1", "--batch", job)
    final = s.wait_ended(job, 150)
    took_s = time.monotonic() - t0
    seen = {
        "scancel rc": asked.returncode,
        "state": final,
        "sig.out": (d / "sig.out").read_text(),
        "ended within 30 s": took_s < 30,
    }
    return seen, {"signal to end s": round(took_s, 1)}


def queue_views(s: System, d: Path) -> tuple[Seen, Seen]:
    """7. squeue -t PD/CD, -h, -O, --me, -l, a running job's %r; sacct --name, step rows, a
    pending job in a -S window; scontrol show job N; sinfo -N -l."""
    done_job = s.submit("-J", "hv-done", "-W", "--wrap", "true", cwd=d)
    run_job = s.submit("-J", "hv-run", "--gres=gpu:h100:1", "--wrap", "sleep 120", cwd=d)
    s.wait_state(run_job, {"RUNNING"}, 60)
    s.submit("-J", "hv-pend", "--gres=gpu:h100:8", "--wrap", "true", cwd=d)
    s.submit("-J", "hv-begin", "--begin=now+1hour", "--wrap", "true", cwd=d)
    time.sleep(3)  # a scheduling pass for both: hv-pend waits for Resources
    today = time.strftime("%Y-%m-%d")
    views = {
        "squeue -h -t PD -o %i|%j|%r": ["-h", "-t", "PD", "-o", "%i|%j|%r"],
        "squeue -h -t CD -o %i|%j": ["-h", "-t", "CD", "-o", "%i|%j"],
        "squeue -h -t R -o %i|%j|%r": ["-h", "-t", "R", "-o", "%i|%j|%r"],
        "squeue --me -h -o %i|%j": ["--me", "-h", "-o", "%i|%j"],
        "squeue -O JobID,Name (header)": ["-O", "JobID,Name", "-t", "R"],
        "squeue -l (lines 1-2)": ["-l", "-t", "R"],
    }
    seen: Seen = {}
    for label, args in views.items():
        out = s.do("squeue", *args)
        lines = out.stdout.splitlines() if out.returncode == 0 else [f"rc {out.returncode}"]
        if "header" in label:
            seen[label] = lines[0].split() if lines else []
        elif "-l" in label:
            seen[label] = [bool(re.match(r"\w{3} \w{3} [ \d]\d ", lines[0])), lines[1].split()]
        else:  # this case's jobs (J1...): the other cases' stay in squeue for MinJobAge
            rows = s.norm("\n".join(x.strip() for x in lines)).splitlines()
            seen[label] = sorted(x for x in rows if x.startswith(("J", "rc ")))
    for label, args in {
        "sacct --name hv-done -n -P": [
            "--name",
            "hv-done",
            "-n",
            "-P",
            "-o",
            "JobID,JobName,State",
        ],
        "sacct -S today --name hv-pend,hv-begin -X": [
            "-S",
            today,
            "--name",
            "hv-pend,hv-begin",
            "-X",
            "-n",
            "-P",
            "-o",
            "JobID,JobName,State",
        ],
    }.items():
        for _ in range(20):  # slurmdbd records a new job a few seconds late: wait for it
            out = s.do("sacct", *args)
            if out.returncode or s.ids[2] in out.stdout or "hv-done" in label:
                break
            time.sleep(1)
        rows = s.norm(out.stdout).split()  # this case's jobs: sacct's window holds earlier runs'
        mine = [row for row in rows if row.startswith("J")]
        seen[label] = mine if out.returncode == 0 else out.stderr.strip()
    shown = s.do("show-job", run_job)
    pairs = dict(re.findall(r"(\w[\w/:]*)=(\S*)", shown.stdout))
    keys = (
        "JobId",
        "JobName",
        "UserId",
        "JobState",
        "Reason",
        "Partition",
        "NumNodes",
        "TimeLimit",
        "NodeList",
        "StdOut",
        "WorkDir",
        "Restarts",
        "BatchFlag",
    )
    seen["show job: keys"] = [k for k in keys if k in pairs]
    seen["show job: JobState Reason"] = [pairs.get("JobState"), pairs.get("Reason")]
    nodes = s.do("sinfo", "-N", "-l").stdout.splitlines()
    seen["sinfo -N -l: header"] = nodes[1].split() if len(nodes) > 1 else nodes
    seen["sinfo -N -l: node|partition"] = sorted(
        "|".join(line.split()[:2]) for line in nodes[2:] if line.strip()
    )
    s.cancel_all()
    return seen, {"done": done_job}


ENV_VARS = (
    "SLURM_GPUS_PER_NODE",
    "SLURM_MEM_PER_CPU",
    "SLURM_JOB_ACCOUNT",
    "SLURM_JOB_QOS",
    "SLURM_JOB_DEPENDENCY",
    "SLURM_NTASKS",
    "SLURM_NPROCS",
    "SLURM_NTASKS_PER_NODE",
)


def environment(s: System, d: Path) -> tuple[Seen, Seen]:
    """8. the variables issue 57 names, after a met ``afterok`` and without ``--ntasks``."""
    first = s.submit("-W", "--wrap", "true", cwd=d)
    body = "#SBATCH -o env.out\n" + "".join(f"echo {v}=${{{v}-unset}}\n" for v in ENV_VARS)
    done = s.do(
        "sbatch",
        "-W",
        f"--dependency=afterok:{first}",
        "--gpus-per-node=1",
        "--mem-per-cpu=512M",
        script(d, "env.sh", body),
        cwd=d,
    )
    lines = s.norm((d / "env.out").read_text()).splitlines()
    return {"rc": done.returncode, **dict(line.split("=", 1) for line in lines)}, {}


def timeout_line(s: System, d: Path) -> tuple[Seen, Seen]:
    """9. a job past its limit: the ``CANCELLED AT ... DUE TO TIME LIMIT`` line, TIMEOUT."""
    t0 = time.monotonic()
    job = s.submit("-t", "1", "-o", "to.out", "--wrap", "echo begun; sleep 300", cwd=d)
    final = s.wait_ended(job, 240)
    text = s.norm((d / "to.out").read_text())
    line = next((x for x in text.splitlines() if "DUE TO TIME LIMIT" in x), None)
    return {"state": final, "time-limit line": line}, {
        "submit to end s": round(time.monotonic() - t0, 1)
    }


def interactive(s: System, d: Path) -> tuple[Seen, Seen]:
    """10. srun's failed task, Ctrl-C while queued, salloc's lines and shell, srun through a
    .bashrc's PATH."""
    seen: Seen = {}
    failed = subprocess.run(
        s.srun(["-n1"], ["bash", "-c", "exit 3"]),
        env=s.env,
        cwd=d,
        capture_output=True,
        text=True,
        timeout=120,
    )
    seen["srun exit 3: rc"] = failed.returncode
    seen["srun exit 3: error line"] = [x for x in failed.stderr.splitlines() if "Exited" in x]
    blocker = s.submit("--gres=gpu:h100:8", "--wrap", "sleep 120", cwd=d)
    s.wait_state(blocker, {"RUNNING"}, 60)
    waiting = subprocess.Popen(
        s.srun(["--gres=gpu:h100:1"], ["true"]),
        env=s.env,
        cwd=d,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(4)
    waiting.send_signal(signal.SIGINT)
    _, err = waiting.communicate(timeout=60)
    seen["Ctrl-C while queued: rc"] = waiting.returncode
    s.do("scancel", blocker)
    s.wait_ended(blocker, 60)
    shell = (
        "echo n=$(env | grep -c ^SLURM_); echo cvd=${CUDA_VISIBLE_DEVICES-unset}; "
        "srun -n2 true 2>err.txt; echo srun-n2 rc=$?; echo err=$(head -c 90 err.txt)"
    )
    held = subprocess.run(
        s.salloc(["-n1", "--gres=gpu:h100:1"], ["bash", "-c", shell]),
        env=s.env,
        cwd=d,
        capture_output=True,
        text=True,
        timeout=120,
    )
    words = re.findall(r"(Granted|Relinquishing) job allocation", held.stderr)
    out = dict(line.split("=", 1) for line in held.stdout.splitlines() if "=" in line)
    seen["salloc: lines"] = words
    seen["salloc: shell's CUDA_VISIBLE_DEVICES"] = out.get("cvd")
    seen["salloc: srun -n2 in a 1-task allocation, rc"] = out.get("srun-n2 rc")
    body = (
        "#SBATCH -o path.out\nexport PATH=/usr/bin:/bin\n"
        "srun -n1 bash -c 'echo step=$SLURM_STEP_ID'\n"
    )
    s.do("sbatch", "-W", script(d, "path.sh", body), cwd=d)
    seen["PATH=/usr/bin:/bin; srun"] = (d / "path.out").read_text()
    detail = {
        "salloc SLURM_* count": out.get("n"),
        "srun -n2 error": s.norm(out.get("err", "")),
        "Ctrl-C stderr": s.norm(err.strip()),
    }
    return seen, detail


def partitions_declared(s: System, d: Path) -> tuple[Seen, Seen]:
    """11. ``up --blueprint FILE --partition ...`` (railyard's slurm.conf): the partitions a
    user sees in ``sinfo -N -l``. Slurm's side reads the running slurm.conf."""
    if s.name == "slurm":
        lines = s.do("sinfo", "-N", "-l").stdout.splitlines()[2:]
        return {"partitions": sorted(line.split()[2] for line in lines if line.strip())}, {}
    blueprint = d / "bp.yaml"
    blueprint.write_text(
        "name: compare\nnode_types:\n  box: {gpu: H100-SXM-80GB, gpus: 8, cpu_cores: 16,"
        " power_w: 10000}\nnode_groups:\n  n: {node_type: box, count: 1, hostname_prefix: box}\n"
    )
    from benchmarks.slurm.compare_env import Railyard

    server = Railyard(
        d / "home",
        (
            "--blueprint",
            str(blueprint),
            "--node-name",
            "box001",
            "--partition",
            "gpu Default=YES",
            "--partition",
            "debug",
        ),
        base=(),
    )
    try:
        lines = server.cli("nodes", "-N", "-l").stdout.splitlines()[2:]
    finally:
        server.stop()
    return {"partitions": sorted(line.split()[2] for line in lines if line.strip())}, {}


THROTTLE_T_S = 20


def throttled_array(s: System, d: Path) -> tuple[Seen, Seen]:
    """Issue 56 item 3, scaled (45 s to 20 s): a 2-GPU job, an array ``%2`` of shorter 1-GPU
    tasks, an 8-GPU job, two later 1-GPU jobs; does the 8-GPU job start as the 2-GPU job
    ends (all 8 GPUs free), and who went first. Time limits on every job (the later ones'
    too long to backfill), so that both backfills know when GPUs free up."""
    stamp = f"date +%s.%N > {d}/start-$L"
    t, task_s = THROTTLE_T_S, THROTTLE_T_S * 2 // 5
    s.submit("-t", "1", "--gres=gpu:h100:2", "--wrap", f"L=two; {stamp}; sleep {t}", cwd=d)
    array = f"L=array$SLURM_ARRAY_TASK_ID; {stamp}; sleep {task_s}"
    s.submit("-t", "1", "--array=0-3%2", "--gres=gpu:h100:1", "--wrap", array, cwd=d)
    time.sleep(2)
    submitted = time.time()
    big = s.submit("-t", "1", "--gres=gpu:h100:8", "--wrap", f"L=big; {stamp}; sleep 2", cwd=d)
    for n in (1, 2):
        s.submit("-t", "2", "--gres=gpu:h100:1", "--wrap", f"L=later{n}; {stamp}; sleep 5", cwd=d)
    s.wait_ended(big, 4 * t + 60)
    started = {p.name[6:]: float(p.read_text()) for p in d.glob("start-*")}
    s.cancel_all()
    big_at = started.get("big")
    delay_s = None if big_at is None else big_at - submitted
    before = sorted(k for k, v in started.items() if big_at is not None and v < big_at)
    seen = {
        "started before the 8-GPU job": before,
        "8-GPU job starts as the 2-GPU job ends": delay_s is not None and delay_s < t + 6,
    }
    return seen, {"8-GPU start after submit s": None if delay_s is None else round(delay_s, 1)}


CASES: dict[str, Case] = {
    "1 open-mode append": open_mode_append,
    "2 -p gpu,debug": partition_list,
    "3 srun --gpus/--gres in a job": srun_gpus,
    "4 --export=NONE,FOO=bar": export_none_plus,
    "5 requeue": requeue,
    "6 cancel --signal=USR1 --batch": cancel_signal_batch,
    "7 squeue/sacct/show job/sinfo": queue_views,
    "8 SLURM_* variables": environment,
    "9 TIMEOUT line": timeout_line,
    "10 interactive": interactive,
    "11 up --blueprint --partition": partitions_declared,
    "56.3 throttled array": throttled_array,
}

DELIBERATE: dict[str, dict[str, str]] = {
    "8 SLURM_* variables": {
        "SLURM_JOB_ACCOUNT": "railyard has no sacctmgr accounts: a job is charged to its queue "
        "(quota, fair share), so the account is the queue's name",
    },
    "10 interactive": {
        "salloc: srun -n2 in a 1-task allocation, rc": "srun -n2 in a one-task allocation is "
        "refused by both ('srun: error: Unable to create step...: More processors requested "
        "than permitted'); railyard's srun exits 2 (its rule for a request it refuses), "
        "Slurm's 1; `if ! srun ...` reads both alike",
    },
    "56.3 throttled array": {
        "started before the 8-GPU job": "the 8-GPU job starts at the same moment on both, as "
        "the 2-GPU job ends; Slurm ranks the array (older) ahead of it and starts tasks 2-3 as "
        "tasks 0-1 end (8 s), railyard decides a throttled array's released tasks just after "
        "the head job of their flavor (issue 56 item 3's rule: they may backfill around its "
        "reservation, never pass it), so with limits past that reservation they wait and "
        "4 GPUs idle 10 s",
    },
}
"""Per case, the fields where railyard differs on purpose, with why (the docs' table says
the same)."""

OPEN: dict[str, dict[str, str]] = {}
"""Per case, the fields where railyard still differs and should not: open work, shown as
such (the extended tier's test expects them to fail)."""
