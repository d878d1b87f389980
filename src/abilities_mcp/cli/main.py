"""The `abilities-mcp` command. `serve` is the whole program in three lines: find the project, build the server,
run it over stdio. The other commands read the same files and the same state for a person at a terminal.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import signal
import sqlite3
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..state.database import StateFileError
from ..state.project import Project
from .inert import inert, make_output_inert
from .parser import parse_args

if TYPE_CHECKING:  # annotations only: each command imports what it uses when it runs, so start-up stays fast
    from pathlib import Path

    from ..abilities.catalog import Catalog
    from ..errors import UnknownName

log = logging.getLogger("abilities_mcp")
# After a signal, the process exits within this long even if stdin is still open (runs are recorded by then).
SHUTDOWN_SECONDS = 5.0
# prctl(2) option: whether the process may be dumped, traced or read through /proc by its own user.
PR_SET_DUMPABLE = 4


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    # Start-up builds hundreds of thousands of objects (the SDK's and our pydantic models) and frees almost none:
    # the collector's passes over them are a tenth of the server's start. It comes back once the command is ready.
    gc.disable()
    args = parse_args(None if argv is None else list(argv))
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    project = Project.resolve(args.root, args.state_dir, args.state)
    command = args.command or "serve"
    if problem := settle_defaults(args, project):
        print(f"abilities-mcp: {inert(problem)}; fix or unset it", file=sys.stderr)
        return 2
    if command != "schema" and (what := _not_a_project(project.root)):
        print(
            f"abilities-mcp: the project root {str(project.root)!r} {what}. It comes from --root, else "
            "$ABILITIES_ROOT, else $CLAUDE_PROJECT_DIR, else the current folder; point it at the project's folder "
            "(a client config whose ${...} variables the client did not expand shows up here too).",
            file=sys.stderr,
        )
        return 2
    if command not in ("serve", "hook"):  # stdout is the protocol there: JSON, which escapes controls itself
        make_output_inert()
    if command not in ("hook", "schema"):
        for notice in project.notices():
            print(notice, file=sys.stderr)  # never stdout: it carries the protocol
    if command in STATE_COMMANDS and (code := _state_ready(project)) is not None:
        return code
    if command != "serve":
        settled()
    try:
        return COMMANDS[command](project, args)
    except BrokenPipeError:  # `abilities-mcp schema ability | head`: the reader left, which is fine
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except sqlite3.OperationalError as exc:  # opened, then a write failed: a read-only mount, a sandbox, a full disk
        print(
            f"abilities-mcp: the state file {project.state_shown!r} cannot be used ({exc}); nothing was recorded. "
            "Run the command where that folder is writable, or point --state-dir at one that is.",
            file=sys.stderr,
        )
        return 2
    except StateFileError as exc:  # a PostgreSQL state that went away mid-command: its message names it and the fix
        print(f"abilities-mcp: {exc}", file=sys.stderr)
        return 2


def settled() -> None:
    """Start-up is over: what it built stays for the process's life, so the collector leaves it out (freeze) from
    now on, and collects what the work makes."""
    gc.freeze()
    gc.enable()


def _not_a_project(root) -> str | None:
    """Why the root cannot be the project (it is missing, not a folder, or not readable by this user), or None."""
    try:
        if root.is_dir():
            return None if os.access(root, os.R_OK | os.X_OK) else "cannot be read by this user"
        return "is not a folder" if root.exists() else "does not exist"
    except OSError as exc:  # a parent folder this user may not enter
        return f"cannot be reached ({exc.strerror})"


def _state_ready(project: Project) -> int | None:
    """Open the state file before the command does: a damaged one is moved aside and a fresh one started (said on
    stderr); a folder in its place or one this user cannot write stops the command with the fix (exit 2). A folder
    is never moved: someone made it, and it may be a mount or hold more than a state file."""
    from ..state.database import Database, StateFileError, open_state

    try:
        db, notice = open_state(project.state_location, Database)
    except (StateFileError, OSError) as exc:
        print(f"abilities-mcp: {exc}", file=sys.stderr)
        return 2
    db.close()
    if notice:
        print(notice, file=sys.stderr)
    return None


def serve(project: Project, args: argparse.Namespace) -> int:
    """Run the MCP server over stdio until the client hangs up or a signal arrives (`--http`: the team server)."""
    if getattr(args, "http", None):
        return _serve_http(project, args)
    import anyio

    from ..engine.process import reap_adopted_forever
    from ..server.app import create_server
    from ..server.stdio import run_stdio

    _not_dumpable()
    if sys.stdin.isatty():  # a person started it by hand: say what it is, or it looks hung
        print(_banner(project), file=sys.stderr, flush=True)
    server = create_server(
        project, history_runs=args.history_runs, history_days=args.history_days, session_ttl=args.session_ttl
    )
    settled()

    async def run() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_cancel_on_signal, tg.cancel_scope)
            tg.start_soon(reap_adopted_forever)
            await run_stdio(server)  # the SDK's transport, every line answered
            tg.cancel_scope.cancel()

    anyio.run(run)
    return 0


def _serve_http(project: Project, args: argparse.Namespace) -> int:
    """The team server over streamable HTTP (server/http.py), until a signal."""
    settled()
    from ..server.http import Listen, TeamOptions, serve_http
    from ..state.identities import Approvers

    client_id, secret = os.environ.get("ABILITIES_OIDC_CLIENT_ID"), os.environ.get("ABILITIES_OIDC_CLIENT_SECRET")
    problems = [
        *([] if args.issuer else ["--issuer URL (the OpenID provider that issues the callers' tokens)"]),
        *([] if client_id else ["$ABILITIES_OIDC_CLIENT_ID (this server's client id at the provider)"]),
        *([] if secret else ["$ABILITIES_OIDC_CLIENT_SECRET (its secret, for introspecting tokens)"]),
    ]
    if problems:
        print(f"abilities-mcp serve --http needs {'; '.join(problems)}", file=sys.stderr)
        return 2
    try:
        listen = Listen.parse(args.http, args.public_url)
    except ValueError as exc:
        print(f"abilities-mcp: {exc}", file=sys.stderr)
        return 2
    approvers = Approvers.parse(args.approvers if args.approvers is not None else os.environ.get("ABILITIES_APPROVERS"))
    options = TeamOptions(listen, args.issuer, client_id, secret, approvers, args.audience)
    print(f"abilities-mcp: team server at {listen.public_url}/mcp (project {project.root})", file=sys.stderr)
    _not_dumpable()
    from .team_hooks import hook_endpoint  # the client hooks' endpoint, /hook/CLIENT/EVENT (docs/team.md)

    serve_http(
        project,
        options,
        hook=hook_endpoint,
        history_runs=args.history_runs,
        history_days=args.history_days,
        session_ttl=args.session_ttl,
    )
    return 0


def _banner(project: Project) -> str:
    import shlex

    from .. import __version__
    from ..clients.configs import running_command

    # The Inspector starts its command without a shell: this very program, by its absolute path.
    command = shlex.join([*running_command(), "--root", str(project.root)])
    return "\n".join(
        [
            f"abilities-mcp {__version__}: an MCP server on stdio. A client starts it; typed lines must be JSON-RPC.",
            f"  project  {project.root}",
            f"  state    {project.state_shown}",
            "  connect  abilities-mcp init claude (or opencode, cursor, vscode, codex, gemini, desktop) in the project",
            f"  inspect  npx -y @modelcontextprotocol/inspector@2.12.0 --cli {command} --method tools/list",
            "  stop     Ctrl-C",
        ]
    )


def _not_dumpable() -> None:
    """Close this process to other processes of the same user (Linux: PR_SET_DUMPABLE 0): /proc/PID/fd, environ
    and mem become root's, so an agent's shell cannot write a forged form answer into the server's stdin through
    /proc, read its memory or attach a debugger. The client's own end of the pipe stays open to the agent's user:
    the threat model says so. Steps start dumpable again (execve resets it)."""
    if sys.platform != "linux":
        return
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError) as exc:  # a libc without prctl: the server still runs, just less closed
        log.warning("could not make the server undumpable: %r", exc)


async def _cancel_on_signal(scope) -> None:
    import anyio

    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async for signum in signals:
            log.info("received %s; stopping runs and exiting", signal.Signals(signum).name)
            scope.cancel()
            # The stdin reader sits in a thread nothing can cancel: once runs are stopped and recorded (the kill
            # grace and a margin), leave even if it still blocks.
            threading.Timer(SHUTDOWN_SECONDS, os._exit, args=(0,)).start()
            return


def validate(project: Project, args: argparse.Namespace) -> int:
    """Print every problem in the project's files; exit 1 if there is any."""
    from ..abilities.catalog import Catalog
    from ..errors import UnknownName
    from ..server.views import validation_report

    catalog = Catalog(project).refresh()
    try:
        for name in args.names:
            catalog.require_file(name)
    except UnknownName as exc:
        print(f"abilities-mcp: {_unknown_file(catalog, exc)}", file=sys.stderr)
        return 2  # the command cannot do what was asked (docs/cli.md's exit codes)
    reports = [r for name in (args.names or [None]) for r in validation_report(catalog, name).files]
    if args.json:
        print(
            json.dumps({"valid": all(r.valid for r in reports), "files": [r.model_dump() for r in reports]}, indent=2)
        )
    else:
        width = max([9, *(len(r.kind) for r in reports)])  # "tool cache" is the one longer kind
        for r in reports:
            print(f"{'ok   ' if r.valid else 'ERROR'} {r.kind:{width}} {r.name}  ({r.path})")
            for e in r.errors:
                print(f"      {e.path or '(file)'}: {e.message}")
            for w in r.warnings:
                print(f"warn  {w.path or '(file)'}: {w.message}")
        bad = sum(not r.valid for r in reports)
        print(f"\n{len(reports)} file(s) checked, {bad} with errors." if reports else _nothing_to_check(catalog))
    return 1 if any(not r.valid for r in reports) else 0


