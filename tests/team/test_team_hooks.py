"""Client hooks in team mode: the team server's /hook/CLIENT/EVENT decides with the local hook's own gates, for the
caller's sessions only, and `abilities-mcp hook … --url` fails closed whenever it gets no usable answer."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anyio
import httpx2
import pytest

from abilities_mcp.cli.team_hooks import hook_endpoint, session_owner
from support import trust_project
from team_support import ISSUER, Tokens, team_client, team_server

pytestmark = pytest.mark.anyio

BASH_AFTER_READ = {
    "read-first": {
        "description": "Read the notes before running a command",
        "triggers": {"tools": ["Bash"]},
        "prerequisites": [{"step": 1, "tool": "Read", "description": "Read the notes"}],
        "mode": "enforce",
    }
}
AGENT_STEP = """\
description: One agent step, nothing else may run meanwhile
settings: {enforcement: strict}
steps:
  - id: think
    type: agent
    prompt: Think it over
"""
TOKENS = Tokens(alice_token="alice", bob_token="bob")
# The client-side hook's whole exchange is bounded by this (remote.py TIMEOUT_SECONDS); a test allows Python's start.
CLIENT_BOUND_SECONDS = 4.0 + 3.0


def bash(session: str, command: str = "ls") -> dict:
    return {
        "session_id": session,
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command},
    }


def read(session: str) -> dict:
    return {
        "session_id": session,
        "hook_event_name": "PostToolUse",
        "tool_name": "Read",
        "tool_input": {"file_path": "/tmp/notes.txt"},
        "tool_response": {"type": "text", "file": {"content": "notes"}},
    }


async def ask(origin: str, token: str | None, event: str, payload: dict, **params: str) -> httpx2.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient() as http:
        return await http.post(f"{origin}/hook/claude/{event}", json=payload, headers=headers, params=params)


def decision(answer: httpx2.Response) -> str:
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert set(body) == {"stdout", "stderr", "exit"} and body["exit"] == 0, body
    out = json.loads(body["stdout"]) if body["stdout"] else {}
    return out.get("hookSpecificOutput", {}).get("permissionDecision", "allow")


@pytest.fixture
def gated(project):
    (project.root / "workflows.json").write_text(json.dumps(BASH_AFTER_READ))
    trust_project(project)
    return project


async def test_bash_is_denied_until_its_prerequisite_ran_in_that_session_and_only_that_callers(gated):
    async with team_server(gated, TOKENS, hook=hook_endpoint) as origin:
        denied = await ask(origin, "alice_token", "PreToolUse", bash("s1"))
        assert decision(denied) == "deny"
        assert "Read" in json.loads(denied.json()["stdout"])["hookSpecificOutput"]["permissionDecisionReason"]
        recorded = await ask(origin, "alice_token", "PostToolUse", read("s1"))
        assert recorded.status_code == 200 and recorded.json()["exit"] == 0
        assert decision(await ask(origin, "alice_token", "PreToolUse", bash("s1"))) == "allow"
        # Bob naming the same session id has his own: alice's record is not his
        assert decision(await ask(origin, "bob_token", "PreToolUse", bash("s1"))) == "deny"
        assert decision(await ask(origin, "alice_token", "PreToolUse", bash("s2"))) == "deny"


async def test_a_request_without_a_token_or_with_a_forged_one_is_401_and_decides_nothing(gated):
    async with team_server(gated, TOKENS, hook=hook_endpoint) as origin:
        for token in (None, "forged"):
            answer = await ask(origin, token, "PostToolUse", read("s1"))
            assert answer.status_code == 401 and "bearer" in answer.headers["www-authenticate"].lower()
        assert decision(await ask(origin, "alice_token", "PreToolUse", bash("s1"))) == "deny"  # nothing recorded
        async with httpx2.AsyncClient() as http:
            unknown = await http.post(f"{origin}/hook/claude/Nope", json={}, headers={"Authorization": "Bearer x"})
            assert unknown.status_code == 404
            wrong = await http.get(f"{origin}/hook/claude/PreToolUse", headers={"Authorization": "Bearer alice_token"})
            assert wrong.status_code == 405


async def test_the_callers_live_run_gates_their_bash_and_no_one_elses(project, write):
    write("think", AGENT_STEP)
    trust_project(project)
    async with team_server(project, TOKENS, hook=hook_endpoint) as origin:
        async with team_client(origin, "alice_token", mode="legacy") as alice:
            run = await alice.call_tool("ability_run", {"name": "think"}, meta={"sessionID": "s1"})
            assert run.structured_content["status"] == "awaiting_agent", run
            named = await ask(origin, "alice_token", "PreToolUse", bash("s1"), server="abilities")
            assert decision(named) == "deny"  # the run's own session, as the MCP call named it
            assert "think" in named.json()["stdout"]
            # a session the server cannot tie to the MCP connection (Claude Code over HTTP): the caller's newest run
            assert decision(await ask(origin, "alice_token", "PreToolUse", bash("claude-uuid"))) == "deny"
            # this server's own tools pass, named as the caller's config names the server
            own = {**bash("s1"), "tool_name": "mcp__abilities__ability_step_complete", "tool_input": {}}
            assert decision(await ask(origin, "alice_token", "PreToolUse", own, server="abilities")) == "allow"
            assert decision(await ask(origin, "bob_token", "PreToolUse", bash("s1"))) == "allow"
    owner = session_owner(f"{ISSUER}#alice")
    from support import stored_run

    assert stored_run(project.root, run.structured_content["run_id"]).session_id == f"{owner}:s1"


# --- the client side: `abilities-mcp hook claude PreToolUse --url URL` -------------------------------------------


def hook_process(url: str, payload: dict, token: str | None, event: str = "PreToolUse") -> tuple[int, str, str, float]:
    env = {k: v for k, v in os.environ.items() if k != "ABILITIES_TOKEN"}
    if token is not None:
        env["ABILITIES_TOKEN"] = token
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "abilities_mcp", "hook", "claude", event, "--url", url],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    return done.returncode, done.stdout, done.stderr, time.monotonic() - started


def denied_reason(stdout: str) -> str:
    answer = json.loads(stdout)["hookSpecificOutput"]
    assert answer["permissionDecision"] == "deny", answer
    return answer["permissionDecisionReason"]


async def test_the_client_hook_prints_the_servers_answer_and_denies_without_a_token(gated):
    async with team_server(gated, TOKENS, hook=hook_endpoint) as origin:
        code, out, err, _ = await anyio.to_thread.run_sync(hook_process, origin, bash("s1"), "alice_token")
        assert code == 0 and "Read" in denied_reason(out), err
        code, out, err, _ = await anyio.to_thread.run_sync(
            hook_process, origin, read("s1"), "alice_token", "PostToolUse"
        )
        assert code == 0, err
        code, out, err, _ = await anyio.to_thread.run_sync(hook_process, origin, bash("s1"), "alice_token")
        assert code == 0 and out == "", (out, err)  # allowed: nothing to say
        code, out, err, _ = await anyio.to_thread.run_sync(hook_process, origin, bash("s1"), None)
        assert code == 0 and "ABILITIES_TOKEN" in denied_reason(out) and "Traceback" not in err
        code, out, err, _ = await anyio.to_thread.run_sync(hook_process, origin, bash("s1"), "forged")
        reason = denied_reason(out)
        assert "refused the token" in reason and "ABILITIES_TOKEN" in reason and "Traceback" not in err


@contextmanager
def fake_server(behaviour: str) -> Iterator[str]:
    """A server that is not a working team server: `silent` accepts and never answers, `garbled` answers 200 with
    something else than a hook's answer, `html` answers a page, `redirect` sends the hook elsewhere."""
    stop = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if behaviour == "silent":
                stop.wait(30)
                return
            if behaviour == "redirect":
                self.send_response(307)
                self.send_header("Location", "http://127.0.0.1:9/elsewhere")
                self.end_headers()
                return
            body = b'{"stdout": 1, "exit": "0"}' if behaviour == "garbled" else b"<html>a login page</html>"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        stop.set()
        server.shutdown()
        server.server_close()


def closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"  # closed again when the block ends: nothing listens


@pytest.mark.parametrize(
    ("behaviour", "said"),
    [
        ("down", "cannot be reached"),
        ("silent", "no answer within"),
        ("garbled", "cannot read"),
        ("html", "cannot read"),
        ("redirect", "redirect"),
    ],
    ids=["server-down", "never-answers", "garbled-json", "not-json", "redirect"],
)
def test_the_client_hook_denies_a_tool_call_it_gets_no_usable_answer_for(behaviour: str, said: str) -> None:
    if behaviour == "down":
        code, out, err, took = hook_process(closed_port(), bash("s1"), "token")
    else:
        with fake_server(behaviour) as url:
            code, out, err, took = hook_process(url, bash("s1"), "token")
    reason = denied_reason(out)
    assert code == 0 and said in reason and "fails closed" in reason, reason
    assert "Traceback" not in err and took < CLIENT_BOUND_SECONDS


def test_other_events_go_on_with_the_reason_when_the_server_is_down() -> None:
    code, out, err, _ = hook_process(closed_port(), read("s1"), "token", "PostToolUse")
    assert code == 1 and out == "" and "cannot be reached" in err and "Traceback" not in err
    stop = {"session_id": "s1", "hook_event_name": "Stop", "stop_hook_active": False}
    code, out, err, _ = hook_process(closed_port(), stop, "token", "Stop")
    assert code == 1 and out == "" and "cannot be reached" in err


def test_the_local_guards_hold_before_the_server_is_asked(tmp_path) -> None:
    settings = {
        **bash("s1"),
        "tool_name": "Write",
        "tool_input": {"file_path": str(tmp_path / ".claude/settings.json")},
    }
    code, out, err, _ = hook_process(closed_port(), {**settings, "cwd": str(tmp_path)}, "token")
    assert code == 0 and "decides what gates the agent" in denied_reason(out), err
