"""The command line's grammar: every command, its arguments and the options all commands share."""

from __future__ import annotations

import argparse
import sys

# What `decide` answers after a failed step (on_failure: ask).
DECISIONS = ["retry", "continue", "stop"]
# The clients `init` and `hook` take, as help shows them; argparse checks a value against the clients' own lists,
# imported only then (tests/cli/test_cli.py holds the two in step).
INIT_CLIENTS = "claude, opencode, cursor, vscode, codex, gemini, desktop"
HOOK_CLIENTS = "claude, codex, cursor, gemini, opencode"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The parsed command line. `gateway add NAME [options] -- COMMAND ARGS...`: everything after `--` is the
    server's command (argparse alone would give an empty command once an option sits between NAME and `--`)."""
    parser = build_parser()
    words = list(sys.argv[1:] if argv is None else argv)
    if "--" in words:
        cut = words.index("--")
        before = words[:cut]
        if "gateway" in before and "add" in before[before.index("gateway") :]:
            args = parser.parse_args(before)
            args.server_command = [*args.server_command, *words[cut + 1 :]]
            return args
    return parser.parse_args(words)


def _team_options(p: argparse.ArgumentParser) -> None:
    """`serve --http`: the team server (server/http.py)."""
    team = p.add_argument_group(
        "team server",
        "Over streamable HTTP instead of stdio, every caller identified by a token from the team's OpenID provider. "
        "The server's own client id and secret at that provider come from $ABILITIES_OIDC_CLIENT_ID and "
        "$ABILITIES_OIDC_CLIENT_SECRET (never a flag: a command line is readable by every user of the machine).",
    )
    team.add_argument("--http", metavar="HOST:PORT", help="serve MCP at http://HOST:PORT/mcp (e.g. 0.0.0.0:8080)")
    team.add_argument("--issuer", metavar="URL", help="the OpenID provider that vouches for callers (required)")
    team.add_argument(
        "--public-url", metavar="URL", help="the origin callers reach this server at (default http://HOST:PORT)"
    )
    team.add_argument(
        "--audience",
        metavar="URI",
        help="the audience every token must carry (default: this server's MCP URL, PUBLIC-URL/mcp, as RFC 8707 "
        "resource indicators name it; give another where the provider names resource servers its own way)",
    )
    team.add_argument(
        "--approvers",
        metavar="WHO,…",
        default=None,
        help="who may answer approvals on the run page: subjects or verified emails (default: $ABILITIES_APPROVERS)",
    )