def _unknown_file(catalog: Catalog, exc: UnknownName) -> str:
    """An unknown name for `validate`, in the command line's words: what it may mean, or the commands that list."""
    if not exc.close:
        return (
            f"Unknown ability or skill {exc.name!r}. `abilities-mcp list` shows the abilities, "
            "`abilities-mcp skills list` the skills."
        )
    renamed = catalog.renamed(exc.name)
    why = f" ({_shown(catalog, renamed.path)} sets name: {renamed.name!r})" if renamed else ""
    return f"Unknown ability or skill {exc.name!r}. Did you mean {exc.close!r}?{why}"


def _nothing_to_check(catalog: Catalog) -> str:
    """What `validate` says of a project with no files of its own: the built-in skills are there, and checked."""
    builtin = sum(s.scope == "builtin" for s in catalog.skillset.skills.values())
    shipped = (
        f" The {builtin} built-in skill(s) (`abilities-mcp skills list`) are checked when abilities-mcp is built."
        if builtin
        else ""
    )
    return (
        f"No abilities, skills or workflows.json in {catalog.project.root} to check: add abilities/NAME.yaml "
        f"(docs/abilities.md).{shipped}"
    )


def _shown(catalog: Catalog, path: Path) -> str:
    return str(path.relative_to(catalog.project.root)) if path.is_relative_to(catalog.project.root) else str(path)


