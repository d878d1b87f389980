"""The local page's server side (issue 32) through its ASGI app: the secret path prefix every page is under (a bare
404 outside it, the cookie scoped to it, every link drawn within it), the one-time login, the session cookie, the
checks every request passes (Host, cookie, Origin, CSRF) with nothing changed when one fails, an answer from the page
completing a real run and a call approval (channel web), hostile text escaped, and the live event streams.

The test browsers' base URL is the page's prefix, as the printed link's is: `/waiting` below asks for
`http://127.0.0.1:PORT/s/<prefix>/waiting`; a URL outside the prefix is written whole, from ORIGIN.

Runs are real: started through the in-memory MCP client as an agent would, driven by that server's engine, answered
through the page; the two share nothing but the state file.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser
from pathlib import Path

import httpx2 as httpx
import pytest
from starlette.testclient import TestClient

from abilities_mcp.prerequisites.approvals import CallApprovals, Request
from abilities_mcp.state.database import Database
from abilities_mcp.state.project import Project
from abilities_mcp.state.spool import Spool, spool_path
from abilities_mcp.state.store import RunRecord, StepRecord, Store
from abilities_mcp.ui.app import create_app
from abilities_mcp.ui.auth import COOKIE, TOKEN_SECONDS, Gate
from support import GATED, state_db, stored_run, until, write_skill

PORT = 8765
ORIGIN = f"http://127.0.0.1:{PORT}"
BROWSER = "Mozilla/5.0 (X11; Linux x86_64) TestBrowser/1.0"
# The page's event streams read the state file this often in these tests (0.5 s in use).
POLL = 0.02
# How long a stream may take to say what the test waits for.
STREAM_SECONDS = 10.0
HOSTILE = "<script>alert(1)</script>\x1b[2J\u202e\"'><img src=x onerror=alert(2)>"
PUSH = "git push --force origin main"


class Clock:
    """A clock the test moves: the login link's age."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def gate(clock: Clock) -> Gate:
    return Gate(PORT, clock=clock)


@pytest.fixture
def stopping() -> threading.Event:
    return threading.Event()


@pytest.fixture
def app(project: Project, gate: Gate, stopping: threading.Event):
    return create_app(project, gate, stopping=stopping, poll=POLL)