def build_parser() -> argparse.ArgumentParser:
    """Every command and option; options may come before or after the command."""
    parser = argparse.ArgumentParser(
        prog="abilities-mcp",
        parents=[_common(None, None, "warning")],
        description="MCP stdio server for enforceable agent workflows (no command: serve).",
    )
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"abilities-mcp {__version__}")
    _history_options(parser, None)
    sub = parser.add_subparsers(dest="command")
    # Options may come before or after the command; after it they must not reset what came before.
    common = _common(argparse.SUPPRESS, argparse.SUPPRESS, argparse.SUPPRESS)
    p = sub.add_parser("serve", parents=[common], help="run the MCP server over stdio (the default)")
    _history_options(p, argparse.SUPPRESS)
    _team_options(p)
    p = sub.add_parser(
        "validate", parents=[common], help="check abilities, skills and workflows.json; exit 1 on errors"
    )
    p.add_argument("names", nargs="*", metavar="NAME")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("list", parents=[common], help="list abilities")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser(
        "run",
        parents=[common],
        help="run an ability in this terminal",
        description="Run an ability here, with live progress. Exit 0 when every step passed, 1 when a step failed "
        "(even under on_failure: continue), 2 for a usage error, 3 when the run was cancelled or refused.",
    )
    p.add_argument("name", help="the ability, as `abilities-mcp list` shows it (e.g. deploy/production)")
    p.add_argument(
        "-i", "--input", action="append", default=[], metavar="KEY=VALUE", help="an input; repeat for several"
    )
    p = sub.add_parser("status", parents=[common], help="show a run (default: the newest)")
    p.add_argument("run_id", nargs="?")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("logs", parents=[common], help="what a run's steps printed (all that was kept)")
    p.add_argument("run_id", help="the run, as `abilities-mcp history` lists it")
    p.add_argument("step", nargs="?", help="one step (default: every step)")
    p.add_argument(
        "-f",
        "--follow",
        action="store_true",
        help="print a running step's output as it comes, until it (or with no STEP, the run) stops running; "
        "exit 0 completed, 1 failed, 3 cancelled or interrupted",
    )
    p = sub.add_parser("history", parents=[common], help="list recent runs")
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--json", action="store_true", help="what the ability_history tool returns")
    p = sub.add_parser(
        "approve", parents=[common], help="approve the step a run waits on, or one tool call (at a terminal only)"
    )
    p.add_argument(
        "run_id",
        nargs="?",
        metavar="RUN_OR_CALL",
        help="the run (run_…) or the call approval (call_…) to answer; none: list what waits for a person",
    )
    p.add_argument("--reject", action="store_true", help="reject instead")
    p.add_argument("--choice", help="the option value to answer with, for approvals with options")
    p.add_argument("--step", help="the step asked about (default: whichever the run waits on)")
    p.add_argument("--note", help="why, for the record")
    p = sub.add_parser("decide", parents=[common], help="retry, continue or stop after a failed step (terminal only)")
    p.add_argument("run_id")
    p.add_argument(
        "decision",
        type=_decision,
        metavar="{retry,continue,stop}",
        help="the decision, or its first letters (r, c, s)",
    )
    p.add_argument("--step", help="the failed step (default: whichever the run asks about)")
    p.add_argument("--note", help="why, for the record")
    p = sub.add_parser(
        "trust",
        parents=[common],
        help="review what changed in the files that decide gates, and trust them (a person, at a terminal only)",
        description="Shows, as diffs, every ability, agent file, workflows.json, tool cache, gateway.json and "
        "abilities-mcp.json that differs from what a person last trusted, and which edits wait for trust because "
        "they would lower a gate; then asks, and records the files as shown. Exit 0 trusted (or nothing waits), "
        "1 not trusted, 2 refused (not a person at a terminal).",
    )
    p.add_argument("paths", nargs="*", metavar="FILE", help="only these files (default: every one that differs)")
    p.add_argument("--list", action="store_true", help="show what differs and trust nothing (no terminal needed)")
    p.add_argument("--yes", action="store_true", help="trust without asking again (the person check still applies)")
    p.add_argument("--how", default="trust", help=argparse.SUPPRESS)  # `init` records its trust as "init"
    p = sub.add_parser("skills", parents=[common], help="list, route to, or read the project's skills")
    # One parser per action, each with its own positionals, so options may sit anywhere (`route --json TEXT`).
    actions = p.add_subparsers(dest="action", required=True, metavar="{list,route,read,plan,sync}")
    s = actions.add_parser("list", parents=[common], help="every skill, where it lives, and its warnings")
    s.add_argument("--json", action="store_true")
    s = actions.add_parser("route", parents=[common], help="the skills that fit a task, best first")
    s.add_argument("task", nargs="+", metavar="TEXT", help="the task in the user's words")
    s.add_argument("--limit", type=int, default=3, help="how many skills at most")
    s.add_argument("--json", action="store_true")
    s = actions.add_parser("read", parents=[common], help="print skills as `openskills read` does")
    s.add_argument("names", nargs="+", metavar="NAME", help="skill name(s); `a,b` reads several")
    s = actions.add_parser("plan", parents=[common], help="a plan's next task, its skills and the prompt block")
    s.add_argument("plan", nargs="?", metavar="PLAN", help="a Markdown checklist under the project (PLAN.md)")
    s.add_argument("--task", help="the task itself, instead of a plan")
    s.add_argument("--kind", choices=["implementation", "review"], default="implementation", help="the step's kind")
    s.add_argument("--max", type=int, dest="max_skills", help="skills at most (default 2, or 1 for review)")
    s.add_argument("--budget", type=int, help="characters of each SKILL.md in the prompt (default 20000)")
    s.add_argument("--references", action="store_true", default=None, help="add each skill's references/ files")
    s.add_argument("--json", action="store_true", help="the skill_plan tool's answer instead of the prompt")
    s = actions.add_parser("sync", parents=[common], help="write the skills catalog into AGENTS.md, as OpenSkills does")
    s.add_argument("--output", default="AGENTS.md", help="the Markdown file (default AGENTS.md, under the project)")
    s.add_argument("--command", dest="read_command", help="how agents read a skill (abilities-mcp skills read)")
    s.add_argument("--dry-run", action="store_true", help="print the diff and write nothing")
    p = sub.add_parser("events", parents=[common], help="skill events (discovered, selected, failed, cut) and counters")
    p.add_argument("--kind", choices=["SKILLS_DISCOVERED", "SKILLS_SELECTED", "SKILLS_LOAD_FAILED", "SKILLS_TRUNCATED"])
    p.add_argument("--session", help="one session's events")
    p.add_argument("--run", help="one run's events")
    p.add_argument("--since", metavar="DURATION", help="only the last DURATION (30m, 2h, 1d)")
    p.add_argument("--limit", type=int, default=50, help="the newest N events (default 50)")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("audit", parents=[common], help="the audit trail: gate decisions, records, answers, trust")
    p.add_argument("--since", metavar="DURATION", help="only the last DURATION (30m, 2h, 7d)")
    p.add_argument("--session", help="one session's entries")
    p.add_argument("--limit", type=int, help="the newest N entries")
    p.add_argument("--json", action="store_true")
    p.add_argument("--verify", action="store_true", help="check the hash chain; exit 1 naming the first broken entry")
    p.add_argument("--prune", action="store_true", help="delete the entries older than the retention, now")
    p.add_argument("--days", type=float, help="the retention for --prune (default $ABILITIES_AUDIT_DAYS, else 90)")
    p = sub.add_parser(
        "ui",
        parents=[common],
        help="the local page: runs live, timelines, graphs, approvals (a person, at a terminal only)",
        description="Serves the page on 127.0.0.1 and prints a one-time login link (it works once, for 10 minutes). "
        "Exit 0 when stopped (Ctrl-C), 2 when refused (not a person at a terminal) or the port cannot be used.",
    )
    p.add_argument("--port", type=int, default=0, help="the port on 127.0.0.1 (default: a free one)")
    p = sub.add_parser("schema", parents=[common], help="print a JSON Schema for editors")
    p.add_argument("kind", choices=["ability", "workflows", "gateway", "settings"])
    _workflow_parsers(sub, common)
    _gateway_parsers(sub, common)
    _client_parsers(sub, common)
    return parser


