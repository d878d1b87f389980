"""`abilities-mcp doctor`: whether this project's setup holds the threat model, one line per check and the fix under
each that fails, as `flutter doctor` and `brew doctor` do.

Each check is a small function of the setup that returns its findings; CHECKS lists them in the order shown, so one
more check is one more entry there. Nothing is written, and no command a project's config names is run: only the
clients' own `--version`, found on PATH.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..clients import sandbox as sandboxes
from ..clients import wiring
from ..clients.jsonc import read_object
from ..clients.sandbox import Where
from ..clients.versions import VERIFIED
from ..state.project import Project
from ..state.trust import TRUST_COMMAND

OK, WARN, FAIL, SKIP = "ok", "warn", "fail", "skip"
# At a terminal, a mark read at a glance; elsewhere (a pipe, CI) the word.
MARKS = {OK: "✓", WARN: "!", FAIL: "✗", SKIP: "-"}
# How long a client's `--version` may take: Gemini CLI, a Node program, needs about 4 s on a busy machine (Claude
# Code and Codex well under 1 s); one that hangs must not hang the doctor.
VERSION_TIMEOUT_SECONDS = 20.0
# Permission bits that let users other than the owner into the state folder or its files.
OTHERS = stat.S_IRWXG | stat.S_IRWXO
_VERSION = re.compile(r"\d+\.\d+\.\d+")


@dataclass(frozen=True)
class Finding:
    """One line of the report: its status, what it is about, what was found, and the fix when it is not ok."""

    status: str
    subject: str
    text: str
    fix: str = ""


@dataclass
class Setup:
    """What the checks look at: the project, the clients set up in it, and this machine."""

    project: Project
    where: Where
    clients: list[str]
    which: Callable[[str], str | None] = shutil.which
    platform: str = sys.platform
    run: Callable[..., subprocess.CompletedProcess] = subprocess.run
    uid: int = field(default_factory=os.getuid)

    @classmethod
    def of(cls, project: Project) -> Setup:
        where = Where.here()
        return cls(project, where, wiring.set_up(project.root, where.home))

    def shown(self, path: Path) -> str:
        """A path as the report names it: relative inside the project."""
        return str(path.relative_to(self.project.root)) if path.is_relative_to(self.project.root) else str(path)


def run(project: Project, as_json: bool = False) -> int:
    """Print the report; 1 when a check fails, else 0."""
    findings = diagnose(Setup.of(project))
    if as_json:
        print(json.dumps({"ok": not _failing(findings), "checks": [asdict(f) for f in findings]}, indent=2))
    else:
        print(render(findings, marks=sys.stdout.isatty()))
    return 1 if _failing(findings) else 0


def diagnose(setup: Setup) -> list[Finding]:
    """Every check's findings, in CHECKS' order."""
    return [finding for check in CHECKS for finding in check(setup)]


def render(findings: list[Finding], marks: bool) -> str:
    """One line per finding, its fix indented under it, and a last line that sums up."""
    lines = []
    for f in findings:
        lines.append(f"[{MARKS[f.status]}] {f.subject}: {f.text}" if marks else f"{f.status:<5} {f.subject}: {f.text}")
        lines += [f"    fix: {f.fix}"] if f.fix and f.status in (WARN, FAIL) else []
    failing = len(_failing(findings))
    warnings = sum(f.status == WARN for f in findings)
    warned = f"; {warnings} warning{'s' * (warnings != 1)}" if warnings else ""
    lines.append(
        f"{failing} check{'s' * (failing != 1)} failed{warned}: the fix is under each."
        if failing
        else f"No check failed{warned}."
    )
    return "\n".join(lines)


def _failing(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.status == FAIL]


# --- the checks ---------------------------------------------------------------------------------------------------


def clients_found(setup: Setup) -> list[Finding]:
    """Which clients this project is set up for (each check below looks at those)."""
    if not setup.clients:
        return [
            Finding(
                WARN,
                "clients",
                "no client is set up in this project: no agent reaches abilities-mcp here",
                "abilities-mcp init claude --sandbox (or codex, gemini, opencode, cursor, vscode, desktop)",
            )
        ]
    return [Finding(OK, "clients", ", ".join(wiring.LABELS[c] for c in setup.clients))]


def server_entries(setup: Setup) -> list[Finding]:
    """Each client starts abilities-mcp, with a command that exists."""
    return [_server_finding(setup, client) for client in setup.clients]


def _server_finding(setup: Setup, client: str) -> Finding:
    label, init = wiring.LABELS[client], f"abilities-mcp init {client}"
    found = wiring.servers(client, setup.project.root, setup.where.home)
    if broken := wiring.unreadable(client, setup.project.root, setup.where.home):
        text = f"{setup.shown(broken)} does not parse, so {label} reads no server from it"
        return Finding(FAIL, label, text, f"fix its syntax; `{init} --dry-run` names the problem")
    if not found and (team := wiring.team_servers(client, setup.project.root, setup.where.home)):
        server = team[0]
        where = f"{server.name!r} in {setup.shown(server.path)}"
        if not server.enabled:
            fix = f"enable it there, or {init} --url URL --force"
            return Finding(FAIL, label, f"the server {where} is disabled", fix)
        return Finding(OK, label, f"server {where} is the team server at {server.url} (token from $ABILITIES_TOKEN)")
    if not found:
        return Finding(FAIL, label, "no server entry starts abilities-mcp, so the agent has none of its tools", init)
    server = found[0]
    where = f"{server.name!r} in {setup.shown(server.path)}"
    if not server.enabled:
        return Finding(FAIL, label, f"the server {where} is disabled", f"enable it there, or {init} --force")
    program = wiring.runnable(server.argv, setup.which)
    if program is None:
        why = f"the server {where} runs {server.argv[0]!r}, which is not found"
        return Finding(FAIL, label, why, f"{init} --force (or --command with how the client starts abilities-mcp)")
    return Finding(OK, label, f"server {where} runs {program}")


def hooks(setup: Setup) -> list[Finding]:
    """Each client that has hooks runs abilities-mcp's, for every event init wires, with a command that exists."""
    return [_hooks_finding(setup, client) for client in setup.clients]


