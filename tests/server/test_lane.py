"""The gateway's lane on stdio (server/lane.py): which calls it takes, and that what it answers is what the SDK's
own path answers, against the real mcp-server-sqlite and server-everything: results, refusals and errors, the gates,
progress, a cancelled call, an exposed tool."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from abilities_mcp.server.app import create_server
from abilities_mcp.server.lane import Lane
from abilities_mcp.state.project import Project
from support import MODERN_ENVELOPE, REQUEST_TIMEOUT_SECONDS, RawServer, raw_server, state_db
from upstream_servers import SAFE_QUERY, everything_server, write_project

NOTE_WRITES = {
    "description": "Look before writing",
    "triggers": {"tools": ["write_query"]},
    "prerequisites": [{"step": 1, "tool": "append_insight", "description": "Say why first"}],
    "mode": "warn",
}


# --- which messages the lane takes ----------------------------------------------------------------------------


class _Tasks:
    """Stands in for the transport's task group: records what the lane starts."""

    def __init__(self) -> None:
        self.started: list[Any] = []

    def start_soon(self, *args: Any, **_: Any) -> None:
        self.started.append(args)


def ready_lane(version: str = "2025-11-25", *, exposed: bool = False) -> tuple[Lane, _Tasks]:
    """A lane after a handshake on `version`, with tool_call's work and (optionally) one exposed server `db`."""
    lane, tasks = Lane(), _Tasks()
    lane.attach(tasks, object(), object())  # type: ignore[arg-type]  # nothing is sent: only what is taken is looked at
    lane.session = SimpleNamespace(session_of_request=lambda *_: "s1")  # type: ignore[assignment]
    lane.call_through = object()  # type: ignore[assignment]
    if exposed:
        exposed = {
            "exposed_name": lambda self, name: name.startswith("db__"),
            "to_tell": lambda self, session: False,
            "ready_now": lambda self, *_: None,  # not ready to start at once: the lane gives it a task
        }
        lane.exposed = type("Exposed", (), exposed)()  # type: ignore[assignment]
    lane.take(request("initialize", {"protocolVersion": version}, id=0))
    lane.sent(types.JSONRPCResponse(jsonrpc="2.0", id=0, result={"protocolVersion": version}))
    lane.take(types.JSONRPCNotification(jsonrpc="2.0", method="notifications/initialized"))
    return lane, tasks


def request(method: str, params: dict[str, Any], id: int = 7) -> types.JSONRPCRequest:
    return types.JSONRPCRequest(jsonrpc="2.0", id=id, method=method, params=params)


def call(name: str = "tool_call", arguments: Any = None, **more: Any) -> types.JSONRPCRequest:
    if arguments is None:
        arguments = {"tool": "db__read_query", "arguments": {"query": "SELECT 1"}}
    return request("tools/call", {"name": name, "arguments": arguments, **more})


@pytest.mark.parametrize(
    ("message", "taken"),
    [
        (call(), True),
        (call(_meta={"sessionID": "s1", "progressToken": 3, "claudecode/toolUseId": "x"}), True),
        (call(arguments={"tool": "db__list_tables"}), True),  # arguments left out
        (call(arguments={"tool": "db__list_tables", "arguments": None}), True),
        (call(arguments={"tool": 5}), False),  # the SDK's validation names the field
        (call(arguments={"tool": "x", "arguments": [1]}), False),
        (call(arguments={"tool": "x", "extra": 1}), False),
        (call(arguments="not an object"), False),
        (call(task={"ttl": 1000}), False),  # a task-augmented call: the SDK's
        (call(_meta="not an object"), False),
        (call("workflow_status", {}), False),  # this server's other tools
        (request("tools/list", {}), False),
    ],
)
def test_the_lane_takes_only_plain_gateway_calls_after_the_handshake(message: Any, taken: bool) -> None:
    lane, tasks = ready_lane()

    assert lane.take(message) is taken
    assert len(tasks.started) == taken


def test_an_exposed_tools_call_is_taken_and_an_unexposed_name_is_not() -> None:
    lane, _ = ready_lane(exposed=True)

    assert lane.take(call("db__read_query", {"query": "SELECT 1"}))
    assert not lane.take(call("web__fetch", {"url": "x"}))


