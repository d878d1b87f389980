"""Shared pieces of the benchmarks: a raw JSON-RPC client over pipes, the floor server, project generators, and
the one-line report. Each benchmark script imports this module from its own folder.
"""

from __future__ import annotations

import json
import os
import select
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

# The MCP revision the benchmarks speak; the server must accept it.
PROTOCOL_VERSION = "2025-11-25"
# A request that gets no answer within this long means the server hung: fail loudly rather than wait forever.
DEFAULT_REPLY_TIMEOUT_S = 30.0
# After stdin closes, a server gets this long to exit before it is killed.
EXIT_TIMEOUT_S = 10.0
# How much of a failed server's stderr an error quotes.
STDERR_TAIL_CHARS = 2000
# Bytes read from the server's stdout per os.read call.
READ_CHUNK = 64 * 1024
# The only variables the servers inherit; PYTHONPATH lets one benchmark another source tree (see README).
PASSED_VARS = ("PATH", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH")

# The floor: the smallest useful MCPServer, one async tool, same SDK and same stdio transport as the real server.
FLOOR_SERVER = '''\
from mcp.server.mcpserver import MCPServer

server = MCPServer("floor")


@server.tool()
async def echo(text: str) -> str:
    """Return the text."""
    return text


if __name__ == "__main__":
    server.run("stdio")
'''


class ServerDied(RuntimeError):
    """The server under test closed its stdout or stopped answering."""


class StdioClient:
    """A bare MCP client: newline-delimited JSON-RPC over a child's pipes, no SDK in the way of the clock."""

    def __init__(self, argv: list[str], *, env: dict[str, str], cwd: Path, stderr_path: Path):
        self.argv = argv
        self.stderr_path = stderr_path
        self._stderr = stderr_path.open("ab")
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, env=env, cwd=cwd, bufsize=0
        )
        self._buffer = bytearray()
        self._next_id = 0
        self._envelope: dict[str, Any] | None = None  # a 2026-07-28 connection's per-request _meta (discover())

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        except BrokenPipeError:
            raise self._died("closed stdin") from None

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        self.send({"jsonrpc": "2.0", "method": method, **({"params": params} if params is not None else {})})

    def request(self, method: str, params: dict[str, Any] | None = None, timeout: float = DEFAULT_REPLY_TIMEOUT_S):
        """Send a request and return its response (skipping notifications the server sends meanwhile)."""
        self._next_id += 1
        request_id = self._next_id
        if self._envelope is not None:
            params = {**(params or {}), "_meta": {**self._envelope, **(params or {}).get("_meta", {})}}
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, **({"params": params} if params else {})})
        deadline = time.monotonic() + timeout
        while True:
            message = self._read_message(deadline)
            if message.get("id") == request_id and "method" not in message:
                if "error" in message:
                    raise ServerDied(f"{method} failed: {message['error']}")
                return message["result"]

    def initialize(self) -> dict[str, Any]:
        """The handshake: initialize, then notifications/initialized."""
        result = self.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "abilities-mcp-benchmarks", "version": "0"},
            },
        )
        self.notify("notifications/initialized")
        return result

    def discover(self) -> dict[str, Any]:
        """A 2026-07-28 connection (Claude Code 2.1 opens one): no handshake, server/discover, and the envelope on
        every request from then on."""
        self._envelope = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "abilities-mcp-benchmarks", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        return self.request("server/discover")

    def call_tool(self, name: str, arguments: dict[str, Any], timeout: float = DEFAULT_REPLY_TIMEOUT_S):
        """tools/call; a tool error (isError) is a failed benchmark, not a data point."""
        result = self.request("tools/call", {"name": name, "arguments": arguments}, timeout=timeout)
        if result.get("isError"):
            raise ServerDied(f"tool {name} returned an error: {result.get('content')}")
        return result

    def close(self) -> int:
        """Hang up (close stdin) and wait for the exit; kill a server that will not leave."""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            return self.proc.wait(timeout=EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()
        finally:
            if self.proc.stdout is not None:
                self.proc.stdout.close()
            self._stderr.close()

    def _read_message(self, deadline: float) -> dict[str, Any]:
        fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        while (newline := self._buffer.find(b"\n")) < 0:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise self._died("sent no reply in time")
            chunk = os.read(fd, READ_CHUNK)
            if not chunk:
                raise self._died(f"closed stdout (exit code {self.proc.wait(timeout=EXIT_TIMEOUT_S)})")
            self._buffer += chunk
        line = bytes(self._buffer[:newline])
        del self._buffer[: newline + 1]
        return json.loads(line)

    def _died(self, what: str) -> ServerDied:
        """The error, with the tail of the server's stderr (its file vanishes with the temp dir)."""
        self._stderr.flush()
        tail = self.stderr_path.read_text(errors="replace")[-STDERR_TAIL_CHARS:]
        return ServerDied(f"{' '.join(self.argv[1:])} {what}; its stderr ends:\n{tail}")


def isolated_env(home: Path) -> dict[str, str]:
    """The child environment: PATH and locale only, HOME inside the temp dir so no user abilities or skills leak in."""
    env = {k: v for k, v in os.environ.items() if k in PASSED_VARS}
    home.mkdir(parents=True, exist_ok=True)
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_STATE_HOME=str(home / ".local" / "state"),
        PYTHONUNBUFFERED="1",
    )
    return env


