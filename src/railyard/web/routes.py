"""The dashboard's pages and actions (`/ui/...`), each a thin reader of control's use-cases.

A user sees their own jobs and the queues they belong to; an admin sees everything and may
drain and resume nodes. Other users' jobs are never named to a user: on the fabric map their
GPUs are grey, and their job pages answer 403. Every action is a POST with the CSRF field and
a confirmation in the browser, and goes through the same use-case as the API (same checks,
same audit trail).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from sqlalchemy.orm import Session

from railyard.control.errors import Invalid, NotFound, ServiceError
from railyard.control.usecases import joblist as job_list
from railyard.control.usecases import joblookup, jobs, jobsamples, nodes
from railyard.control.usecases.accounting import (
    Report,
    gpu_hours,
    nominal_gpus,
    window_start_t_s,
)
from railyard.control.usecases.alerts import alerts
from railyard.control.usecases.fabric import fabric_view
from railyard.control.usecases.history import SPANS_S
from railyard.control.usecases.jobviews import (
    JobDetail,
    JobLine,
    job_detail,
    job_filters,
    read_job_log,
    sessions_of,
)
from railyard.control.usecases.nodeutil import node_utilization
from railyard.control.usecases.overview import (
    InUse,
    LoopReport,
    gpus_by_flavor,
    gpus_in_use_by,
    head_jobs,
    loop_report,
    pending_by_reason,
    pending_counts,
)
from railyard.control.usecases.placements import placement_text, readable
from railyard.control.usecases.queueviews import overcommitted, queue_shares
from railyard.control.usecases.whatif import expected_starts
from railyard.sched import SchedulerConfig
from railyard.web import accounting as accounting_page
from railyard.web import alerts as alerts_view
from railyard.web import appproxy, assets, bulk, fabric, jobcharts, joblist, login
from railyard.web import nodes as nodes_view
from railyard.web import overview as overview_page
from railyard.web import queues as queues_view
from railyard.web import why as why_panel
from railyard.web.headers import SecureRoute
from railyard.web.login import LOGIN_PATH, form, refused
from railyard.web.page import button, command_text, duration, esc, page, table
from railyard.web.session import COOKIE, Viewer, cross_site, csrf_ok, drop_cookie, viewer
from railyard.web.whatif import StartCache, twin

MAX_OFFSET = 10_000_000  # a page beyond is empty anyway: no huge OFFSET for the store


def router(scheduler: SchedulerConfig | None = None) -> APIRouter:
    """The dashboard; `scheduler` is the policy the what-if simulates (the server's). Every
    route is a `SecureRoute`; `GET /` leads to it."""
    r = APIRouter(prefix="/ui", include_in_schema=False, route_class=SecureRoute)
    policy = scheduler or SchedulerConfig()
    simulate = twin(policy)
    starts = StartCache(simulate)

    def context(request: Request) -> Any:
        return request.app.state.railyard

    def guarded(render: Callable[[Request, Session, Viewer, float], Response]) -> Any:
        """Run `render` for a logged-in viewer; others go to the login page."""

        def handler(request: Request) -> Response:
            ctx = context(request)
            now = ctx.clock()
            with ctx.store.session() as session:
                who = viewer(request, session, now)
                if who is None:
                    away = RedirectResponse(LOGIN_PATH, status_code=303)
                    if COOKIE in request.cookies:  # an ended session: forget it
                        drop_cookie(away, request, COOKIE)
                    return away
                return render(request, session, who, now)

        return handler

    # -- pages --------------------------------------------------------------------------------

    def overview(request: Request, session: Session, who: Viewer, now: float) -> Response:
        flavors = gpus_by_flavor(session)
        rows = [[esc(f.flavor), _n(f.total), _n(f.in_use), _n(f.free), _n(f.draining),
                 _n(f.down)] for f in flavors]  # fmt: skip
        reasons = pending_by_reason(session, who.user)
        waiting = (sum(n for _, n in reasons) if who.admin
                   else sum(pending_counts(session).values()))  # fmt: skip
        span = overview_page.picked_range(request.query_params.get("range"))
        mine = "" if who.admin else " (yours)"
        loop = loop_report(session, context(request).loop_health, who.user, now)
        body = (
            (_loop_box(loop) if loop is not None else "")
            + "<h2>GPUs by flavor</h2>"
            + table(("flavor", "total", "in use", "free", "draining", "down"), rows)
            + overview_page.why_free(flavors, waiting,
                                     lambda: head_jobs(session, who.user))
            + f"<h2>Pending jobs by reason{mine}</h2>"
            + (table(("reason", "jobs"), [[esc(k), _n(v)] for k, v in reasons])
               if reasons else "<p class=muted>none waiting</p>")
            + _sessions(sessions_of(session, who.user))
            + _in_use(gpus_in_use_by(session, who.user))
            + overview_page.charts(session, now, sum(f.total for f in flavors), span)
        )  # fmt: skip
        return page("Overview", body, user=who.user.name, active="/ui/", csrf=who.csrf)

    def jobs_page(request: Request, session: Session, who: Viewer, now: float) -> Response:
        q = {k: v for k, v in request.query_params.items() if v}
        try:
            found = job_list.job_page(
                session, who.user, state=q.get("state"), queue=q.get("queue"),
                user=q.get("user") if who.admin else None, array=q.get("array"),
                search=q.get("q"), sort=q.get("sort") or "newest",
                offset=min(max(0, _int(q.get("offset"), 0)), MAX_OFFSET),
                limit=joblist.page_size(q.get("rows")),
            )  # fmt: skip
        except ServiceError as exc:
            return page("Jobs", f'<p class="err">{esc(exc)}</p>', user=who.user.name,
                        status=422, csrf=who.csrf)  # fmt: skip
        tbody = joblist.rows(found, now)
        if q.get("partial"):
            return HTMLResponse(tbody)
        body = (joblist.form(job_filters(session, who.user), q) + joblist.bulk_form(who.csrf)
                + joblist.pager(found, q) + tbody)  # fmt: skip
        return page("Jobs", body, user=who.user.name, active="/ui/jobs", csrf=who.csrf)

    def fabric_page(request: Request, session: Session, who: Viewer, now: float) -> Response:
        focus = request.query_params.get("job") or None
        params = {k: v for k, v in request.query_params.items() if v}
        body = fabric.render(fabric_view(session, who.user, focus), who, focus, params)
        return page("Fabric", body, user=who.user.name, active="/ui/fabric", csrf=who.csrf)

    def queues_page(request: Request, session: Session, who: Viewer, now: float) -> Response:
        body = queues_view.render(queue_shares(session, who.user), overcommitted(session))
        return page("Queues", body, user=who.user.name, active="/ui/queues", csrf=who.csrf)

    def whatif_page(request: Request, session: Session, who: Viewer, now: float) -> Response:
        began = time.perf_counter()
        found = expected_starts(session, who.user, now, simulate)
        took = time.perf_counter() - began
        rows = [[f'<a href="/ui/jobs/{esc(e.job_id)}">{esc(e.job_id)}</a>', esc(e.queue),
                 esc(e.user), _n(e.gpus),
                 "not within the horizon" if e.start_in_s is None else duration(e.start_in_s)]
                for e in found]  # fmt: skip
        body = (
            f"<p>The twin ran {policy.ordering} with {policy.backfill} backfill on the live "
            f"state in {took:.2f} s; jobs without a time limit are taken to run their queue's "
            "DefaultTime, or an hour.</p>"
            + (table(("job", "queue", "user", "GPUs", "expected start in"), rows)
               if rows else "<p class=muted>no pending jobs</p>")
        )  # fmt: skip
        return page("What-if", body, user=who.user.name, active="/ui/queues", csrf=who.csrf)

    def job_page(request: Request, session: Session, who: Viewer, now: float) -> Response:
        job_id = request.path_params["job_id"]
        try:
            found = job_detail(session, who.user, job_id, now)
        except NotFound:  # another user's job too: ids don't leak
            return page("No such job", f"<p>No job {esc(job_id)}.</p>", user=who.user.name,
                        status=404, csrf=who.csrf)  # fmt: skip
        points = jobsamples.history(session, found.line.id, points=jobcharts.POINTS,
                                    last_s=jobcharts.WINDOW_S)  # fmt: skip
        resources = jobcharts.render(points)
        detail = _job_detail(found, who, resources)
        return page(f"Job {job_id}", detail, user=who.user.name, active="/ui/jobs",
                    csrf=who.csrf)  # fmt: skip

    def usage(
        request: Request, session: Session, who: Viewer, now: float
    ) -> tuple[Report, int, str]:
        q = request.query_params
        days = _int(q.get("days"), 7)
        days = days if days in accounting_page.WINDOWS_DAYS else 7
        by = q.get("by") or "user"
        by = by if by in ("user", "queue", "account") else "user"
        start = window_start_t_s(days, now)
        period = accounting_page.PERIOD_OF_WINDOW[days]
        found = gpu_hours(session, who.user, start, now, now, period=period, by=(by,))
        return found, days, by

    def accounting_view(request: Request, session: Session, who: Viewer, now: float) -> Response:
        found, days, by = usage(request, session, who, now)
        nominal = nominal_gpus(session)
        body = accounting_page.render(found, nominal, days, by)
        return page("Accounting", body, user=who.user.name, active="/ui/accounting",
                    csrf=who.csrf)  # fmt: skip

    def samples_csv(request: Request, session: Session, who: Viewer, now: float) -> Response:
        job_id = request.path_params["job_id"]
        row, _ = joblookup.get_job(session, who.user, job_id)  # else 404 (the API's error handler)
        found = jobsamples.history(session, row.id, points=jobsamples.MAX_POINTS)
        disposition = {"Content-Disposition": f'attachment; filename="job-{row.id}-samples.csv"'}
        return Response(jobsamples.to_csv(found), media_type="text/csv", headers=disposition)

    def accounting_csv(request: Request, session: Session, who: Viewer, now: float) -> Response:
        found, days, by = usage(request, session, who, now)
        name = f"railyard-gpu-hours-{days}d-by-{by}.csv"
        disposition = {"Content-Disposition": f'attachment; filename="{name}"'}
        return Response(accounting_page.csv_text(found), media_type="text/csv",
                        headers=disposition)  # fmt: skip

    def alerts_page(request: Request, session: Session, who: Viewer, now: float) -> Response:
        found = alerts(session, context(request).loop_health, who.user, now)
        return page("Alerts", alerts_view.render(found), user=who.user.name, active="/ui/alerts",
                    csrf=who.csrf)  # fmt: skip

    def node_page(request: Request, session: Session, who: Viewer, now: float) -> Response:
        name = request.path_params["node"]
        span = overview_page.picked_range(request.query_params.get("range"))
        try:
            found = node_utilization(session, name, now, SPANS_S[span])
        except NotFound:
            return page("No such node", f"<p>No node {esc(name)}.</p>", user=who.user.name,
                        status=404, csrf=who.csrf)  # fmt: skip
        return page(f"Node {name}", nodes_view.render(found, span), user=who.user.name,
                    active="/ui/fabric", csrf=who.csrf)  # fmt: skip

    for path, render in (("/", overview), ("/jobs", jobs_page), ("/fabric", fabric_page),
                         ("/alerts", alerts_page), ("/nodes/{node}", node_page),
                         ("/queues", queues_page), ("/queues/whatif", whatif_page),
                         ("/accounting", accounting_view), ("/accounting.csv", accounting_csv),
                         ("/jobs/{job_id}", job_page),
                         ("/jobs/{job_id}/samples.csv", samples_csv)):  # fmt: skip
        r.add_api_route(path, guarded(render), methods=["GET"], response_class=HTMLResponse)

    @r.get("/jobs/{job_id}/start")
    def job_start(request: Request, job_id: str) -> Response:
        """The twin's expected start of a pending job the viewer may see (the why panel)."""
        ctx = context(request)
        with ctx.store.session() as session:
            who = viewer(request, session, ctx.clock())
            if who is None:
                return JSONResponse({"detail": "log in first"}, status_code=401)
            now = ctx.clock()
            try:
                found = job_detail(session, who.user, job_id, now)
            except ServiceError as exc:
                return JSONResponse({"detail": str(exc)}, status_code=404)
            if found.why is None:
                return JSONResponse({"pending": False, "start_t_s": None})
            known, start = starts.start_t_s(session, job_id, now)
        shown = "not within the twin's horizon" if start is None else (
            "now" if start <= now else f"in {duration(start - now)} (" + time.strftime(
                "%Y-%m-%d %H:%M:%S", time.localtime(start)) + ")")  # fmt: skip
        return JSONResponse({"pending": known, "start_t_s": start, "text": shown})

    @r.get("/jobs/{job_id}/log")
    def job_log(request: Request, job_id: str, rank: int = 0, offset: int = 0) -> Response:
        ctx = context(request)
        with ctx.store.session() as session:
            who = viewer(request, session, ctx.clock())
            if who is None:
                return JSONResponse({"detail": "log in first"}, status_code=401)
            try:
                piece = read_job_log(session, who.user, job_id, rank, offset, ctx.spool_dir,
                                     ctx.remote_log)  # fmt: skip
            except Invalid as exc:
                return JSONResponse({"detail": str(exc)}, status_code=422)
            except ServiceError as exc:
                return JSONResponse({"detail": str(exc)}, status_code=403)
            return JSONResponse(
                {"text": piece.text, "offset": piece.offset, "finished": piece.finished}
            )

    # -- actions ------------------------------------------------------------------------------

    def action(name: str, apply: Callable[[Session, Viewer, str, float, dict[str, str]], str]
               ) -> None:  # fmt: skip
        async def handler(request: Request) -> Response:
            fields = form(await request.body())
            target = request.path_params["target"]
            ctx = context(request)
            if cross_site(request) is not None or not csrf_ok(request, fields.get("csrf")):
                return refused("the form is stale or forged (CSRF); reload the page")

            def run() -> tuple[int, str]:
                with ctx.store.session() as session:
                    who = viewer(request, session, ctx.clock())
                    if who is None:
                        return 401, LOGIN_PATH
                    try:
                        return 303, apply(session, who, target, ctx.clock(), fields)
                    except ServiceError as exc:
                        return 409 if "admin" not in str(exc) else 403, str(exc)

            status, where = await run_in_threadpool(run)
            if status == 303:
                ctx.wake()
                return RedirectResponse(where, status_code=303)
            if status == 401:
                return RedirectResponse(where, status_code=303)
            return refused(where, status)

        r.add_api_route(f"/{name}", handler, methods=["POST"])

    def cancel(session: Session, who: Viewer, job_id: str, now: float, _: dict[str, str]) -> str:
        jobs.cancel_job(session, who.user, job_id, now)
        return f"/ui/jobs/{job_id}"

    def hold(session: Session, who: Viewer, job_id: str, now: float, _: dict[str, str]) -> str:
        jobs.hold_job(session, who.user, job_id, now)
        return f"/ui/jobs/{job_id}"

    def release(session: Session, who: Viewer, job_id: str, now: float, _: dict[str, str]) -> str:
        jobs.release_job(session, who.user, job_id, now)
        return f"/ui/jobs/{job_id}"

    def drain(session: Session, who: Viewer, node: str, now: float, f: dict[str, str]) -> str:
        nodes.drain_node(session, who.user, node, (f.get("reason") or "drained")[:200], now)
        return "/ui/fabric"

    def resume(session: Session, who: Viewer, node: str, now: float, _: dict[str, str]) -> str:
        nodes.resume_node(session, who.user, node, now)
        return "/ui/fabric"

    for name, apply in (("jobs/{target}/cancel", cancel), ("jobs/{target}/hold", hold),
                        ("jobs/{target}/release", release), ("nodes/{target}/drain", drain),
                        ("nodes/{target}/resume", resume)):  # fmt: skip
        action(name, apply)

    @r.post("/jobs/bulk")
    async def bulk_action(request: Request) -> Response:
        """The jobs list's selected jobs: one action, each job checked as its own button."""
        body = await request.body()
        ctx = context(request)
        if cross_site(request) is not None or not csrf_ok(request, form(body).get("csrf")):
            return refused("the form is stale or forged (CSRF); reload the page")
        action, ids = bulk.selected(body)
        if action not in bulk.ACTIONS or not ids:
            return refused("choose cancel, hold or release, and tick at least one job", 422)

        def run() -> Response:
            with ctx.store.session() as session:
                who = viewer(request, session, ctx.clock())
                if who is None:
                    return RedirectResponse(LOGIN_PATH, status_code=303)
                out = bulk.apply(session, who, action, ids, ctx.clock())
                return bulk.result_page(action, out, who.user.name, who.csrf)

        answer = await run_in_threadpool(run)
        ctx.wake()
        return answer

    @r.get("/static/{name}")
    def static(name: str) -> Response:
        found = assets.serve(name)
        return found if found is not None else _missing()

    @r.api_route("/{rest:path}", methods=["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"])
    def missing() -> Response:
        return _missing()

    top = APIRouter(include_in_schema=False, route_class=SecureRoute)

    @top.get("/")
    @top.get("/ui")
    def home() -> Response:
        return RedirectResponse("/ui/", status_code=307)

    top.include_router(login.router())
    top.include_router(appproxy.router())  # before the pages' catch-all
    top.include_router(r)  # last: its catch-all answers 404 for any other /ui path
    return top


# -- helpers ------------------------------------------------------------------------------------


def _missing() -> HTMLResponse:
    return page("Not found", "<p>No such page.</p>", user=None, status=404)


def _sessions(found: list[tuple[JobLine, str]]) -> str:
    """Your interactive sessions, an "Open" link on each running app."""
    if not found:
        return ""
    rows = []
    for line, kind in found:
        job = f'<a href="/ui/jobs/{esc(line.id)}">{esc(line.id)}</a>'
        app = kind == "app" and line.state == "running"
        link = f'<a class="button" href="/ui/jobs/{esc(line.id)}/app/">Open</a>' if app else ""
        what = "web app" if kind == "app" else f"terminal ({kind})"
        rows.append([job, esc(line.name), what, esc(line.state), _n(line.gpus), link])
    return "<h2>Your sessions</h2>" + table(
        ("job", "name", "kind", "state", "GPUs", ""), rows, tbody_id="sessions"
    )


def _in_use(found: InUse) -> str:
    """GPUs held now by queue and by user, side by side."""
    if not found.by_queue:
        return ""

    def part(title: str, rows: list[tuple[str, int]]) -> str:
        return (f'<div class="inline-table"><h2>{title}</h2>'
                + table(("", "GPUs"), [[esc(k), _n(v)] for k, v in rows]) + "</div>")  # fmt: skip

    return part("GPUs in use by queue", found.by_queue) + part("by user", found.by_user)


def _loop_box(report: LoopReport) -> str:
    """The scheduler loop as /healthz judges it, in the lines this viewer may read."""
    if report.ok:
        return "<p class=muted>scheduler loop: ok</p>"
    items = "".join(f"<li>{esc(line)}</li>" for line in report.lines)
    return f"<h2>Scheduler loop: failing</h2><ul class=loop-problems>{items}</ul>"


def _n(value: int | float) -> str:
    return f'<span class="num">{value}</span>'


def _int(text: str | None, default: int) -> int:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default


def _job_detail(job: JobDetail, who: Viewer, resources: str) -> str:
    line = job.line
    env = job.env_names
    facts = [
        ("state", f'<span class="state-{esc(line.state)}">{esc(line.state)}</span>'),
        ("reason", esc(line.reason)), ("queue", esc(line.queue)),
        ("user", esc(line.user)), ("Unix account", esc(job.unix_user)),
        ("GPUs", f"{job.workers} x {job.gpus_per_worker} {esc(job.flavor)}"),
        ("placement", esc(placement_text(line.placement)) or "-"),
        ("restarts", f"{job.restart_count} of at most {job.max_restarts}"),
        ("run time", duration(job.run_s) if job.run_s is not None else "-"),
        ("time limit", duration(job.walltime_s) if job.walltime_s else "none"),
        ("command", f"<code>{esc(command_text(job.command))}</code>" if job.command is not None
         else "batch script"),
        ("environment", esc(f"{len(env)} variables exported: " + ", ".join(env[:12])
                            + (", ..." if len(env) > 12 else ""))),
    ]  # fmt: skip
    summary = table(("", ""), [[esc(k), v] for k, v in facts])
    history = table(("when", "what", ""), [[
        esc(time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e.t_s))), esc(e.kind),
        esc(readable(e.message))] for e in job.events])  # fmt: skip
    actions = ""
    if job.interactive == "app" and job.mine and line.state == "running":
        actions = f'<a class="button" href="/ui/jobs/{esc(line.id)}/app/">Open</a> '
    if not job.finished:
        actions += button(f"/ui/jobs/{line.id}/cancel", "Cancel", who.csrf,
                         confirm=f"Cancel job {line.id}?")  # fmt: skip
        if job.pending:
            verb = "release" if job.hold else "hold"
            actions += " " + button(f"/ui/jobs/{line.id}/{verb}", verb.title(), who.csrf,
                                    confirm=f"{verb.title()} job {line.id}?")  # fmt: skip
    options = "".join(f'<option value="{i}">{i}</option>' for i in range(job.ranks))
    why = why_panel.render(job.why, line.id) if job.why is not None else ""
    return (
        summary + f"<p>{actions}</p>" + why
        + f'<p><a href="/ui/fabric?job={esc(line.id)}">Where its ranks sit</a></p>'
        + "<h2>History</h2>" + history + "<h2>Resources</h2>" + resources
        + f'<h2>Logs</h2><label>rank <select id="rank">{options}</select></label>'
        + '<pre class="log" id="log"></pre>'
    )  # fmt: skip
