"""The attack campaign of issue 20, end to end against a live server: a root `railyard up`
(multi-user mode) shared by two fresh Unix accounts, alice and bob; bob attacks from his own
account (his shell, his jobs, his token). Each row is one attack: what must happen, what did,
and whether the boundary held. The attacks that broke it in the review of b858d76 come
first, then the ones that held then and must keep holding.

Run as root: ``python benchmarks/attack_campaign.py [--ray] [--only WORD]`` (``--ray`` adds
the tokenless ``ray.init`` against a head started by ``railyard join --head``: about a minute
more; ``--only`` runs the attacks whose name holds WORD); prints a table and writes
``benchmarks/results/attack_campaign.json``. Exit 1 if any attack got through.

Each attack is also measured as the other users meet it meanwhile (issue 52): a bystander
polls ``/healthz`` every 100 ms (its p99 latency, and how many answers were not 200), and
alice submits a 1-GPU job as the attack begins (the seconds from her submit to its start, as
the store recorded it). Attacks of later reviews live in ``benchmarks/attacks_*.py``, each
module a list ``ATTACKS`` of (name, what must happen, function); this script runs them after
its own. The same attacks, one per test, are ``tests/security/``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.integration.server_proc import ServerProcess, free_port
from tests.integration.tenants import Site, finished, shared_site, submit, user, wait

RESULTS = Path(__file__).parent / "results" / "attack_campaign.json"


@dataclass
class Row:
    attack: str
    expected: str
    result: str
    held: bool
    healthz_p99_ms: float | None = None  # what a bystander saw while the attack ran
    healthz_failures: int = 0
    alice_start_s: float | None = None  # alice's 1-GPU job, submitted as the attack began


Attack = Callable[[Site], tuple[str, bool]]
ATTACKS: list[tuple[str, str, Attack]] = []


def attack(name: str, expected: str) -> Callable[[Attack], Attack]:
    def register(fn: Attack) -> Attack:
        ATTACKS.append((name, expected, fn))
        return fn

    return register


# -- helpers ----------------------------------------------------------------------------------


def post_job(site: Site, token: str, **body: Any) -> httpx.Response:
    body.setdefault("gpus", 1)
    body.setdefault("export", "ALL")
    body.setdefault("env", {"PATH": "/usr/local/bin:/usr/bin:/bin"})
    response: httpx.Response = site.server.call("POST", "/v1/jobs", token=token, json=body)
    return response


def said(response: httpx.Response) -> str:
    """Status and the first line the server said."""
    try:
        detail = str(response.json().get("detail", ""))
    except (ValueError, AttributeError):
        detail = response.text
    return f"{response.status_code} {detail.splitlines()[0][:70] if detail else ''}".strip()


def through_spool(site: Site, target: Path) -> str:
    """``<spool>/../../..<target>``: textually inside the spool, really ``target``."""
    return str(site.spool) + "/.." * (len(site.spool.parts) - 1) + str(target)


def bob_log_through(site: Site, output: str, secret: str) -> tuple[str, bool]:
    """Bob's job writes to ``output``; he then asks for its log. Held: nothing of ``secret``."""
    response = post_job(site, site.bob.token, command=["true"], output=output,
                        workdir=str(site.bob.home))  # fmt: skip
    if response.status_code != 201:
        return f"refused at submit: {said(response)}", response.status_code < 500
    job_id = response.json()[0]["id"]
    finished(site.server, job_id)
    logs = site.server.call("GET", f"/v1/jobs/{job_id}/logs", token=site.bob.token)
    leaked = secret in logs.text
    shown = "text withheld" if logs.status_code == 200 and not leaked else said(logs)
    return ("LEAKED " if leaked else "") + shown, not leaked and logs.status_code < 500


def alice_sleeper(site: Site, env: dict[str, str] | None = None) -> tuple[str, str]:
    """A running job of alice's that wrote its pid; (job id, pid)."""
    pid_file = site.alice.home / f"pid-{time.monotonic_ns()}"
    job_id = submit(site.server, site.alice.token, gpus=0,
                    command=["bash", "-c", f"echo $$ > {pid_file}; exec sleep 120"],
                    env=env or {"PATH": "/usr/bin:/bin"})  # fmt: skip
    wait(lambda: pid_file.exists() and pid_file.read_text().strip() != "")
    return job_id, pid_file.read_text().strip()