def _hooks_finding(setup: Setup, client: str) -> Finding:
    label, init = wiring.LABELS[client], f"abilities-mcp init {client}"
    if client == "opencode":
        return _plugin_finding(setup)
    wired = wiring.hooks(client, setup.project.root)
    if wired is None:
        text = "has no hooks: this server's tools are gated, the client's own (shell, edits) are not"
        return Finding(WARN, label, text, "for gated work use Claude Code, Codex, Gemini CLI, OpenCode or Cursor")
    where = setup.shown(wired.path)
    if wired.missing:
        text = f"no abilities-mcp hook for {', '.join(wired.missing)} in {where}: those gates are off"
        return Finding(FAIL, label, text, init)
    if pinning := _pinning_finding(setup, client, wired):
        return pinning
    broken = sorted({argv[0] for argv in wired.found.values() if not wiring.runnable(argv, setup.which)})
    if broken:
        text = f"hooks in {where} run {', '.join(map(repr, broken))}, which is not found: every gate fails open"
        return Finding(FAIL, label, text, f"{init} --force (or --command with how the client starts abilities-mcp)")
    if client == "claude" and (off := _claude_hooks_disabled(setup)):
        return Finding(FAIL, label, f"disableAllHooks is true in {setup.shown(off)}: no hook runs", "remove it there")
    return Finding(OK, label, f"hooks for {', '.join(wired.found)} in {where}")


