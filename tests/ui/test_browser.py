"""The local page (issue 32) in a real headless Chromium: the person logs in with the link `abilities-mcp ui` prints
at their terminal (its cookie scoped to the page's secret prefix), watches a run go live, approves and rejects it
there, opens an ability's graph; a request without the session cookie, from another origin or without the CSRF token
changes nothing.

Debian's `chromium` through Playwright for Python, one browser for the module; one `abilities-mcp ui` process per
test, under a pseudo-terminal with a person's environment (the same person check as `approve`). The runs are driven by
an in-memory server on the same project in a thread of the test, as an agent's server would drive them: the page and
the server share nothing but the state file. Without Chromium the tests skip, unless `ABILITIES_REQUIRE_BROWSER` is set (`.ci/run`
sets it): then they fail. With `UPDATE_SCREENSHOTS_ENV=1` they write docs/images/ui-*.png.
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client
from playwright.sync_api import Browser, BrowserContext, Page, expect

from abilities_mcp.cli import person
from abilities_mcp.server import create_server
from abilities_mcp.state.project import Project
from browser_support import chromium
from support import GATED, REPO, TEST_RETRY_BASE, Terminal, cli, stored_run, until

UPDATE_SCREENSHOTS_ENV = "ABILITIES_UPDATE_SCREENSHOTS"
SCREENSHOTS = REPO / "docs" / "images"
# The screenshots' size, and the window of every test but the narrow one.
DESKTOP = {"width": 1200, "height": 800}
# A small phone held upright.
NARROW = {"width": 360, "height": 740}
# How long the page may take to show a change: an event from the server reaches it well within this on 2 busy cores.
SHOWN_MS = 15_000
# How long a run may take to reach a state, and `abilities-mcp ui` to start or stop.
SETTLE_SECONDS = 30
# Tab presses allowed to reach the Approve button: the nav's five links, the form's controls, and room to spare.
MAX_TABS = 40
# Open http://127.0.0.1:PORT/s/PREFIX/login?token=TOKEN: groups 1 the page's address, 2 the origin, 3 the prefix.
LINK = re.compile(r"Open ((http://127\.0\.0\.1:\d+)/s/([\w-]{22})/)login\?token=\S+")

expect.set_options(timeout=SHOWN_MS)


# --- the browser, the page's process, the agent's server ----------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


@dataclass
class UI:
    """`abilities-mcp ui` running at a person's terminal, and the link it printed."""

    term: Terminal
    link: str
    home: str  # the page's address, under its secret prefix: http://127.0.0.1:PORT/s/PREFIX/ (the windows' base URL)
    origin: str  # http://127.0.0.1:PORT
    prefix: str


@pytest.fixture
def gated(write: Callable[[str, str], Path]) -> None:
    """The project's ability: a build, a person's approval, then the deploy it guards (it creates `deployed`)."""
    write("gated", GATED)


@pytest.fixture
def ui(root: Path, gated: None) -> Iterator[UI]:
    """`abilities-mcp ui` on the project, started at a person's terminal; SIGTERM stops it."""
    env = {k: v for k, v in os.environ.items() if k not in person.AGENT_ENV}
    term = Terminal(cli(root, "ui"), root, env=env)
    first = term.expect("\n", timeout=SETTLE_SECONDS).splitlines()[0]
    found = LINK.fullmatch(first.strip())
    assert found, f"the first line is not the login link: {first!r}"
    yield UI(term, found.group(0).removeprefix("Open "), found.group(1), found.group(2), found.group(3))
    term.proc.send_signal(signal.SIGTERM)
    term.wait(SETTLE_SECONDS)  # fails the test if the page does not stop on SIGTERM


@dataclass
class Agent:
    """An in-memory server on the project, running in a thread of its own as an agent's server would."""

    portal: BlockingPortal
    client: Client
    root: Path

    def start(self, wait_seconds: float = 0) -> str:
        """Start the gated ability; returns its run id (after `wait_seconds` at most: 0 returns at once)."""
        done = self.portal.call(self.client.call_tool, "ability_run", {"name": "gated", "wait_seconds": wait_seconds})
        return done.structured_content["run_id"]

    def waiting(self) -> str:
        """A run of the gated ability that waits for the person's approval."""
        run_id = self.start(wait_seconds=SETTLE_SECONDS)
        assert stored_run(self.root, run_id).status == "awaiting_approval"
        return run_id

    def settled(self, run_id: str, status: str) -> None:
        """Wait until the run reaches `status` in the state file."""
        self.portal.call(until, lambda: stored_run(self.root, run_id).status == status, SETTLE_SECONDS)