def test_before_the_handshake_ends_or_in_an_envelope_the_sdk_refuses_every_call_goes_the_sdks_way() -> None:
    lane, tasks = Lane(), _Tasks()
    lane.attach(tasks, object(), object())  # type: ignore[arg-type]
    lane.session = SimpleNamespace(session_of_request=lambda *_: "s1")  # type: ignore[assignment]
    lane.call_through = object()  # type: ignore[assignment]
    lane.take(request("initialize", {"protocolVersion": "2025-11-25"}, id=0))
    assert not lane.take(call())  # initialize not answered yet
    lane.sent(types.JSONRPCResponse(jsonrpc="2.0", id=0, result={"protocolVersion": "2025-11-25"}))
    assert not lane.take(call())  # notifications/initialized not sent yet
    lane.take(types.JSONRPCNotification(jsonrpc="2.0", method="notifications/initialized"))
    assert not lane.take(call(_meta=MODERN_ENVELOPE))  # a 2026 envelope on a handshake-era connection: the SDK refuses
    assert lane.take(call())
    tasks.started.clear()

    unnegotiated, _ = ready_lane("2026-07-28")  # initialize asking for 2026, which the handshake does not serve
    assert not unnegotiated.take(call())
    assert tasks.started == []


def test_on_a_2026_connection_a_call_is_taken_when_its_envelope_passes_the_sdks_ladder() -> None:
    lane, tasks = Lane(), _Tasks()
    lane.attach(tasks, object(), object())  # type: ignore[arg-type]
    lane.session = SimpleNamespace(session_of_request=lambda *_: "s1")  # type: ignore[assignment]
    lane.call_through = object()  # type: ignore[assignment]
    assert not lane.take(request("server/discover", {"_meta": MODERN_ENVELOPE}, id=0))  # the era: 2026

    half = {k: v for k, v in MODERN_ENVELOPE.items() if not k.endswith("clientCapabilities")}
    assert not lane.take(call(_meta=half))  # the SDK answers INVALID_PARAMS naming the missing key
    assert not lane.take(call(_meta={**MODERN_ENVELOPE, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}))
    assert not lane.take(request("initialize", {"protocolVersion": "2025-11-25"}, id=1))  # refused by the SDK there
    assert lane.take(call(_meta={**MODERN_ENVELOPE, "progressToken": 3}))
    assert [started[-1] for started in tasks.started] == ["2026-07-28"]  # answered in the envelope's version


def test_while_a_workflow_may_ask_a_person_a_call_not_ready_at_once_goes_the_sdks_way() -> None:
    lane, tasks = ready_lane()
    asked: list[bool] = []
    lane.asks_person = lambda: asked.append(True) or True  # type: ignore[func-returns-value]
    lane.call_now = lambda *_: None  # type: ignore[assignment]  # Proxy.ready_now declines (a workflow may ask)

    assert not lane.take(call())  # the SDK's context shows the client's form
    assert asked == [True]
    assert tasks.started == []


@pytest.mark.parametrize("gated", [False, True], ids=["no workflow triggers", "a workflow triggers"])
def test_a_call_ready_at_once_is_started_without_asking_whether_a_person_may_be_asked(gated: bool) -> None:
    """Its session is claimed once either way: before the call is sent when its gates read the session, else just
    after (the upstream works on the call meanwhile)."""
    lane, tasks = ready_lane()
    lane.asks_person = lambda: pytest.fail("read the workflows a second time")  # type: ignore[assignment]
    events: list[str] = []
    lane.session = SimpleNamespace(session_of_request=lambda *_: events.append("claimed") or "s1")  # type: ignore[assignment]

    def go(session_id_of: Any, progress: Any, finish: Any) -> Any:
        if gated:
            assert (session_id_of(), session_id_of()) == ("s1", "s1")
        events.append("sent")
        return SimpleNamespace(cancel=lambda: None)

    lane.call_now = lambda *_: go  # type: ignore[assignment]  # Proxy.ready_now: nothing to wait for

    assert lane.take(call())
    assert events == (["claimed", "sent"] if gated else ["sent", "claimed"])
    assert tasks.started == []  # started in the callback, no task


async def test_a_cancellation_is_taken_only_for_a_call_the_lane_holds() -> None:
    lane, _ = ready_lane()
    scope = anyio.CancelScope()
    lane._calls[7] = scope

    def cancelled(request_id: Any) -> types.JSONRPCNotification:
        params = {"requestId": request_id, "reason": "user"}
        return types.JSONRPCNotification(jsonrpc="2.0", method="notifications/cancelled", params=params)

    assert not lane.take(cancelled(8))
    assert lane.take(cancelled("7"))  # the same id written as a string, as the SDK correlates them
    assert scope.cancel_called