@pytest.fixture
async def browser(app, gate: Gate) -> AsyncIterator[httpx.AsyncClient]:
    """A browser on the page, not logged in; its URLs are under the page's prefix."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=gate.home, headers={"user-agent": BROWSER}) as c:
        yield c


@pytest.fixture
async def person(browser: httpx.AsyncClient, gate: Gate) -> httpx.AsyncClient:
    """The same browser, logged in with the printed link."""
    answer = await browser.get(_link(gate))
    assert answer.status_code == 303, answer.text
    return browser


@pytest.fixture
def sync_person(app, gate: Gate) -> Iterator[TestClient]:
    """A logged-in browser for the event streams (Starlette's client reads a stream as it comes)."""
    with TestClient(app, base_url=gate.home, follow_redirects=False) as c:
        assert c.get(_link(gate)).status_code == 303
        yield c


def _link(gate: Gate) -> str:
    return gate.login_url()  # whole: http://127.0.0.1:PORT/s/<prefix>/login?token=…


def _csrf(page: httpx.Response) -> str:
    found = re.search(r'data-csrf="([^"]+)"', page.text)
    assert found, page.text
    return found.group(1)


async def _waiting_run(client, write, body: str = GATED, name: str = "gated") -> str:
    write(name, body)
    run = (await client.call_tool("ability_run", {"name": name, "wait_seconds": 10})).structured_content
    assert run["status"] in ("awaiting_approval", "awaiting_decision"), run
    return run["run_id"]


def _ask_call(root: Path, shown: str = PUSH) -> str:
    db = Database(state_db(root))
    try:
        request = Request("Bash", "d" * 64, shown, ("force-push",), "Force-push to main?", 600.0)
        return CallApprovals(db).ask("s1", "claude", request).call_id
    finally:
        db.close()


def _call(root: Path, call_id: str):
    db = Database(state_db(root))
    try:
        return CallApprovals(db).get(call_id)
    finally:
        db.close()


# --- the login -------------------------------------------------------------------------------------------------------


async def test_the_link_logs_in_once_with_a_strict_http_only_cookie_and_a_second_use_is_refused(
    browser: httpx.AsyncClient, gate: Gate
) -> None:
    link = _link(gate)
    assert re.fullmatch(rf"{ORIGIN}/s/[\w-]{{22}}/login\?token=[\w-]{{43}}", link) and link.startswith(gate.home)
    first = await browser.get(link)
    assert first.status_code == 303 and first.headers["location"] == f"{gate.base}/"
    cookie = first.headers["set-cookie"]
    assert re.fullmatch(rf"{COOKIE}=[\w-]{{40,}}; HttpOnly; SameSite=Strict; Path={gate.base}/", cookie), cookie
    assert "Secure" not in cookie and "Max-Age" not in cookie and "Domain" not in cookie
    assert (await browser.get("/")).status_code == 200

    browser.cookies.clear()  # whoever else read the link
    again = await browser.get(link)
    assert again.status_code == 403 and "set-cookie" not in again.headers
    assert "Run `abilities-mcp ui` again for a new link" in again.text
    assert (await browser.get("/")).status_code == 401


async def test_a_link_older_than_ten_minutes_is_refused_and_spent(
    browser: httpx.AsyncClient, gate: Gate, clock: Clock
) -> None:
    link = _link(gate)
    clock.now += TOKEN_SECONDS
    late = await browser.get(link)
    assert late.status_code == 403 and "set-cookie" not in late.headers
    clock.now -= TOKEN_SECONDS  # even back in time, a link is tried once
    assert (await browser.get(link)).status_code == 403


async def test_a_link_preview_head_request_leaves_the_link_unspent(browser: httpx.AsyncClient, gate: Gate) -> None:
    looked = await browser.head(_link(gate))
    assert looked.status_code == 200 and "set-cookie" not in looked.headers
    assert (await browser.get(_link(gate))).status_code == 303


async def test_the_session_cookie_is_found_among_other_pages_cookies(person: httpx.AsyncClient) -> None:
    ours = person.cookies[COOKIE]
    person.cookies.clear()  # sent by hand below, as a browser sends every cookie of 127.0.0.1, whatever its port
    crowded = f'theme="dark; wide"; junk; a=b=c; {COOKIE}={ours}; other=1'
    assert (await person.get("/", headers={"cookie": crowded})).status_code == 200
    assert (await person.get("/", headers={"cookie": f"{COOKIE}={ours}x"})).status_code == 401


@pytest.mark.parametrize("token", ["", "x", "A" * 43], ids=["empty", "short", "guessed"])
async def test_a_wrong_token_is_refused_and_leaves_the_link_usable(
    browser: httpx.AsyncClient, gate: Gate, token: str
) -> None:
    assert (await browser.get("/login", params={"token": token})).status_code == 403
    assert (await browser.get(_link(gate))).status_code == 303


# --- the secret prefix: nothing outside it, the cookie only within it -------------------------------------------------


def _near(prefix: str) -> str:
    """Another prefix one character off."""
    return prefix[:-1] + ("B" if prefix[-1] == "A" else "A")


# Paths outside the page's prefix: `{base}` is `/s/<prefix>`, `{near}` a prefix one character off.
OUTSIDE = [
    "/", "/waiting", "/runs/run_1", "/abilities/gated", "/events", "/static/app.js", "/favicon.ico", "/login",
    "/s/", "/s/{near}/", "/s/{near}/waiting", "/s/{near}/static/app.js", "{base}", "{base}x/", "{base}x/waiting",
    "/x{base}/", "/s{base}/waiting",
]  # fmt: skip


@pytest.mark.parametrize("url", OUTSIDE)
async def test_outside_the_prefix_every_request_is_a_bare_404_even_with_the_cookie(
    person: httpx.AsyncClient, gate: Gate, client, write, url: str
) -> None:
    run_id = await _waiting_run(client, write)
    ours = {"cookie": f"{COOKIE}={person.cookies[COOKIE]}"}  # presented by hand: a browser would not send it here
    where = ORIGIN + url.replace("run_1", run_id).format(base=gate.base, near=_near(gate.prefix))
    for answer in (await person.get(where, headers=ours), await person.head(where, headers=ours)):
        assert answer.status_code == 404, where
        assert answer.content == b"" and answer.headers["content-length"] == "0"  # no page, no data, no prefix
        assert "set-cookie" not in answer.headers and "location" not in answer.headers
        assert answer.headers["content-security-policy"] == "default-src 'self'; frame-ancestors 'none'"


async def test_a_change_outside_the_prefix_with_the_cookie_origin_and_token_is_a_404_and_changes_nothing(
    person: httpx.AsyncClient, gate: Gate, client, write, root: Path
) -> None:
    run_id = await _waiting_run(client, write)
    call_id = _ask_call(root)
    token = _csrf(await person.get("/waiting"))
    ours = {"cookie": f"{COOKIE}={person.cookies[COOKIE]}", "origin": ORIGIN, "x-csrf-token": token}
    for base in ("", f"/s/{_near(gate.prefix)}"):
        for url in (f"{base}/waiting/runs/{run_id}", f"{base}/waiting/calls/{call_id}"):
            answer = await person.post(ORIGIN + url, data={"csrf": token, "answer": "approve"}, headers=ours)
            assert answer.status_code == 404 and answer.content == b"", url
    record = stored_run(root, run_id)
    assert (record.status, record.answers, record.answer) == ("awaiting_approval", [], None)
    assert _call(root, call_id).status == "pending"


async def test_the_login_link_outside_the_prefix_is_a_404_and_leaves_the_link_unspent(
    browser: httpx.AsyncClient, gate: Gate
) -> None:
    token = _link(gate).partition("?token=")[2]
    for url in (f"{ORIGIN}/login?token={token}", f"{ORIGIN}/s/{_near(gate.prefix)}/login?token={token}"):
        answer = await browser.get(url)
        assert answer.status_code == 404 and answer.content == b"" and "set-cookie" not in answer.headers
    assert (await browser.get(_link(gate))).status_code == 303


async def test_the_cookie_is_scoped_to_the_prefix_so_the_browser_sends_it_nowhere_else(
    person: httpx.AsyncClient, gate: Gate
) -> None:
    [cookie] = list(person.cookies.jar)
    assert (cookie.name, cookie.domain, cookie.path) == (COOKIE, "127.0.0.1", f"{gate.base}/")
    sent: list[str] = []

    async def record(request: httpx.Request) -> None:
        sent.append(request.headers.get("cookie", ""))

    person.event_hooks["request"].append(record)
    await person.get(f"{ORIGIN}/")  # another server on 127.0.0.1 would see this request: no cookie in it
    await person.get(f"{ORIGIN}/s/{_near(gate.prefix)}/")
    await person.get("/")
    assert sent == ["", "", f"{COOKIE}={cookie.value}"]


class _Links(HTMLParser):
    """Every URL a page names: href, src, action, and the streams app.js opens (data-events, data-follow)."""

    NAMES = ("href", "src", "action", "data-events", "data-follow")

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found += [(tag, name, value or "") for name, value in attrs if name in self.NAMES]


def _links(text: str) -> list[tuple[str, str, str]]:
    parser = _Links()
    parser.feed(text)
    return parser.found


OUTER = "description: runs gated\nsteps:\n  - {id: inner, type: workflow, workflow: gated}\n"


async def test_every_link_on_every_page_is_under_the_prefix(
    browser: httpx.AsyncClient, gate: Gate, client, write, root: Path, project: Project
) -> None:
    refused = await browser.get("/waiting")  # no cookie yet: the refusal page's links
    await browser.get(_link(gate))
    run_id = await _waiting_run(client, write)
    write("outer", OUTER)
    _ask_call(root)
    step = StepRecord("build", 0, "script", status="running", started_at=time.time())
    _stored(project, "run_live", "gated", "running", started=time.time(), steps=[step])
    # The live step's page first: the runs list finds run_live's server gone and marks it interrupted.
    urls = ["/runs/run_live/steps/build", "/", f"/runs/{run_id}", f"/runs/{run_id}/steps/build", "/abilities",
            "/abilities/gated", "/abilities/outer", "/waiting", "/skills?task=x", "/prerequisites", "/nothing"]  # fmt: skip
    pages = [refused, *[await browser.get(u) for u in urls]]
    assert [p.status_code for p in pages] == [401, *[200] * 10, 404]
    found = [(tag, name, value) for page in pages for tag, name, value in _links(page.text)]
    in_page = [f for f in found if f[1] == "href" and f[2].startswith("#")]  # the skip link: this very page
    outside = [f for f in found if not f[2].startswith(f"{gate.base}/") and f not in in_page]
    assert outside == [], outside
    kinds = {(tag, name) for tag, name, _ in found}
    for kind in [("link", "href"), ("script", "src"), ("body", "data-events"), ("form", "action"), ("a", "href"),
                 ("pre", "data-follow")]:  # fmt: skip
        assert kind in kinds, kind  # each sort of link was seen, so each was checked
    assert ("a", "href", f"{gate.base}/waiting#ask-{run_id}") in found
    graph = pages[urls.index("/abilities/outer") + 1].text  # its nested ability, linked from the picture
    assert f'<a href="{gate.base}/abilities/gated" aria-label="open the ability gated">' in graph


@pytest.mark.parametrize(
    "url",
    ["/", "/runs/run_1", "/runs/run_1/steps/a", "/abilities", "/abilities/gated", "/waiting", "/skills?task=x",
     "/prerequisites", "/events", "/runs/run_1/steps/a/follow", "/nothing"],
)  # fmt: skip
async def test_without_the_cookie_every_page_is_401_and_shows_nothing(
    browser: httpx.AsyncClient, client, write, url: str
) -> None:
    run_id = await _waiting_run(client, write)
    page = await browser.get(url.replace("run_1", run_id))
    assert page.status_code == 401
    assert "abilities-mcp ui" in page.text
    assert run_id not in page.text and "gated" not in page.text and "data-csrf" not in page.text


async def test_the_static_files_need_no_cookie_and_hold_no_data(browser: httpx.AsyncClient) -> None:
    script, style = await browser.get("/static/app.js"), await browser.get("/static/app.css")
    assert script.status_code == style.status_code == 200
    assert "EventSource" in script.text and script.headers["content-type"].split(";")[0].endswith("javascript")
    assert style.headers["content-type"].startswith("text/css")


@pytest.mark.parametrize("host", ["evil.example", f"evil.example:{PORT}", "127.0.0.1:1", f"127.0.0.2:{PORT}", ""])
async def test_a_foreign_host_header_is_refused_on_every_request(
    person: httpx.AsyncClient, project: Project, host: str
) -> None:
    for url in ("/", "/static/app.css", "/waiting", "/events"):
        assert (await person.get(url, headers={"host": host})).status_code == 403, url
    fresh = Gate(PORT)
    app = create_app(project, fresh)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=ORIGIN) as other:
        assert (await other.get(_link(fresh), headers={"host": host})).status_code == 403
        assert (await other.get(_link(fresh), headers={"host": f"localhost:{PORT}"})).status_code == 303