def cancel(site: Site, job_id: str) -> None:
    site.server.call("DELETE", f"/v1/jobs/{job_id}")


def alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ProcessLookupError, ValueError):
        return False
    return True


# -- files through `railyard logs` (item 1) -----------------------------------------------------


@attack("logs: --output=<spool>/../<state>/client.json", "the admin token is not shown")
def dotdot_client_json(site: Site) -> tuple[str, bool]:
    client = site.server.state_dir / "client.json"
    return bob_log_through(site, through_spool(site, client), site.server.token)


@attack("logs: --output=<spool>/../etc/shadow", "nothing of /etc/shadow")
def dotdot_shadow(site: Site) -> tuple[str, bool]:
    return bob_log_through(site, through_spool(site, Path("/etc/shadow")), "root:")


@attack("logs: symlink in bob's checkpoints/ to alice's", "alice's checkpoint not shown")
def planted_symlink(site: Site) -> tuple[str, bool]:
    alice_job = submit(site.server, site.alice.token, gpus=0, command=["bash", "-c",
                       'echo alice-ckpt-secret > "$RAILYARD_CHECKPOINT_DIR/ckpt.txt"'])  # fmt: skip
    finished(site.server, alice_job)
    planted = submit(site.server, site.bob.token, gpus=0, command=["true"])
    finished(site.server, planted)
    link = site.spool / planted / "checkpoints" / "link"
    site.bob.shell(f"ln -s {site.spool / alice_job / 'checkpoints'} {link}")
    return bob_log_through(site, f"{link}/ckpt.txt", "alice-ckpt-secret")


@attack("logs: --output=/proc/<alice's job>/environ", "alice's environment not shown")
def proc_environ(site: Site) -> tuple[str, bool]:
    alice_job, pid = alice_sleeper(site, {"PATH": "/usr/bin:/bin", "ALICE_ENV": "alice-env-secret"})
    try:
        return bob_log_through(site, through_spool(site, Path(f"/proc/{pid}/environ")),
                               "alice-env-secret")  # fmt: skip
    finally:
        cancel(site, alice_job)


@attack("logs: --output=<alice's 0600 file>", "alice's file not shown")
def alice_file(site: Site) -> tuple[str, bool]:
    secret = site.alice.home / "secret.txt"
    site.alice.shell(f"umask 077; echo alice-file-secret > {secret}")
    return bob_log_through(site, str(secret), "alice-file-secret")


@attack("submit: NUL in --output", "4xx at submit, one line")
def nul_output(site: Site) -> tuple[str, bool]:
    response = post_job(site, site.bob.token, command=["true"], output="out\x00.txt")
    return said(response), 400 <= response.status_code < 500


@attack("submit: a plain user mapped to root", "403: only an admin's jobs run as root")
def mapped_to_root(site: Site) -> tuple[str, bool]:
    created = site.server.call("POST", "/v1/users", json={"name": "rooted", "unix_user": "root"})
    if created.status_code not in (200, 201):
        return f"user not created: {said(created)}", True
    site.server.request("POST", "/v1/queues/default/members", json={"user": "rooted"})
    token = site.server.request("POST", "/v1/tokens", json={"user": "rooted"})["token"]
    response = post_job(site, token, command=["id", "-u"])
    return said(response), response.status_code == 403


# -- processes and GPUs (items 3, 4) ------------------------------------------------------------

DETACH = (
    "setsid nohup sleep 600 >/dev/null 2>&1 & echo $! > {d}/nohup.pid; "
    "( setsid bash -c 'sleep 600 & echo $! > {d}/daemon.pid' & ); "
    "sleep 600"
)


