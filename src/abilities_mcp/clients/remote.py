"""`abilities-mcp hook CLIENT EVENT --url URL`: a client's hook in team mode, decided by the team server.

The client's payload goes, as the client sent it, to `POST URL/hook/CLIENT/EVENT` with the person's token
(`Authorization: Bearer $ABILITIES_TOKEN`, the token the client's MCP entry sends to URL/mcp); the server runs the
local hook's own decision against its project and state for that person (cli/team_hooks.py) and answers with what it
printed and its exit code, which this prints and returns. What only this machine knows stays here: the guards over
the client's own files (guards.py, against the project `--root` names, else the client's folder), and which of the
client's configured servers is the team server (their url is URL), sent along as `server=NAME`.

Fails closed: with no token, a refused one, no answer within TIMEOUT_SECONDS, a server down or an answer this cannot
read, a tool call is refused in the client's own format with the reason and the fix. The other events go on with
the reason on stderr (exit 1): after a tool ran nothing can be undone, a prompt or a session start only loses the
run's note, and a stop blocked while the server is away would keep the agent looping with nothing it could do.

Stdlib only (urllib), imported only for `--url`: the local hook's path does not load it.
"""

from __future__ import annotations

import _signal as signals
import http.client
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from . import guards
from .answers import DENY_EXIT, FAIL_OPEN_EXIT, Answer, render
from .payloads import EVENTS, KINDS, BadPayload, Call, event_name, parse

TOKEN_ENV = "ABILITIES_TOKEN"
# Seconds for the whole exchange (connect, send, answer): within the hook's own budget (hook.py BUDGET_SECONDS) and
# well within the timeout init writes for the clients (configs.py HOOK_TIMEOUT_SECONDS), past which they let a call
# through; what is left covers Python's start on a loaded machine.
TIMEOUT_SECONDS = 4.0
TIMEOUT_ENV = "ABILITIES_HOOK_BUDGET"  # as for the local hook: it may shorten the wait, never lengthen it
# The server's answer is two texts the client caps at 10,000 characters each; anything far bigger is not an answer.
MAX_ANSWER_BYTES = 1024 * 1024
EXITS = (0, FAIL_OPEN_EXIT, DENY_EXIT)


class Unanswered(Exception):
    """The team server gave no answer this hook can use: the reason, and what fixes it."""


def main(
    client: str,
    event: str,
    url: str,
    root: str | None = None,
    stdin: IO[str] | None = None,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
) -> int:
    """Answer one event through the team server at `url`; returns the exit code."""
    stdin, stdout, stderr = stdin or sys.stdin, stdout or sys.stdout, stderr or sys.stderr
    name = event_name(client, event)
    if name is None:
        known = "; ".join(f"{c}: {', '.join(e)}" for c, e in EVENTS.items())
        print(f"abilities-mcp hook: unknown client or event {client!r} {event!r}; use {known}", file=stderr)
        return FAIL_OPEN_EXIT
    body = stdin.read()
    call = _call(client, name, body)
    try:
        with _deadline(_timeout()):
            guarded = _guarded(call, root)
            if guarded:
                return render(client, name, Answer(deny=guarded), stdout, stderr)
            answer = ask(url, client, name, body, _servers(client, call, root, url))
    except Unanswered as exc:
        return _unanswered(client, name, call, url, str(exc), stdout, stderr)
    stdout.write(answer["stdout"])
    stderr.write(answer["stderr"])
    return answer["exit"]


def _call(client: str, name: str, body: str) -> Call | None:
    """The payload read as the local hook reads it (for the guards and the server names); None if it cannot be:
    the server then says what is wrong with it."""
    try:
        return parse(client, KINDS[name], json.loads(body or "{}"), name)
    except (ValueError, BadPayload, RecursionError, TypeError):
        return None