async def test_every_answer_carries_the_headers_that_keep_the_page_to_itself(
    browser: httpx.AsyncClient, gate: Gate
) -> None:
    answers = [
        await browser.get("/"),
        await browser.get("/static/app.css"),
        await browser.get("/", headers={"host": "evil.example"}),
        await browser.get(_link(gate)),
        await browser.get("/waiting"),
        await browser.get("/nothing"),
        await browser.get(f"{ORIGIN}/waiting"),  # outside the prefix
    ]
    assert [a.status_code for a in answers] == [401, 200, 403, 303, 200, 404, 404]
    for a in answers:
        assert a.headers["content-security-policy"] == "default-src 'self'; frame-ancestors 'none'"
        assert a.headers["x-frame-options"] == "DENY" and a.headers["referrer-policy"] == "no-referrer"
        assert a.headers["x-content-type-options"] == "nosniff"
    assert [a.headers["cache-control"] for a in answers] == ["no-store", "no-cache", *["no-store"] * 5]
    assert "<script>" not in answers[4].text and "style=" not in answers[4].text  # nothing inline the policy blocks


# --- changes: refused unless from the page, with its token --------------------------------------------------------


def _refusals() -> list[tuple[str, Callable[[str], dict[str, str]], dict[str, str], int]]:
    """(case, form fields from the page's token, headers, status): each a change the page must refuse. `{base}` in a
    header is the page's prefix, `/s/<prefix>`."""
    ours = {"origin": ORIGIN}
    elsewhere = "A" * 22  # another prefix's place
    return [
        ("no-cookie", lambda t: {"csrf": t}, ours, 401),
        ("foreign-origin", lambda t: {"csrf": t}, {"origin": "http://evil.example"}, 403),
        ("null-origin", lambda t: {"csrf": t}, {"origin": "null"}, 403),
        ("longer-port-origin", lambda t: {"csrf": t}, {"origin": ORIGIN + "0"}, 403),
        ("localhost-origin", lambda t: {"csrf": t}, {"origin": f"http://localhost:{PORT}"}, 403),
        ("no-origin-no-referer", lambda t: {"csrf": t}, {}, 403),
        ("foreign-referer", lambda t: {"csrf": t}, {"referer": "http://evil.example/waiting"}, 403),
        ("longer-port-referer", lambda t: {"csrf": t}, {"referer": ORIGIN + "0{base}/waiting"}, 403),
        ("referer-outside-the-prefix", lambda t: {"csrf": t}, {"referer": f"{ORIGIN}/waiting"}, 403),
        ("referer-under-another-prefix", lambda t: {"csrf": t}, {"referer": f"{ORIGIN}/s/{elsewhere}/waiting"}, 403),
        ("referer-the-prefix-without-slash", lambda t: {"csrf": t}, {"referer": ORIGIN + "{base}"}, 403),
        ("wrong-csrf", lambda t: {"csrf": "0" * len(t)}, ours, 403),
        ("missing-csrf", lambda t: {}, ours, 403),
        ("two-csrf", lambda t: {"csrf": [t, "x"]}, ours, 403),
        ("foreign-host", lambda t: {"csrf": t}, {**ours, "host": "evil.example"}, 403),
        ("wrong-csrf-header", lambda t: {}, {**ours, "x-csrf-token": "nope"}, 403),
    ]


