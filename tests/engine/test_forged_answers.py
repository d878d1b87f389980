"""An answer written into the state file by something other than abilities-mcp (damaged, or forged by hand) never
crashes the run: it is dropped with a note, the run goes on waiting, and the person can still answer.

And a CLI command whose state file opens but cannot be written (a read-only mount, a sandbox) says so, no traceback.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import tempfile
import textwrap
from dataclasses import asdict
from pathlib import Path

import pytest
from mcp import Client

from abilities_mcp.engine.questions import Answer
from abilities_mcp.server import create_server
from abilities_mcp.state.project import Project
from abilities_mcp.state.store import Store
from support import GATED, as_nobody, cli, until

pytestmark = pytest.mark.anyio

MALFORMED = [
    "not json at all",
    json.dumps(["approved"]),
    json.dumps({"value": "approved", "approved": True}),  # no question id, no channel
    json.dumps({"question_id": "q", "value": "approved", "approved": "yes", "by": "terminal"}),
    json.dumps({"question_id": "q", "value": 1, "approved": True, "by": "terminal"}),
    "[" * 50_000,
]


def status(project: Project, run_id: str) -> str:
    store = Store(project.state_db)
    try:
        return store.get_run(run_id).status
    finally:
        store.close()


def write_raw_answer(project: Project, run_id: str, text: str) -> None:
    with sqlite3.connect(project.state_db) as db:
        db.execute("UPDATE runs SET answer=? WHERE run_id=?", (text, run_id))


def raw_answer(project: Project, run_id: str) -> str | None:
    with sqlite3.connect(project.state_db) as db:
        return db.execute("SELECT answer FROM runs WHERE run_id=?", (run_id,)).fetchone()[0]


@pytest.mark.parametrize("forged", MALFORMED, ids=range(len(MALFORMED)))
async def test_a_malformed_answer_is_dropped_and_a_real_one_still_lets_the_run_go_on(
    project: Project, write, root: Path, forged: str
) -> None:
    write("gated", GATED)
    async with Client(create_server(project), mode="legacy") as client:  # no form: the run waits for a person
        started = await client.call_tool("ability_run", {"name": "gated", "wait_seconds": 10})
        run = started.structured_content
        assert run["status"] == "awaiting_approval"
        run_id = run["run_id"]

        write_raw_answer(project, run_id, forged)
        await until(lambda: raw_answer(project, run_id) is None)  # the server dropped it

        assert status(project, run_id) == "awaiting_approval"
        store = Store(project.state_db)
        events = [e for e in store.events(run_id) if e["event"] == "ignored"]
        question = store.get_run(run_id).question
        assert events and "malformed answer" in events[0]["detail"]
        real = Answer(question["id"], "approved", True, "terminal", origin="/dev/pts/9; test")
        assert store.answer(run_id, real.question_id, asdict(real), "approve")
        store.close()
        await until(lambda: status(project, run_id) == "completed", timeout=30)
        done = await client.call_tool("ability_status", {"run_id": run_id})
    assert done.structured_content["status"] == "completed"
    assert (root / "deployed").exists()


def test_a_cli_command_whose_state_file_cannot_be_written_says_so_without_a_traceback() -> None:
    python, env = as_nobody()
    # Under /tmp itself, not pytest's folder: as root the command runs as nobody, who must reach the project.
    tmp_path = Path(tempfile.mkdtemp(prefix="abilities-readonly-"))
    tmp_path.chmod(0o755)
    root = tmp_path / "project"
    (root / "abilities").mkdir(parents=True)
    (root / "abilities" / "one.yaml").write_text(
        textwrap.dedent("""\
        description: one step
        steps:
          - {id: a, type: script, run: "true"}
        """)
    )
    state = tmp_path / "state"
    first = subprocess.run(
        cli(root, "run", "one", "--state-dir", str(state)), capture_output=True, text=True, timeout=60
    )
    assert first.returncode == 0, first.stderr
    for path in [state, *state.iterdir()]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    command = [*python, "-m", "abilities_mcp", "run", "one", "--state-dir", str(state), "--root", str(root)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, env={**env, "HOME": str(tmp_path)})
    finally:
        for path in [state, *state.iterdir()]:
            path.chmod(0o755)
        shutil.rmtree(tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert str(state) in done.stderr