@pytest.fixture
def agent(project: Project, root: Path, gated: None) -> Iterator[Agent]:
    with start_blocking_portal("asyncio") as portal:
        with portal.wrap_async_context_manager(Client(create_server(project, retry_base=TEST_RETRY_BASE))) as client:
            yield Agent(portal, client, root)


@pytest.fixture
def open_page(browser: Browser, ui: UI) -> Iterator[Callable[..., Page]]:
    """open_page(viewport) → a new browser window logged in with the printed link (usable once: the first call); its
    base URL is the page's address, so `page.goto("waiting")` opens http://127.0.0.1:PORT/s/PREFIX/waiting."""
    contexts: list[BrowserContext] = []

    def _open(viewport: dict[str, int] = DESKTOP) -> Page:
        context = browser.new_context(viewport=viewport, base_url=ui.home)
        contexts.append(context)
        page = context.new_page()
        page.goto(ui.link)
        expect(page).to_have_url(ui.home)
        return page

    yield _open
    for context in contexts:
        context.close()


# Text nodes with the test's temporary folder in them read `~` there instead, for the screenshots only: the pytest
# folder's long name says nothing to a reader.
SHORTEN_FOLDER = """([folder, home]) => {
    const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    while (walk.nextNode()) walk.currentNode.nodeValue = walk.currentNode.nodeValue.replaceAll(folder, home);
}"""


def screenshot(page: Page, name: str, root: Path) -> None:
    """docs/images/NAME, when the screenshots are being remade (never in CI: the tree stays clean)."""
    if os.environ.get(UPDATE_SCREENSHOTS_ENV) == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.evaluate(SHORTEN_FOLDER, [str(root.parent), "~"])
        page.screenshot(path=SCREENSHOTS / name)


def approval_form(page: Page, run_id: str) -> tuple[str, dict[str, str]]:
    """The waiting page's Approve form for the run: where it posts, and the fields a click on Approve sends."""
    button = page.locator(f'#waiting article[data-run="{run_id}"] button[name="answer"][value="approve"]')
    return button.evaluate("""b => [b.form.action, {...Object.fromEntries(new FormData(b.form)), [b.name]: b.value}]""")


# --- the tests --------------------------------------------------------------------------------------------------


def test_the_printed_link_logs_the_person_in_once_and_a_second_use_is_refused(browser: Browser, ui: UI) -> None:
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    page.goto(ui.link)
    expect(page).to_have_url(ui.home)
    expect(page.locator("table#runs")).to_be_attached()
    for name in ("Runs", "Waiting for you", "Abilities", "Skills", "Prerequisites"):
        expect(page.get_by_role("link", name=name, exact=True)).to_be_visible()
    cookie = next(c for c in context.cookies() if c["name"] == "abilities_ui")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["domain"] == "127.0.0.1", cookie
    assert cookie["path"] == f"/s/{ui.prefix}/", cookie  # the browser sends it to no other path of 127.0.0.1

    other = browser.new_context(viewport=DESKTOP)  # whoever else read the link: the agent, a shoulder
    again = other.new_page()
    response = again.goto(ui.link)
    assert response is not None and response.status in (400, 401, 403, 410), response and response.status
    expect(again.locator("body")).to_contain_text(re.compile(r"used|expired|no longer|not valid|invalid", re.I))
    expect(again.locator("table#runs")).to_have_count(0)
    assert not [c for c in other.cookies() if c["name"] == "abilities_ui"]
    other.close()
    context.close()


def test_a_run_goes_live_on_the_runs_page_from_its_start_to_awaiting_approval(
    open_page, agent: Agent, root: Path
) -> None:
    page = open_page()
    expect(page.locator("#live")).to_have_attribute("aria-live", "polite")
    expect(page.locator("#live")).to_have_text("live")
    expect(page.locator("#runs tr[data-run]")).to_have_count(0)
    page.evaluate("window.notReloaded = true")  # gone if the page reloads

    run_id = agent.start(wait_seconds=0)
    row = page.locator(f'#runs tr[data-run="{run_id}"]')
    expect(row).to_have_attribute("data-status", "awaiting_approval")
    assert page.evaluate("window.notReloaded") is True
    expect(row).to_contain_text("gated")
    screenshot(page, "ui-runs.png", root)


