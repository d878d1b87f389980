"""The real Gemini CLI (`@google/gemini-cli`, pinned), headless (`gemini -p`), against a project set up by
`abilities-mcp init gemini`: its hooks and its MCP connection hold the gates, proven with what Gemini CLI sends.

Each scenario is one `gemini -p` whose model is a script (scripted_gemini.py) on 127.0.0.1, reached through
`GOOGLE_GEMINI_BASE_URL` with API-key auth (`security.auth.selectedType: "gemini-api-key"` in the user's
settings: with only the base URL set, Gemini CLI picks its GATEWAY auth type, which `-p` refuses as "Invalid auth
method selected"; packages/cli/src/config/auth.ts, packages/core/src/core/contentGenerator.ts:80-92, 347-353).
What these tests found about Gemini CLI 0.61.0, against its source (google-gemini/gemini-cli):
- project hooks run only in a trusted folder (packages/core/src/hooks/hookRegistry.ts `processHooksFromConfig`);
  the tests trust it with GEMINI_CLI_TRUST_WORKSPACE=true (packages/core/src/utils/trust.ts), a person answers the
  CLI's trust prompt; Gemini then warns once, on stderr, that the project's hooks will run;
- BeforeTool sends run_shell_command {command}, and an MCP tool as mcp_SERVER_TOOL with mcp_context
  {server_name, tool_name}; AfterTool sends the result as {llmContent, returnDisplay}, an MCP tool's llmContent
  as [{text}] parts; AfterAgent sends stop_hook_active;
- a BeforeTool deny reaches the model as the tool's error, an AfterAgent deny as a new prompt (another turn);
- an MCP call carries no session id, so the BeforeTool hook announces each call to this server's tools and the
  server files it under Gemini's session_id (state/claims.py, as for OpenCode).
The scenarios run with `--yolo`: Gemini's own approval says yes to everything, so a denial seen here is the hook's.
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
from real_clients import GEMINI_CLI, installed
from scripted_gemini import Request, ScriptedGemini, calls, say
from scripted_openai import Turn
from support import stored_run

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not on PATH: Gemini CLI comes from npm")

# One headless run: a few model turns, each tool call with a hook process before and after it. Far more is a hang.
GEMINI_TIMEOUT_SECONDS = 180
MODEL = "gemini-2.5-flash"


def own(tool: str) -> str:
    """This server's tool as Gemini CLI names it (packages/core/src/tools/mcp-tool.ts: mcp_SERVER_TOOL)."""
    return f"mcp_{SERVER}_{tool}"


@dataclass
class Session:
    """What one `gemini -p` did: its JSON answer, and every request its model server got."""

    root: Path
    model: ScriptedGemini
    output: dict[str, Any]
    stderr: str
    state_db: Path

    def results(self) -> list[str]:
        """What every tool call returned to the model, oldest first (the last request holds them all)."""
        assert self.model.requests, f"the model was never asked; stderr:\n{self.stderr[-3000:]}"
        return self.model.requests[-1].tool_results()


def scratch_project(base: Path, abilities: dict[str, str], workflows: dict[str, Any] | None = None) -> Path:
    """A project as a person sets it up: abilities (and workflows.json), then `abilities-mcp init gemini`."""
    assert ABILITIES_MCP.is_file(), f"{ABILITIES_MCP} is missing: install the package into this interpreter's env"
    root = base / "project"
    (root / "abilities").mkdir(parents=True)
    for name, text in abilities.items():
        (root / "abilities" / f"{name}.yaml").write_text(textwrap.dedent(text))
    if workflows is not None:
        (root / "workflows.json").write_text(json.dumps(workflows, indent=2))
    done = subprocess.run(
        [str(ABILITIES_MCP), "--root", str(root), "init", "gemini", "--command", str(ABILITIES_MCP)],
        capture_output=True,
        text=True,
        timeout=INIT_TIMEOUT_SECONDS,
    )
    assert done.returncode == 0, done.stderr
    assert "trusted folder" in done.stdout, done.stdout  # init says what Gemini CLI still asks of the person
    return root


