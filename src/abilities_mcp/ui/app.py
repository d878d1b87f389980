"""The local page's web app (`abilities-mcp ui`): its routes, each reading the state file and the project's files
through the capabilities (the store, the catalog, the skill set, the workflows, the call approvals) and answering
with a server-rendered page, behind auth.Guard.

Every route is under the process's secret prefix, `/s/<prefix>` (auth.Gate.base; `/waiting` below is
`/s/<prefix>/waiting`), and so is every link a page draws (markup.path); a request for any other path gets a bare
404 from the guard.

| route | shows |
|---|---|
| `GET /login?token=…` | a one-time link: a session cookie, then the runs or the item the link is for (else 403) |
| `GET /` | the runs, newest first, filtered by `status` and `ability`, live |
| `GET /runs/{run_id}` | a run's timeline, child runs, answers and inputs, live |
| `GET /runs/{run_id}/steps/{step_id}` (`/follow`) | all that was kept of a step's output (its output as it comes) |
| `GET /abilities`, `/abilities/{name}` | the abilities; one as a graph with its problems |
| `GET /waiting`, `POST /waiting/runs/{id}`, `POST /waiting/calls/{id}` | what waits for a person, and their answer |
| `GET /skills?task=…` | the skills, their problems, a task routed to them |
| `GET /prerequisites` | the workflows, each session's records and verdicts, the latest call approvals |
| `GET /events` | server-sent events: what changed |

An answer given here is recorded with channel `web` and its origin (this page's address and the browser's
User-Agent); the run, driven by its own server process, reads it from the state file.
"""

from __future__ import annotations

import getpass
import logging
import threading
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..abilities.catalog import Catalog
from ..engine.recovery import recover_orphans
from ..errors import did_you_mean
from ..prerequisites.approvals import CallApprovals
from ..prerequisites.sessions import DEFAULT_TTL_SECONDS, SessionState
from ..state.database import Database
from ..state.project import Project
from ..state.store import LIVE, Store
from . import answers, definitions, live, pages
from .auth import Gate, Guard, Session
from .markup import el, inert, join, layout, links_under, path, refusal_page
from .signin import CALLBACK_PATH, SignedIn, TeamGate

STATIC = Path(__file__).parent / "static"
# Runs the list reads (top-level, newest first) before it filters: history keeps 500 by default.
LISTED_RUNS = 500
# Sessions the prerequisites page shows, newest first.
LISTED_SESSIONS = 20
# Call approvals the prerequisites page shows, newest first.
LISTED_CALLS = 50
# How many skills a routed task shows.
ROUTED_SKILLS = 5
# A browser's User-Agent is cut to this in the answer's origin.
MAX_AGENT_CHARS = 200
EVENT_STREAM_HEADERS = {"x-accel-buffering": "no"}

log = logging.getLogger(__name__)


class Page:
    """What every route needs: the project, its catalog (cached by mtime), the gate, and the stop signal."""

    def __init__(self, project: Project, gate: Gate, session_ttl: float, stopping: threading.Event, poll: float):
        self.project, self.gate, self.session_ttl = project, gate, session_ttl
        self.catalog = Catalog(project)
        self.stopping, self.poll = stopping, poll
        self.user = _user()

    def html(self, request: Request, title: str, body: object, current: str | None, status: int = 200) -> Response:
        session: Session | None = request.scope.get("state", {}).get("session")
        text = layout(
            title, body, current=current, session_csrf=session.csrf if session else None, project=str(self.project.root)
        )
        return HTMLResponse(text, status_code=status)

    def store(self) -> Store:
        return Store.open(self.project)

    def origin(self, request: Request) -> str:
        """Where an answer given here came from, for the record."""
        agent = inert(request.headers.get("user-agent", "unknown"))[:MAX_AGENT_CHARS]
        if not isinstance(self.gate, TeamGate):
            return f"page 127.0.0.1:{self.gate.port} (browser: {agent})"
        session = request.scope.get("state", {}).get("session")
        who = session.identity if isinstance(session, SignedIn) else None
        signed = f" signed in as {who.shown} ({who.key})" if who is not None else ""
        return f"page {self.gate.origin}{signed} (browser: {agent})"

    def answerer(self, request: Request) -> tuple[str | None, str]:
        """Who answers from this request: (their identity's key, how the record names them). On a team page only a
        signed-in approver answers (answers.NotTaken otherwise); on the local page, the person at this machine."""
        session = request.scope.get("state", {}).get("session")
        if not isinstance(self.gate, TeamGate):
            return None, f"{self.user} on the page"
        if not isinstance(session, SignedIn) or session.identity is None:
            raise answers.NotTaken("sign in first")
        if not session.approver:
            raise answers.NotTaken(
                f"{session.identity.shown} is not an approver on this server; whoever runs it names approvers "
                "with `serve --approvers` (or $ABILITIES_APPROVERS)"
            )
        return session.identity.key, f"{session.identity.shown} on the page"