REFUSALS = _refusals()


@pytest.mark.parametrize(("case", "form", "headers", "status"), REFUSALS, ids=[r[0] for r in REFUSALS])
async def test_a_change_without_the_cookie_the_pages_origin_or_its_token_is_refused_and_changes_nothing(
    person: httpx.AsyncClient,
    gate: Gate,
    client,
    write,
    root: Path,
    case: str,
    form,
    headers: dict[str, str],
    status: int,
) -> None:
    run_id = await _waiting_run(client, write)
    call_id = _ask_call(root)
    token = _csrf(await person.get("/waiting"))
    if case == "no-cookie":
        person.cookies.clear()
    headers = {k: v.replace("{base}", gate.base) for k, v in headers.items()}
    for url in (f"/waiting/runs/{run_id}", f"/waiting/calls/{call_id}"):
        fields = {**form(token), "answer": "approve"}
        answer = await person.post(url, data=fields, headers=headers)
        assert answer.status_code == status, (url, answer.text)
        assert "Recorded" not in answer.text
    record = stored_run(root, run_id)
    assert (record.status, record.answers, record.answer) == ("awaiting_approval", [], None)
    assert _call(root, call_id).status == "pending"


async def test_a_referer_from_the_page_stands_in_for_a_missing_origin(person, gate, client, write, root) -> None:
    run_id = await _waiting_run(client, write)
    token = _csrf(await person.get("/waiting"))
    fields = {"csrf": token, "answer": "reject"}
    answer = await person.post(f"/waiting/runs/{run_id}", data=fields, headers={"referer": f"{gate.home}waiting"})
    assert answer.status_code == 303
    await until(lambda: stored_run(root, run_id).status == "failed")