def list_abilities(project: Project, args: argparse.Namespace) -> int:
    """Print the abilities the server would offer."""
    from pathlib import Path

    from ..abilities.catalog import Catalog
    from ..server.views import ability_info

    catalog = Catalog(project).refresh()
    infos = sorted((ability_info(catalog, d) for d in catalog.winners.values()), key=lambda a: a.name)
    if args.json:
        print(json.dumps([i.model_dump() for i in infos], indent=2))
        return 0
    for info in infos:
        flag = None if info.valid else "[invalid: run `abilities-mcp validate`]"
        print(f"{info.name:28} {'  '.join(t for t in (info.description, flag) if t)}")
        path_name = catalog.path_names.get(Path(info.path))
        if path_name and path_name != info.name:  # a `name:` renamed it: `run PATH-NAME` would find nothing
            print(f"{'':30}(name: {info.name!r} in {info.path}; its path alone would call it {path_name!r})")
        for name, spec in info.inputs.items():
            extra = (
                " (required)"
                if spec.required
                else f" (default {json.dumps(spec.default)})"
                if spec.default is not None
                else ""
            )
            print(f"{'':30}-i {name}=<{spec.type}>{extra}")
    if not infos:
        print(f"No abilities under {project.root / 'abilities'}.")
    return 0