# --- the real server over stdio against the SDK's own path ---------------------------------------------------


async def tool_call(server: RawServer, tool: str, arguments: Any = None, **meta: Any) -> dict[str, Any]:
    params = {"name": "tool_call", "arguments": {"tool": tool, "arguments": arguments}}
    return await server.request("tools/call", {**params, "_meta": {"sessionID": "s1", **meta}})


def wire(root: Path, stderr: Path, modern: bool = False) -> Any:
    """The real server over stdio, logging at debug level (which calls the lane takes)."""
    return raw_server(root, stderr, "--log-level", "debug", modern=modern)


def lane_paths(stderr: Path) -> list[str]:
    """How the lane sent each call, in order, from the server's debug log: "taken" (a task) or "started at once"."""
    return re.findall(r"\(id \d+\) (taken|started at once) by the gateway lane", stderr.read_text())


def sqlite_project(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    write_project(root, {"safe-query": SAFE_QUERY, "note-writes": NOTE_WRITES})


# The same calls, in order, down the lane and down the SDK's path: every kind of answer tool_call gives.
CALLS: list[tuple[str, Any]] = [
    ("sqlite__read_query", {"query": "SELECT name FROM users ORDER BY id", "table": "users"}),  # runs 2 first
    ("read_query", {"query": "SELECT count(*) AS n FROM users", "table": "users"}),  # bare name; nothing to run
    ("sqlite__write_query", {"query": "UPDATE users SET name = 'ada' WHERE id = 1"}),  # warn: runs, with a warning
    (
        "sqlite__read_query",
        {"query": "SELECT nope FROM users", "table": "users"},
    ),  # the upstream says why (not as isError)
    ("sqlite__read_querry", {"query": "SELECT 1"}),  # unknown: did-you-mean
    ("sqlite__read_query", {"query": 5}),  # breaks the upstream's schema: nothing sent
    ("sqlite__describe_table", None),  # arguments left out: the schema names table_name
]


@pytest.mark.parametrize("modern", [False, True], ids=["handshake era", "2026-07-28"])
async def test_the_lanes_answers_are_the_sdks_answers_for_every_kind_of_result(tmp_path: Path, modern: bool) -> None:
    sqlite_project(tmp_path / "over-stdio")
    sqlite_project(tmp_path / "in-memory")

    async with wire(tmp_path / "over-stdio", tmp_path / "stderr.txt", modern=modern) as server:
        laned = [await tool_call(server, tool, arguments) for tool, arguments in CALLS]
    project = Project(tmp_path / "in-memory", tmp_path / "in-memory-state")
    async with Client(create_server(project), mode="auto" if modern else "legacy") as client:  # the same era
        sdk = [
            await client.call_tool("tool_call", {"tool": tool, "arguments": arguments}, meta={"sessionID": "s1"})
            for tool, arguments in CALLS
        ]

    # resultType: at 2026 it is on the wire; a handshake-era answer leaves it out and the client's model fills it in
    wired = [
        answer.model_dump(by_alias=True, mode="json", exclude_none=True, exclude=set() if modern else {"result_type"})
        for answer in sdk
    ]
    assert wired == laned
    if modern:
        assert all(answer["resultType"] == "complete" for answer in laned)
        assert all(answer["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "abilities-mcp" for answer in laned)
    # Once the upstream is up, a call with nothing to wait for (no prerequisite to run, arguments that fit) is sent
    # from the loop's callback; the others, and the first (which starts the upstream), take a task of their own.
    paths = lane_paths(tmp_path / "stderr.txt")
    assert paths == ["taken", "started at once", "started at once", "started at once", "taken", "taken", "taken"]
    first, _, warned, failed, unknown, bad, _ = laned
    assert [r["tool"] for r in first["structuredContent"]["gate"]["ran_prerequisites"]] == [
        "sqlite__list_tables",
        "sqlite__describe_table",
    ]
    assert "expects append_insight (step 1)" in warned["content"][-1]["text"]
    assert failed["content"][0]["text"] == "Database error: no such column: nope"
    assert unknown["isError"] and "Did you mean 'sqlite__read_query'?" in unknown["content"][0]["text"]
    assert bad["isError"] and "nothing was sent" in bad["content"][0]["text"]


async def test_a_call_the_lane_leaves_to_the_sdk_is_answered_by_it(tmp_path: Path) -> None:
    sqlite_project(tmp_path / "p")

    async with wire(tmp_path / "p", tmp_path / "stderr.txt") as server:
        answer = await server.request("tools/call", {"name": "tool_call", "arguments": {"tool": 5}})
        after = await tool_call(server, "sqlite__list_tables")

    assert answer["isError"] and "tool" in answer["content"][0]["text"]
    assert "users" in after["content"][0]["text"]
    assert (tmp_path / "stderr.txt").read_text().count("taken by the gateway lane") == 1


def everything_project(root: Path, **entry: Any) -> None:
    root.mkdir(parents=True, exist_ok=True)
    server = {"command": str(everything_server()), "args": ["stdio"], **entry}
    (root / "gateway.json").write_text(json.dumps({"mcpServers": {"everything": server}}))


async def test_progress_reaches_the_caller_with_its_token_before_the_answer(tmp_path: Path) -> None:
    everything_project(tmp_path / "p")

    async with wire(tmp_path / "p", tmp_path / "stderr.txt") as server:
        operation = {"duration": 1, "steps": 3}
        result = await tool_call(server, "everything__trigger-long-running-operation", operation, progressToken="tok")
        answer_at = next(i for i, m in enumerate(server.seen) if m.get("id") == server.last_id)
        progress = [m["params"] for m in server.seen[:answer_at] if m.get("method") == "notifications/progress"]

    assert not result.get("isError"), result
    assert [(p["progressToken"], p["progress"], p["total"]) for p in progress] == [
        ("tok", 1, 3),
        ("tok", 2, 3),
        ("tok", 3, 3),
    ]


async def test_a_cancelled_call_gets_no_answer_and_the_server_goes_on(tmp_path: Path) -> None:
    everything_project(tmp_path / "p")

    async with wire(tmp_path / "p", tmp_path / "stderr.txt") as server:
        await tool_call(server, "everything__echo", {"message": "warm up"})
        long = {"duration": 600, "steps": 600}
        params = {
            "name": "tool_call",
            "arguments": {"tool": "everything__trigger-long-running-operation", "arguments": long},
        }
        long_call = {"jsonrpc": "2.0", "id": "long", "method": "tools/call"}
        await server.send({**long_call, "params": {**params, "_meta": {"progressToken": 1}}})
        with anyio.fail_after(REQUEST_TIMEOUT_SECONDS):
            while (await server.read()).get("method") != "notifications/progress":
                pass  # the upstream is working on it
        await server.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "long"}})
        after = await tool_call(server, "everything__echo", {"message": "after the cancel"})

    assert after["content"][0]["text"] == "Echo: after the cancel"
    assert not [m for m in server.seen if m.get("id") == "long"]  # the cancelled call is never answered