async def test_a_change_in_another_method_or_too_large_is_refused(person, client, write, root: Path) -> None:
    run_id = await _waiting_run(client, write)
    token = _csrf(await person.get("/waiting"))
    url = f"/waiting/runs/{run_id}"
    ours = {"origin": ORIGIN, "x-csrf-token": token}
    assert (await person.put(url, data={"answer": "approve"}, headers=ours)).status_code == 405
    assert (await person.delete(url, headers=ours)).status_code == 405
    big = {"answer": "approve", "note": "x" * 70_000}
    assert (await person.post(url, data=big, headers=ours)).status_code == 413
    assert stored_run(root, run_id).answers == []


# --- answers from the page ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("button", "ends", "said"), [("approve", "completed", "approved"), ("reject", "failed", "rejected")]
)
async def test_an_answer_on_the_page_drives_the_real_run_and_is_recorded_as_web(
    person: httpx.AsyncClient, gate: Gate, client, write, root: Path, button: str, ends: str, said: str
) -> None:
    run_id = await _waiting_run(client, write)
    waiting = await person.get("/waiting")
    item = re.search(rf'<article [^>]*data-run="{run_id}".*?</article>', waiting.text, re.S)
    assert item and "Deploy v1.0.0?" in item.group(0), waiting.text
    assert '<button type="submit" name="answer" value="approve" class="approve">Approve</button>' in item.group(0)
    assert '<button type="submit" name="answer" value="reject" class="reject">Reject</button>' in item.group(0)
    assert "touch deployed" in item.group(0)  # what would run after a yes
    fields = {"csrf": _csrf(waiting), "step": "approve", "answer": button, "note": "from the page"}
    fields["question"] = re.search(r'name="question" value="([^"]+)"', item.group(0)).group(1)

    answer = await person.post(f"/waiting/runs/{run_id}", data=fields, headers={"origin": ORIGIN})

    assert answer.status_code == 303 and answer.headers["location"] == f"{gate.base}/waiting?answered={run_id}"
    record = await until(lambda: (r := stored_run(root, run_id)).status == ends and r)
    assert (root / "deployed").exists() == (button == "approve")
    [trail] = record.answers
    assert trail["step_id"] == "approve"
    assert trail["detail"] == f"{said} by web (page 127.0.0.1:{PORT} (browser: {BROWSER}))"
    assert record.step("approve").output.startswith(said) and "from the page" in record.step("approve").output
    after = await person.get(ORIGIN + answer.headers["location"])
    assert f'data-run="{run_id}"' not in after.text and "Recorded your answer" in after.text
    timeline = (await person.get(f"/runs/{run_id}")).text
    assert f'<span id="run-status" class="status status-{ends}">{ends}</span>' in timeline
    assert re.search(r'<li id="step-approve" data-step="approve" data-status="(completed|failed)"', timeline)
    assert f"{said} by web" in timeline  # the answers, with who and through what