class _Imported:
    """A list of choices imported only when argparse checks a value: the clients' modules cost tens of milliseconds
    to import, and `serve`, the command a client starts, never reads them (a metavar keeps usage from listing it)."""

    def __init__(self, load):
        self._load = load

    def __iter__(self):
        return iter(self._load())

    def __contains__(self, value) -> bool:
        return value in self._load()


def _init_clients() -> list[str]:
    from ..clients.configs import CLIENTS

    return CLIENTS


def _hook_clients() -> list[str]:
    from ..clients.payloads import EVENTS

    return sorted(EVENTS)


def _client_parsers(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("hook", parents=[common], help="answer a client hook event (reads its JSON on stdin)")
    p.add_argument("client", choices=_Imported(_hook_clients), metavar="CLIENT", help=f"one of {HOOK_CLIENTS}")
    p.add_argument("event", help="the event as the client names it, e.g. PreToolUse (docs/clients.md lists them)")
    p.add_argument("--url", help="team mode: the team server that decides (token from $ABILITIES_TOKEN)")
    _history_options(p, argparse.SUPPRESS)
    p = sub.add_parser("init", parents=[common], help="write or merge a client's config (server entry and hooks)")
    p.add_argument("client", choices=_Imported(_init_clients), metavar="CLIENT", help=f"one of {INIT_CLIENTS}")
    p.add_argument("--dry-run", action="store_true", help="print the diff, write nothing")
    p.add_argument("--name", default="abilities", help="the server's name in the client (default: abilities)")
    p.add_argument(
        "--command",
        dest="client_command",
        help="how the client starts abilities-mcp (default: found on PATH, else this one)",
    )
    p.add_argument("--force", action="store_true", help="replace an existing entry of ours that differs")
    p.add_argument(
        "--url",
        help="team mode: the team server's address (https://…): its MCP endpoint as the server, with the token from "
        "$ABILITIES_TOKEN, and hooks that ask it (docs/team.md)",
    )
    p.add_argument(
        "--gateway",
        action="store_true",
        help="also move the client's other MCP servers into gateway.json, so they are reached only through the gates",
    )
    p.add_argument(
        "--sandbox",
        action="store_true",
        help="also turn on the client's own sandbox as verified (Claude Code, Codex, Gemini CLI), so the agent's shell "
        "writes only the project; refused for a client that has none",
    )
    p = sub.add_parser(
        "doctor",
        parents=[common],
        help="whether this project's setup holds the threat model: hooks, sandboxes, the state folder, versions",
        description="One line per check, with the fix for each that fails; exit 1 when one fails.",
    )
    p.add_argument("--json", action="store_true")


def _workflow_parsers(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("workflows", parents=[common], help="list or edit workflows.json (tool prerequisites)")
    actions = p.add_subparsers(dest="action", required=True, metavar="{list,add,enable,disable,remove}")
    s = actions.add_parser("list", parents=[common], help="every workflow: triggers, prerequisites, mode")
    s.add_argument("--json", action="store_true")
    s = actions.add_parser("add", parents=[common], help="add a built-in template")
    s.add_argument("--template", required=True, help="database, browser, github-pr, graphql or dangerous-commands")
    s.add_argument("--name", help="the workflow's name (default: the template's own)")
    for action, text in (("enable", "turn on"), ("disable", "turn off (kept in the file)"), ("remove", "delete")):
        s = actions.add_parser(action, parents=[common], help=f"{text} a workflow")
        s.add_argument("name")


def _gateway_parsers(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("gateway", parents=[common], help="list or edit gateway.json (the upstream MCP servers)")
    actions = p.add_subparsers(dest="action", required=True, metavar="{list,add,remove}")
    s = actions.add_parser("list", parents=[common], help="every upstream server and what is wrong with it")
    s.add_argument("--json", action="store_true")
    s = actions.add_parser("add", parents=[common], help="add a server: add NAME -- COMMAND ARGS... (or --url URL)")
    s.add_argument("name")
    s.add_argument("server_command", nargs="*", metavar="COMMAND", help="after --: the command and its arguments")
    s.add_argument("--url", help="a streamable HTTP server's endpoint, instead of a command")
    s.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME[=VALUE]",
        help="an environment variable; a bare NAME passes this server's NAME on when set (an upstream starts with a "
        "bare environment: no SSL_CERT_FILE, no HTTPS_PROXY)",
    )
    s.add_argument("--header", action="append", default=[], metavar="KEY=VALUE", help="an HTTP header (--url)")
    s.add_argument("--timeout", metavar="DURATION", help="how long one call may take (default 60s)")
    s = actions.add_parser("remove", parents=[common], help="delete a server")
    s.add_argument("name")
    p = sub.add_parser("tools", parents=[common], help="the gateway's tool cache (.opencode/agent-skill-tools.json)")
    actions = p.add_subparsers(dest="action", required=True, metavar="{refresh}")
    actions.add_parser("refresh", parents=[common], help="list every upstream's tools and write the cache")


def pick(values: list[str], reply: str) -> str:
    """The value a person typed: the value itself, else the one value it starts (`r` for retry, any case); a
    ValueError in plain words naming the values otherwise."""
    if reply in values:
        return reply
    typed = reply.strip().lower()
    found = [v for v in values if typed and v.lower().startswith(typed)]
    if len(found) == 1:
        return found[0]
    if found:
        raise ValueError(f"{reply!r} could be {' or '.join(repr(v) for v in found)}; type more of it")
    raise ValueError(f"{reply!r} is not one of the answers; type {_either(values)} (or its first letters)")


def _either(values: list[str]) -> str:
    return ", ".join(values[:-1]) + f" or {values[-1]}" if len(values) > 1 else "".join(values)


def _decision(text: str) -> str:
    try:
        return pick(DECISIONS, text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _duration(text: str) -> float:
    from ..durations import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _state_location(text: str) -> str:
    from ..state.database import StateFileError, check_location

    try:
        return check_location(text)
    except StateFileError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _common(root, state_dir, log_level) -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--root", default=root, help="project root (default: $ABILITIES_ROOT, $CLAUDE_PROJECT_DIR, cwd)"
    )
    common.add_argument(
        "--state-dir",
        default=state_dir,
        help="state directory (default: $XDG_STATE_HOME/abilities-mcp/projects/NAME-CRC, outside the project)",
    )
    common.add_argument(
        "--state",
        default=state_dir,  # None at the top, SUPPRESS after the command, like --state-dir
        type=_state_location,
        metavar="LOCATION",
        help="the state database: postgresql://USER@HOST/DATABASE for a team's shared one (default: $ABILITIES_STATE, "
        "else the SQLite file in the state directory; docs/team.md)",
    )
    common.add_argument("--log-level", default=log_level, choices=["debug", "info", "warning", "error"])
    return common


def _history_options(parser: argparse.ArgumentParser, default) -> None:
    """--session-ttl, --history-runs, --history-days; left None here, and settled once the project is known (the
    environment, then its settings file, then the defaults: main.settle_defaults)."""
    parser.add_argument(
        "--session-ttl",
        type=_duration,
        default=default,
        metavar="DURATION",
        help="workflow prerequisites recorded in a session expire this long after it started "
        "(default: $ABILITIES_SESSION_TTL, else sessions.ttl in abilities-mcp.json, else 24h)",
    )
    parser.add_argument(
        "--history-runs",
        type=int,
        default=default,
        help="finished runs kept (default: $ABILITIES_HISTORY_RUNS, else history.runs in abilities-mcp.json, else 500)",
    )
    parser.add_argument(
        "--history-days",
        type=float,
        default=default,
        help="days finished runs are kept (default: $ABILITIES_HISTORY_DAYS, else history.days, else 30)",
    )
