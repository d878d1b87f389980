"""The `abilities-mcp` command. `serve` is the whole program in three lines: find the project, build the server,
run it over stdio. The other commands read the same files and the same state for a person at a terminal.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence

from ..state.project import Project
from ..state.store import DEFAULT_HISTORY_DAYS, DEFAULT_HISTORY_RUNS

log = logging.getLogger("abilities_mcp")
# After a signal, the process exits within this long even if stdin is still open (runs are recorded by then).
SHUTDOWN_SECONDS = 5.0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    project = Project.resolve(args.root, args.state_dir)
    try:
        return COMMANDS[args.command or "serve"](project, args)
    except BrokenPipeError:  # `abilities-mcp schema ability | head`: the reader left, which is fine
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def serve(project: Project, args: argparse.Namespace) -> int:
    """Run the MCP server over stdio until the client hangs up or a signal arrives."""
    import anyio

    from ..server.app import create_server

    server = create_server(
        project, history_runs=args.history_runs, history_days=args.history_days, session_ttl=args.session_ttl
    )

    async def run() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_cancel_on_signal, tg.cancel_scope)
            await server.run_stdio_async()
            tg.cancel_scope.cancel()

    anyio.run(run)
    return 0


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
        print(exc, file=sys.stderr)
        return 1
    reports = [r for name in (args.names or [None]) for r in validation_report(catalog, name).files]
    if args.json:
        print(
            json.dumps({"valid": all(r.valid for r in reports), "files": [r.model_dump() for r in reports]}, indent=2)
        )
    else:
        for r in reports:
            print(f"{'ok   ' if r.valid else 'ERROR'} {r.kind:9} {r.name}  ({r.path})")
            for e in r.errors:
                print(f"      {e.path or '(file)'}: {e.message}")
        bad = sum(not r.valid for r in reports)
        print(f"\n{len(reports)} file(s) checked, {bad} with errors." if reports else "No abilities or skills found.")
    return 1 if any(not r.valid for r in reports) else 0


def list_abilities(project: Project, args: argparse.Namespace) -> int:
    """Print the abilities the server would offer."""
    from ..abilities.catalog import Catalog
    from ..server.views import ability_info

    catalog = Catalog(project).refresh()
    infos = sorted((ability_info(catalog, d) for d in catalog.winners.values()), key=lambda a: a.name)
    if args.json:
        print(json.dumps([i.model_dump() for i in infos], indent=2))
        return 0
    for info in infos:
        flag = "" if info.valid else "  [invalid: run `abilities-mcp validate`]"
        print(f"{info.name:28} {info.description or ''}{flag}")
        for name, spec in info.inputs.items():
            extra = (
                " (required)" if spec.required else f" (default {spec.default!r})" if spec.default is not None else ""
            )
            print(f"{'':30}-i {name}=<{spec.type}>{extra}")
    if not infos:
        print(f"No abilities under {project.root / 'abilities'}.")
    return 0


def run(project: Project, args: argparse.Namespace) -> int:
    """Run an ability in this terminal with live progress."""
    import anyio

    from .terminal import run_in_terminal

    inputs = {}
    for item in args.input:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"-i takes key=value, got {item!r}", file=sys.stderr)
            return 2
        inputs[key] = value
    return anyio.run(run_in_terminal, project, args.name, inputs)


def status(project: Project, args: argparse.Namespace) -> int:
    """Print one run (default: the newest)."""
    from ..engine.recovery import recover_orphans
    from ..server.views import run_view
    from ..state.store import Store
    from .terminal import print_run

    store = Store(project.state_db)
    recover_orphans(store)
    record = store.get_run(args.run_id) if args.run_id else next(iter(store.runs(limit=1)), None)
    if record is None:
        print(f"No run {args.run_id!r}." if args.run_id else "No runs yet.", file=sys.stderr)
        return 1
    view = run_view(record, store.get_run)
    print(view.model_dump_json(indent=2) if args.json else print_run(view))
    return 0


def history(project: Project, args: argparse.Namespace) -> int:
    """Print recent runs, newest first."""
    from ..engine.recovery import recover_orphans
    from ..server.views import history_view
    from ..state.store import Store

    store = Store(project.state_db)
    recover_orphans(store)
    for r in history_view(store.runs(limit=args.limit)).runs:
        print(f"{r.run_id}  {r.status:12} {r.ability:28} {r.started_at}  {r.finished_at or ''}")
    return 0


def approve(project: Project, args: argparse.Namespace) -> int:
    """A person approves (or rejects) the step a run waits on; refused unless typed at a terminal."""
    from .terminal import answer_command

    wanted = "reject" if args.reject else "approve"
    return answer_command(project, args.run_id, args.step, wanted, args.choice, args.note)


def decide(project: Project, args: argparse.Namespace) -> int:
    """A person decides what happens after a failed step (on_failure: ask); refused unless typed at a terminal."""
    from .terminal import answer_command

    return answer_command(project, args.run_id, args.step, "decision", args.decision, args.note)


def skills(project: Project, args: argparse.Namespace) -> int:
    """`skills list | route TEXT | read NAME`: what the server offers as skills, for a person or a shell-only agent."""
    from ..skills.skillset import SkillSet

    skillset = SkillSet(project).refresh()
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
    local = sum(s.scope == "project" for s in found)
    print(f"Summary: {local} project, {len(found) - local} user ({len(found)} total)")
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
    """Print the JSON Schema of the ability format or of workflows.json, for editors."""
    if args.kind == "workflows":
        from ..prerequisites.spec import json_schema

        document = json_schema()
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
            name = edits.add_template(path, args.template, args.name)
            print(f"Added workflow {name!r} (template {args.template}) to {path}.")
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
    except AbilitiesError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


def _list_workflows(project: Project, as_json: bool) -> int:
    from ..prerequisites.workflows import Workflows
    from ..server.views import workflow_list_view

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
        print(f"    first {chain}")
    for problem in view.problems:
        print(f"problem: {problem}", file=sys.stderr)
    if not view.workflows:
        print(f"No workflows in {project.workflows_file}. Add one: abilities-mcp workflows add --template database")
    return 0


def hook(project: Project, args: argparse.Namespace) -> int:
    """Answer one client hook event (stdin: the client's JSON; stdout: its answer). `__main__` runs the plain
    `hook CLIENT EVENT` form without argparse: it runs on every tool call."""
    from ..clients.hook import main as answer

    return answer(args.client, args.event, project=project, session_ttl=args.session_ttl)


def init(project: Project, args: argparse.Namespace) -> int:
    """Write or merge a client's config: the server entry, and the hooks where the client has them."""
    from ..clients.configs import init as write_config

    return write_config(
        project.root, args.client, dry_run=args.dry_run, name=args.name, command=args.client_command, force=args.force
    )


COMMANDS = {
    "serve": serve,
    "validate": validate,
    "list": list_abilities,
    "run": run,
    "status": status,
    "history": history,
    "approve": approve,
    "decide": decide,
    "schema": schema,
    "skills": skills,
    "workflows": workflows,
    "hook": hook,
    "init": init,
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="abilities-mcp",
        parents=[_common(None, None, "warning")],
        description="MCP stdio server for enforceable agent workflows (no command: serve).",
    )
    _history_options(parser, None)
    sub = parser.add_subparsers(dest="command")
    # Options may come before or after the command; after it they must not reset what came before.
    common = _common(argparse.SUPPRESS, argparse.SUPPRESS, argparse.SUPPRESS)
    p = sub.add_parser("serve", parents=[common], help="run the MCP server over stdio (the default)")
    _history_options(p, argparse.SUPPRESS)
    p = sub.add_parser(
        "validate", parents=[common], help="check abilities, skills and workflows.json; exit 1 on errors"
    )
    p.add_argument("names", nargs="*", metavar="NAME")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("list", parents=[common], help="list abilities")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("run", parents=[common], help="run an ability in this terminal")
    p.add_argument("name")
    p.add_argument("-i", "--input", action="append", default=[], metavar="KEY=VALUE")
    p = sub.add_parser("status", parents=[common], help="show a run (default: the newest)")
    p.add_argument("run_id", nargs="?")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("history", parents=[common], help="list recent runs")
    p.add_argument("--limit", type=int, default=20)
    p = sub.add_parser("approve", parents=[common], help="approve the step a run waits on (at a terminal only)")
    p.add_argument("run_id")
    p.add_argument("--reject", action="store_true", help="reject instead")
    p.add_argument("--choice", help="the option value to answer with, for approvals with options")
    p.add_argument("--step", help="the step asked about (default: whichever the run waits on)")
    p.add_argument("--note", help="why, for the record")
    p = sub.add_parser("decide", parents=[common], help="retry, continue or stop after a failed step (terminal only)")
    p.add_argument("run_id")
    p.add_argument("decision", choices=["retry", "continue", "stop"])
    p.add_argument("--step", help="the failed step (default: whichever the run asks about)")
    p.add_argument("--note", help="why, for the record")
    p = sub.add_parser("skills", parents=[common], help="list, route to, or read the project's skills")
    # One parser per action, each with its own positionals, so options may sit anywhere (`route --json TEXT`).
    actions = p.add_subparsers(dest="action", required=True, metavar="{list,route,read}")
    s = actions.add_parser("list", parents=[common], help="every skill, where it lives, and its warnings")
    s.add_argument("--json", action="store_true")
    s = actions.add_parser("route", parents=[common], help="the skills that fit a task, best first")
    s.add_argument("task", nargs="+", metavar="TEXT", help="the task in the user's words")
    s.add_argument("--limit", type=int, default=3, help="how many skills at most")
    s.add_argument("--json", action="store_true")
    s = actions.add_parser("read", parents=[common], help="print skills as `openskills read` does")
    s.add_argument("names", nargs="+", metavar="NAME", help="skill name(s); `a,b` reads several")
    p = sub.add_parser("schema", parents=[common], help="print a JSON Schema for editors")
    p.add_argument("kind", choices=["ability", "workflows"])
    _workflow_parsers(sub, common)
    _client_parsers(sub, common)
    return parser


def _client_parsers(sub, common: argparse.ArgumentParser) -> None:
    from ..clients.configs import CLIENTS
    from ..clients.hook import EVENTS

    p = sub.add_parser("hook", parents=[common], help="answer a client hook event (reads its JSON on stdin)")
    p.add_argument("client", choices=sorted(EVENTS))
    p.add_argument("event", help="; ".join(f"{client}: {', '.join(events)}" for client, events in EVENTS.items()))
    _history_options(p, argparse.SUPPRESS)
    p = sub.add_parser("init", parents=[common], help="write or merge a client's config (server entry and hooks)")
    p.add_argument("client", choices=CLIENTS)
    p.add_argument("--dry-run", action="store_true", help="print the diff, write nothing")
    p.add_argument("--name", default="abilities", help="the server's name in the client (default: abilities)")
    p.add_argument(
        "--command",
        dest="client_command",
        help="how the client starts abilities-mcp (default: found on PATH, else this one)",
    )
    p.add_argument("--force", action="store_true", help="replace an existing entry of ours that differs")


def _workflow_parsers(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("workflows", parents=[common], help="list or edit workflows.json (tool prerequisites)")
    actions = p.add_subparsers(dest="action", required=True, metavar="{list,add,enable,disable,remove}")
    s = actions.add_parser("list", parents=[common], help="every workflow: triggers, prerequisites, mode")
    s.add_argument("--json", action="store_true")
    s = actions.add_parser("add", parents=[common], help="add a built-in template")
    s.add_argument("--template", required=True, help="database, browser, github-pr or graphql")
    s.add_argument("--name", help="the workflow's name (default: the template's own)")
    for action, text in (("enable", "turn on"), ("disable", "turn off (kept in the file)"), ("remove", "delete")):
        s = actions.add_parser(action, parents=[common], help=f"{text} a workflow")
        s.add_argument("name")


def _duration(text: str) -> float:
    from ..durations import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _common(root, state_dir, log_level) -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--root", default=root, help="project root (default: $ABILITIES_ROOT, $CLAUDE_PROJECT_DIR, cwd)"
    )
    common.add_argument("--state-dir", default=state_dir, help="state directory (default: ROOT/.abilities)")
    common.add_argument("--log-level", default=log_level, choices=["debug", "info", "warning", "error"])
    return common


def _history_options(parser: argparse.ArgumentParser, default) -> None:
    from ..prerequisites.sessions import TTL_ENV

    parser.add_argument(
        "--session-ttl",
        type=_duration,
        default=default if default is not None else os.environ.get(TTL_ENV) or "24h",  # parsed by type=
        metavar="DURATION",
        help="workflow prerequisites recorded in a session expire this long after it started "
        "(default 24h, $ABILITIES_SESSION_TTL)",
    )
    env_runs, env_days = os.environ.get("ABILITIES_HISTORY_RUNS"), os.environ.get("ABILITIES_HISTORY_DAYS")
    parser.add_argument(
        "--history-runs",
        type=int,
        default=default if default is not None else int(env_runs or DEFAULT_HISTORY_RUNS),
        help="finished runs kept (default 500, $ABILITIES_HISTORY_RUNS)",
    )
    parser.add_argument(
        "--history-days",
        type=float,
        default=default if default is not None else float(env_days or DEFAULT_HISTORY_DAYS),
        help="days finished runs are kept (default 30, $ABILITIES_HISTORY_DAYS)",
    )