async def test_an_answer_for_a_question_the_run_no_longer_asks_is_not_recorded(person, client, write, root) -> None:
    run_id = await _waiting_run(client, write)
    token = _csrf(await person.get("/waiting"))
    fields = {"csrf": token, "step": "approve", "question": "not-this-one", "answer": "approve"}
    answer = await person.post(f"/waiting/runs/{run_id}", data=fields, headers={"origin": ORIGIN})
    assert answer.status_code == 409 and "Nothing was recorded" in answer.text
    fields.pop("question")
    taken = await person.post(f"/waiting/runs/{run_id}", data=fields, headers={"origin": ORIGIN})
    assert taken.status_code == 303
    again = await person.post(
        f"/waiting/runs/{run_id}", data=fields, headers={"origin": ORIGIN, "accept": "application/json"}
    )
    assert again.status_code == 409 and again.json()["ok"] is False
    await until(lambda: stored_run(root, run_id).status == "completed")
    assert len(stored_run(root, run_id).answers) == 1


ASKS = """
description: a failing step that asks
steps:
  - {id: flaky, type: script, run: exit 3, on_failure: ask}
  - {id: after, type: script, run: touch after}
"""


async def test_a_decision_shows_one_button_per_option_and_its_answer_drives_the_run(
    person: httpx.AsyncClient, client, write, root: Path
) -> None:
    run_id = await _waiting_run(client, write, ASKS, "asks")
    waiting = await person.get("/waiting")
    item = re.search(rf'<article [^>]*data-run="{run_id}".*?</article>', waiting.text, re.S).group(0)
    assert re.findall(r'name="answer" value="(\w+)"', item) == ["retry", "continue", "stop"]
    fields = {"csrf": _csrf(waiting), "answer": "continue"}
    answer = await person.post(
        f"/waiting/runs/{run_id}", data=fields, headers={"origin": ORIGIN, "accept": "application/json"}
    )
    assert answer.status_code == 200 and answer.json() == {
        "ok": True,
        "message": "Recorded: answered 'continue' by web.",
    }
    await until(lambda: (root / "after").exists())