async def test_an_exposed_tool_is_called_down_the_lane_with_the_sdks_answer(tmp_path: Path) -> None:
    everything_project(tmp_path / "p", expose="all")

    async with wire(tmp_path / "p", tmp_path / "stderr.txt") as server:
        listed = await server.request("tools/list", {})
        answer = await server.request("tools/call", {"name": "everything__echo", "arguments": {"message": "hi"}})
        refused = await server.request("tools/call", {"name": "everything__echo", "arguments": {"message": 5}})

    assert "everything__echo" in [t["name"] for t in listed["tools"]]
    assert answer["content"] == [{"type": "text", "text": "Echo: hi"}]
    assert refused["isError"] and "nothing was sent" in refused["content"][0]["text"]
    # tools/list started the upstream: the call is sent at once; the refused one, which sends nothing, takes a task
    assert lane_paths(tmp_path / "stderr.txt") == ["started at once", "taken"]


async def test_a_lane_call_after_gateway_json_stops_exposing_a_server_tells_the_client_first(tmp_path: Path) -> None:
    everything_project(tmp_path / "p", expose="all")

    async with wire(tmp_path / "p", tmp_path / "stderr.txt") as server:
        await server.request("tools/list", {})
        everything_project(tmp_path / "p")  # exposes nothing now
        result = await tool_call(server, "everything__echo", {"message": "hi"})
        answer_at = next(i for i, m in enumerate(server.seen) if m.get("id") == server.last_id)

    assert result["content"][0]["text"] == "Echo: hi"
    told = [m for m in server.seen[:answer_at] if m.get("method") == "notifications/tools/list_changed"]
    assert len(told) == 1