def add_db_server(root: Path) -> None:
    """A second MCP server whose tools a workflow orders, added to the project's settings as a person would."""
    script = root / "db_server.py"
    script.write_text(DB_SERVER)
    path = root / ".gemini" / "settings.json"
    settings = json.loads(path.read_text())
    settings["mcpServers"]["db"] = {"command": sys.executable, "args": [str(script)]}
    path.write_text(json.dumps(settings, indent=2))


def run_gemini(base: Path, root: Path, prompt: str, turns: Sequence[Turn]) -> Session:
    """`gemini -p PROMPT` in the project, its model answering from `turns`; returns once the client exited."""
    gemini = installed(GEMINI_CLI)
    home = base / "home"
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    (home / ".gemini" / "settings.json").write_text(
        json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}})
    )
    with ScriptedGemini(list(turns)) as model:
        env = {
            "PATH": os.environ.get("PATH", ""),
            "LANG": os.environ.get("LANG", "C.UTF-8"),
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_STATE_HOME": str(home / ".local" / "state"),
            "GOOGLE_GEMINI_BASE_URL": model.base_url,
            "GEMINI_API_KEY": "scripted",
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
        }
        args = [str(gemini), "-p", prompt, "--output-format", "json", "--yolo", "-m", MODEL]
        process = subprocess.Popen(
            args,
            cwd=root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its MCP servers and hooks in one group, killed together on a hang
        )
        try:
            stdout, stderr = process.communicate(timeout=GEMINI_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
            pytest.fail(f"gemini -p did not finish in {GEMINI_TIMEOUT_SECONDS}s; stderr:\n{stderr[-4000:]}")
    state = default_state_dir(root.resolve(), Path(env["XDG_STATE_HOME"])) / "state.db"
    assert process.returncode == 0, (
        f"gemini exited {process.returncode}; stdout:\n{stdout[-2000:]}\nstderr:\n{stderr[-4000:]}"
    )
    assert not model.errors, model.errors
    assert not model.overrun, f"the client asked for more turns than the script has; stderr:\n{stderr[-3000:]}"
    return Session(root, model, json.loads(stdout[stdout.index("{") :]), stderr, state)


def result_json(text: str) -> dict[str, Any]:
    """An MCP result's JSON, as Gemini CLI hands it to the model (inside {output: "<untrusted_context>...})."""
    output = json.loads(text)
    body = output.get("output", "") if isinstance(output, dict) else ""
    return json.loads(body[body.index("{") : body.rindex("}") + 1])


def run_id_in(request: Request) -> str:
    return result_json(request.tool_results()[0])["run_id"]


# --- scenario: the tools are listed, an ability runs ----------------------------------------------------------


@pytest.fixture(scope="module")
def script_run(tmp_path_factory: pytest.TempPathFactory) -> Session:
    base = tmp_path_factory.mktemp("gemini-script")
    root = scratch_project(base, {"hello": HELLO})
    return run_gemini(
        base,
        root,
        "Run the hello ability and tell me its status.",
        [
            calls((own("ability_run"), {"name": "hello"})),
            lambda r: calls((own("ability_status"), {"run_id": run_id_in(r)})),
            say("The hello ability completed."),
        ],
    )


def test_gemini_lists_the_servers_tools_to_the_model(script_run: Session) -> None:
    names = script_run.model.requests[0].tool_names
    for tool in ("ability_run", "ability_status", "ability_step_complete", "workflow_status", "skill_load"):
        assert own(tool) in names, names


def test_gemini_gives_the_model_the_session_start_hooks_context(script_run: Session) -> None:
    # SessionStart's hookSpecificOutput.additionalContext was accepted and reached the model.
    assert "abilities-mcp is connected." in "\n".join(script_run.model.requests[0].texts())


def test_gemini_runs_an_ability_and_reads_its_status_back(script_run: Session) -> None:
    started, status = (result_json(t) for t in script_run.results())
    assert started["status"] == "completed", started
    assert status["status"] == "completed" and status["run_id"] == started["run_id"]
    record = stored_run(script_run.root, started["run_id"], script_run.state_db)
    assert record.status == "completed"
    assert (script_run.root / "hello.txt").read_text() == "hello\n"
    # The MCP call carried no session id: the server filed the run under the session the BeforeTool hook announced.
    assert record.session_id == script_run.output["session_id"]


# --- scenario: a strict agent step ----------------------------------------------------------------------------

GUARDED = """
description: The agent reviews the notes, nothing else
settings: {enforcement: strict}
steps:
  - id: review
    type: agent
    prompt: Review the notes
"""


@pytest.fixture(scope="module")
def strict_run(tmp_path_factory: pytest.TempPathFactory) -> Session:
    base = tmp_path_factory.mktemp("gemini-strict")
    root = scratch_project(base, {"guarded": GUARDED})
    return run_gemini(
        base,
        root,
        "Run the guarded ability.",
        [
            calls((own("ability_run"), {"name": "guarded"})),
            calls(("run_shell_command", {"command": "touch pwned"})),
            calls(("write_file", {"file_path": str(root / "written.txt"), "content": "x"})),
            lambda r: calls((own("ability_cancel"), {"run_id": run_id_in(r)})),
            say("Cancelled."),
        ],
    )


def test_gemini_a_shell_or_write_call_out_of_step_at_a_strict_agent_step_is_denied_and_writes_nothing(
    strict_run: Session,
) -> None:
    started, shell, write, cancelled = strict_run.results()
    assert result_json(started)["status"] == "awaiting_agent"
    assert not (strict_run.root / "pwned").exists() and not (strict_run.root / "written.txt").exists()
    for denied, tool in ((shell, "run_shell_command"), (write, "write_file")):
        # The model gets the hook's reason: the step, what it allows, and the legal next call.
        assert f"abilities-mcp: {tool} is not allowed now." in denied, denied
        assert "at step 'review' (agent)" in denied and "ability_step_complete(run_id=" in denied
    assert result_json(cancelled)["status"] == "cancelled"


# --- scenario: the agent would stop while a strict run waits for it ------------------------------------------


@pytest.fixture(scope="module")
def stop_run(tmp_path_factory: pytest.TempPathFactory) -> Session:
    base = tmp_path_factory.mktemp("gemini-stop")
    root = scratch_project(base, {"guarded": GUARDED})
    return run_gemini(
        base,
        root,
        "Run the guarded ability.",
        [
            calls((own("ability_run"), {"name": "guarded"})),
            say("I am done."),  # AfterAgent: denied, the run waits for the agent: another turn
            say("I am still done."),  # AfterAgent again: let through, never twice in a row
        ],
    )


def test_gemini_after_agent_sends_the_agent_back_once_while_a_strict_run_waits_for_it(stop_run: Session) -> None:
    run_id = result_json(stop_run.results()[0])["run_id"]
    assert len(stop_run.model.requests) == 3  # the client came back once after the first answer, and not again
    told = "\n".join(stop_run.model.requests[2].texts())
    assert f"Run {run_id} of ability 'guarded' is at step 'review' (agent). The run is not finished." in told


# --- scenario: a workflows.json gate on another server's tool -------------------------------------------------


@pytest.fixture(scope="module")
def workflow_run(tmp_path_factory: pytest.TempPathFactory) -> Session:
    base = tmp_path_factory.mktemp("gemini-workflow")
    root = scratch_project(base, {"hello": HELLO}, workflows=LOOK_FIRST)
    add_db_server(root)
    query = ("mcp_db_execute_query", {"sql": "select * from users"})
    return run_gemini(
        base,
        root,
        "Query the users.",
        [
            calls(query),
            calls(("mcp_db_list_databases", {})),
            calls(("mcp_db_list_tables", {})),
            calls(query),
            say("3 users."),
        ],
    )


def test_gemini_a_workflows_json_gate_denies_the_query_until_its_prerequisites_ran(workflow_run: Session) -> None:
    denied, databases, tables, allowed = workflow_run.results()
    assert "abilities-mcp: Denied: 'mcp__db__execute_query' may not run yet." in denied, denied
    assert "list_databases" in denied and "list_tables" in denied
    assert "main, analytics" in databases and "users, orders" in tables
    assert "3 rows" in allowed and "abilities-mcp" not in allowed