async def test_a_call_approval_answered_on_the_page_is_recorded_with_channel_web(
    person: httpx.AsyncClient, root: Path
) -> None:
    call_id = _ask_call(root, f"{PUSH} && echo '{HOSTILE}'")
    waiting = await person.get("/waiting")
    item = re.search(rf'<article [^>]*data-call="{call_id}".*?</article>', waiting.text, re.S).group(0)
    assert "git push --force origin main &amp;&amp; echo &#x27;&lt;script&gt;" in item  # the call, exactly, escaped
    assert "\\x1b[2J\\u202e" in item and "<script>" not in item and "<img" not in item
    headers = {"origin": ORIGIN, "x-csrf-token": _csrf(waiting), "accept": "application/json"}

    answer = await person.post(f"/waiting/calls/{call_id}", data={"answer": "approve"}, headers=headers)

    assert answer.status_code == 200 and answer.json()["ok"] is True
    found = _call(root, call_id)
    assert (found.status, found.channel) == ("approved", "web")
    assert found.answered_by.endswith(" on the page")
    assert found.origin == f"page 127.0.0.1:{PORT} (browser: {BROWSER})"
    again = await person.post(f"/waiting/calls/{call_id}", data={"answer": "reject"}, headers=headers)
    assert again.status_code == 409 and _call(root, call_id).status == "approved"
    assert f'data-call="{call_id}"' not in (await person.get("/waiting")).text


# --- what the pages show, escaped -------------------------------------------------------------------------------------


HOSTILE_FILE = r"""
description: "<script>alert(1)</script>\e[2J\u202e\"'><img src=x onerror=alert(2)>"
steps:
  - {id: "<b>x</b>", type: script, run: ls}
"""


