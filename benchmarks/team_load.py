"""A team's load: 50 agent sessions at once, 20 runs each, against two team servers (`serve --http`) on one
PostgreSQL, with tokens from a real OpenID provider; p50 and p99 of each tool call against the same calls made one
at a time to the stdio server on its SQLite file (the floor: one person, one laptop).

Each session is one person (their own token), its own MCP session on one of the two replicas (alternating), and
makes `ability_run` of a one-script-step ability (`wait_seconds` long enough for the run to end) then
`ability_status` of that run, 20 times. Every answer is checked (the run completed). The replicas and the provider
are real processes; PostgreSQL is a throwaway cluster. Needs PostgreSQL's binaries and Node (as the tests do).

    .venv/bin/python benchmarks/team_load.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2

from _harness import PROTOCOL_VERSION, StdioClient, abilities_argv, isolated_env, log

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # the tests' throwaway PostgreSQL and OpenID provider

SESSIONS, RUNS = 50, 20
QUICK_SESSIONS, QUICK_RUNS = 6, 3
REPLICAS = 2
ABILITY = """\
description: One quick step, as a check before a commit might be
steps:
  - {id: check, type: script, run: "true"}
"""
ACCEPT = "application/json, text/event-stream"
START_SECONDS = 30.0
# The audience the replicas take tokens for: one service to the provider, whichever replica answers.
AUDIENCE = "http://abilities.test/mcp"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


class HttpSession:
    """A bare MCP client over streamable HTTP (handshake era): JSON-RPC posts, answers read from JSON or SSE."""

    def __init__(self, http: httpx2.AsyncClient, url: str, token: str):
        self.http, self.url = http, url
        self.headers = {"Authorization": f"Bearer {token}", "Accept": ACCEPT}
        self.next_id = 0

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        answer = await self.http.post(self.url, json=message, headers=self.headers)
        if answer.status_code != 200:
            raise RuntimeError(f"{method}: HTTP {answer.status_code}: {answer.text[:300]}")
        if "mcp-session-id" in answer.headers:
            self.headers["mcp-session-id"] = answer.headers["mcp-session-id"]
        if answer.headers.get("content-type", "").startswith("text/event-stream"):
            for line in answer.text.splitlines():
                if line.startswith("data:") and '"id"' in line:
                    found = json.loads(line[5:])
                    if found.get("id") == self.next_id:
                        return found
            raise RuntimeError(f"{method}: no answer in the event stream")
        return answer.json()

    async def open(self) -> None:
        info = {"name": "team-load", "version": "1"}
        await self.request("initialize", {"protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": info})
        await self.http.post(
            self.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=self.headers
        )

    async def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        found = await self.request("tools/call", {"name": name, "arguments": arguments})
        result = found.get("result") or {}
        if "error" in found or result.get("isError"):
            raise RuntimeError(f"{name}: {found}")
        return result["structuredContent"]


async def one_session(url: str, token: str, runs: int, timings: list[float]) -> None:
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(120)) as http:
        session = HttpSession(http, url, token)
        await session.open()
        for _ in range(runs):
            started = time.perf_counter()
            run = await session.call("ability_run", {"name": "check", "wait_seconds": 60})
            timings.append(time.perf_counter() - started)
            if run["status"] != "completed":
                raise RuntimeError(f"the run did not complete: {run}")
            started = time.perf_counter()
            await session.call("ability_status", {"run_id": run["run_id"]})
            timings.append(time.perf_counter() - started)


def start_replica(
    root: Path, env: dict[str, str], provider, state: str, log_file: Path
) -> tuple[subprocess.Popen, str]:
    port = free_port()
    argv = [sys.executable, "-m", "abilities_mcp", "serve", "--http", f"127.0.0.1:{port}", "--issuer", provider.issuer]
    argv += ["--root", str(root), "--state", state, "--audience", AUDIENCE]
    server_env = {
        **env,
        "ABILITIES_OIDC_CLIENT_ID": provider.server.client_id,
        "ABILITIES_OIDC_CLIENT_SECRET": provider.server.secret,
    }
    proc = subprocess.Popen(
        argv, env=server_env, stdin=subprocess.DEVNULL, stdout=log_file.open("wb"), stderr=subprocess.STDOUT
    )
    origin = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        try:
            if httpx2.get(f"{origin}/.well-known/oauth-protected-resource/mcp", timeout=2).status_code == 200:
                return proc, origin
        except httpx2.TransportError:
            if proc.poll() is not None:
                raise RuntimeError(f"a replica exited: {log_file.read_text()[-2000:]}") from None
        time.sleep(0.05)  # polling a process that is starting: bounded by the deadline above
    proc.kill()
    raise RuntimeError("a replica did not answer within 30 s")


def floor(root: Path, env: dict[str, str], folder: Path, calls: int) -> list[float]:
    """The same calls, one at a time, to the stdio server on a SQLite file."""
    client = StdioClient(abilities_argv(root, folder / "stdio-state"), env=env, cwd=root, stderr_path=folder / "f.err")
    timings = []
    try:
        client.initialize()
        for _ in range(calls // 2):
            started = time.perf_counter()
            run = client.call_tool("ability_run", {"name": "check", "wait_seconds": 60})
            timings.append(time.perf_counter() - started)
            run_id = run["structuredContent"]["run_id"]
            started = time.perf_counter()
            client.call_tool("ability_status", {"run_id": run_id})
            timings.append(time.perf_counter() - started)
    finally:
        client.close()
    return timings


def _p(samples: list[float]) -> str:
    return f"p50 {percentile(samples, 0.5) * 1000:.1f} ms  p99 {percentile(samples, 0.99) * 1000:.1f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_SESSIONS} sessions × {QUICK_RUNS} runs")
    args = parser.parse_args()
    sessions, runs = (QUICK_SESSIONS, QUICK_RUNS) if args.quick else (SESSIONS, RUNS)

    from postgres_support import Cluster
    from provider_support import start_provider, user_token

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        root = folder / "project"
        (root / "abilities").mkdir(parents=True)
        (root / "abilities" / "check.yaml").write_text(ABILITY)
        env = isolated_env(folder / "home")
        cluster = Cluster()
        with start_provider(folder / "provider") as provider:
            tokens = [user_token(provider, f"dev{i}", resource=AUDIENCE) for i in range(sessions)]
            state = cluster.fresh_schema()
            replicas = [start_replica(root, env, provider, state, folder / f"replica{i}.log") for i in range(REPLICAS)]
            try:
                timings: list[float] = []

                async def everyone() -> None:
                    await asyncio.gather(
                        *(
                            one_session(f"{replicas[i % REPLICAS][1]}/mcp", token, runs, timings)
                            for i, token in enumerate(tokens)
                        )
                    )

                alone: list[float] = []  # one session by itself first: HTTP and PostgreSQL without the crowd
                asyncio.run(one_session(f"{replicas[0][1]}/mcp", tokens[0], runs, alone))
                started = time.perf_counter()
                asyncio.run(everyone())
                wall = time.perf_counter() - started
            finally:
                for proc, _ in replicas:
                    proc.terminate()
                for proc, _ in replicas:
                    proc.wait(30)
                cluster.stop()
        base = floor(root, env, folder, len(timings))
    log(f"  {sessions} sessions × {runs} runs, {REPLICAS} replicas, one database: {len(timings)} calls in {wall:.1f} s")
    log(f"  team, all at once   {_p(timings)}")
    log(f"  team, one session   {_p(alone)}")
    log(f"  stdio on SQLite     {_p(base)} (one session, the floor)")
    p50 = percentile(timings, 0.5) / percentile(base, 0.5)
    p99 = percentile(timings, 0.99) / percentile(base, 0.99)
    log(
        f"team_load: ratio {p50:.2f} (no goal) p50 per tool call, {sessions} sessions at once on {REPLICAS} replicas "
        f"vs one stdio session on SQLite; p99 ratio {p99:.2f}; median {statistics.median(timings) * 1000:.1f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