@attack("cancel: setsid nohup sleep & + fork-setsid-fork", "every process ends with the job")
def outlive_cancel(site: Site) -> tuple[str, bool]:
    d = site.bob.home / f"detach-{time.monotonic_ns()}"
    site.bob.shell(f"mkdir -p {d}")
    job_id = submit(site.server, site.bob.token, gpus=0, command=["bash", "-c", DETACH.format(d=d)])
    pids = [d / "nohup.pid", d / "daemon.pid"]
    wait(lambda: all(p.exists() and p.read_text().strip() for p in pids))
    found = [p.read_text().strip() for p in pids]
    site.server.call("DELETE", f"/v1/jobs/{job_id}", token=site.bob.token)
    finished(site.server, job_id)
    deadline = time.monotonic() + 15
    while any(alive(p) for p in found) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = [p for p in found if alive(p)]
    for pid in left:
        os.kill(int(pid), 9)
    return (f"survivors {left}" if left else "2 detached processes ended"), not left


@attack("devices: a 1-GPU job opens every /dev/nvidiaN", "only its own GPU: others EPERM")
def other_gpus(site: Site) -> tuple[str, bool]:
    devdir = site.scratch / f"dev-{time.monotonic_ns()}"
    devdir.mkdir()
    os.chmod(devdir, 0o755)
    for minor in range(4):
        subprocess.run(["mknod", "-m", "666", str(devdir / f"nvidia{minor}"), "c", "195",
                        str(minor)], check=True)  # fmt: skip
    probe = (
        "import errno, json, os, sys\nout = {}\n"
        "for n in range(4):\n"
        "    try:\n        os.close(os.open(f'" + str(devdir) + "/nvidia{n}', os.O_RDWR))\n"
        "        out[n] = 'opened'\n"
        "    except OSError as exc:\n        out[n] = errno.errorcode[exc.errno]\n"
        "print(json.dumps({'visible': os.environ.get('CUDA_VISIBLE_DEVICES'), 'open': out}))\n"
    )
    out = site.bob.home / f"gpus-{time.monotonic_ns()}.out"
    job_id = submit(site.server, site.bob.token, gpus=1, output=str(out),
                    command=[site.python, "-c", probe])  # fmt: skip
    finished(site.server, job_id)
    line = [x for x in out.read_text().splitlines() if x.startswith("{")]
    if not line:
        return "no answer from the job", False
    facts = json.loads(line[-1])
    own = str(facts["visible"])
    others = {n: e for n, e in facts["open"].items() if n != own}
    held = all(e == "EPERM" for e in others.values()) and facts["open"][own] != "EPERM"
    return f"own GPU {own}: {facts['open'][own]}; others: {sorted(set(others.values()))}", held


# -- priorities and admins (items 5, 6) ---------------------------------------------------------


@attack("submit: --priority 1000000 (bob)", "403 naming the most he may ask")
def priority_high(site: Site) -> tuple[str, bool]:
    response = post_job(site, site.bob.token, command=["true"], priority=1000000)
    return said(response), response.status_code == 403


@attack("submit: --priority critical (bob)", "403 naming the most he may ask")
def priority_critical(site: Site) -> tuple[str, bool]:
    response = post_job(site, site.bob.token, command=["true"], priority="critical")
    return said(response), response.status_code == 403


@attack("submit: --nice -5 (bob)", "403: only admins raise a priority")
def negative_nice(site: Site) -> tuple[str, bool]:
    response = post_job(site, site.bob.token, command=["true"], nice=-5)
    return said(response), response.status_code == 403


@attack("PATCH /v1/users/bob is_admin=true (bob)", "403")
def promote_self(site: Site) -> tuple[str, bool]:
    response = site.server.call("PATCH", "/v1/users/bob", token=site.bob.token,
                                json={"is_admin": True})  # fmt: skip
    return said(response), response.status_code in (403, 404)


@attack("PATCH /v1/users/admin is_admin=false (the last admin)", "409, admin calls still work")
def demote_last_admin(site: Site) -> tuple[str, bool]:
    response = site.server.call("PATCH", "/v1/users/admin", json={"is_admin": False})
    still = site.server.call("GET", "/v1/users").status_code
    return f"{said(response)}; admin GET /v1/users {still}", response.status_code == 409


# -- the dashboard (item 7) ---------------------------------------------------------------------


@attack("dashboard: bearer token as the session cookie", "not logged in")
def token_cookie(site: Site) -> tuple[str, bool]:
    response = httpx.get(f"{site.server.url}/ui/", cookies={"railyard_session": site.bob.token},
                         follow_redirects=False, timeout=10)  # fmt: skip
    where = response.headers.get("location", "")
    return f"{response.status_code} -> {where}", response.status_code in (303, 307, 401, 403)


