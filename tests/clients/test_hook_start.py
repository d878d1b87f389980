"""What keeps the hook's start small, held as structure (never timed here; benchmarks/hook_latency.py times it): a
decision loads only the modules it needs (no pathlib: its paths are text), its records are records.Record subclasses
(not namedtuples, whose classes cost six times as much to define), and the command ends once its answer is out, its
writes already committed."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from abilities_mcp.records import Record
from support import run_hook, start_strict_run, state_db

SESSION = "2f7c0a1e-claude-session"
HOOK_TIMEOUT = 60
# What an allowed Read, with a state file and workflows.json to read, has no use for: the session's records, the
# audit trail (and its SHA-256), the announcements, the clients' configs, the keywords' phrases, the lowering of an
# edit nobody made, OpenSSL, and pathlib (with urllib.parse, 5 ms: Project and the state keep paths as text).
UNNEEDED_FOR_A_READ = (
    "abilities_mcp.prerequisites.sessions",
    "abilities_mcp.state.audit",
    "abilities_mcp.state.claims",
    "abilities_mcp.clients.servers",
    "abilities_mcp.phrases",
    "abilities_mcp.prerequisites.lowering",
    "hashlib",
    "contextlib",
    "pathlib",
)
# What no decision needs, the deny that writes the audit trail and the record after a call included: typing (the
# settings file's sessions.ttl is read for a session's records), and the shell command parser while every rule in
# workflows.json is in plain words (prerequisites/rules.py).
UNNEEDED_FOR_ANY = ("typing", "contextlib", "pathlib", "abilities_mcp.prerequisites.commands")
# What a strict run's step needs not read to refuse a call out of step: workflows.json and its gates.
UNNEEDED_FOR_A_STEP_DENY = (
    "abilities_mcp.prerequisites.gates",
    "abilities_mcp.prerequisites.workflows",
    "abilities_mcp.prerequisites.in_force",
    "pathlib",
)
# The hook's records: records.Record subclasses whose annotations document their fields (workflows.py says why not
# typing.NamedTuple nor collections.namedtuple).
RECORDS = {
    "abilities_mcp.clients.hook": ("Caller",),
    "abilities_mcp.clients.payloads": ("Call",),
    "abilities_mcp.clients.answers": ("Answer",),
    "abilities_mcp.clients.enforcement": ("Verdict", "StopVerdict"),
    "abilities_mcp.clients.position": ("Position",),
    "abilities_mcp.clients.guards": ("Place",),
    "abilities_mcp.clients.servers": ("Entry",),
    "abilities_mcp.prerequisites.gates": ("Observer", "Matched", "Check", "RecordPlan"),
    "abilities_mcp.prerequisites.workflows": ("Prerequisite", "Approval", "Workflow", "Source"),
    "abilities_mcp.prerequisites.commands": ("ShellRule",),
    "abilities_mcp.prerequisites.sessions": ("Completion", "SessionInfo"),
    "abilities_mcp.prerequisites.names": ("Name",),
    "abilities_mcp.state.trust": ("Record",),
    "abilities_mcp.state.owners": ("Owner",),
    "abilities_mcp.state.audit": ("Entry", "Broken"),
    "abilities_mcp.phrases": ("Trigger",),
}


def loaded(event: str, payload: dict, watched: tuple[str, ...]) -> tuple[str, list]:
    """Run the hook for `event` in a fresh interpreter: its answer on stdout, and [exit code, which of `watched` it
    imported]."""
    code = (
        "import io, json, sys; from abilities_mcp.__main__ import main; "
        "sys.stdin = io.StringIO(sys.argv[1]); code = main(['hook', 'claude', sys.argv[3]]); "
        "sys.stderr.write(json.dumps([code, [m for m in sys.modules if m in sys.argv[2].split()]]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(payload), " ".join(watched), event],
        capture_output=True,
        text=True,
        timeout=HOOK_TIMEOUT,
    )
    return done.stdout, json.loads(done.stderr)


def use_database_workflow(root: Path) -> None:
    from abilities_mcp.prerequisites.templates import TEMPLATES

    template = TEMPLATES["database"]
    data = {template["name"]: {k: v for k, v in template.items() if k != "name"}}
    (root / "workflows.json").write_text(json.dumps(data, indent=2))


def test_an_allowed_read_loads_no_session_records_no_audit_trail_and_no_client_configs(root) -> None:
    use_database_workflow(root)
    denied = run_hook(root, "claude", "PreToolUse", {"session_id": SESSION, "tool_name": "mcp__db__execute_query"})
    assert '"permissionDecision": "deny"' in denied.stdout and state_db(root).exists()  # a state file to read
    payload = {"session_id": SESSION, "tool_name": "Read", "tool_input": {"file_path": "x"}, "cwd": str(root)}

    answer, imported = loaded("PreToolUse", payload, UNNEEDED_FOR_A_READ)

    assert answer == ""  # allowed, nothing to say
    assert imported == [0, []]


@pytest.mark.parametrize(
    ("event", "payload", "answer"),
    [
        ("PreToolUse", {"tool_name": "mcp__db__execute_query"}, '"permissionDecision": "deny"'),
        ("PostToolUse", {"tool_name": "mcp__db__list_databases", "tool_response": {"rows": []}}, ""),
    ],
    ids=["workflow-deny", "record"],
)
def test_a_deny_and_a_record_load_no_typing_no_contextlib_and_no_command_parser(root, event, payload, answer) -> None:
    use_database_workflow(root)
    rules = {"description": "d", "triggers": {"tools": ["Bash(git push --force:*)"]}, "approval": {"expires": "10m"}}
    (root / "workflows.json").write_text(
        json.dumps({**json.loads((root / "workflows.json").read_text()), "push": rules})
    )
    call = {"session_id": SESSION, "cwd": str(root), **payload}

    said, imported = loaded(event, call, UNNEEDED_FOR_ANY)

    assert answer in said and (answer or said == "")
    assert imported == [0, []]


def test_a_strict_runs_step_refuses_bash_without_reading_workflows_json(root) -> None:
    use_database_workflow(root)
    start_strict_run(state_db(root), session=SESSION, run_id="run_live")
    payload = {"session_id": SESSION, "tool_name": "Bash", "tool_input": {"command": "ls"}, "cwd": str(root)}

    answer, imported = loaded("PreToolUse", payload, UNNEEDED_FOR_A_STEP_DENY)

    assert '"permissionDecision": "deny"' in answer and "run_live" in answer, answer
    assert imported == [0, []]


@pytest.mark.parametrize(
    ("event", "payload"),
    [
        ("PreToolUse", {"tool_name": "mcp__db__execute_query"}),
        ("PostToolUse", {"tool_name": "mcp__db__list_databases", "tool_response": {"rows": []}}),
    ],
    ids=["workflow-deny", "record"],
)
def test_a_deny_and_a_record_define_no_namedtuple_of_their_own(root, event, payload) -> None:
    # collections.namedtuple compiles a __new__ per class (records.py): the package's records must not call it.
    use_database_workflow(root)
    code = (
        "import collections, io, json, sys; made = []; real = collections.namedtuple\n"
        "def counted(name, *a, **k):\n"
        "    made.append([name, sys._getframe(1).f_globals.get('__name__')]); return real(name, *a, **k)\n"
        "collections.namedtuple = counted; from abilities_mcp.__main__ import main\n"
        "sys.stdin = io.StringIO(sys.argv[1]); code = main(['hook', 'claude', sys.argv[2]])\n"
        "sys.stderr.write(json.dumps([code, [m for m in made if m[1].startswith('abilities_mcp')]]))"
    )
    call = {"session_id": SESSION, "cwd": str(root), **payload}

    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(call), event], capture_output=True, text=True, timeout=HOOK_TIMEOUT
    )

    assert json.loads(done.stderr) == [0, []]


@pytest.mark.parametrize(
    ("module", "name"), [(m, n) for m, names in RECORDS.items() for n in names], ids=lambda v: str(v).split(".")[-1]
)
def test_each_record_is_a_record_whose_annotations_are_its_fields(module, name) -> None:
    record = getattr(importlib.import_module(module), name)

    assert issubclass(record, Record) and record.__slots__ == ()  # no instance dict: a tuple, as before
    assert record.__new__ is Record.__new__ and record._make.__func__ is Record._make.__func__  # no namedtuple's
    assert tuple(record.__annotations__) == record._fields


def test_the_hook_command_answers_and_its_record_is_read_by_the_next_call(root) -> None:
    # The command ends without the interpreter's teardown (__main__._exit_now): the answer is flushed first and the
    # record committed, so the next process sees it.
    use_database_workflow(root)
    for tool in ("mcp__db__list_databases", "mcp__db__list_tables", "mcp__db__inspect_table"):
        after = {"session_id": SESSION, "tool_name": tool, "tool_response": {"rows": []}}
        assert run_hook(root, "claude", "PostToolUse", after).returncode == 0

    done = run_hook(root, "claude", "PreToolUse", {"session_id": SESSION, "tool_name": "mcp__db__execute_query"})

    assert done.returncode == 0 and '"permissionDecision"' not in done.stdout, done.stdout + done.stderr


def test_the_guards_find_each_protected_file_where_realpath_does(tmp_path) -> None:
    # guards._real_in looks only at a file's own components below a real folder: links (absolute, relative, a loop,
    # one to /), a file where a folder is expected and missing parts must all come out as realpath has them.
    from abilities_mcp.clients.guards import CLIENT_FILES, _real_in

    root, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    (root / ".claude" / "hooks").mkdir(parents=True)
    elsewhere.mkdir()
    (elsewhere / "servers").write_text("{}")
    (root / ".codex").symlink_to(elsewhere)
    (root / ".mcp.json").symlink_to(elsewhere / "servers")
    (root / ".cursor").write_text("not a folder")
    (root / "loop").symlink_to(root / "loop")
    (root / ".gemini").symlink_to("loop")
    (root / ".opencode").symlink_to("../elsewhere")
    (root / ".config").symlink_to("/")

    for base in (root, tmp_path / "project" / ".claude" / "..", Path("/")):
        for name in (*CLIENT_FILES, ".abilities"):
            assert _real_in(os.path.realpath(base), name) == os.path.realpath(os.path.join(base, name)), name


def test_the_hook_empties_a_wal_that_outgrew_its_limit_and_loses_no_record(root, monkeypatch) -> None:
    # Each hook's process leaves the state file unclosed, and the next one to open it alone reads the whole WAL and
    # forgets what was checkpointed: the hook empties the WAL once it outgrows WAL_LIMIT_BYTES (Hook.settle).
    from abilities_mcp.clients import hook as hooks
    from abilities_mcp.clients.payloads import parse
    from abilities_mcp.state import audit
    from abilities_mcp.state.project import Project

    monkeypatch.setattr(hooks, "WAL_LIMIT_BYTES", 64 * 1024)
    use_database_workflow(root)
    wal = state_db(root).with_name("state.db-wal")
    opened, sizes = [], []
    for i in range(60):  # about 9 pages each: eight times the limit in all
        payload = {"session_id": f"s-{i}", "tool_name": "mcp__db__list_databases", "tool_response": {"rows": [i]}}
        hook = hooks.Hook(parse("claude", "after", payload, "PostToolUse"), Project.resolve(root))
        assert hooks.after(hook).context == ""
        hook.settle()
        opened.append(hook)  # each connection left open, as each hook's process leaves it
        sizes.append(wal.stat().st_size)
    database = opened[-1].database()

    recorded = database.db.execute("SELECT count(*) FROM prereq_records WHERE tool='list_databases'").fetchone()[0]
    assert recorded == 60 and audit.verify(database) == (60, None)
    assert 0 in sizes  # emptied, more than once
    assert max(sizes) < 64 * 1024 + 16 * 4120  # never past the limit by more than one write's pages