def test_approving_on_the_waiting_page_completes_the_run_and_records_the_web_channel(
    open_page, agent: Agent, root: Path
) -> None:
    run_id = agent.waiting()
    page = open_page()
    page.goto("waiting")
    item = page.locator(f'#waiting article[data-run="{run_id}"]')
    expect(item).to_contain_text("Deploy v1.0.0?")
    screenshot(page, "ui-waiting.png", root)
    item.get_by_role("button", name="Approve", exact=True).click()

    agent.settled(run_id, "completed")
    page.goto(f"runs/{run_id}")
    expect(page.locator("#run-status")).to_have_text("completed")
    for step in ("build", "approve", "deploy"):
        expect(page.locator(f'#timeline li[data-step="{step}"]')).to_have_attribute("data-status", "completed")
    screenshot(page, "ui-run.png", root)
    assert (root / "deployed").exists()
    answers = stored_run(root, run_id).answers
    assert [(a["step_id"], a["detail"].split(" (")[0]) for a in answers] == [("approve", "approved by web")], answers


def test_rejecting_on_the_waiting_page_fails_the_run_and_its_script_never_runs(
    open_page, agent: Agent, root: Path
) -> None:
    run_id = agent.waiting()
    page = open_page()
    page.goto("waiting")
    page.locator(f'#waiting article[data-run="{run_id}"]').get_by_role("button", name="Reject", exact=True).click()

    agent.settled(run_id, "failed")
    page.goto(f"runs/{run_id}")
    expect(page.locator("#run-status")).to_have_text("failed")
    expect(page.locator('#timeline li[data-step="deploy"]')).not_to_have_attribute("data-status", "completed")
    assert not (root / "deployed").exists()
    record = stored_run(root, run_id)
    assert record.step("deploy").status != "completed" and "rejected by web" in record.step("approve").error


def test_an_abilitys_graph_shows_each_step_as_a_node_with_its_type(open_page, root: Path) -> None:
    page = open_page()
    page.goto("abilities/gated")
    nodes = page.locator('#graph svg[role="img"] g.node')
    expect(nodes).to_have_count(3)
    shown = nodes.evaluate_all("gs => gs.map(g => [g.dataset.step, g.dataset.type])")
    assert sorted(shown) == [["approve", "approval"], ["build", "script"], ["deploy", "script"]], shown
    screenshot(page, "ui-graph.png", root)


def test_a_post_without_the_cookie_from_another_origin_or_without_the_csrf_token_changes_nothing(
    browser: Browser, open_page, agent: Agent, root: Path, ui: UI
) -> None:
    run_id = agent.waiting()
    page = open_page()
    page.goto("waiting")
    action, fields = approval_form(page, run_id)
    assert fields.get("csrf") and fields["answer"] == "approve", fields
    ours = {"Origin": ui.origin}

    stranger = browser.new_context()  # no cookie
    refused = [
        stranger.request.post(action, form=fields, headers=ours, max_redirects=0),
        page.request.post(action, form=fields, headers={"Origin": "http://evil.example"}, max_redirects=0),
        page.request.post(action, form={**fields, "csrf": "0" * len(fields["csrf"])}, headers=ours, max_redirects=0),
        page.request.post(action, form={k: v for k, v in fields.items() if k != "csrf"}, headers=ours, max_redirects=0),
    ]
    stranger.close()
    statuses = [r.status for r in refused]
    assert statuses[0] in (401, 403) and statuses[1:] == [403, 403, 403], statuses
    record = stored_run(root, run_id)
    assert (record.status, record.answers) == ("awaiting_approval", []), record

    # The same form with the cookie, the page's origin and the token is taken: the refusals above were for what
    # each lacked, not for a form the test got wrong.
    taken = page.request.post(action, form=fields, headers=ours, max_redirects=0)
    assert taken.status < 400, taken.status
    agent.settled(run_id, "completed")


def test_the_approve_button_is_reached_with_tab_and_pressed_with_enter(open_page, agent: Agent) -> None:
    run_id = agent.waiting()
    page = open_page()
    page.goto("waiting")
    expect(page.locator(f'#waiting article[data-run="{run_id}"]')).to_be_visible()
    on_approve = "() => document.activeElement?.name === 'answer' && document.activeElement.value === 'approve'"
    for _ in range(MAX_TABS):
        page.keyboard.press("Tab")
        if page.evaluate(on_approve):
            break
    else:
        pytest.fail(f"{MAX_TABS} Tab presses never reached the Approve button")
    page.keyboard.press("Enter")
    agent.settled(run_id, "completed")


def test_the_waiting_page_fits_a_narrow_window_without_scrolling_sideways(open_page, agent: Agent) -> None:
    run_id = agent.waiting()
    page = open_page(NARROW)
    page.goto("waiting")
    expect(page.locator(f'#waiting article[data-run="{run_id}"]')).to_be_visible()
    width: Any = page.evaluate("document.documentElement.scrollWidth")
    assert width <= NARROW["width"], f"the page is {width}px wide in a {NARROW['width']}px window"
