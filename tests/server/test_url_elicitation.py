"""A run that waits for a person, on a client that asks by URL and shows no forms (issue 32): the server hosts the
local page itself, on 127.0.0.1, and sends the client a one-time link to the waiting page's item for the question.
The person (here: httpx as their browser) logs in with it and approves there; the answer is recorded with channel
`web`, the client is told the elicitation completed, the link works once, and its token is on no disk. A declined
link leaves the question to the terminal; a client that shows forms still gets the form."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.abc
import httpx2 as httpx
import pytest
from mcp import Client
from mcp.client.session import ClientSession
from mcp_types import (
    ElicitationCapability,
    ElicitRequestParams,
    ElicitRequestURLParams,
    ElicitResult,
    UrlElicitationCapability,
)

from abilities_mcp.server.app import create_server
from support import GATED, TEST_RETRY_BASE, stored_run, until

LINK = re.compile(r"^http://127\.0\.0\.1:(\d+)/s/([A-Za-z0-9_-]+)/login\?token=([A-Za-z0-9_-]+)$")
BROWSER = "Mozilla/5.0 (X11; Linux x86_64) TestBrowser/1.0"


@pytest.fixture
def url_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK's client declares both modes with a callback: this one declares URL mode only."""
    build = ClientSession._build_capabilities

    def url_mode_only(self: ClientSession, version: str) -> Any:
        caps = build(self, version)
        if caps.elicitation is not None:
            caps = caps.model_copy(update={"elicitation": ElicitationCapability(url=UrlElicitationCapability())})
        return caps

    monkeypatch.setattr(ClientSession, "_build_capabilities", url_mode_only)


class Person:
    """The person at the client: shown the link, they open it in their browser and answer there (or decline)."""

    def __init__(self, action: str = "accept", answer: str | None = "approve"):
        self.action, self.answer = action, answer  # answer None: they open the link but answer elsewhere
        self.asked: list[ElicitRequestParams] = []
        self.seen: dict[str, Any] = {}
        self.tg: anyio.abc.TaskGroup | None = None  # where their browser runs, once they said they opened the link

    async def __call__(self, ctx: Any, params: ElicitRequestParams) -> ElicitResult:
        self.asked.append(params)
        if self.action == "accept" and self.answer is not None:  # the person consents, the browser opens
            assert isinstance(params, ElicitRequestURLParams) and self.tg is not None
            self.tg.start_soon(self.browse, params)
        return ElicitResult(action=self.action)

    async def browse(self, params: ElicitRequestURLParams) -> None:
        found = LINK.match(params.url)
        assert found, params.url
        port, prefix = found.group(1), found.group(2)
        origin, base = f"http://127.0.0.1:{port}", f"/s/{prefix}"
        run_id = re.search(r"run (run_\w+)", params.message).group(1)
        headers = {"user-agent": BROWSER}
        async with httpx.AsyncClient(base_url=origin, headers=headers) as browser:
            login = await browser.get(params.url)
            assert login.status_code == 303, login.text
            assert login.headers["location"] == f"{base}/waiting#ask-{run_id}"  # the item for this question
            page = await browser.get(login.headers["location"])
            assert page.status_code == 200 and f'id="ask-{run_id}"' in page.text
            csrf = re.search(r'data-csrf="([^"]+)"', page.text).group(1)
            form = {"csrf": csrf, "answer": self.answer}
            for name in ("step", "question"):
                value = re.search(rf'name="{name}" value="([^"]+)"', page.text)
                if value:
                    form[name] = value.group(1)
            posted = await browser.post(
                f"{base}/waiting/runs/{run_id}", data=form, headers={"origin": origin, "accept": "application/json"}
            )
            assert posted.status_code == 200 and posted.json()["ok"], posted.text
        self.seen["question"] = form.get("question")  # the page's item names the question it answers
        async with httpx.AsyncClient(headers=headers) as another:  # the link again, in a fresh browser: spent
            self.seen["again"] = (await another.get(params.url, follow_redirects=False)).status_code
        self.seen["token"] = found.group(3)