def run(project: Project, args: argparse.Namespace) -> int:
    """Run an ability in this terminal with live progress; a person answers its questions here (isolated, as
    `approve` does)."""
    _isolated()
    import anyio

    from ..engine.process import reap_adopted_forever
    from .terminal import run_in_terminal

    inputs = {}
    for item in args.input:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"-i takes key=value, got {item!r}", file=sys.stderr)
            return 2
        inputs[key] = value

    async def in_terminal() -> int:
        async with anyio.create_task_group() as tg:
            tg.start_soon(reap_adopted_forever)  # this process starts no children but steps: it may reap the rest
            code = await run_in_terminal(project, args.name, inputs)
            tg.cancel_scope.cancel()
        return code

    return anyio.run(in_terminal)


def status(project: Project, args: argparse.Namespace) -> int:
    """Print one run (default: the newest)."""
    from ..engine.recovery import recover_orphans
    from ..server.views import run_view
    from ..state.store import Store
    from .terminal import failed_step_reports, print_run

    store = Store.open(project)
    recover_orphans(store)
    record = store.get_run(args.run_id) if args.run_id else next(iter(store.runs(limit=1)), None)
    if record is None:
        if args.json and not args.run_id:
            print("null")  # JSON mode prints JSON: no run yet
            return 0
        print(
            f"No run {args.run_id!r}; `abilities-mcp history` lists them."
            if args.run_id
            else "No runs yet. Start one with `abilities-mcp run NAME` (`abilities-mcp list` shows the abilities).",
            file=sys.stderr,
        )
        return 2  # nothing to show: the command could not do what was asked (docs/cli.md's exit codes)
    view = run_view(record, store.get_run)
    if args.json:
        print(view.model_dump_json(indent=2))
        return 0
    print(print_run(view))
    for report in failed_step_reports(store, view):  # each failure's reason, said once, with its output's end
        print(report)
    return 0


def history(project: Project, args: argparse.Namespace) -> int:
    """Print recent runs, newest first."""
    from ..engine.recovery import recover_orphans
    from ..prerequisites.approvals import CallApprovals, describe
    from ..server.views import history_view
    from ..state.store import Store
    from .inert import inert

    store = Store.open(project)
    recover_orphans(store)
    records = store.runs(limit=args.limit)
    calls = CallApprovals(store).listed(limit=args.limit)
    if args.json:  # the ability_history tool's shape, as `status --json` prints ability_status's
        print(history_view(records, calls).model_dump_json(indent=2))
        return 0
    if not records:
        print("No runs yet. Start one with `abilities-mcp run NAME` (`abilities-mcp list` shows the abilities).")
    for record in records:
        r = history_view([record]).runs[0]
        print(f"{r.run_id}  {r.status:12} {r.ability:28} {r.started_at}  {r.finished_at or ''}")
        for answer in record.answers:  # who let the run on, and from where
            print(f"    answered {answer['step_id']}: {answer['detail']}")
    if calls:
        print("\nCalls held for a person's approval (newest first):")
    for call in calls:  # the call as the agent sent it: inert, and its first line only
        first = inert((call.shown.splitlines() or [""])[0])
        print(f"{call.call_id}  {call.state():9} {call.tool}: {first}\n    {describe(call)}")
    return 0


def settle_defaults(args: argparse.Namespace, project: Project) -> str | None:
    """What no flag set: the environment, then the project's settings file (abilities-mcp.json), then the default.
    Returns what is wrong with an environment variable, or None."""
    from ..durations import parse_duration
    from ..prerequisites.sessions import DEFAULT_TTL_SECONDS, TTL_ENV
    from ..state.settings import chosen
    from ..state.store import DEFAULT_HISTORY_DAYS, DEFAULT_HISTORY_RUNS

    root = project.root
    wanted = [
        ("session_ttl", "sessions.ttl", TTL_ENV, parse_duration, DEFAULT_TTL_SECONDS),
        ("history_runs", "history.runs", "ABILITIES_HISTORY_RUNS", _whole, DEFAULT_HISTORY_RUNS),
        ("history_days", "history.days", "ABILITIES_HISTORY_DAYS", _positive, DEFAULT_HISTORY_DAYS),
    ]
    for attribute, dotted, env, parse, default in wanted:
        try:
            value = chosen(root, dotted, getattr(args, attribute), env, parse, default, project.state_dir)
            setattr(args, attribute, value)
        except ValueError as exc:
            return f"${env}: {exc}"
    return None