def abilities_argv(root: Path, state_dir: Path) -> list[str]:
    """The real server, exactly as a client configures it."""
    return [sys.executable, "-m", "abilities_mcp", "--root", str(root), "--state-dir", str(state_dir)]


def write_floor_server(folder: Path) -> list[str]:
    """Write the floor server script; returns the command that starts it."""
    path = folder / "floor_server.py"
    path.write_text(FLOOR_SERVER)
    return [sys.executable, str(path)]


# --- generated projects ---------------------------------------------------------------------------------------

TOP_LEVEL_SHARE = 5  # one ability in this many sits directly under abilities/, the rest in team folders
ABILITIES_PER_TEAM = 25
KINDS = ("deploy", "build", "lint", "release", "backup", "migrate", "report", "sync")


def ability_yaml(i: int, skill_count: int) -> str:
    """A realistic small script ability: inputs with rules, 3-5 steps with needs, timeouts, env and a check."""
    kind = KINDS[i % len(KINDS)]
    skill_step = ""
    if skill_count and i % 10 == 0:  # a few abilities hand a skill to the agent
        skill_step = f"""\
          - id: review
            type: skill
            skill: skill-{i % skill_count:04d}
            needs: [package]
        """
    extra_step = ""
    if i % 2:
        extra_step = """\
          - id: notify
            type: script
            description: Tell the log
            when: always()
            needs: [package]
            run: echo "{{inputs.target}} done with {{steps.package.output}}"
        """
    text = f"""\
        description: {kind.title()} component {i} to the chosen environment with checks before and after
        version: "1.{i % 7}"
        triggers:
          keywords: [{kind}, component-{i}]
        inputs:
          target: {{type: string, enum: [staging, production], default: staging, description: Where to {kind}}}
          verbose: {{type: boolean, default: false}}
          retries: {{type: integer, default: 2, min: 0, max: 5}}
        settings:
          on_failure: stop
          timeout: 10m
        steps:
          - id: check
            type: script
            description: The tools are on PATH
            run: command -v sh
          - id: prepare
            type: script
            description: A scratch folder for the {kind}
            run: mkdir -p .scratch/{kind}-{i} && echo prepared
            needs: [check]
            timeout: 30s
            env: {{COMPONENT: "component-{i}", RETRIES: "{{{{inputs.retries}}}}"}}
          - id: package
            type: script
            description: Build the artefact
            run: echo "component-{i}-{{{{inputs.target}}}}.tar"
            needs: [prepare]
            on_failure: retry
            max_retries: 2
            validation: {{stdout_contains: component-{i}}}
        """
    steps = textwrap.indent(textwrap.dedent(extra_step) + textwrap.dedent(skill_step), "  ")
    return textwrap.dedent(text) + steps


def ability_path(abilities: Path, i: int) -> Path:
    """abilities/deploy-0.yaml for some, abilities/team-3/build-7.yaml for most."""
    name = f"{KINDS[i % len(KINDS)]}-{i}.yaml"
    if i % TOP_LEVEL_SHARE == 0:
        return abilities / name
    return abilities / f"team-{i // ABILITIES_PER_TEAM}" / name


def skill_markdown(i: int) -> str:
    return textwrap.dedent(f"""\
        ---
        name: skill-{i:04d}
        description: How to review change set {i} - what to read first, what to check, and how to report it
        ---
        # Reviewing change set {i}

        Read the diff from the top; note every public function whose signature changed.

        1. Run the unit tests for the touched package.
        2. Check the changelog mentions the change.
        3. Report findings as a short list, most severe first.

        Keep the review under thirty minutes; hand back `ok` or a list of problems.
        """)


def write_project(root: Path, abilities: int, skills: int) -> Path:
    """Generate `abilities` ability files and `skills` skill folders under root; returns root."""
    for i in range(abilities):
        path = ability_path(root / "abilities", i)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(ability_yaml(i, skills))
    for i in range(skills):
        folder = root / "skills" / f"skill-{i:04d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "SKILL.md").write_text(skill_markdown(i))
    return root


# --- reporting ------------------------------------------------------------------------------------------------


def ms(seconds: float) -> str:
    """Milliseconds, with decimals only where they matter."""
    value = seconds * 1000
    return f"{value:.2f}" if value < 10 else f"{value:.0f}"


def final_line(label: str, samples: list[float], floor: list[float], goal: float | None, unit: str) -> str:
    """`label: ratio R (goal <= G) median X ms vs floor Y ms over N unit` from the two sample lists."""
    mine, base = statistics.median(samples), statistics.median(floor)
    target = f"goal <= {goal:g}" if goal is not None else "no goal"
    return (
        f"{label}: ratio {mine / base:.2f} ({target}) median {ms(mine)} ms vs floor {ms(base)} ms "
        f"over {len(samples)} {unit}"
    )


def spread(samples: list[float]) -> str:
    """min / median / max in ms, for the detail lines above the final one."""
    return f"min {ms(min(samples))}  median {ms(statistics.median(samples))}  max {ms(max(samples))} ms"


def log(message: str) -> None:
    print(message, flush=True)