class Notes:
    """Every message the server sent the client outside a request's result."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    async def __call__(self, message: Any) -> None:
        self.seen.append(message)

    def completed(self) -> list[str]:
        found = []
        for message in self.seen:
            params = getattr(message, "params", None)
            if getattr(message, "method", None) == "notifications/elicitation/complete":
                found.append(params.elicitation_id)
        return found


def client_for(project, person: Person, notes: Notes | None = None) -> Client:
    server = create_server(project, retry_base=TEST_RETRY_BASE)
    return Client(server, mode="legacy", elicitation_callback=person, message_handler=notes)


def files_holding(folder: Path, secret: str) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


async def test_the_person_approves_on_the_page_the_link_opens(project, write, root, url_only) -> None:
    write("gated", GATED)
    person, notes = Person(), Notes()
    async with client_for(project, person, notes) as client, anyio.create_task_group() as person.tg:
        result = await client.call_tool("ability_run", {"name": "gated", "inputs": {"version": "v2.0.0"}})
        run = result.structured_content
        assert run["status"] == "completed", run
        await until(notes.completed)
    assert (root / "deployed").exists()
    assert len(person.asked) == 1
    asked = person.asked[0]
    assert isinstance(asked, ElicitRequestURLParams) and asked.mode == "url"
    assert "Deploy v2.0.0?" in asked.message and run["run_id"] in asked.message
    assert asked.message.endswith("Open the link to answer on your own screen.")
    question_id = person.seen["question"]
    assert question_id and asked.elicitation_id == question_id
    assert notes.completed() == [question_id]
    answered = [e for e in _events(root, run["run_id"]) if e["event"] == "answered"]
    assert len(answered) == 1 and answered[0]["detail"].startswith("approved by web (page 127.0.0.1:")
    assert BROWSER in answered[0]["detail"]
    assert person.seen["again"] == 403  # the link works once
    token = person.seen["token"]
    assert files_holding(project.state_dir, token) == [] and files_holding(root, token) == []
    assert urlsplit(asked.url).hostname == "127.0.0.1"


async def test_a_rejection_on_the_page_stops_the_run(project, write, root, url_only) -> None:
    write("gated", GATED)
    person = Person(answer="reject")
    async with client_for(project, person) as client, anyio.create_task_group() as person.tg:
        result = await client.call_tool("ability_run", {"name": "gated", "inputs": {}})
    run = result.structured_content
    assert run["status"] == "failed", run
    assert not (root / "deployed").exists()
    answered = [e["detail"] for e in _events(root, run["run_id"]) if e["event"] == "answered"]
    assert len(answered) == 1 and answered[0].startswith("rejected by web")


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_a_declined_link_leaves_the_question_to_the_terminal(project, write, root, url_only, action) -> None:
    write("gated", GATED)
    person = Person(action=action)
    async with client_for(project, person) as client:
        result = await client.call_tool("ability_run", {"name": "gated", "inputs": {}, "wait_seconds": 5})
        run = result.structured_content
        assert run["status"] == "awaiting_approval", run  # not rejected: still asked
        assert len(person.asked) == 1
        again = await client.call_tool("ability_status", {"run_id": run["run_id"], "wait_seconds": 0})
        assert again.structured_content["status"] == "awaiting_approval"
        assert len(person.asked) == 1  # a declined link is not sent again
        async with httpx.AsyncClient() as browser:  # nor does it log in any more: revoked, though never used
            assert (await browser.get(person.asked[0].url, follow_redirects=False)).status_code == 403
        _answer_at_terminal(project, run["run_id"])
        await until(lambda: stored_run(root, run["run_id"]).status == "completed")
    assert (root / "deployed").exists()
    answered = [e["detail"] for e in _events(root, run["run_id"]) if e["event"] == "answered"]
    assert len(answered) == 1 and answered[0].startswith("approved by terminal")


async def test_a_client_that_shows_forms_still_gets_the_form(project, write, root) -> None:
    write("gated", GATED)
    asked: list[ElicitRequestParams] = []

    async def form(ctx: Any, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params)
        return ElicitResult(action="accept", content={"approve": True})

    server = create_server(project, retry_base=TEST_RETRY_BASE)
    async with Client(server, mode="legacy", elicitation_callback=form) as client:  # declares form and url
        result = await client.call_tool("ability_run", {"name": "gated", "inputs": {}})
    assert result.structured_content["status"] == "completed"
    assert len(asked) == 1 and asked[0].mode == "form"


async def test_an_answer_at_the_terminal_ends_the_wait_for_the_link(project, write, root, url_only) -> None:
    write("gated", GATED)
    person, notes = Person(answer=None), Notes()
    async with client_for(project, person, notes) as client, anyio.create_task_group() as tg:

        async def answer_once_asked() -> None:
            await until(lambda: person.asked)
            run_id = re.search(r"run (run_\w+)", person.asked[0].message).group(1)
            _answer_at_terminal(project, run_id)

        tg.start_soon(answer_once_asked)
        result = await client.call_tool("ability_run", {"name": "gated", "inputs": {}})
        assert result.structured_content["status"] == "completed", result.structured_content
        await until(notes.completed)
        assert notes.completed() == [person.asked[0].elicitation_id]
        async with httpx.AsyncClient() as browser:  # the link was not used; the question is settled: it goes
            assert (await browser.get(person.asked[0].url, follow_redirects=False)).status_code == 403
    answered = [e["detail"] for e in _events(root, result.structured_content["run_id"]) if e["event"] == "answered"]
    assert len(answered) == 1 and answered[0].startswith("approved by terminal")


def test_a_minted_link_lands_only_within_the_page() -> None:
    from abilities_mcp.ui.auth import Gate

    gate = Gate(8765, printed_link=False)
    with pytest.raises(RuntimeError):
        gate.login_url()  # a hosted page prints no link: only minted ones log in
    for target in ("https://evil.example/", "//evil.example/", "/\\evil.example", "waiting"):
        with pytest.raises(ValueError):
            gate.mint(target)
    token = gate.mint("/waiting#ask-run_1")
    assert gate.link(token) == f"http://127.0.0.1:8765/s/{gate.prefix}/login?token={token}"
    assert gate.login_to("not-it") is None
    session, target = gate.login_to(token)
    assert target == "/waiting#ask-run_1" and gate.sessions[session.session_id] is session
    assert gate.login_to(token) is None  # once
    revoked = gate.mint("/waiting")
    gate.revoke(revoked)
    assert gate.login_to(revoked) is None


def _answer_at_terminal(project, run_id: str) -> None:
    """What `abilities-mcp approve RUN` records once the person check passed."""
    from abilities_mcp.abilities.catalog import Catalog
    from abilities_mcp.engine.core import Engine
    from abilities_mcp.state.store import Store

    store = Store(project.state_db)
    try:
        engine = Engine(store, Catalog(project))
        _, question = engine.pending_question(run_id, None, "terminal")
        engine.record_answer(run_id, question, question.from_yes_no(True, "terminal", origin="terminal /dev/pts/9"))
    finally:
        store.close()


def _events(root: Path, run_id: str) -> list[dict]:
    from abilities_mcp.state.store import Store
    from support import state_db

    store = Store(state_db(root))
    try:
        return store.events(run_id)
    finally:
        store.close()
