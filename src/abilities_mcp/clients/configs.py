"""`abilities-mcp init CLIENT`: write or merge the config that makes a client start this server, and, where the
client has them, its hooks (`--gateway`: moves.py; `--sandbox`: the client's own sandbox, from sandbox.py).

Every file is planned before any is written (planned.py), so a file that must not be touched (it does not parse,
names a key twice, or keeps comments a rewrite would lose) stops the whole command with nothing changed. Edits keep
every other key, the key order and the file's indentation; a run that would change nothing writes nothing.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
from collections.abc import Callable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from ..state.project import Project
from . import moves
from . import sandbox as sandboxes
from .hook import event_name
from .planned import ConfigError, Planned, append_table, apply, merged, plan_json, read_text, read_toml

CLIENTS = ["claude", "opencode", "cursor", "vscode", "codex", "gemini", "desktop"]
# Claude Code's rule for server names; 40 keeps `mcp__NAME__ability_step_complete` within the API's 64-char limit.
NAME_RULE = re.compile(r"[A-Za-z0-9_-]{1,40}")
# Claude Code ignores a project server that takes one of these names.
RESERVED_NAMES = {"workspace", "claude-in-chrome", "computer-use"}
# Seconds Claude Code waits for a hook; a gate that takes longer fails open, and a tool call waits that long.
HOOK_TIMEOUT_SECONDS = 10
# The Claude Code events the hook answers, each with its matcher (None: the event takes none).
CLAUDE_HOOKS = {
    "PreToolUse": "*",
    "PostToolUse": "*",
    "UserPromptSubmit": None,
    "SessionStart": "startup|resume|clear|compact|fork",
    "Stop": None,
}
# What every hook init writes ends with: the project, absolute. The hook takes it over the client's working
# directory, which is the call's (Codex sends its exec_command's workdir): a call run from a subfolder or /tmp must
# not find "no workflows.json here" and pass ungated (clients/hook.py `_project`).
ROOT_OPTION = "--root"
# Team mode's hooks name the team server instead (remote.py): it decides against its own project.
URL_OPTION = "--url"
HOOK_OPTIONS = (ROOT_OPTION, URL_OPTION)
# Where opencode_plugin.js takes the argv that starts abilities-mcp.
PLUGIN_TOKEN = "__ABILITIES_MCP_COMMAND__"
PLUGIN_OPTIONS_TOKEN = "__ABILITIES_MCP_HOOK_OPTIONS__"
OPENCODE_SCHEMA = "https://opencode.ai/config.json"
# Cursor and VS Code may start servers outside the project: they pass the folder they have open.
WORKSPACE_ROOT = ["--root", "${workspaceFolder}"]
SERVER_ONLY = "{}: server only; its hooks are not wired yet (the server's own tools are gated, the client's are not)"
# Codex, Gemini CLI and Cursor: their hook events with their matcher (None: the event takes none, or all match).
# Codex: codex-rs/config/src/hook_config.rs (HookEventsToml); Gemini CLI: packages/core/src/hooks/types.ts;
# Cursor: its hooks documentation (preToolUse gates its file tools; shell and MCP calls have their own events).
CLIENT_HOOKS: dict[str, dict[str, str | None]] = {
    "codex": {"PreToolUse": "*", "PostToolUse": "*", "UserPromptSubmit": None, "SessionStart": None, "Stop": None},
    "gemini": {"BeforeTool": "*", "AfterTool": "*", "BeforeAgent": None, "SessionStart": None, "AfterAgent": None},
    "cursor": {
        "beforeShellExecution": None,
        "beforeMCPExecution": None,
        "preToolUse": "Write|Edit|StrReplace|Delete",
        "afterShellExecution": None,
        "afterMCPExecution": None,
        "stop": None,
    },
}
CLIENT_NOTES = {
    "cursor": (
        "Cursor: reload the window to load .cursor/hooks.json (Cursor 1.7 or later; Settings > Hooks lists them). "
        "Cursor is not driven for real in this project's tests: its hooks are tested from its documented payloads"
    ),
    "vscode": SERVER_ONLY.format("VS Code"),
    "codex": (
        "Codex: it runs the hooks in .codex/hooks.json only after you trust them and this project: start codex "
        "here, accept the project as trusted, then open /hooks and review and trust each abilities-mcp hook"
    ),
    "gemini": (
        "Gemini CLI: it runs the hooks in .gemini/settings.json only in a trusted folder: trust this folder when "
        "Gemini CLI asks (or /permissions), then restart it"
    ),
    "desktop": "Claude Desktop: server only (it has no hooks); restart Claude Desktop to load it",
}
# The last line after a write, for the clients whose note above does not already say what to do next.
NEXT_STEPS = {
    "claude": (
        "next: start a new Claude Code session in this project (it asks once before it starts the project's "
        "server, and reads the hooks at the start); `abilities-mcp doctor` then checks the setup"
    ),
    "opencode": (
        "next: restart OpenCode in this project (it loads the server and the plugin at the start); "
        "`abilities-mcp doctor` then checks the setup"
    ),
}


def init(
    project_root: Path,
    client: str,
    *,
    dry_run: bool,
    name: str,
    command: str | None,
    force: bool,
    gateway: bool = False,
    sandbox: bool = False,
    state_dir: Path | None = None,
    plan: Callable[[Path, str, str, list[str], bool, bool], list[Planned]] | None = None,
) -> int:
    """Write (or with dry_run, show) the client's config; returns the exit code. `plan(root, client, name, argv, force,
    gateway)`: the files to write, planned another way (team mode: remote_configs.py). `gateway`: also move the client's
    other servers into gateway.json, so they are reached only through this server's gates. `sandbox`: also turn on
    the client's own sandbox as verified, refused (nothing written) for a client that has none, or when the state
    folder (`state_dir`, default: the project's) would be inside what the sandbox lets the agent's shell write."""
    try:
        _check(client, name)
        if gateway and client not in moves.GATEWAY_CLIENTS:
            raise ConfigError(moves.not_movable(client))
        if sandbox and client in sandboxes.NO_SANDBOX:
            raise ConfigError(f"--sandbox: {sandboxes.NO_SANDBOX[client]}. Nothing was changed.")
        argv, chosen = resolve_command(command)
        if plan is not None:
            plans = plan(Path(project_root), client, name, argv, force, gateway)
        else:
            plans = PLANNERS[client](Path(project_root), name, argv, force)
        if sandbox:
            plans = _sandboxed(Path(project_root), client, plans, force, state_dir)
        if gateway:
            plans = moves.behind_gateway(Path(project_root), client, name, plans, force)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 1
    if chosen:
        print(chosen)
    for plan in plans:
        apply(plan, dry_run)
    if client in CLIENT_NOTES:
        print(CLIENT_NOTES[client])
    if sandbox:
        print(_sandbox_note(client))
    if dry_run:
        print("(dry run: nothing written)")
    elif client in NEXT_STEPS and not gateway and any(plan.new != plan.old for plan in plans):
        print(NEXT_STEPS[client])  # (--gateway's own note says to restart the client)
    return 0


def _check(client: str, name: str) -> None:
    if client not in PLANNERS:
        raise ConfigError(f"Unknown client {client!r}; clients: {', '.join(CLIENTS)}")
    if not NAME_RULE.fullmatch(name) or name in RESERVED_NAMES:
        raise ConfigError(
            f"--name {name!r} cannot name the server: use 1-40 letters, digits, '-' or '_' (Claude Code's rule; "
            f"tool names such as mcp__NAME__ability_step_complete must fit in 64 characters), and not "
            f"{', '.join(sorted(RESERVED_NAMES))}"
        )


def resolve_command(command: str | None) -> tuple[list[str], str | None]:
    """The argv that starts abilities-mcp, and a line to print when it was chosen for a command not on PATH."""
    if command is None:
        return _default_command()
    if os.path.isfile(command):  # a path, spaces and backslashes included: not split; absolute, since Claude Code
        return [os.path.abspath(command)], None  # runs hooks wherever the session has cd'ed to
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise ConfigError(f"--command {command!r}: {exc}; quote it as a shell would") from None
    if not argv:
        raise ConfigError("--command is empty; pass how the client starts abilities-mcp, e.g. 'uvx abilities-mcp'")
    if os.sep in argv[0] and os.path.isfile(argv[0]):
        argv[0] = os.path.abspath(argv[0])
    return argv, None


def _default_command() -> tuple[list[str], str | None]:
    """abilities-mcp on PATH; else the console script running now; else this Python with `-m`."""
    if shutil.which("abilities-mcp"):
        return ["abilities-mcp"], None
    argv = running_command()
    return argv, f"abilities-mcp is not on PATH; the config runs {shlex.join(argv)} — pass --command to choose"


def running_command() -> list[str]:
    """The argv that starts this very abilities-mcp, absolute: the console script running now, else this Python
    with `-m` (a command run without a shell, as clients and the Inspector run it, needs no PATH then)."""
    script = Path(sys.argv[0])
    is_script = script.name in ("abilities-mcp", "abilities-mcp.exe") and script.is_file()
    return [os.path.abspath(script)] if is_script else [sys.executable, "-m", "abilities_mcp"]


def desktop_config_path(platform: str, env: Mapping[str, str], home: Path) -> Path:
    """Claude Desktop's config file on this platform (sys.platform's names)."""
    if platform == "darwin":
        folder = home / "Library" / "Application Support"
    elif platform == "win32":
        folder = Path(env["APPDATA"]) if env.get("APPDATA") else home / "AppData" / "Roaming"
    else:  # the XDG rule: a relative XDG_CONFIG_HOME is ignored
        xdg = env.get("XDG_CONFIG_HOME", "")
        folder = Path(xdg) if os.path.isabs(xdg) else home / ".config"
    return folder / "Claude" / "claude_desktop_config.json"


# Planners: (project root, server name, argv, force) -> the files to write.


def _claude(root: Path, name: str, argv: list[str], force: bool) -> list[Planned]:
    mcp_json = root / ".mcp.json"
    entry = {"type": "stdio", "command": argv[0], "args": [*argv[1:], "serve"]}
    settings = root / ".claude" / "settings.json"
    return [
        _plan_entry(mcp_json, ["mcpServers"], name, entry, force),
        plan_json(settings, lambda data: _put_hooks(data, argv, force, settings, root)),
    ]


def _opencode(root: Path, name: str, argv: list[str], force: bool) -> list[Planned]:
    path = root / "opencode.json"
    if not path.exists() and (root / "opencode.jsonc").exists():
        path = root / "opencode.jsonc"

    def merge(data: dict[str, Any]) -> list[str]:
        mcp = data.get("mcp")
        servers = mcp.get("servers") if isinstance(mcp, dict) else None
        entry = {"type": "local", "command": [*argv, "serve"]}
        if isinstance(servers, dict) and all(isinstance(v, dict) for v in servers.values()):  # V2: no `enabled`
            return _put_entry(data, ["mcp", "servers"], name, entry, force, path)
        return _put_entry(data, ["mcp"], name, {**entry, "enabled": True}, force, path)

    return [plan_json(path, merge, new_file={"$schema": OPENCODE_SCHEMA}), _plan_plugin(root, argv)]


def _plan_plugin(root: Path, argv: list[str], url: str | None = None) -> Planned:
    path = root / ".opencode" / "plugins" / "abilities-mcp.js"
    new, old = plugin_text(argv, [URL_OPTION, url] if url is not None else []), read_text(path)
    notes = [f"{path} differed from this version's plugin: init owns that file and replaces it"]
    return Planned(path, old, new, notes if old and old != new else [])


def plugin_text(argv: list[str], options: list[str]) -> str:
    """The OpenCode plugin as init writes it: the command that starts abilities-mcp, and the hook's options."""
    template = resources.files("abilities_mcp.clients").joinpath("opencode_plugin.js").read_text(encoding="utf-8")
    return template.replace(PLUGIN_TOKEN, json.dumps(argv)).replace(PLUGIN_OPTIONS_TOKEN, json.dumps(options))


def _editor(relpath: str, key: str, extra: dict[str, str], root_args: list[str]) -> Callable[..., list[Planned]]:
    """Cursor, VS Code, Gemini: one server entry under `key` in ROOT/relpath."""

    def plan(root: Path, name: str, argv: list[str], force: bool) -> list[Planned]:
        entry = {**extra, "command": argv[0], "args": [*argv[1:], "serve", *root_args]}
        return [_plan_entry(root / relpath, [key], name, entry, force)]

    return plan


def _gemini(root: Path, name: str, argv: list[str], force: bool) -> list[Planned]:
    """The server entry and the hooks share .gemini/settings.json."""
    path, entry = root / ".gemini" / "settings.json", {"command": argv[0], "args": [*argv[1:], "serve"]}

    def merge(data: dict[str, Any]) -> list[str]:
        return _put_entry(data, ["mcpServers"], name, entry, force, path) + _put_client_hooks(
            data, argv, force, path, "gemini", root
        )

    return [plan_json(path, merge)]


def _cursor(root: Path, name: str, argv: list[str], force: bool) -> list[Planned]:
    hooks = root / ".cursor" / "hooks.json"
    return [
        *_editor(".cursor/mcp.json", "mcpServers", {}, WORKSPACE_ROOT)(root, name, argv, force),
        plan_json(hooks, lambda data: _put_cursor_hooks(data, argv, force, hooks, root), new_file={"version": 1}),
    ]


def _desktop(root: Path, name: str, argv: list[str], force: bool) -> list[Planned]:
    found = shutil.which(argv[0])
    if not found:
        raise ConfigError(
            f"Claude Desktop needs an absolute command and {argv[0]!r} is not found; "
            "pass --command with an absolute path, e.g. --command /home/you/.local/bin/abilities-mcp"
        )
    path = desktop_config_path(sys.platform, os.environ, Path.home())
    entry = {"command": os.path.abspath(found), "args": [*argv[1:], "serve", "--root", os.path.abspath(root)]}
    return [_plan_entry(path, ["mcpServers"], name, entry, force)]


def _codex(root: Path, name: str, argv: list[str], force: bool) -> list[Planned]:
    """The server in config.toml, the hooks in hooks.json beside it (discovery.rs reads both from .codex/)."""
    hooks = root / ".codex" / "hooks.json"
    return [
        *_codex_server(root, name, argv, force),
        plan_json(hooks, lambda d: _put_client_hooks(d, argv, force, hooks, "codex", root)),
    ]


def _codex_server(root: Path, name: str, argv: list[str], force: bool) -> list[Planned]:
    entry = {"command": argv[0], "args": [*argv[1:], "serve"]}
    return [codex_server(root / ".codex" / "config.toml", name, entry, force)]


def codex_server(path: Path, name: str, entry: dict[str, Any], force: bool) -> Planned:
    """The server's table in Codex's config.toml (`init`, and `init --url`: clients/remote_configs.py). Only ever
    appended to: there is no TOML writer that keeps the person's comments and layout."""
    # A JSON string is a TOML basic string, a JSON list of strings a TOML array (and the result is parsed back).
    table = f"[mcp_servers.{name}]\n" + "".join(
        f"{k} = {json.dumps(v, ensure_ascii=False)}\n" for k, v in entry.items()
    )
    old = read_text(path)
    current = _toml_server(path, old, name)
    if current is None:
        new = append_table(old, table)
        if _toml_server(path, new, name) != entry:
            raise ConfigError(
                f"{path}: appending [mcp_servers.{name}] would not add that server; add by hand:\n{table}"
            )
        return Planned(path, old, new)
    if current != entry and force:
        raise ConfigError(
            f"{path}: init cannot safely rewrite TOML (your comments and layout would be lost) and changed nothing; "
            f"replace the [mcp_servers.{name}] table there by hand with:\n{table}"
        )
    return Planned(path, old, old, _kept(name, path) if current != entry else [])


def _toml_server(path: Path, text: str, name: str) -> Any:
    servers = read_toml(path, text).get("mcp_servers")
    return servers.get(name) if isinstance(servers, dict) else None


PLANNERS: dict[str, Callable[[Path, str, list[str], bool], list[Planned]]] = {
    "claude": _claude,
    "opencode": _opencode,
    "cursor": _cursor,
    "vscode": _editor(".vscode/mcp.json", "servers", {"type": "stdio"}, WORKSPACE_ROOT),
    "codex": _codex,
    "gemini": _gemini,
    "desktop": _desktop,
}


# --sandbox: the client's own sandbox, as verified (clients/sandbox.py says what and why).


def _sandboxed(root: Path, client: str, plans: list[Planned], force: bool, state_dir: Path | None) -> list[Planned]:
    """The client's files with its sandbox settings merged in, once the state folder is known to stay out of what the
    sandbox lets the agent's shell write (else nothing is written: the sandbox would not protect it)."""
    where = sandboxes.Where.here()
    state = state_dir or Project.resolve(root).state_dir
    if hit := sandboxes.exposing(state, sandboxes.writable_roots(client, root, where)):
        undo = f", or {hit.undo}" if hit.undo else ""
        raise ConfigError(
            f"--sandbox: the state folder {str(state)!r} is inside {str(hit.path)!r} ({hit.why}), which the "
            "sandbox lets the agent's shell write, so the agent could still forge a person's approval there. Point "
            "--state-dir or $ABILITIES_STATE_DIR elsewhere, or unset them (the default, under $XDG_STATE_HOME or "
            f"~/.local/state, is outside the project){undo}. Nothing was changed."
        )
    if client == "codex":
        return [_codex_sandbox(p, force) if p.path == root / sandboxes.CODEX_CONFIG else p for p in plans]
    spec = sandboxes.JSON_SANDBOXES[client]
    path = root / spec.path
    later = [
        f"{source} sets {spec.table}.{key} = {json.dumps(value)}, which wins over {path}, so {risk}: remove it there"
        for source, key, value, risk in sandboxes.overriding(client, root, where)
    ]
    return [
        merged(p, lambda d: _put_sandbox(d, spec, force, path), notes=later) if p.path == path else p for p in plans
    ]


def _put_sandbox(data: dict, spec: sandboxes.JsonSandbox, force: bool, path: Path) -> list[str]:
    """Each verified key in its table; a value the person set otherwise stays (with what it risks) unless force."""
    table = data.setdefault(spec.table, {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: {spec.table} must be a JSON object; fix it by hand, nothing was changed")
    notes = []
    for key, setting in spec.settings.items():
        if key in table and table[key] != setting.value and not force:
            notes.append(
                f"kept your {spec.table}.{key} = {json.dumps(table[key])} in {path}, so {setting.risk}; the verified "
                f"value is {json.dumps(setting.value)} (--force replaces it)"
            )
        else:
            table[key] = setting.value
    return notes


def _codex_sandbox(plan: Planned, force: bool) -> Planned:
    """`sandbox_mode` at the top of config.toml, every other byte kept: a top-level key cannot be appended after a
    table (it would belong to that table), so it goes first. One the person set otherwise stays, as for a server."""
    line = f'sandbox_mode = "{sandboxes.CODEX_MODE}"\n'
    data = read_toml(plan.path, plan.new)
    current = data.get("sandbox_mode")
    if current == sandboxes.CODEX_MODE:
        return plan
    if current is not None and force:
        raise ConfigError(
            f"{plan.path}: init cannot safely rewrite TOML (your comments and layout would be lost) and changed "
            f"nothing; replace the sandbox_mode line there by hand with:\n{line}"
        )
    if current is not None:
        kept = f"kept your sandbox_mode = {json.dumps(current)} in {plan.path}, so {sandboxes.CODEX_RISK}"
        fix = f"the verified value is {json.dumps(sandboxes.CODEX_MODE)} (change that line by hand)"
        return Planned(plan.path, plan.old, plan.new, [*plan.notes, f"{kept}; {fix}"])
    new = line + ("\n" + plan.new if plan.new.strip() else "")
    if read_toml(plan.path, new) != {**data, "sandbox_mode": sandboxes.CODEX_MODE}:
        raise ConfigError(f"{plan.path}: adding sandbox_mode at the top would change its meaning; add by hand:\n{line}")
    return Planned(plan.path, plan.old, new, plan.notes)


def _sandbox_note(client: str) -> str:
    """What the sandbox now does, and what it still needs on this machine."""
    lacking = sandboxes.missing(client, shutil.which)
    if not lacking:
        return sandboxes.NOTES[client]
    packages = " ".join(lacking)
    return f"{sandboxes.NOTES[client]}. Not found here: {packages}; install it first (apt-get install {packages})"


# Merging into JSON.


def _put_entry(data: dict, keys: list[str], name: str, entry: dict, force: bool, path: Path) -> list[str]:
    """Put our server entry at data[keys...][name]; one the person has that differs stays unless force."""
    table = data
    for key in keys:
        table = table.setdefault(key, {})
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: {'.'.join(keys)} must be a JSON object; fix it by hand, nothing was changed")
    if table.get(name) not in (None, entry) and not force:
        return _kept(name, path)
    table[name] = entry
    return []


def _kept(name: str, path: Path, what: str = "entry") -> list[str]:
    return [f"kept your existing {name} {what} in {path} (differs from ours; --force replaces it)"]


def hook_command(argv: list[str], client: str, event: str, root: Path, url: str | None = None) -> list[str]:
    """The argv of our hook for one event: abilities-mcp, `hook CLIENT EVENT`, and the project pinned by --root
    (team mode: the team server that decides, `--url URL`)."""
    if url is not None:
        return [*argv, "hook", client, event, URL_OPTION, url]
    return [*argv, "hook", client, event, ROOT_OPTION, os.path.abspath(root)]


def _put_hooks(
    settings: dict, argv: list[str], force: bool, path: Path, root: Path, url: str | None = None
) -> list[str]:
    """One command handler per event; the person's other handlers and groups stay as they are."""
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise ConfigError(f"{path}: hooks must be a JSON object; fix it by hand, nothing was changed")
    outcomes = {}
    for event, matcher in CLAUDE_HOOKS.items():
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise ConfigError(f"{path}: hooks.{event} must be a JSON array; fix it by hand, nothing was changed")
        handler = {
            "type": "command",
            "command": shlex.join(hook_command(argv, "claude", event, root, url)),
            "timeout": HOOK_TIMEOUT_SECONDS,
        }
        outcomes[event] = _put_handler(groups, handler, event, matcher, force)
    return _hook_notes(outcomes, path, root, url)


def _put_client_hooks(
    settings: dict, argv: list[str], force: bool, path: Path, client: str, root: Path, url: str | None = None
) -> list[str]:
    """Codex's and Gemini CLI's hooks: Claude Code's three levels; Gemini's timeout is in milliseconds."""
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise ConfigError(f"{path}: hooks must be a JSON object; fix it by hand, nothing was changed")
    outcomes = {}
    for event, matcher in CLIENT_HOOKS[client].items():
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise ConfigError(f"{path}: hooks.{event} must be a JSON array; fix it by hand, nothing was changed")
        command = shlex.join(hook_command(argv, client, event, root, url))
        handler: dict[str, Any] = {"type": "command", "command": command}
        if client == "gemini":
            handler |= {"name": f"abilities-mcp {event}", "timeout": HOOK_TIMEOUT_SECONDS * 1000}
        else:
            handler["timeout"] = HOOK_TIMEOUT_SECONDS
        outcomes[event] = _put_handler(groups, handler, event, matcher, force, client)
    return _hook_notes(outcomes, path, root, url)


def _put_cursor_hooks(
    data: dict, argv: list[str], force: bool, path: Path, root: Path, url: str | None = None
) -> list[str]:
    """Cursor's hooks.json: {"version": 1, "hooks": {EVENT: [{"command", "matcher"?}]}}, a flat list per event."""
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise ConfigError(f"{path}: hooks must be a JSON object; fix it by hand, nothing was changed")
    outcomes = {}
    for event, matcher in CLIENT_HOOKS["cursor"].items():
        handlers = hooks.setdefault(event, [])
        if not isinstance(handlers, list):
            raise ConfigError(f"{path}: hooks.{event} must be a JSON array; fix it by hand, nothing was changed")
        command = shlex.join(hook_command(argv, "cursor", event, root, url))
        handler = {"command": command, **({"matcher": matcher} if matcher else {})}
        mine = [i for i, h in enumerate(handlers) if is_our_hook(h, event, "cursor")]
        if not mine:
            handlers.append(handler)
            continue
        outcomes[event] = _outcome(handlers[mine[0]], handler, force)
        if outcomes[event] != KEPT:
            handlers[mine[0]] = handler
    return _hook_notes(outcomes, path, root, url)


# What became of our hook already in a file: replaced by the new one (or the same), kept (it differs, and no
# --force), or re-pinned (it differed only in its --root, which init owns: missing in an older init's hook, or
# naming another folder, the project's old place or another machine's).
REPLACED, KEPT, REPINNED = "replaced", "kept", "repinned"


def _put_handler(
    groups: list, handler: dict, event: str, matcher: str | None, force: bool, client: str = "claude"
) -> str:
    for group in groups:
        handlers = group.get("hooks") if isinstance(group, dict) else None
        for i, existing in enumerate(handlers if isinstance(handlers, list) else []):
            if not is_our_hook(existing, event, client):
                continue
            outcome = _outcome(existing, handler, force)
            if outcome != KEPT:
                handlers[i] = handler
            return outcome
    groups.append({"matcher": matcher, "hooks": [handler]} if matcher else {"hooks": [handler]})
    return REPLACED


def _outcome(existing: dict, handler: dict, force: bool) -> str:
    if existing == handler or force:
        return REPLACED
    return REPINNED if _unpinned(existing) == _unpinned(handler) else KEPT


def _unpinned(handler: dict) -> dict:
    """The handler with its command as words and its --root taken off: two that differ only there compare equal."""
    rest = {k: v for k, v in handler.items() if k not in ("command", "args")}
    return {**rest, "exec": "args" in handler, "words": split_root(hook_words(handler))[0]}


def _hook_notes(outcomes: dict[str, str], path: Path, root: Path, url: str | None = None) -> list[str]:
    notes = [_kept(event, path, "hook")[0] for event, outcome in outcomes.items() if outcome == KEPT]
    repinned = [event for event, outcome in outcomes.items() if outcome == REPINNED]
    if repinned and url is not None:
        notes.append(
            f"updated the abilities-mcp hooks for {', '.join(repinned)} in {path} to ask the team server {url}"
        )
    elif repinned:
        notes.append(
            f"updated the abilities-mcp hooks for {', '.join(repinned)} in {path} to pin the project with "
            f"{ROOT_OPTION} {os.path.abspath(root)} (without it, the hook takes the project from the client's working "
            "directory, which a call can move out of the project: its gates would not apply)"
        )
    return notes


def hook_words(handler: dict) -> list[str]:
    """The argv a handler runs: its command and args (exec form), or its command line split as a shell would."""
    if isinstance(handler.get("args"), list):
        return [str(handler.get("command", "")), *map(str, handler["args"])]
    command = handler.get("command")
    if not isinstance(command, str):
        return []
    try:
        return shlex.split(command)
    except ValueError:  # unbalanced quotes: not a line init wrote
        return command.split()


def split_root(words: list[str]) -> tuple[list[str], str | None]:
    """An argv without its trailing `--root ROOT` and `--url URL` (or `--root=ROOT`, `--url=URL`), and that root
    (None: it has none)."""
    words, options = split_options(words)
    return words, options.get(ROOT_OPTION)


def split_options(words: list[str]) -> tuple[list[str], dict[str, str]]:
    """An argv without the hook's trailing options (`--root ROOT`, `--url URL`, either spelling, each once), and
    them."""
    options: dict[str, str] = {}
    while words:
        if len(words) >= 2 and words[-2] in HOOK_OPTIONS and words[-2] not in options:
            options[words[-2]], words = words[-1], words[:-2]
            continue
        option, equals, value = words[-1].partition("=")
        if equals and option in HOOK_OPTIONS and option not in options:
            options[option], words = value, words[:-1]
            continue
        break
    return words, options


def is_our_hook(handler: Any, event: str, client: str = "claude") -> bool:
    """Ours runs `... hook CLIENT EVENT`, with the project pinned by `--root ROOT` after it or (an older init's)
    without, whatever starts abilities-mcp (string or exec form)."""
    if not isinstance(handler, dict):
        return False
    words = split_root(hook_words(handler))[0][-3:]
    same_event = len(words) == 3 and event_name(client, words[2]) == event
    return same_event and words[:2] == ["hook", client]


def _plan_entry(path: Path, keys: list[str], name: str, entry: dict, force: bool) -> Planned:
    return plan_json(path, lambda data: _put_entry(data, keys, name, entry, force, path))