def _whole(value: str | int) -> int:
    number = int(value)
    if number < 1:
        raise ValueError(f"{value!r} must be a whole number of at least 1")
    return number


def _positive(value: str | float) -> float:
    number = float(value)
    if not number > 0:
        raise ValueError(f"{value!r} must be a positive number of days")
    return number


def logs(project: Project, args: argparse.Namespace) -> int:
    """What a run's steps printed (cli/logs.py)."""
    from .logs import logs as show

    return show(project, args)


def events(project: Project, args: argparse.Namespace) -> int:
    """The skill events the server recorded, and their counters (cli/events.py)."""
    from .events import events as show

    return show(project, args)


def audit(project: Project, args: argparse.Namespace) -> int:
    """The audit trail: listed, verified or pruned (cli/audit.py)."""
    from .audit import audit as show

    return show(project, args)


def approve(project: Project, args: argparse.Namespace) -> int:
    """A person approves (or rejects) the step a run waits on, or one tool call a workflow holds for them (`call_…`);
    refused unless typed at a terminal. With nothing named: what waits for a person."""
    from ..prerequisites.approvals import ID_PREFIX

    if args.run_id is None:  # nothing named: what waits for a person
        from .calls import waiting

        return waiting(project)
    _isolated()
    if args.run_id.startswith(ID_PREFIX):  # a person's yes to one tool call a workflow holds
        from .calls import answer_call

        return answer_call(project, args.run_id, args.reject, args.note)
    from .terminal import answer_command

    wanted = "reject" if args.reject else "approve"
    return answer_command(project, args.run_id, args.step, wanted, args.choice, args.note)


def decide(project: Project, args: argparse.Namespace) -> int:
    """A person decides what happens after a failed step (on_failure: ask); refused unless typed at a terminal."""
    _isolated()
    from .terminal import answer_command

    return answer_command(project, args.run_id, args.step, "decision", args.decision, args.note)


def _isolated() -> None:
    """Run again in Python's isolated mode, unless already: a PYTHONPATH or user-site shim (one that makes isatty()
    say yes) must not run inside a command that takes a person's answer (`run`, `approve`, `decide`), nor a library
    LD_PRELOAD puts into it (person.LOADER_ENV: the new process starts without them). Call it first, before the
    command does anything. Code the agent runs inside the process itself (its own Python that imports this package
    and patches it, a library that puts itself back across the exec) is beyond it: that is the agent's own program,
    as able as one that writes the state file (the threat model's "unrestricted shell" row)."""
    from .person import LOADER_ENV

    if not sys.flags.isolated:
        clean = {k: v for k, v in os.environ.items() if k not in LOADER_ENV}  # no LD_PRELOAD library in it either
        os.execve(sys.executable, [sys.executable, "-I", "-m", "abilities_mcp", *sys.argv[1:]], clean)


def ui(project: Project, args: argparse.Namespace) -> int:
    """The local page for a person: runs, timelines, graphs, approvals (cli/ui.py); isolated, as `approve` is."""
    _isolated()
    from .ui import serve_page

    return serve_page(project, args, harden=_not_dumpable)


def trust(project: Project, args: argparse.Namespace) -> int:
    """A person reviews what changed in the files that decide gates, and trusts them (cli/trust.py)."""
    from .trust import command

    if not args.list:
        _isolated()  # the person check decides: no shim may run before it
    return command(project, args)