@attack("dashboard: cross-site login POST", "403")
def login_csrf(site: Site) -> tuple[str, bool]:
    response = httpx.post(f"{site.server.url}/ui/login", data={"token": site.bob.token},
                          headers={"Origin": "https://evil.example"}, timeout=10)  # fmt: skip
    return f"{response.status_code}", response.status_code == 403


@attack("dashboard: security headers on /ui/login", "CSP, X-Frame-Options, nosniff")
def ui_headers(site: Site) -> tuple[str, bool]:
    headers = httpx.get(f"{site.server.url}/ui/login", timeout=10).headers
    wanted = ("content-security-policy", "x-frame-options", "x-content-type-options")
    missing = [h for h in wanted if h not in headers]
    return (f"missing {missing}" if missing else "all three present"), not missing


# -- smaller (item 8) -------------------------------------------------------------------------


@attack("submit: a job name with CR/LF", "4xx naming 'name'")
def crlf_name(site: Site) -> tuple[str, bool]:
    response = post_job(site, site.bob.token, command=["true"], name="x\r\n9 fake RUNNING")
    return said(response), 400 <= response.status_code < 500


@attack("submit: --dependency afterok:<alice's job>", "same answer as a job that does not exist")
def dependency_probe(site: Site) -> tuple[str, bool]:
    alice_job = submit(site.server, site.alice.token, gpus=0, command=["true"])
    finished(site.server, alice_job)
    theirs = post_job(site, site.bob.token, command=["true"], dependency=f"afterok:{alice_job}")
    missing = str(int(alice_job) + 100000)
    nobody = post_job(site, site.bob.token, command=["true"], dependency=f"afterok:{missing}")
    same = theirs.text == nobody.text.replace(missing, alice_job)
    return said(theirs), same and theirs.status_code != 201


@attack("up: --spool-dir inside the 0700 state directory", "exit 2, one line")
def spool_in_state(site: Site) -> tuple[str, bool]:
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp) / "state"
        state.mkdir(mode=0o700)
        first = ServerProcess(state, gpus=1, spool_dir=site.scratch / "spool-reachable")
        first.start(timeout_s=90)
        try:  # a store whose users map to their own accounts: they must reach the spool
            user(first, "bob", site.bob.account.pw_name)
        finally:
            first.stop()
        server = ServerProcess(state, gpus=1, spool_dir=state / "jobs")
        try:
            server.start(timeout_s=90)
        except RuntimeError as exc:
            lines = [x for x in str(exc).splitlines() if "cannot reach" in x]
            code = server.proc.returncode if server.proc else None
            return f"exit {code}: {lines[0][:70] if lines else ''}", code == 2 and len(lines) == 1
        server.stop()
        return "started", False


# -- what held in the review and must keep holding ----------------------------------------------


@attack("bob's job reads alice's spool, store, client.json, /proc/<pid>/environ", "all denied")
def direct_reads(site: Site) -> tuple[str, bool]:
    alice_job, pid = alice_sleeper(site, {"PATH": "/usr/bin:/bin", "ALICE_ENV": "x"})
    targets = [site.spool / alice_job / "logs" / "rank-0.log", site.spool / alice_job /
               "checkpoints", site.server.state_dir / "railyard.db",
               site.server.state_dir / "client.json", Path(f"/proc/{pid}/environ")]  # fmt: skip
    script = "; ".join(
        f"{'ls' if t.name == 'checkpoints' else 'cat'} {t} >/dev/null 2>&1 && echo READ {t}"
        for t in targets
    )
    out = site.bob.home / f"direct-{time.monotonic_ns()}.out"
    job_id = submit(site.server, site.bob.token, gpus=0, output=str(out),
                    command=["bash", "-c", script])  # fmt: skip
    finished(site.server, job_id)
    cancel(site, alice_job)
    read = [x for x in out.read_text().splitlines() if x.startswith("READ")]
    return (f"read {read}" if read else f"{len(targets)} of {len(targets)} denied"), not read