def _timeout() -> float:
    try:
        return max(0.001, min(TIMEOUT_SECONDS, float(os.environ.get(TIMEOUT_ENV) or TIMEOUT_SECONDS)))
    except ValueError:
        return TIMEOUT_SECONDS


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Unanswered raised once `seconds` pass, whatever the exchange is waiting on (a name lookup, a server that
    accepts and never answers, one that answers a byte at a time)."""

    def expire(_signum: int, _frame: Any) -> None:
        raise Unanswered(f"no answer within {seconds:g} s")

    try:
        previous = signals.signal(signals.SIGALRM, expire)
    except (AttributeError, ValueError):  # no SIGALRM, or not the main thread: the socket timeout alone bounds it
        yield
        return
    signals.setitimer(signals.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signals.setitimer(signals.ITIMER_REAL, 0)
        signals.signal(signals.SIGALRM, previous)


def _root(call: Call | None, root: str | None) -> Path:
    env = os.environ
    chosen = root or env.get("ABILITIES_ROOT") or env.get("CLAUDE_PROJECT_DIR") or (call.cwd if call else "")
    return Path(chosen or os.getcwd()).expanduser().resolve()


def _guarded(call: Call | None, root: str | None) -> str | None:
    """What no agent may touch on this machine (its client's hooks, settings and servers): decided here, where they
    are. The state folder named is this machine's; a team's state is on the server."""
    if call is None or call.kind != "before" or not call.tool:
        return None
    from ..state.project import Project

    project = Project.resolve(_root(call, root))
    return guards.refusal(call.tool, call.arguments, project.root, project.state_dir)


def _servers(client: str, call: Call | None, root: str | None, url: str) -> list[str]:
    """This server's names in the client's configs, read only for a call that could be an MCP tool's."""
    if call is None or call.kind not in ("before", "after") or not _maybe_mcp(call):
        return []
    from .servers import remote_names

    return sorted(remote_names(client, _root(call, root), url))


def _maybe_mcp(call: Call) -> bool:
    return call.client == "opencode" or bool(call.server or call.origin) or call.tool.startswith("mcp")


def ask(url: str, client: str, event: str, body: str, servers: list[str]) -> dict[str, Any]:
    """The server's answer: {"stdout", "stderr", "exit"}; Unanswered for anything else."""
    token = os.environ.get(TOKEN_ENV, "").strip()
    if not token:
        raise Unanswered(f"no token: ${TOKEN_ENV} is not set (the access token the client sends to {url}/mcp)")
    query = urllib.parse.urlencode([*(("server", s) for s in servers), ("url", url)])
    endpoint = f"{url.rstrip('/')}/hook/{urllib.parse.quote(client)}/{urllib.parse.quote(event)}?{query}"
    request = urllib.request.Request(
        endpoint,
        data=body.encode("utf-8", errors="replace"),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json", "Accept": "application/json"},
        method="POST",
    )
    try:
        with _OPENER.open(request, timeout=_timeout()) as response:
            raw = response.read(MAX_ANSWER_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise Unanswered(_refused_by(exc.code, url)) from None
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise Unanswered(f"the team server at {url} cannot be reached ({reason})") from None
    return _answer(raw, url)


def _refused_by(status: int, url: str) -> str:
    if status in (401, 403):
        return (
            f"the team server at {url} refused the token in ${TOKEN_ENV} (HTTP {status}: expired, revoked, or not "
            "one its provider issued)"
        )
    if status in (301, 302, 303, 307, 308):
        return f"the team server at {url} answered with a redirect (HTTP {status}), which the hook does not follow"
    return f"the team server at {url} answered HTTP {status}"


def _answer(raw: bytes, url: str) -> dict[str, Any]:
    garbled = Unanswered(f"the team server at {url} sent an answer this hook cannot read (is --url the team server?)")
    if len(raw) > MAX_ANSWER_BYTES:
        raise garbled
    try:
        answer = json.loads(raw)
    except (ValueError, RecursionError):
        raise garbled from None
    if not isinstance(answer, dict):
        raise garbled
    out, err, code = answer.get("stdout"), answer.get("stderr"), answer.get("exit")
    if not isinstance(out, str) or not isinstance(err, str) or type(code) is not int or code not in EXITS:
        raise garbled
    return {"stdout": out, "stderr": err, "exit": code}


def _unanswered(client: str, name: str, call: Call | None, url: str, why: str, stdout: IO[str], stderr: IO[str]) -> int:
    """A tool call is refused (in the client's format); any other event goes on, said on stderr."""
    fix = _fix(why, url)
    said = f"abilities-mcp hook {client} {name}: {why}"
    if KINDS[name] != "before":
        print(f"{said}; nothing was recorded or added (team mode). {fix}", file=stderr)
        return FAIL_OPEN_EXIT
    tool = call.tool if call is not None and call.tool else "the tool call"
    reason = (
        f"abilities-mcp: {tool} refused: {why}, so the team's gates cannot be read and the call is refused (team "
        f"mode fails closed). Tell the user: {fix}"
    )
    return render(client, name, Answer(deny=reason), stdout, stderr)


def _fix(why: str, url: str) -> str:
    if why.startswith("no token") or "refused the token" in why:
        return (
            f"get an access token for {url} from the team's OpenID provider, export it as ${TOKEN_ENV} where the "
            "client starts, and restart the client."
        )
    return f"check that the team server at {url} is up and reachable from here (`abilities-mcp doctor`), then retry."


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is an error: following it would send the payload, and with urllib the token, somewhere else."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirects)