async def test_a_call_the_hook_announced_is_filed_under_its_session_whichever_way_the_lane_sends_it(
    tmp_path: Path,
) -> None:
    """OpenCode sends no session id: the hook announces each call (state/claims.py) and the server claims it, once.
    The first call waits for the upstream to start and its prerequisites to run (a task); the second is sent at once.
    Each is filed under the session its announcement named."""
    from abilities_mcp.prerequisites.sessions import SessionState
    from abilities_mcp.state.claims import announce, claim
    from abilities_mcp.state.store import Store

    sqlite_project(tmp_path / "p")
    gated = {"tool": "sqlite__read_query", "arguments": {"query": "SELECT name FROM users", "table": "users"}}
    plain = {"tool": "sqlite__list_tables", "arguments": {}}
    neither = {"tool": "sqlite__create_table", "arguments": {"query": "CREATE TABLE notes (body TEXT)"}}
    store = Store(state_db(tmp_path / "p"))
    try:
        async with wire(tmp_path / "p", tmp_path / "stderr.txt") as server:
            announce(store, "ses_first", "tool_call", gated, None)
            first = await server.request("tools/call", {"name": "tool_call", "arguments": gated})
            announce(store, "ses_second", "tool_call", plain, None)
            second = await server.request("tools/call", {"name": "tool_call", "arguments": plain})
            # neither gated nor a prerequisite: nothing reads its session, and its announcement is used up all the same
            announce(store, "ses_third", "tool_call", neither, None)
            third = await server.request("tools/call", {"name": "tool_call", "arguments": neither})
            unclaimed = claim(store, "tool_call", neither, None)
        sessions = SessionState(store)
        done_first, done_second = sessions.done("ses_first"), sessions.done("ses_second")
    finally:
        store.close()

    assert not first.get("isError") and not second.get("isError") and not third.get("isError"), (first, second, third)
    assert unclaimed is None
    assert lane_paths(tmp_path / "stderr.txt") == ["taken", "started at once", "started at once"]
    assert sorted(done_first["safe-query"]) == [1, 2]  # run by the gateway, under the announced session
    assert sorted(done_second["safe-query"]) == [1]


@pytest.mark.parametrize("lane", [True, False], ids=["down the lane", "the SDK's way"])
async def test_on_a_2026_connection_the_change_is_told_on_the_clients_subscriptions_listen_stream(
    tmp_path: Path, lane: bool
) -> None:
    """At 2026-07-28 a notification reaches the client only on a subscriptions/listen stream (Claude Code 2.1 opens
    one): there the client hears that gateway.json stopped exposing the server, whichever call comes next."""
    everything_project(tmp_path / "p", expose="all")

    async with wire(tmp_path / "p", tmp_path / "stderr.txt", modern=True) as server:
        listen = {"notifications": {"toolsListChanged": True}, "_meta": MODERN_ENVELOPE}
        await server.send({"jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen", "params": listen})
        await server.request("tools/list", {})
        everything_project(tmp_path / "p")  # exposes nothing now
        if lane:
            result = await tool_call(server, "everything__echo", {"message": "hi"})
            assert result["content"][0]["text"] == "Echo: hi"
        else:
            await server.request("tools/call", {"name": "workflow_list", "arguments": {}})  # the middleware's path

        def told() -> list[dict[str, Any]]:
            return [m for m in server.seen if m.get("method") == "notifications/tools/list_changed"]

        with anyio.fail_after(REQUEST_TIMEOUT_SECONDS):
            while not told():
                await server.read()

    assert [m["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] for m in told()] == ["listen-1"]


async def test_a_crash_in_tool_calls_work_is_answered_with_mcpservers_words_and_not_its_cause() -> None:
    lane = Lane()

    async def crashing(*_: Any) -> Any:
        raise RuntimeError("secret internals")

    lane.call_through = crashing  # type: ignore[assignment]
    params = {"name": "tool_call", "arguments": {"tool": "db__read_query"}}

    session = SimpleNamespace(session_of_request=lambda *_: "s1")

    result = await lane._tool_call(session, params, None)  # type: ignore[arg-type]

    assert result.is_error and result.content[0].text == "Error executing tool tool_call"
