"""The real Codex CLI (`@openai/codex`, pinned), headless (`codex exec --json`), against a project set up by
`abilities-mcp init codex`: its hooks and its MCP connection hold the gates, proven with what Codex really sends.

Each scenario is one `codex exec` whose model is a script (scripted_responses.py) on 127.0.0.1, reached through a
custom provider (`[model_providers.scripted] base_url = ..., wire_api = "responses"` in $CODEX_HOME/config.toml).
What these tests found about Codex 0.169.0, against its source (openai/codex, codex-rs/hooks):
- hooks come from `.codex/hooks.json` in a trusted project (src/engine/discovery.rs `load_hooks_json`); a person
  trusts them in `/hooks`, `codex exec --dangerously-bypass-hook-trust` runs them unreviewed (used here, as the
  trust review is interactive);
- PreToolUse sends tool_name `Bash` with tool_input {command} for its `exec_command` tool, and
  `mcp__SERVER__TOOL` with the call's arguments for an MCP tool (src/events/pre_tool_use.rs `command_input_json`);
  PostToolUse sends an MCP tool's result as {content, structuredContent, isError}; Stop sends stop_hook_active;
- MCP tools reach the model in a Responses-API namespace `mcp__SERVER`; a server connects in the background, so the
  first request lacks its tools unless the server is `required = true` (set here with `-c`);
- the session id is the thread id; an MCP call carries none, so the PreToolUse hook announces each call to this
  server's tools and the server files it under the thread (state/claims.py, as for OpenCode).
The scenarios run with approval_policy "never" and the danger-full-access sandbox: nothing but the project's hooks
can refuse a call, so a denial seen here is the hook's.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from abilities_mcp.state.project import default_state_dir
from client_scenarios import ABILITIES_MCP, DB_SERVER, HELLO, INIT_TIMEOUT_SECONDS, LOOK_FIRST, SERVER
from real_clients import CODEX, installed
from scripted_openai import Turn
from scripted_responses import Request, ScriptedResponses, calls, say
from support import stored_run

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not on PATH: Codex comes from npm")

# One headless run: a few model turns, each tool call with a hook process before and after it. Far more is a hang.
CODEX_TIMEOUT_SECONDS = 120
SHELL = "exec_command"  # Codex's shell tool as the model calls it; its hooks name it Bash


def own(tool: str) -> str:
    """This server's tool as Codex names it (the namespace mcp__SERVER, then the tool)."""
    return f"mcp__{SERVER}__{tool}"


@dataclass
class Session:
    """What one `codex exec` did: its JSONL events, and every request its model server got."""

    root: Path
    model: ScriptedResponses
    events: list[dict[str, Any]]
    stderr: str
    state_db: Path

    @property
    def thread_id(self) -> str:
        started = [e for e in self.events if e.get("type") == "thread.started"]
        assert started, f"no thread.started event; stderr:\n{self.stderr[-3000:]}"
        return started[0]["thread_id"]

    def results(self) -> list[str]:
        """What every tool call returned to the model, oldest first (the last request holds them all)."""
        assert self.model.requests, f"the model was never asked; stderr:\n{self.stderr[-3000:]}"
        return self.model.requests[-1].tool_results()


def scratch_project(base: Path, abilities: dict[str, str], workflows: dict[str, Any] | None = None) -> Path:
    """A project as a person sets it up: abilities (and workflows.json), then `abilities-mcp init codex`."""
    assert ABILITIES_MCP.is_file(), f"{ABILITIES_MCP} is missing: install the package into this interpreter's env"
    root = base / "project"
    (root / "abilities").mkdir(parents=True)
    for name, text in abilities.items():
        (root / "abilities" / f"{name}.yaml").write_text(textwrap.dedent(text))
    if workflows is not None:
        (root / "workflows.json").write_text(json.dumps(workflows, indent=2))
    done = subprocess.run(
        [str(ABILITIES_MCP), "--root", str(root), "init", "codex", "--command", str(ABILITIES_MCP)],
        capture_output=True,
        text=True,
        timeout=INIT_TIMEOUT_SECONDS,
    )
    assert done.returncode == 0, done.stderr
    assert "/hooks" in done.stdout, done.stdout  # init says what Codex still asks of the person
    return root


def add_db_server(root: Path) -> None:
    """A second MCP server whose tools a workflow orders, appended to the project's config as a person would."""
    script = root / "db_server.py"
    script.write_text(DB_SERVER)
    with (root / ".codex" / "config.toml").open("a") as config:
        config.write(
            f"\n[mcp_servers.db]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(script))}]\n"
        )