def _pinning_finding(setup: Setup, client: str, wired: wiring.Hooks) -> Finding | None:
    """Each hook names the project with --root: without it (an older init's hook, or a relative root) the hook takes
    the project from the client's working directory, which is the call's (Codex's workdir), so a shell call run in a
    subfolder or /tmp finds no workflows.json and passes ungated; one pinned to another folder gates with that
    folder's workflows (a project moved, or a config copied from another machine)."""
    label, where = wiring.LABELS[client], setup.shown(wired.path)
    fix = (
        f"abilities-mcp init {client} again: it pins them (if it says it kept a hook because its command differs, "
        "pass --command as you did before, or --force)"
    )
    # A hook that asks a team server (--url) decides by the server's project, wherever the call runs.
    unpinned = [e for e, r in wired.roots.items() if e not in wired.urls and (r is None or not os.path.isabs(r))]
    if unpinned:
        text = (
            f"the hooks for {', '.join(unpinned)} in {where} have no --root, so they take the project from the "
            "client's working directory, which a call can move: a shell call run in a subfolder or /tmp is not gated"
        )
        return Finding(FAIL, label, text, fix)
    pinned = [r for e, r in wired.roots.items() if e not in wired.urls]
    elsewhere = sorted({r for r in pinned if r and Path(r).resolve() != setup.project.root.resolve()})
    if elsewhere:
        named = ", ".join(map(repr, elsewhere))
        text = f"the hooks in {where} are pinned to {named} (--root), not this project: its workflows are not enforced"
        return Finding(FAIL, label, text, fix)
    return None


def _plugin_finding(setup: Setup) -> Finding:
    argv, current = wiring.plugin(setup.project.root)
    if argv is None:
        text = f"no abilities-mcp plugin in {wiring.PLUGIN_FILE}: OpenCode's own tools are not gated"
        return Finding(FAIL, "OpenCode", text, "abilities-mcp init opencode")
    if not wiring.runnable(argv, setup.which):
        text = f"the plugin runs {argv[0]!r}, which is not found: every gate fails open"
        return Finding(FAIL, "OpenCode", text, "abilities-mcp init opencode --command '<how to start abilities-mcp>'")
    if not current:
        text = f"{wiring.PLUGIN_FILE} is not this version's plugin"
        return Finding(WARN, "OpenCode", text, "abilities-mcp init opencode (it replaces the plugin)")
    return Finding(OK, "OpenCode", f"plugin {wiring.PLUGIN_FILE} runs {argv[0]}")


def _claude_hooks_disabled(setup: Setup) -> Path | None:
    for path, _ in sandboxes.claude_files(setup.project.root, setup.where):
        if (read_object(path) or {}).get("disableAllHooks") is True:
            return path
    return None


def sandboxes_on(setup: Setup) -> list[Finding]:
    """Each client's own sandbox is on as verified, and can start on this machine."""
    return [f for client in setup.clients for f in SANDBOX_CHECKS.get(client, _no_sandbox)(setup, client)]


def _json_sandbox(setup: Setup, client: str) -> list[Finding]:
    spec, label = sandboxes.JSON_SANDBOXES[client], wiring.LABELS[client]
    found = sandboxes.json_settings(client, setup.project.root, setup.where)
    findings = []
    for key, setting in spec.settings.items():
        value, source = found[key]
        if value == setting.value:
            continue
        severity = FAIL if key in ("enabled", "allowUnsandboxedCommands", "toolSandboxing") else WARN
        origin = setup.shown(source) if source else f"{label}'s default"
        fix = _sandbox_fix(setup, client, key, source)
        text = f"{spec.table}.{key} is {json.dumps(value)} ({origin}), so {setting.risk}"
        findings.append(Finding(severity, label, text, fix))
    if lacking := sandboxes.missing(client, setup.which, setup.platform):
        packages = " ".join(lacking)
        text = f"its sandbox cannot start here: {packages} not found"
        findings.append(Finding(FAIL, label, text, f"install {packages} (apt-get install {packages})"))
    where = setup.shown(setup.project.root / spec.path)
    return findings or [Finding(OK, label, f"sandbox on, as verified ({', '.join(spec.settings)} in {where})")]


def _sandbox_fix(setup: Setup, client: str, key: str, source: Path | None) -> str:
    """init writes a key no file sets; one the project's file sets otherwise it replaces only with --force (which
    also replaces the person's own server entry and hooks, so setting the one key is named first); another file's
    setting (settings.local.json, the user's) is removed there."""
    spec = sandboxes.JSON_SANDBOXES[client]
    if source is None:
        return f"abilities-mcp init {client} --sandbox"
    if source == setup.project.root / spec.path:
        value, init = json.dumps(spec.settings[key].value), f"abilities-mcp init {client} --sandbox --force"
        return f"set {spec.table}.{key} to {value} in {setup.shown(source)} (or {init})"
    return f"remove it from {setup.shown(source)}"