def skills(project: Project, args: argparse.Namespace) -> int:
    """`skills list | route TEXT | read NAME`: what the server offers as skills, for a person or a shell-only agent."""
    from ..skills.skillset import SkillSet

    skillset = SkillSet(project).refresh()
    if args.action in ("plan", "sync"):
        from . import plans

        return plans.plan(skillset, args) if args.action == "plan" else plans.sync(skillset, args)
    if args.action == "read":
        return _read_skills(skillset, args.names)
    if args.action == "route":
        return _route_skills(skillset, " ".join(args.task), args.limit, args.json)
    found = sorted(skillset.skills.values(), key=lambda s: s.name)
    if args.json:  # the skill_list tool's shape
        from ..server.views import skill_list_view

        print(skill_list_view(skillset).model_dump_json(indent=2))
        return 0
    for s in found:
        print(f"  {s.name:25} ({s.scope})\n    {s.description}")
        for warning in skillset.warnings(s):
            print(f"    warning: {warning}")
        print()
    for note in skillset.notes:
        print(f"note: {note}", file=sys.stderr)
    project, user, builtin = (sum(s.scope == scope for s in found) for scope in ("project", "user", "builtin"))
    print(f"Summary: {project} project, {user} user, {builtin} built-in ({len(found)} total)")
    return 0


def _read_skills(skillset, names: list[str]) -> int:
    """OpenSkills' `read` output, so agents that know `openskills read` read ours the same way."""
    wanted = list(dict.fromkeys(n.strip() for arg in names for n in arg.split(",") if n.strip()))
    missing = [n for n in wanted if n not in skillset.skills]
    if missing or not wanted:
        print(f"Error: Skill(s) not found: {', '.join(missing) or '(none given)'}", file=sys.stderr)
        print("Known skills: " + (", ".join(sorted(skillset.skills)) or "none"), file=sys.stderr)
        return 1
    for name in wanted:
        skill = skillset.skills[name]
        print(f"Reading: {name}\nBase directory: {skill.directory}\n")
        print(skill.path.read_text(encoding="utf-8"))
        print(f"\nSkill read: {name}")
    return 0


def _route_skills(skillset, task: str, limit: int, as_json: bool) -> int:
    matches = skillset.router().route(task, limit)
    if as_json:
        print(json.dumps({"matches": [vars(m) for m in matches]}, indent=2))
    for m in [] if as_json else matches:
        print(f"{m.score:.2f}  {m.name}  ({'; '.join(m.reasons)})")
    if not matches and not as_json:
        print("No skill fits this task.")
    return 0


def schema(project: Project, args: argparse.Namespace) -> int:
    """Print the JSON Schema of the ability format, of workflows.json or of gateway.json, for editors."""
    if args.kind == "workflows":
        from ..prerequisites.spec import json_schema

        document = json_schema()
    elif args.kind == "gateway":
        from ..gateway.config import json_schema as gateway_schema

        document = gateway_schema()
    elif args.kind == "settings":
        from ..state.settings import json_schema as settings_schema

        document = settings_schema()
    else:
        from ..abilities.models import Ability

        document = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            **Ability.model_json_schema(by_alias=True),
        }
    print(json.dumps(document, indent=2))
    return 0


def workflows(project: Project, args: argparse.Namespace) -> int:
    """`workflows list | add --template NAME | enable N | disable N | remove N`: workflows.json, edited safely."""
    from ..errors import AbilitiesError
    from ..prerequisites import edits

    path = project.workflows_file
    try:
        if args.action == "add":
            name, notes = edits.add_fitted_template(path, args.template, args.name)
            print(f"Added workflow {name!r} (template {args.template}) to {path}.")
            for note in notes:  # what the template became to fit the tools this project has
                print(f"  {note}")
        elif args.action in ("enable", "disable"):
            changed = edits.set_enabled(path, args.name, args.action == "enable")
            print(
                f"Workflow {args.name!r} {args.action}d."
                if changed
                else f"Workflow {args.name!r} was already {args.action}d."
            )
        elif args.action == "remove":
            edits.remove(path, args.name)
            print(f"Removed workflow {args.name!r} from {path}.")
        else:
            return _list_workflows(project, args.json)
    except AbilitiesError as exc:  # an unknown template or workflow, a name taken, a file it will not rewrite
        print(exc, file=sys.stderr)
        return 2
    return 0


