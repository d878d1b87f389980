"""A person answers at a terminal: `abilities-mcp approve` / `decide` and the `run` command, each under a real
pseudo-terminal, and refused when stdin is a pipe (an agent's shell tool)."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from support import GATED, Terminal, cli, stored_run, until


async def _waiting_run(client, write, body: str = GATED, name: str = "gated") -> str:
    write(name, body)
    run = (await client.call_tool("ability_run", {"name": name, "wait_seconds": 10})).structured_content
    assert run["status"] in ("awaiting_approval", "awaiting_decision"), run
    return run["run_id"]


async def _status(client, run_id: str) -> dict:
    return (await client.call_tool("ability_status", {"run_id": run_id})).structured_content


async def test_a_person_approves_in_a_terminal_and_the_serving_run_goes_on(client, write, root) -> None:
    run_id = await _waiting_run(client, write)
    term = Terminal(cli(root, "approve", run_id, "--note", "looks good"), root)
    shown = term.expect("[y/N]")
    assert "Deploy v1.0.0?" in shown and run_id in shown
    term.type("y")
    assert "Recorded: approved by terminal: looks good" in term.expect("Recorded")
    assert term.wait() == 0
    await until(lambda: stored_run(root, run_id).status == "completed")
    assert (root / "deployed").exists()
    view = await _status(client, run_id)
    assert next(s for s in view["steps"] if s["id"] == "approve")["output"].startswith("approved")


async def test_a_person_rejects_in_a_terminal(client, write, root) -> None:
    run_id = await _waiting_run(client, write)
    term = Terminal(cli(root, "approve", run_id, "--reject"), root)
    term.expect("Reject (rejected)? [y/N]")
    term.type("yes")
    assert term.wait() == 0
    record = await until(lambda: stored_run(root, run_id).status == "failed" and stored_run(root, run_id))
    assert "rejected by terminal" in record.step("approve").error
    assert not (root / "deployed").exists()


async def test_not_confirming_records_nothing(client, write, root) -> None:
    run_id = await _waiting_run(client, write)
    term = Terminal(cli(root, "approve", run_id), root)
    term.expect("[y/N]")
    term.type("")
    assert "Nothing recorded" in term.expect("Nothing recorded")
    assert term.wait() == 1
    assert stored_run(root, run_id).status == "awaiting_approval"
    await client.call_tool("ability_cancel", {"run_id": run_id})


async def test_a_piped_stdin_is_refused_so_an_agent_shell_cannot_approve(client, write, root) -> None:
    run_id = await _waiting_run(client, write)
    done = subprocess.run(cli(root, "approve", run_id), input="y\n", capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert "stdin is not a terminal" in done.stderr and "an agent's tools cannot" in done.stderr
    assert stored_run(root, run_id).status == "awaiting_approval"
    assert stored_run(root, run_id).answer is None
    await client.call_tool("ability_cancel", {"run_id": run_id})


async def test_decide_retries_a_failed_step_from_a_terminal(client, write, root) -> None:
    flaky = """
    description: flaky
    steps:
      - {id: flaky, type: script, run: 'echo x >> tries; test $(wc -l < tries) -ge 2', on_failure: ask}
    """
    run_id = await _waiting_run(client, write, flaky, "flaky")
    term = Terminal(cli(root, "approve", run_id), root)  # the wrong command says which one is right
    assert f"abilities-mcp decide {run_id}" in term.expect("decide")
    assert term.wait() == 2
    term = Terminal(cli(root, "decide", run_id, "retry"), root)
    assert "Step 'flaky' failed" in term.expect("[y/N]")
    term.type("y")
    assert term.wait() == 0
    await until(lambda: stored_run(root, run_id).status == "completed")
    assert len((root / "tries").read_text().split()) == 2


async def test_approving_a_run_that_waits_for_nothing_is_refused_with_the_state(client, write, root) -> None:
    write("quick", "description: q\nsteps:\n  - {id: a, type: script, run: 'true'}\n")
    run = (await client.call_tool("ability_run", {"name": "quick"})).structured_content
    term = Terminal(cli(root, "approve", run["run_id"]), root)
    assert "no question is waiting" in term.expect("no question")
    assert term.wait() == 2


def test_run_asks_the_approval_inline_at_a_terminal_and_records_where_the_answer_came_from(root: Path) -> None:
    (root / "abilities" / "gated.yaml").write_text(GATED)
    term = Terminal(cli(root, "run", "gated", "-i", "version=v3.1.4"), root)
    assert "Deploy v3.1.4?" in term.expect("[y/N]")
    term.type("y")
    assert "completed" in term.expect("completed  (3 of 3 steps ran)")
    assert term.wait() == 0
    assert (root / "deployed").exists()
    history = subprocess.run(cli(root, "history"), capture_output=True, text=True, timeout=30).stdout
    assert "answered approve: approved by terminal (/dev/pts/" in history  # where it came from, as approve records


@pytest.mark.parametrize("reply", ["n"])
def test_run_takes_a_rejection_at_the_terminal(root: Path, reply: str) -> None:
    (root / "abilities" / "gated.yaml").write_text(GATED)
    term = Terminal(cli(root, "run", "gated"), root)
    term.expect("[y/N]")
    term.type(reply)
    assert "--- approve failed: rejected by terminal" in term.expect("failed: rejected by terminal")
    assert term.wait() == 1
    assert not (root / "deployed").exists()


def test_run_with_piped_stdin_waits_for_the_terminal_command(root: Path) -> None:
    (root / "abilities" / "gated.yaml").write_text(GATED)
    with subprocess.Popen(
        cli(root, "run", "gated"), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as runner:
        try:
            runner.stdin.write("y\n")  # an agent trying to answer through the pipe: ignored
            runner.stdin.flush()
            lines = []
            for line in runner.stdout:
                lines.append(line)
                if "abilities-mcp approve" in line:
                    break
            run_id = "".join(lines).split("run ", 1)[1].split(":", 1)[0]
            assert stored_run(root, run_id).status == "awaiting_approval"
            term = Terminal(cli(root, "approve", run_id), root)
            term.expect("[y/N]")
            term.type("y")
            assert term.wait() == 0
            rest = runner.stdout.read()
            assert runner.wait(timeout=30) == 0, rest
            assert "completed" in rest and (root / "deployed").exists()
        finally:
            if runner.poll() is None:  # a failed assertion must not leave it waiting for an answer
                runner.kill()


def test_run_hands_a_child_runs_agent_step_to_the_person(root: Path) -> None:
    (root / "abilities" / "inner.yaml").write_text(
        "description: inner\nsteps:\n  - {id: ask, type: agent, prompt: Name a colour}\n"
        "  - {id: echo, type: script, run: 'echo got {{steps.ask.output}}', needs: [ask]}\n"
    )
    (root / "abilities" / "outer.yaml").write_text(
        "description: outer\nsteps:\n  - {id: sub, type: workflow, workflow: inner}\n"
    )
    term = Terminal(cli(root, "run", "outer"), root)
    assert "Name a colour" in term.expect("end it with a line holding only '.'")
    term.type("teal")
    term.type(".")
    assert "completed  (1 of 1 steps ran)" in term.expect("steps ran)")
    assert term.wait() == 0


@pytest.mark.parametrize("how", ["sigterm", "ctrl-c"])
def test_run_cancelled_at_the_agent_prompt_ends_at_once_without_waiting_for_input(root: Path, how: str) -> None:
    (root / "abilities" / "asks.yaml").write_text(
        "description: asks\nsteps:\n  - {id: ask, type: agent, prompt: Name a colour}\n"
    )
    term = Terminal(cli(root, "run", "asks"), root)
    term.expect("end it with a line holding only '.'")
    if how == "sigterm":
        term.proc.send_signal(signal.SIGTERM)
    else:
        term.type("\x03")  # the terminal turns it into SIGINT for the foreground process

    # The final summary, printed without any more input.
    shown = term.expect("cancelled  (0 of 1 steps ran; 1 cancelled)")

    assert "cancelled" in shown and "Traceback" not in shown and "ExceptionGroup" not in shown
    assert term.wait() == 3  # run's exit code for a cancelled run


def test_run_under_checkpoint_asks_before_a_hook_command_runs_and_shows_it_inert(root: Path) -> None:
    (root / "abilities" / "hooked.yaml").write_text(
        "description: hooked\nsettings: {approval: checkpoint}\n"
        'hooks: {before: ["touch hook-ran # \\e[2K"]}\n'  # YAML's \e: an escape character in the command
        "steps:\n  - {id: one, type: script, run: 'true'}\n"
    )
    term = Terminal(cli(root, "run", "hooked"), root)

    shown = term.expect("[y/N]")
    ran_before_asked = (root / "hook-ran").exists()
    term.type("y")
    term.expect("Checkpoint before step 'one'")
    term.type("y")

    assert "Checkpoint before hooks.before[0] of ability 'hooked'" in shown
    assert "it runs: touch hook-ran # \\x1b[2K" in shown  # the escape shown as text, never obeyed
    assert not ran_before_asked
    assert "completed  (1 of 1 steps ran)" in term.expect("steps ran)")
    assert term.wait() == 0 and (root / "hook-ran").exists()