def _codex_sandbox(setup: Setup, client: str) -> list[Finding]:
    root, where = setup.project.root, setup.where
    mode = sandboxes.codex_setting(root, where, "sandbox_mode")
    if mode.value in sandboxes.CODEX_MODES_CONFINED:
        return [Finding(OK, "Codex", f"sandbox_mode {mode.value} ({setup.shown(mode.source)})")]
    project_file = root / sandboxes.CODEX_CONFIG
    if not sandboxes.codex_trusted(root, where) and "sandbox_mode" in sandboxes.codex_config(project_file):
        text = f"{sandboxes.CODEX_CONFIG} is not read until you trust this project in Codex, so {sandboxes.CODEX_RISK}"
        return [Finding(WARN, "Codex", text, "start codex in the project and trust it")]
    origin = setup.shown(mode.source) if mode.source else "not set"
    text = f"sandbox_mode is {json.dumps(mode.value)} ({origin}), so {sandboxes.CODEX_RISK}"
    fix = (
        f'set sandbox_mode = "{sandboxes.CODEX_MODE}" in {origin}'
        if mode.source
        else "abilities-mcp init codex --sandbox"
    )
    return [Finding(FAIL, "Codex", text, fix)]


def _no_sandbox(setup: Setup, client: str) -> list[Finding]:
    if client == "desktop":
        return []  # no shell of its own
    advice = sandboxes.NO_SANDBOX[client].split(". ", 1)
    return [Finding(WARN, wiring.LABELS[client], advice[0], advice[1] if len(advice) > 1 else "")]


SANDBOX_CHECKS: dict[str, Callable[[Setup, str], list[Finding]]] = {
    "claude": _json_sandbox,
    "gemini": _json_sandbox,
    "codex": _codex_sandbox,
}


def state_folder_place(setup: Setup) -> list[Finding]:
    """The state folder is outside the project and outside what every client's sandbox lets the shell write."""
    state, root = setup.project.state_dir, setup.project.root
    fix = "point --state-dir or $ABILITIES_STATE_DIR elsewhere, or unset them (the default is outside the project)"
    if sandboxes.exposing(state, [sandboxes.Root(root, "the project")]):
        text = f"{state} is inside the project: an agent that may write the project may write it"
        return [Finding(FAIL, "state folder", text, fix)]
    for client in setup.clients:
        if hit := sandboxes.exposing(state, sandboxes.writable_roots(client, root, setup.where)):
            label = wiring.LABELS[client]
            text = f"{state} is inside {hit.path} ({hit.why}), which {label}'s sandbox lets the shell write"
            return [Finding(FAIL, "state folder", text, f"{fix}, or {hit.undo}" if hit.undo else fix)]
    return [Finding(OK, "state folder", f"{state}, outside the project and every sandbox's writable folders")]


def state_folder_permissions(setup: Setup) -> list[Finding]:
    """The state folder is yours alone (0700): its runs, approvals and trust records are readable by no one else."""
    state = setup.project.state_dir
    try:
        info = state.stat()
    except FileNotFoundError:
        return [Finding(OK, "state folder", "not created yet; the first command creates it with mode 0700")]
    except OSError as exc:
        return [
            Finding(FAIL, "state folder", f"{state} cannot be read: {exc.strerror}", f"fix the permissions of {state}")
        ]
    if info.st_uid != setup.uid:
        text = f"{state} belongs to uid {info.st_uid}, not to you: its owner can read and forge your answers"
        return [Finding(FAIL, "state folder", text, f"move it away; the next command makes a new one ({state})")]
    if info.st_mode & OTHERS:
        exposed = [p for p in sorted(state.rglob("*")) if p.is_file() and p.stat().st_mode & OTHERS]
        files = f" and chmod 600 {' '.join(map(str, exposed))}" if exposed else ""
        text = f"{state} has mode {stat.S_IMODE(info.st_mode):04o}: other users can read it (or write it)"
        return [Finding(FAIL, "state folder", text, f"chmod 700 {state}{files}")]
    return [Finding(OK, "state folder", "mode 0700: yours alone")]