@attack("bob's job looks for a token in its environment", "none")
def token_in_env(site: Site) -> tuple[str, bool]:
    out = site.bob.home / f"env-{time.monotonic_ns()}.out"
    job_id = submit(site.server, site.bob.token, gpus=0, output=str(out), command=["env"])
    finished(site.server, job_id)
    text = out.read_text()
    found = [x.split("=")[0] for x in text.splitlines() if "ry_" in x or "RAILYARD_TOKEN" in x]
    return (f"found {found}" if found else "no token"), not found


@attack("GET alice's job and logs with bob's token", "404, as for no such job")
def cross_user_api(site: Site) -> tuple[str, bool]:
    alice_job = submit(site.server, site.alice.token, gpus=0, command=["true"])
    codes = [site.server.call("GET", path, token=site.bob.token).status_code
             for path in (f"/v1/jobs/{alice_job}", f"/v1/jobs/{alice_job}/logs")]  # fmt: skip
    cancelled = site.server.call("DELETE", f"/v1/jobs/{alice_job}", token=site.bob.token)
    codes.append(cancelled.status_code)
    return f"show {codes[0]}, logs {codes[1]}, cancel {codes[2]}", codes == [404, 404, 404]


@attack("a 17 MiB request body", "413, the server stays up")
def huge_body(site: Site) -> tuple[str, bool]:
    body = b'{"command": ["' + b"x" * (17 << 20) + b'"]}'
    response = httpx.post(f"{site.server.url}/v1/jobs", content=body, timeout=30,
                          headers={"Authorization": f"Bearer {site.bob.token}",
                                   "Content-Type": "application/json"})  # fmt: skip
    up = httpx.get(f"{site.server.url}/healthz", timeout=10).status_code
    return f"{response.status_code}; /healthz {up}", response.status_code == 413


@attack("bob's 10,000-task array while alice submits 50 jobs", "alice: no error, p99 < 1 s")
def array_storm(site: Site) -> tuple[str, bool]:
    times: list[float] = []
    errors: list[int] = []

    def alice() -> None:
        for _ in range(50):
            start = time.perf_counter()
            response = post_job(site, site.alice.token, command=["true"], gpus=0)
            times.append(time.perf_counter() - start)
            if response.status_code != 201:
                errors.append(response.status_code)

    thread = threading.Thread(target=alice)
    thread.start()
    start = time.perf_counter()
    storm = post_job(site, site.bob.token, command=["true"], gpus=1, array="0-9999%2")
    submit_s = time.perf_counter() - start
    thread.join()
    array_id = storm.json()[0]["id"].split("_")[0] if storm.status_code == 201 else None
    if array_id is not None:
        site.server.call("DELETE", f"/v1/jobs/{array_id}", token=site.bob.token)
    times.sort()
    p99_s = times[int(0.99 * (len(times) - 1))] if times else float("inf")
    result = f"array {storm.status_code} in {submit_s:.2f} s; alice p99 {p99_s * 1000:.0f} ms"
    return result + (f", errors {errors}" if errors else ""), not errors and p99_s < 1.0


def ray_tokenless(site: Site) -> tuple[str, bool]:
    """A head from `railyard join --head` on loopback, and a tokenless `ray.init` from a
    process with an empty HOME of its own (anyone who reaches the port)."""
    del site
    # Ray is an optional extra: imported only when --ray asks for this attack.
    from tests.security import test_ray_token as rt

    scratch = rt.Scratch()
    try:
        port = free_port()
        argv = [*rt.RAILYARD, "join", "--head", "--bind", "127.0.0.1", "--port", str(port)]
        argv += ["--node-name", "head", "--gpus", "0", "--ray-start-args", rt.ray_ports()]
        done = scratch.run(argv, scratch.env(scratch.home("head")))
        if done.returncode != 0:
            return f"head did not start: {done.stderr.strip()[-70:]}", False
        verdict, marker = rt.client(scratch, f"127.0.0.1:{port}", "attacker")
        return verdict, verdict.startswith("REFUSED") and not marker.exists()
    finally:
        scratch.close()