def _list_workflows(project: Project, as_json: bool) -> int:
    from ..prerequisites.in_force import Workflows
    from ..server.views import workflow_list_view
    from .inert import inert

    view = workflow_list_view(Workflows(project).current())
    if as_json:
        print(view.model_dump_json(indent=2))
        return 0
    for w in view.workflows:
        state = "" if w.enabled else "  [disabled]"
        print(f"  {w.name:28} {w.mode:8} {w.description}{state}")
        triggers = "; ".join(f"{k}: {v if isinstance(v, str) else ', '.join(v)}" for k, v in w.triggers.items())
        print(f"    when  {triggers}")
        chain = " -> ".join(p.tool if p.required else f"[{p.tool}]" for p in w.prerequisites)
        if chain:
            print(f"    first {chain}")
        if w.approval is not None:  # the prompt is the project's own text, shown as written but inert
            asks = f": {inert(w.approval.prompt)}" if w.approval.prompt else ""
            print(f"    asks  a person, each call (a yes lasts {w.approval.expires / 60:g} min){asks}")
    for problem in view.problems:
        print(f"problem: {problem}", file=sys.stderr)
    if not view.workflows and view.problems:
        print(
            f"No workflow in {project.workflows_file} can be applied: every entry has a problem (above); "
            "`abilities-mcp validate` shows each with its fix."
        )
        return 1
    if not view.workflows:
        print(f"No workflows in {project.workflows_file}. Add one: abilities-mcp workflows add --template database")
    return 0


def hook(project: Project, args: argparse.Namespace) -> int:
    """Answer one client hook event (stdin: the client's JSON; stdout: its answer). `__main__` runs the plain
    `hook CLIENT EVENT` form without argparse: it runs on every tool call."""
    if args.url:  # team mode: the team server decides (clients/remote.py)
        from ..clients.remote import main as remote

        return remote(args.client, args.event, args.url, root=str(project.root))
    from ..clients.hook import main as answer

    return answer(args.client, args.event, project=project, session_ttl=args.session_ttl)


def init(project: Project, args: argparse.Namespace) -> int:
    """Write or merge a client's config: the server entry, and the hooks where the client has them."""
    from ..clients.configs import init as write_config

    if args.url:  # team mode: the team server's entry and hooks that ask it (clients/remote_configs.py)
        from functools import partial

        from ..clients.remote_configs import init as write_team_config

        write_config = partial(write_team_config, url=args.url)
    code = write_config(
        project.root,
        args.client,
        dry_run=args.dry_run,
        name=args.name,
        command=args.client_command,
        force=args.force,
        gateway=args.gateway,
        sandbox=args.sandbox,
        state_dir=project.state_dir,
    )
    if code == 0 and not args.dry_run:
        _trust_after_init(project)
    return code


def _trust_after_init(project: Project) -> None:
    """`init` counts as trust when a person types it: the same isolated person check as `trust`, in a process of
    its own (this one keeps its own argv, which `init` reads to name the command it writes)."""
    import subprocess

    where = ["--root", str(project.root), "--state-dir", str(project.state_dir)]
    subprocess.run([sys.executable, "-I", "-m", "abilities_mcp", *where, "trust", "--yes", "--how", "init"])


def doctor(project: Project, args: argparse.Namespace) -> int:
    """Whether this project's setup holds the threat model, one line per check; exit 1 when one fails."""
    from .doctor import run as diagnose

    return diagnose(project, as_json=args.json)


def gateway(project: Project, args: argparse.Namespace) -> int:
    """`gateway list | add NAME -- COMMAND ARGS... | remove NAME`: gateway.json, edited safely."""
    from .gateway import run as gateway_command

    return gateway_command(project, args)


def tools(project: Project, args: argparse.Namespace) -> int:
    """`tools refresh`: list every upstream's tools into the tool cache."""
    from .gateway import refresh_tools

    return refresh_tools(project)


# The commands that read or write the state file.
STATE_COMMANDS = {"serve", "run", "status", "history", "approve", "decide", "events", "logs", "ui", "audit"}
COMMANDS = {
    "serve": serve,
    "validate": validate,
    "list": list_abilities,
    "run": run,
    "status": status,
    "history": history,
    "approve": approve,
    "decide": decide,
    "trust": trust,
    "schema": schema,
    "skills": skills,
    "events": events,
    "audit": audit,
    "logs": logs,
    "workflows": workflows,
    "gateway": gateway,
    "tools": tools,
    "hook": hook,
    "init": init,
    "doctor": doctor,
    "ui": ui,
}