async def test_hostile_step_output_and_file_text_are_shown_escaped_and_inert(
    person: httpx.AsyncClient, client, write, root: Path
) -> None:
    (root / "hostile.txt").write_text(HOSTILE)
    write("loud", "description: prints markup\nsteps:\n  - {id: shout, type: script, run: cat hostile.txt}\n")
    run = (await client.call_tool("ability_run", {"name": "loud", "wait_seconds": 10})).structured_content
    assert run["status"] == "completed", run
    write("bad", HOSTILE_FILE)

    pages = [
        await person.get(u)
        for u in (f"/runs/{run['run_id']}", f"/runs/{run['run_id']}/steps/shout", "/abilities", "/abilities/bad")
    ]

    assert [p.status_code for p in pages] == [200] * 4
    for page in pages:
        assert "<script>alert" not in page.text and "<img src=x" not in page.text and "\x1b" not in page.text
        assert "\u202e" not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;\\x1b[2J\\u202e&quot;&#x27;&gt;&lt;img" in pages[0].text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;\\x1b[2J" in pages[1].text
    assert "&lt;b&gt;x&lt;/b&gt;" in pages[3].text  # the bad step id, in the problem that names it


async def test_the_runs_page_lists_newest_first_and_filters_by_status_and_ability(
    person: httpx.AsyncClient, project: Project
) -> None:
    _stored(project, "run_old", "gated", "completed", started=100.0)
    _stored(project, "run_new", "other", "failed", started=200.0)

    def rows(page: httpx.Response) -> list[tuple[str, str]]:
        assert '<table id="runs">' in page.text
        return re.findall(r'<tr id="run-[^"]+" data-run="([^"]+)" data-status="([^"]+)"', page.text)

    assert rows(await person.get("/")) == [("run_new", "failed"), ("run_old", "completed")]
    assert rows(await person.get("/", params={"status": "completed"})) == [("run_old", "completed")]
    assert rows(await person.get("/", params={"ability": "other"})) == [("run_new", "failed")]
    assert rows(await person.get("/", params={"status": "failed", "ability": "gated"})) == []


async def test_every_page_names_the_sections_and_the_live_status(person, gate: Gate, write, root) -> None:
    write("gated", GATED)
    write_skill(root, "deploy-helper", "name: deploy-helper\ndescription: Deploy a service")
    for url in ("/", "/waiting", "/abilities", "/abilities/gated", "/skills", "/prerequisites"):
        page = await person.get(url)
        assert page.status_code == 200, url
        for at, name in [("", "Runs"), ("waiting", "Waiting for you"), ("abilities", "Abilities"),
                         ("skills", "Skills"), ("prerequisites", "Prerequisites")]:  # fmt: skip
            current = ' aria-current="page"' if url.strip("/").split("/")[0] == at else ""
            assert f'<a href="{gate.base}/{at}"{current}>{name}</a>' in page.text, (url, name)
        assert '<span id="live" aria-live="polite">' in page.text
    graph = (await person.get("/abilities/gated")).text
    assert re.search(r'<figure id="graph"><svg [^>]*role="img"', graph)
    routed = (await person.get("/skills", params={"task": "deploy the service"})).text
    assert re.search(r"<td>deploy-helper</td><td>\d\.\d\d</td><td>[^<]+</td>", routed), routed


def _stored(project: Project, run_id: str, ability: str, status: str, started: float, steps=()) -> None:
    store = Store(project.state_db)
    try:
        record = RunRecord(
            run_id, ability, "s1", status, "strict", {"steps": []}, None, {}, None, None, None, None,
            started, started + 1 if status not in ("running", "pending") else None, started, list(steps),
        )  # fmt: skip
        store.create_run(record)
    finally:
        store.close()


# --- live: the event streams --------------------------------------------------------------------------------------------


def _events(page: TestClient, url: str, wanted: Callable[[str, object], bool], then: Callable[[], None] = lambda: None):
    """Open an event stream, do `then` once it says it is ready, and return the first event `wanted` accepts, or
    ("closed", None) when the stream ends first (bounded: the test fails after STREAM_SECONDS)."""
    import json

    def read() -> tuple[str, object]:
        with page.stream("GET", url) as stream:
            assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
            event = None
            for line in stream.iter_lines():
                if line.startswith("event: "):
                    event = line.removeprefix("event: ")
                elif line.startswith("data: ") and event is not None:
                    data = json.loads(line.removeprefix("data: "))
                    if event == "ready":
                        then()
                    elif wanted(event, data):
                        return event, data
        return "closed", None

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(read).result(timeout=STREAM_SECONDS)


def test_the_event_stream_says_which_run_changed(sync_person: TestClient, project: Project) -> None:
    _stored(project, "run_live", "gated", "running", started=time.time(), steps=[StepRecord("a", 0, "script")])

    def change() -> None:
        store = Store(project.state_db)
        try:
            store.update_run("run_live", "finish", "done", status="completed", finished_at=time.time())
        finally:
            store.close()

    event, data = _events(sync_person, "/events", lambda e, d: e == "change", change)
    assert data == {"runs": {"run_live": "completed"}, "calls": False, "sessions": False}


def test_the_event_stream_says_when_a_call_waits_for_a_person(sync_person: TestClient, project: Project) -> None:
    event, data = _events(sync_person, "/events", lambda e, d: e == "change", lambda: _ask_call(project.root))
    assert data == {"runs": {}, "calls": True, "sessions": False}


def test_the_event_streams_end_when_the_server_stops(sync_person: TestClient, stopping: threading.Event) -> None:
    assert _events(sync_person, "/events", lambda e, d: False, stopping.set) == ("closed", None)


def test_a_running_steps_output_streams_until_it_ends(sync_person: TestClient, gate: Gate, project: Project) -> None:
    step = StepRecord("build", 0, "script", status="running", started_at=time.time())
    _stored(project, "run_out", "gated", "running", started=time.time(), steps=[step])
    page = sync_person.get("/runs/run_out/steps/build")
    assert f'data-follow="{gate.base}/runs/run_out/steps/build/follow"' in page.text
    spool = Spool(spool_path(project.state_dir, "run_out", "build"))
    spool.write(b"compiling <a>\n\x1b[31mred\n")
    spool.close()
    seen: list[str] = []

    def wanted(event: str, data) -> bool:
        seen.append(data if event == "output" else "")
        if "red" in "".join(seen):
            store = Store(project.state_db)
            try:
                store.update_step("run_out", "build", "succeed", status="completed", exit_code=0)
            finally:
                store.close()
        return event == "end"

    assert _events(sync_person, "/runs/run_out/steps/build/follow", wanted) == (
        "end",
        {"status": "completed", "exit_code": 0},
    )
    assert "".join(seen) == "compiling <a>\n\\x1b[31mred\n"  # inert; app.js puts it in as text, never as markup