def client_versions(setup: Setup) -> list[Finding]:
    """Each client's version, where its command is on PATH, against the one CI verifies."""
    return [_version_finding(setup, client) for client in setup.clients if client in VERIFIED]


def _version_finding(setup: Setup, client: str) -> Finding:
    pin = VERIFIED[client]
    program = setup.which(pin.binary)
    if program is None:
        return Finding(
            SKIP, pin.label, f"`{pin.binary}` is not on PATH; version not checked (CI verifies {pin.version})"
        )
    try:
        done = setup.run(
            [program, "--version"], capture_output=True, text=True, errors="replace", timeout=VERSION_TIMEOUT_SECONDS
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Finding(WARN, pin.label, f"`{pin.binary} --version` failed ({exc})", pin.install)
    version = _VERSION.search(done.stdout or "")
    if version is None:
        return Finding(WARN, pin.label, f"`{pin.binary} --version` said no version", pin.install)
    if version.group() != pin.version:
        text = f"{version.group()}, not the {pin.version} CI verifies: its hooks and payloads may differ"
        return Finding(WARN, pin.label, text, f"{pin.install} (or run tests/clients with yours)")
    return Finding(OK, pin.label, f"{pin.version}, verified in CI")


def installed_outside_the_project(setup: Setup) -> list[Finding]:
    """The code that gates the agent (the server, the hooks, the package they import) lives where the agent cannot
    write: a sandbox lets its shell write the project, so abilities-mcp in a project's .venv can be rewritten."""
    import abilities_mcp

    root = setup.project.root.resolve()
    programs = {"the abilities_mcp package": Path(abilities_mcp.__file__).resolve().parent}
    for client in setup.clients:
        argvs = [s.argv for s in wiring.servers(client, setup.project.root, setup.where.home)]
        wired = wiring.hooks(client, setup.project.root) if client != "opencode" else None
        argvs += list(wired.found.values()) if wired is not None else []
        for argv in argvs:
            if found := wiring.runnable(argv, setup.which):
                programs.setdefault(f"{wiring.LABELS[client]}'s {Path(found).name}", Path(found).resolve())
    inside = [f"{what} ({path})" for what, path in programs.items() if path.is_relative_to(root)]
    if not inside:
        return [Finding(OK, "install", "abilities-mcp and the commands the clients run live outside the project")]
    text = f"{'; '.join(inside)} inside the project: an agent that may write the project can rewrite what gates it"
    fix = (
        "install abilities-mcp outside the project (pipx install, uv tool install, a venv elsewhere), then init --force"
    )
    return [Finding(FAIL, "install", text, fix)]


def files_waiting_for_trust(setup: Setup) -> list[Finding]:
    """Files whose edits would lower a gate wait for a person's trust (the trusted version is enforced meanwhile:
    red, since the project does not run as written); files nobody trusted yet (new abilities run strict: a warning)."""
    from .trust import changes

    found = changes(setup.project)
    fix = f"read the diffs and trust them in your own terminal: {TRUST_COMMAND}"
    waiting = [c for c in found if c.waits]
    findings = [Finding(FAIL, "trust", f"{c.key} {c.note.split(' has ', 1)[-1]}", fix) for c in waiting]
    unreviewed = [c.key for c in found if not c.waits]
    if unreviewed:
        text = (
            f"{len(unreviewed)} file(s) not as a person trusted them ({_listed(unreviewed)}); new abilities run strict"
        )
        findings.append(Finding(WARN, "trust", text, fix))
    return findings or [Finding(OK, "trust", "every file that decides a gate is as a person trusted it")]


def _listed(keys: list[str], shown: int = 3) -> str:
    return ", ".join(keys[:shown]) + (f" and {len(keys) - shown} more" if len(keys) > shown else "")


# The checks, in the order the report shows them: one more check is one more entry.
CHECKS: list[Callable[[Setup], list[Finding]]] = [
    clients_found,
    server_entries,
    hooks,
    sandboxes_on,
    state_folder_place,
    state_folder_permissions,
    installed_outside_the_project,
    files_waiting_for_trust,
    client_versions,
]