def later_attacks(ray: bool = False) -> list[tuple[str, str, Attack]]:
    """The attacks of later reviews, from ``benchmarks/attacks_*.py`` in name order (with
    ``ray``, their ``RAY_ATTACKS`` too)."""
    found: list[tuple[str, str, Attack]] = []
    for path in sorted(Path(__file__).parent.glob("attacks_*.py")):
        module = importlib.import_module(f"benchmarks.{path.stem}")
        found.extend(module.ATTACKS)
        if ray:
            found.extend(getattr(module, "RAY_ATTACKS", []))
    return found


class Bystander:
    """What the other users meet while one attack runs: ``/healthz`` polled every 100 ms from
    another client, and a 1-GPU job of alice's submitted as the attack begins."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.latencies_s: list[float] = []
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self.job_id: str | None = None

    def _poll(self) -> None:
        with httpx.Client(timeout=30) as client:
            while not self._stop.is_set():
                start = time.perf_counter()
                try:
                    ok = client.get(f"{self.site.server.url}/healthz").status_code == 200
                except httpx.HTTPError:
                    ok = False
                self.latencies_s.append(time.perf_counter() - start)
                self.failures += not ok
                self._stop.wait(0.1)

    def __enter__(self) -> Bystander:
        self._thread.start()
        response = post_job(self.site, self.site.alice.token, command=["true"], gpus=1)
        if response.status_code == 201:
            self.job_id = response.json()[0]["id"]
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def healthz_p99_ms(self) -> float | None:
        ordered = sorted(self.latencies_s)
        return round(ordered[int(0.99 * (len(ordered) - 1))] * 1000, 1) if ordered else None

    def alice_start_s(self) -> float | None:
        """Seconds from alice's submit to her job's start (waits up to 60 s for it)."""
        if self.job_id is None:
            return None
        server, deadline = self.site.server, time.monotonic() + 60
        while time.monotonic() < deadline:
            record = server.request("GET", f"/v1/jobs/{self.job_id}")
            if record.get("start_t_s") is not None:
                return round(record["start_t_s"] - record["submit_t_s"], 2)
            time.sleep(0.2)
        return None


def run(ray: bool, only: str | None = None) -> list[Row]:
    rows: list[Row] = []
    chosen = list(ATTACKS) + later_attacks(ray)
    if ray:
        chosen.append(("ray.init(address=HEAD) without the token", "refused", ray_tokenless))
    if only:
        chosen = [c for c in chosen if only.lower() in c[0].lower()]
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp) / "state"
        state.mkdir()
        with shared_site(state) as site:
            for name, expected, fn in chosen:
                with Bystander(site) as bystander:
                    try:
                        result, held = fn(site)
                    except Exception as exc:  # an attack that breaks the harness is a row too
                        result, held = f"error: {type(exc).__name__}: {exc}"[:90], False
                row = Row(name, expected, re.sub(r"\s+", " ", result), held,
                          bystander.healthz_p99_ms(), bystander.failures,
                          bystander.alice_start_s())  # fmt: skip
                rows.append(row)
                print(f"{'held' if held else 'BROKE':>5}  {name}: {result} "
                      f"(healthz p99 {row.healthz_p99_ms} ms, {row.healthz_failures} not 200; "
                      f"alice's job started in {row.alice_start_s} s)", flush=True)  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ray", action="store_true", help="also attack a Ray head (slower)")
    parser.add_argument("--only", metavar="WORD", help="run the attacks whose name holds WORD")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("attack_campaign: run as root (it creates two Unix users)")
    started = time.monotonic()
    rows = run(args.ray, args.only)
    print()
    print(f"{'attack':<62} {'result':<60} {'healthz p99':>11} {'alice':>6} held")
    for row in rows:
        p99 = "-" if row.healthz_p99_ms is None else f"{row.healthz_p99_ms:.0f} ms"
        alice = "-" if row.alice_start_s is None else f"{row.alice_start_s:.1f} s"
        print(f"{row.attack[:62]:<62} {row.result[:60]:<60} {p99:>11} {alice:>6} {row.held}")
    held = sum(r.held for r in rows)
    print(f"\n{held} of {len(rows)} held; {time.monotonic() - started:.0f} s")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps([asdict(r) for r in rows], indent=1) + "\n")
    sys.exit(0 if held == len(rows) else 1)


if __name__ == "__main__":
    main()