def run_codex(
    base: Path, root: Path, prompt: str, turns: Sequence[Turn], servers: Sequence[str] = (SERVER,)
) -> Session:
    """`codex exec PROMPT` in the project, its model answering from `turns`; returns once the client exited."""
    codex = installed(CODEX)
    home = base / "home"
    (home / ".codex").mkdir(parents=True, exist_ok=True)
    with ScriptedResponses(list(turns)) as model:
        (home / ".codex" / "config.toml").write_text(
            textwrap.dedent(
                f"""\
                model = "m"
                model_provider = "scripted"
                approval_policy = "never"
                sandbox_mode = "danger-full-access"

                [model_providers.scripted]
                name = "scripted"
                base_url = "{model.base_url}"
                wire_api = "responses"
                env_key = "SCRIPTED_API_KEY"

                [projects."{root}"]
                trust_level = "trusted"
                """
            )
        )
        env = {
            "PATH": os.environ.get("PATH", ""),
            "LANG": os.environ.get("LANG", "C.UTF-8"),
            "HOME": str(home),
            "CODEX_HOME": str(home / ".codex"),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_STATE_HOME": str(home / ".local" / "state"),
            "SCRIPTED_API_KEY": "scripted",
        }
        # Each server required: Codex then waits for it before the first request (else its tools come a turn late).
        required = [arg for name in servers for arg in ("-c", f"mcp_servers.{name}.required=true")]
        args = [str(codex), "exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-hook-trust", *required]
        process = subprocess.Popen(
            [*args, prompt],
            cwd=root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its MCP servers and hooks in one group, killed together on a hang
        )
        try:
            stdout, stderr = process.communicate(timeout=CODEX_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
            pytest.fail(f"codex exec did not finish in {CODEX_TIMEOUT_SECONDS}s; stderr:\n{stderr[-4000:]}")
    events = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    state = default_state_dir(root.resolve(), Path(env["XDG_STATE_HOME"])) / "state.db"
    assert process.returncode == 0, f"codex exited {process.returncode}; stderr:\n{stderr[-4000:]}"
    assert not model.errors, model.errors
    assert not model.overrun, f"the client asked for more turns than the script has; stderr:\n{stderr[-3000:]}"
    return Session(root, model, events, stderr, state)


def run_id_in(request: Request) -> str:
    """The run id ability_run returned (its result is the last tool result)."""
    text = request.last_tool_result()
    start = text.index("{")
    return json.loads(text[start:])["run_id"]


def result_json(text: str) -> dict[str, Any]:
    """An MCP result's JSON, as Codex hands it to the model (a line of timing first, then the content)."""
    return json.loads(text[text.index("{") :])


# --- scenario: the tools are listed, an ability runs ----------------------------------------------------------


@pytest.fixture(scope="module")
def script_run(tmp_path_factory: pytest.TempPathFactory) -> Session:
    base = tmp_path_factory.mktemp("codex-script")
    root = scratch_project(base, {"hello": HELLO})
    return run_codex(
        base,
        root,
        "Run the hello ability and tell me its status.",
        [
            calls((own("ability_run"), {"name": "hello"})),
            lambda r: calls((own("ability_status"), {"run_id": run_id_in(r)})),
            say("The hello ability completed."),
        ],
    )


def test_codex_lists_the_servers_tools_to_the_model(script_run: Session) -> None:
    names = script_run.model.requests[0].tool_names
    for tool in ("ability_run", "ability_status", "ability_step_complete", "workflow_status", "skill_load"):
        assert own(tool) in names, names


def test_codex_gives_the_model_the_session_start_hooks_context(script_run: Session) -> None:
    # SessionStart's hookSpecificOutput.additionalContext was accepted and reached the model.
    assert "abilities-mcp is connected." in json.dumps(script_run.model.requests[0].body["input"])


def test_codex_runs_an_ability_and_reads_its_status_back(script_run: Session) -> None:
    started, status = (result_json(t) for t in script_run.results())
    assert started["status"] == "completed", started
    assert status["status"] == "completed" and status["run_id"] == started["run_id"]
    record = stored_run(script_run.root, started["run_id"], script_run.state_db)
    assert record.status == "completed"
    assert (script_run.root / "hello.txt").read_text() == "hello\n"
    # The MCP call carried no session id: the server filed the run under the session the PreToolUse hook announced.
    assert record.session_id == script_run.thread_id


# --- scenario: a strict agent step ----------------------------------------------------------------------------

GUARDED = """
description: The agent edits the notes, nothing else
settings: {enforcement: strict}
steps:
  - id: review
    type: agent
    prompt: Review the notes
"""


@pytest.fixture(scope="module")
def strict_run(tmp_path_factory: pytest.TempPathFactory) -> Session:
    base = tmp_path_factory.mktemp("codex-strict")
    root = scratch_project(base, {"guarded": GUARDED})
    return run_codex(
        base,
        root,
        "Run the guarded ability.",
        [
            calls((own("ability_run"), {"name": "guarded"})),
            calls((SHELL, {"cmd": "touch pwned"})),
            lambda r: calls((own("ability_cancel"), {"run_id": run_id_in_results(r)})),
            say("Cancelled."),
        ],
    )


def run_id_in_results(request: Request) -> str:
    return result_json(request.tool_results()[0])["run_id"]


def test_codex_a_shell_call_out_of_step_at_a_strict_agent_step_is_denied_and_writes_nothing(
    strict_run: Session,
) -> None:
    started, denied, cancelled = strict_run.results()
    assert result_json(started)["status"] == "awaiting_agent"
    assert not (strict_run.root / "pwned").exists()
    # The model gets the hook's reason: the step, what it allows, and the legal next call.
    assert "abilities-mcp: Bash is not allowed now." in denied, denied
    assert "at step 'review' (agent)" in denied and "ability_step_complete(run_id=" in denied
    assert result_json(cancelled)["status"] == "cancelled"


# --- scenario: Stop while a strict run waits for the agent ----------------------------------------------------


@pytest.fixture(scope="module")
def stop_run(tmp_path_factory: pytest.TempPathFactory) -> Session:
    base = tmp_path_factory.mktemp("codex-stop")
    root = scratch_project(base, {"guarded": GUARDED})
    return run_codex(
        base,
        root,
        "Run the guarded ability.",
        [
            calls((own("ability_run"), {"name": "guarded"})),
            say("I am done."),  # Stop: blocked, the run waits for the agent
            say("I am still done."),  # Stop again: let through, never twice in a row
        ],
    )


def test_codex_stop_is_blocked_once_while_a_strict_run_waits_for_the_agent(stop_run: Session) -> None:
    run_id = result_json(stop_run.results()[0])["run_id"]
    assert len(stop_run.model.requests) == 3  # the client came back once after the first stop, and not again
    told = "\n".join(stop_run.model.requests[2].user_texts())
    assert f"Run {run_id} of ability 'guarded' is at step 'review' (agent). The run is not finished." in told


# --- scenario: a workflows.json gate on another server's tool -------------------------------------------------


@pytest.fixture(scope="module")
def workflow_run(tmp_path_factory: pytest.TempPathFactory) -> Session:
    base = tmp_path_factory.mktemp("codex-workflow")
    root = scratch_project(base, {"hello": HELLO}, workflows=LOOK_FIRST)
    add_db_server(root)
    query = ("mcp__db__execute_query", {"sql": "select * from users"})
    return run_codex(
        base,
        root,
        "Query the users.",
        [
            calls(query),
            calls(("mcp__db__list_databases", {})),
            calls(("mcp__db__list_tables", {})),
            calls(query),
            say("3 users."),
        ],
        servers=(SERVER, "db"),
    )


def test_codex_a_workflows_json_gate_denies_the_query_until_its_prerequisites_ran(workflow_run: Session) -> None:
    denied, databases, tables, allowed = workflow_run.results()
    assert "abilities-mcp: Denied: 'mcp__db__execute_query' may not run yet." in denied, denied
    assert "list_databases" in denied and "list_tables" in denied
    assert "main, analytics" in databases and "users, orders" in tables
    assert "3 rows" in allowed and "abilities-mcp" not in allowed


# --- scenario: a shell call run from another folder (exec_command's workdir) ----------------------------------

FORCE_PUSH = {
    "force-push-needs-a-person": {
        "enabled": True,
        "mode": "enforce",
        "description": "A person approves every force push",
        "triggers": {"tools": ["Bash(git push --force:*)"]},
        "approval": {"expires": "10m"},
    }
}


@pytest.fixture(scope="module")
def workdir_run(tmp_path_factory: pytest.TempPathFactory) -> Session:
    """A security review's bypass: Codex sends exec_command's workdir as the hook's cwd, and a hook that took it for
    the project found no workflows.json there. init pins the project with --root."""
    base = tmp_path_factory.mktemp("codex-workdir")
    root = scratch_project(base, {}, workflows=FORCE_PUSH)
    push = "git push --force origin main"
    return run_codex(
        base,
        root,
        "Force-push main.",
        [
            calls((SHELL, {"cmd": push, "workdir": str(root / "abilities")})),
            calls((SHELL, {"cmd": push, "workdir": "/tmp"})),
            say("It needs a person."),
        ],
    )


def test_codex_a_gated_shell_call_with_its_workdir_elsewhere_is_still_denied(workdir_run: Session) -> None:
    in_subfolder, in_tmp = workdir_run.results()
    for result in (in_subfolder, in_tmp):
        assert "needs a person's approval" in result and "abilities-mcp approve call_" in result, result
    hooks = json.loads((workdir_run.root / ".codex" / "hooks.json").read_text())["hooks"]
    assert hooks["PreToolUse"][0]["hooks"][0]["command"].endswith(f" --root {workdir_run.root}")
