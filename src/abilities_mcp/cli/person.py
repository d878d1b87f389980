"""Whether an answer (`abilities-mcp approve|decide`, `run`'s prompt) is typed by a person, or by an agent's tools.

A terminal alone proves nothing: an agent's shell tool makes one with `script`, a Python pty or tmux. So besides
stdin and stdout being a terminal, the command refuses when it runs inside an agent client's process tree, or on
a terminal whose other end a process of that tree holds, or with the environment an agent client gives its tools.
A library the dynamic loader put into the command (LD_PRELOAD) is refused too. A process the agent detached
(`setsid`, a double fork) and stripped of that environment, or code the agent runs inside the command itself, is
beyond what one OS user can tell apart: the README's threat model says so, and what closes it (the client's
sandbox, another user).
Linux reads all of this from /proc; elsewhere only the terminal check applies.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import NamedTuple

# Agent clients, by the program name their processes carry (the native binaries and the npm launchers).
AGENT_PROGRAMS = {
    "claude",
    "opencode",
    "codex",
    "gemini",
    "cursor-agent",
    "copilot",
    "aider",
    "goose",
    "crush",
    "qwen",
    "amp",
}
# Words in a Node/Bun process's arguments that make it one of those clients (`node .../claude-code/cli.js`).
AGENT_SCRIPTS = ("claude-code", "opencode", "@openai/codex", "gemini-cli", "cursor-agent")
# Variables agent clients set for the commands their tools run.
AGENT_ENV = (
    "CLAUDECODE",
    "CLAUDE_CODE_ENTRYPOINT",
    "CLAUDE_CODE_SESSION_ID",
    "OPENCODE",
    "OPENCODE_SESSION_ID",
    "CODEX_SANDBOX",
    "CODEX_SANDBOX_NETWORK_DISABLED",
    "GEMINI_CLI",
    "CURSOR_AGENT",
)
# Variables that make the dynamic loader put a library into a program before it starts, where it can make isatty()
# say yes. The commands that take answers re-run themselves without them (main._isolated): one still set was put
# back by what ran before, or the command was started in isolated mode with it.
LOADER_ENV = ("LD_PRELOAD", "LD_AUDIT", "DYLD_INSERT_LIBRARIES")
# How far up the process tree to look: deeper trees are not made by hand.
MAX_ANCESTORS = 64
PROC = Path("/proc")


class Proc(NamedTuple):
    """One process, as /proc shows it."""

    pid: int
    name: str  # the program name (comm)
    argv: tuple[str, ...]

    def label(self) -> str:
        return f"{self.name} ({self.pid})"


def refusal(proc: Path = PROC) -> str | None:
    """Why this process cannot be taken for a person at a terminal; None when nothing says so."""
    try:
        tty = os.ttyname(0) if sys.stdin.isatty() and sys.stdout.isatty() else None
    except OSError:
        tty = None
    if tty is None:
        return "stdin is not a terminal"
    marker = _agent_env(dict(os.environ))
    if marker:
        return f"it runs with {marker} set, which an agent client gives the commands its tools run"
    loader = next((name for name in LOADER_ENV if _loaded_env(proc).get(name)), None)
    if loader:
        return f"it runs with {loader} set, which loads a library into it that can fake its terminal"
    if not proc.is_dir():
        return None
    chain = ancestry(os.getpid(), proc)
    agent = _agent_in(chain, proc)
    if agent:
        return f"it runs inside {agent}, an agent client ({' < '.join(p.label() for p in chain)})"
    for holder in terminal_holders(tty, proc):
        agent = _agent_in(ancestry(holder.pid, proc), proc)
        if agent:
            return f"its terminal was made by {holder.label()}, which runs inside {agent}, an agent client"
        marker = _agent_env(_environ(holder.pid, proc))
        if marker:
            return f"its terminal was made by {holder.label()}, which runs with {marker} set (an agent client's tool)"
    return None


def origin(proc: Path = PROC) -> str:
    """Where an answer typed here came from: the terminal and the process chain, for the record."""
    try:
        tty = os.ttyname(0)
    except OSError:
        tty = "no terminal"
    if not proc.is_dir():
        return tty
    chain = ancestry(os.getpid(), proc)[1:]  # this command itself is implied
    holders = ", ".join(h.label() for h in terminal_holders(tty, proc))
    held = f" held by {holders}" if holders else ""
    return f"{tty}{held}; {' < '.join(p.label() for p in chain)}"


def ancestry(pid: int, proc: Path = PROC) -> list[Proc]:
    """The process and its parents, nearest first, up to (not including) the kernel's."""
    chain: list[Proc] = []
    while pid > 0 and len(chain) < MAX_ANCESTORS:
        found = _read(pid, proc)
        if found is None:
            break
        process, parent = found
        chain.append(process)
        pid = parent
    return chain


def terminal_holders(tty: str, proc: Path = PROC) -> list[Proc]:
    """The processes holding the master side of a pseudo-terminal (/dev/pts/N): whoever made the terminal."""
    if not tty.startswith("/dev/pts/"):
        return []
    index = tty.rsplit("/", 1)[-1]
    holders = []
    for entry in proc.iterdir():
        if entry.name.isdigit() and _holds_master(entry, index):
            found = _read(int(entry.name), proc)
            if found is not None:
                holders.append(found[0])
    return holders


def _holds_master(entry: Path, index: str) -> bool:
    try:
        for fd in (entry / "fd").iterdir():
            if os.readlink(fd) in ("/dev/ptmx", "/dev/pts/ptmx") and _tty_index(entry / "fdinfo" / fd.name) == index:
                return True
    except OSError:  # gone, or another user's: neither made a terminal this user types into
        return False
    return False


def _tty_index(fdinfo: Path) -> str | None:
    for line in fdinfo.read_text().splitlines():
        if line.startswith("tty-index:"):
            return line.split(":", 1)[1].strip()
    return None


def _read(pid: int, proc: Path) -> tuple[Proc, int] | None:
    try:
        stat = (proc / str(pid) / "stat").read_text()
        argv = (proc / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    # `pid (comm) state ppid ...`: comm may hold spaces and parentheses, so split at the last ')'.
    name = stat[stat.index("(") + 1 : stat.rindex(")")]
    parent = int(stat[stat.rindex(")") + 2 :].split()[1])
    return Proc(pid, name, tuple(a.decode(errors="replace") for a in argv if a)), parent


def _agent_in(chain: list[Proc], proc: Path) -> str | None:
    for p in chain:
        program = os.path.basename(p.argv[0]) if p.argv else ""
        if p.name in AGENT_PROGRAMS or program in AGENT_PROGRAMS:
            return p.label()
        if p.name in ("node", "bun", "deno") and any(word in arg for arg in p.argv[1:3] for word in AGENT_SCRIPTS):
            return p.label()
    return None


def _environ(pid: int, proc: Path) -> dict[str, str]:
    try:
        raw = (proc / str(pid) / "environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


def _loaded_env(proc: Path) -> dict[str, str]:
    """This process's environment as it started (/proc, where a library that unset a variable still shows it) and
    as Python holds it."""
    return {**_environ(os.getpid(), proc), **os.environ}


def _agent_env(env: dict[str, str]) -> str | None:
    return next((name for name in AGENT_ENV if env.get(name)), None)