def create_app(
    project: Project,
    gate: Gate,
    *,
    session_ttl: float | None = None,
    stopping: threading.Event | None = None,
    poll: float = live.POLL_SECONDS,
) -> Guard:
    """The page's ASGI app for a project, behind the gate; `stopping` set ends every event stream."""
    page = Page(project, gate, session_ttl or DEFAULT_TTL_SECONDS, stopping or threading.Event(), poll)
    routes = [  # within the prefix
        Route("/login", _bound(login, page)),
        Route(CALLBACK_PATH, _bound(callback, page)),
        Route("/", _bound(runs, page)),
        Route("/runs/{run_id}", _bound(run, page)),
        Route("/runs/{run_id}/steps/{step_id}", _bound(step_output, page)),
        Route("/runs/{run_id}/steps/{step_id}/follow", _bound(follow, page)),
        Route("/abilities", _bound(abilities, page)),
        Route("/abilities/{name:path}", _bound(ability, page)),
        Route("/waiting", _bound(waiting, page)),
        Route("/waiting/runs/{run_id}", _bound(answer_run, page), methods=["POST"]),
        Route("/waiting/calls/{call_id}", _bound(answer_call, page), methods=["POST"]),
        Route("/skills", _bound(skills, page)),
        Route("/prerequisites", _bound(prerequisites, page)),
        Route("/events", _bound(events, page)),
        Route("/favicon.ico", _no_icon),  # the pages name it; there is none
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    handlers = {HTTPException: _bound(_http_error, page), Exception: _bound(_bug, page)}
    app = Starlette(routes=[Mount(gate.base, routes=routes)], exception_handlers=handlers)
    return Guard(app, gate, _refusal(gate.base))


async def _no_icon(request: Request) -> Response:
    return Response(status_code=204)


def _bound(route: Callable[..., Any], page: Page) -> Callable[..., Any]:
    """The route for Starlette: given the page, and drawing its links under the page's prefix."""

    async def endpoint(request: Request, *rest: Any) -> Response:
        with links_under(page.gate.base):
            return await route(page, request, *rest)

    endpoint.__name__ = route.__name__
    return endpoint


def _refusal(base: str) -> Callable[[int, str, str], str]:
    """The guard's refusal page, its links under the prefix (the guard refuses only requests under it)."""

    def refusal(status: int, title: str, message: str) -> str:
        with links_under(base):
            return refusal_page(status, title, message)

    return refusal


async def _in_thread(function: Callable[[], Response]) -> Response:
    """File and database work off the event loop (the streams and other requests go on meanwhile)."""
    return await anyio.to_thread.run_sync(function)


# --- the login ------------------------------------------------------------------------------------------------------


async def login(page: Page, request: Request) -> Response:
    if request.method == "HEAD":  # a link preview looking, not the person opening it: the link stays unspent
        return Response(status_code=200, media_type="text/html")
    if isinstance(page.gate, TeamGate):  # the team page: the provider signs the person in, in this browser
        url, browser = await page.gate.start_login(request.headers.get("cookie"))
        response = RedirectResponse(url, status_code=303)
        response.headers.append("set-cookie", page.gate.login_cookie_header(browser))
        return response
    found = page.gate.login_to(request.query_params.get("token", ""))
    if found is None:
        message = (
            "This login link is not valid: it was used already, it expired (a link works for 10 minutes), or it is "
            "not the one printed. Run `abilities-mcp ui` again for a new link."
        )
        return HTMLResponse(refusal_page(403, "Link not valid", message), status_code=403)
    session, target = found  # where the link lands: fixed when it was made (auth.Gate.mint), never by the request
    response = RedirectResponse(page.gate.base + target, status_code=303)
    response.headers.append("set-cookie", page.gate.cookie_header(session))
    return response


async def callback(page: Page, request: Request) -> Response:
    """The browser back from the team's provider: a session for whoever signed in (ui/signin.py)."""
    if not isinstance(page.gate, TeamGate):
        raise HTTPException(404)
    try:
        session = await page.gate.finish_login(dict(request.query_params), request.headers.get("cookie"))
    except Exception as exc:  # the provider refused the code, or could not be reached: said, nothing opened
        log.warning("sign-in failed: %s", exc)
        session = None
    if session is None:
        message = (
            "Signing in did not finish: it took too long, this return was used already, it was begun in another "
            f"browser, or the provider refused it. Open {page.gate.home}login to sign in again."
        )
        return HTMLResponse(refusal_page(403, "Not signed in", message), status_code=403)
    response = RedirectResponse(page.gate.base + "/waiting", status_code=303)
    response.headers.append("set-cookie", page.gate.cookie_header(session))
    return response


# --- runs -----------------------------------------------------------------------------------------------------------


async def runs(page: Page, request: Request) -> Response:
    status, ability = request.query_params.get("status", ""), request.query_params.get("ability", "")

    def render() -> Response:
        with closing(page.store()) as store:
            recover_orphans(store)  # a run whose server died shows as interrupted, as `status` shows it
            every = store.runs(limit=LISTED_RUNS)
        shown = [r for r in every if (not status or r.status == status) and (not ability or r.ability == ability)]
        known = sorted({r.ability for r in every} | set(page.catalog.refresh().winners))
        return page.html(request, "Runs", pages.runs_body(shown, status, ability, known), "")

    return await _in_thread(render)


async def run(page: Page, request: Request) -> Response:
    run_id = request.path_params["run_id"]

    def render() -> Response:
        with closing(page.store()) as store:
            recover_orphans(store)
            record = store.get_run(run_id)
            if record is None:
                return _not_found(page, request, f"There is no run {run_id!r}; the runs list shows those kept.")
            children = store.children(run_id)
            parent = store.get_run(record.parent_run) if record.parent_run else None
        svg = _graph(record.definition, record.ability, status={s.step_id: s.status for s in record.steps})
        title = f"Run {record.run_id}"
        return page.html(request, title, pages.run_body(record, children, parent, svg), None)

    return await _in_thread(render)


async def step_output(page: Page, request: Request) -> Response:
    run_id, step_id = request.path_params["run_id"], request.path_params["step_id"]

    def render() -> Response:
        with closing(page.store()) as store:
            record = store.get_run(run_id)
        step = next((s for s in record.steps if s.step_id == step_id), None) if record else None
        if record is None or step is None:
            return _not_found(page, request, f"Run {run_id!r} has no step {step_id!r}.")
        live_step = step.status == "running" or (step.status == "pending" and record.status in LIVE)
        follow_url = path("runs", run_id, "steps", step_id, "follow") if live_step else None
        return page.html(request, f"Output of {step_id}", pages.step_body(record, step, follow_url), None)

    return await _in_thread(render)


async def follow(page: Page, request: Request) -> Response:
    run_id, step_id = request.path_params["run_id"], request.path_params["step_id"]
    stream = live.output(page.project.state_location, page.project.state_dir, run_id, step_id, page.stopping)
    return StreamingResponse(stream, media_type="text/event-stream", headers=EVENT_STREAM_HEADERS)


async def events(page: Page, request: Request) -> Response:
    stream = live.changes(page.project.state_location, page.stopping, page.poll)
    return StreamingResponse(stream, media_type="text/event-stream", headers=EVENT_STREAM_HEADERS)


# --- abilities ------------------------------------------------------------------------------------------------------


async def abilities(page: Page, request: Request) -> Response:
    def render() -> Response:
        catalog = page.catalog.refresh()
        problems = {str(d.path): len(catalog.diagnostics(d)) for d in catalog.definitions}
        winners = {name: d.path for name, d in catalog.winners.items()}
        body = definitions.abilities_body(catalog.definitions, problems, winners)
        return page.html(request, "Abilities", body, "abilities")

    return await _in_thread(render)


async def ability(page: Page, request: Request) -> Response:
    name = request.path_params["name"]

    def render() -> Response:
        catalog = page.catalog.refresh()
        found = catalog.winners.get(name) or next((d for d in catalog.definitions if d.name == name), None)
        if found is None:
            close = did_you_mean(name, catalog.winners)
            hint = f" Did you mean {close!r}?" if close else ""
            return _not_found(page, request, f"There is no ability {name!r}.{hint}")
        problems = catalog.diagnostics(found)
        svg = _graph(definitions.ability_data(found), found.name, problems=[(p.path, p.message) for p in problems])
        return page.html(request, f"Ability {found.name}", definitions.ability_body(found, problems, svg), "abilities")

    return await _in_thread(render)


def _graph(
    data: dict[str, Any], name: str, problems: list[tuple[str, str]] = (), status: dict[str, str] | None = None
) -> str:
    """graph.py's picture, its nested abilities linked to their own pages."""
    from .graph import ability_svg

    return ability_svg(
        data, problems, name, link=lambda other: path("abilities", other, keep_slashes=True), status=status
    )


# --- waiting for you ------------------------------------------------------------------------------------------------


async def waiting(page: Page, request: Request) -> Response:
    answered = request.query_params.get("answered")
    flash = f"Recorded your answer to {answered}." if answered else None

    def render() -> Response:
        with closing(page.store()) as store:
            recover_orphans(store)
            found = answers.asking(store)
            calls = CallApprovals(store).waiting()
        session = request.scope["state"]["session"]
        body = answers.waiting_body(found, calls, session.csrf, flash)
        return page.html(request, "Waiting for you", body, "waiting")

    return await _in_thread(render)


async def answer_run(page: Page, request: Request) -> Response:
    """A person's answer to a run's question, given on the page (answers.py)."""
    run_id, form, origin = request.path_params["run_id"], await _form(request), page.origin(request)

    def record() -> Response:
        with closing(page.store()) as store:
            try:
                identity, _ = page.answerer(request)
                said = answers.answer_run(store, page.catalog, run_id, form, origin, identity)
            except answers.NotTaken as exc:
                return _not_taken(page, request, str(exc))
        return _taken(request, run_id, said)

    return await _in_thread(record)


async def answer_call(page: Page, request: Request) -> Response:
    """A person's yes (or no) to one tool call a workflow holds, given on the page (answers.py)."""
    call_id, form, origin = request.path_params["call_id"], await _form(request), page.origin(request)

    def record() -> Response:
        with closing(Database.open(page.project)) as db:
            try:
                identity, by = page.answerer(request)
                said = answers.answer_call(db, call_id, form, by, origin, identity)
            except answers.NotTaken as exc:
                return _not_taken(page, request, str(exc))
        return _taken(request, call_id, said)

    return await _in_thread(record)


async def _form(request: Request) -> dict[str, str]:
    """The form's fields (the guard read and checked the body already), each one's first value."""
    try:
        fields = parse_qs((await request.body()).decode("utf-8"))
    except UnicodeDecodeError:
        return {}
    return {k: v[0] for k, v in fields.items() if v}


def _wants_json(request: Request) -> bool:
    return "application/json" in request.headers.get("accept", "")


def _taken(request: Request, item: str, said: str) -> Response:
    """The answer was recorded: app.js gets JSON, a form without the script goes back to the list."""
    if _wants_json(request):
        return JSONResponse({"ok": True, "message": said})
    return RedirectResponse(f"{path('waiting')}?answered={quote(item, safe='')}", status_code=303)


def _not_taken(page: Page, request: Request, why: str) -> Response:
    message = f"Nothing was recorded: {why}"
    if _wants_json(request):
        return JSONResponse({"ok": False, "message": message}, status_code=409)
    body = join([el("p", message, role="alert"), el("p", el("a", "Back to what waits for you", href=path("waiting")))])
    return page.html(request, "Not recorded", body, "waiting", status=409)


# --- skills and prerequisites --------------------------------------------------------------------------------------


async def skills(page: Page, request: Request) -> Response:
    task = request.query_params.get("task", "")

    def render() -> Response:
        catalog = page.catalog.refresh()
        skillset = catalog.skillset
        found = list(skillset.skills.values())
        problems = [p for f in catalog.files() if f.kind == "skill" for p in f.diagnostics]
        matches = skillset.router().route(task, ROUTED_SKILLS) if task.strip() else None
        warnings = {s.name: skillset.warnings(s) for s in found}
        body = definitions.skills_body(found, warnings, problems, skillset.notes, task, matches)
        return page.html(request, "Skills", body, "skills")

    return await _in_thread(render)


async def prerequisites(page: Page, request: Request) -> Response:
    def render() -> Response:
        found = page.catalog.workflows.current()
        with closing(Database.open(page.project)) as db:
            sessions = _sessions(db, page.session_ttl)
            calls = CallApprovals(db).listed(limit=LISTED_CALLS)
        body = definitions.prerequisites_body(found, sessions, calls)
        return page.html(request, "Prerequisites", body, "prerequisites")

    return await _in_thread(render)


def _sessions(db: Database, ttl: float) -> list[definitions.SessionRecords]:
    """The latest sessions whose records have not lapsed, newest first (a lapsed one is not read: reading would
    start it over)."""
    now = time.time()
    rows = db.db.execute(
        "SELECT session_id, started_at FROM prereq_sessions WHERE started_at > ? ORDER BY started_at DESC LIMIT ?",
        (now - ttl, LISTED_SESSIONS),
    ).fetchall()
    state = SessionState(db, ttl)
    return [definitions.SessionRecords(sid, at, at + ttl, state.done(sid)) for sid, at in rows]


# --- errors ---------------------------------------------------------------------------------------------------------


def _not_found(page: Page, request: Request, message: str) -> Response:
    return page.html(request, "Not found", el("p", message), None, status=404)


async def _http_error(page: Page, request: Request, exc: HTTPException) -> Response:
    if exc.status_code == 404:
        return _not_found(page, request, "There is no such page here.")
    return page.html(request, "Refused", el("p", str(exc.detail)), None, status=exc.status_code)


async def _bug(page: Page, request: Request, exc: Exception) -> Response:
    body = el("p", "Something went wrong while making this page; the terminal running `abilities-mcp ui` shows it.")
    return page.html(request, "Error", body, None, status=500)


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "a person"
