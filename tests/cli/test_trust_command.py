"""`abilities-mcp trust`: a person at their terminal reads the diff of every gate-defining file since the last trust,
and trusts it; an agent's tools (a pipe, an agent's environment, a shim) cannot; `init` counts as trust."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

from abilities_mcp.abilities.catalog import Catalog
from abilities_mcp.cli import person
from abilities_mcp.cli.trust import changes, trust_all
from abilities_mcp.state.project import Project
from abilities_mcp.state.trust import TrustStore
from support import FAKE_TERMINAL, Terminal, cli, trust_project

# A command's bound: it starts, reads the project and answers well within this, or something hangs.
COMMAND_TIMEOUT = 60
GATED = """\
description: A production deploy a person approves
steps:
  - {id: approve, type: approval, prompt: Deploy to production?}
  - {id: deploy, type: script, run: touch deployed, needs: [approve]}
settings: {enforcement: strict}
"""


def person_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in person.AGENT_ENV}


def edited_project(root: Path, project: Project) -> Path:
    """A trusted deploy ability the agent then edited to loose."""
    path = root / "abilities" / "deploy.yaml"
    path.write_text(GATED)
    trust_project(project)
    path.write_text(GATED.replace("enforcement: strict", "enforcement: loose"))
    return path


def enforcement(project: Project) -> str:
    definition = Catalog(project).get("deploy")
    assert definition.ability is not None
    return definition.ability.settings.enforcement


def test_a_person_reads_the_diff_and_the_reason_then_trusts_it(root: Path, project: Project) -> None:
    edited_project(root, project)
    term = Terminal(cli(root, "trust"), root, env=person_env())

    shown = term.expect("[y/N]")
    term.type("y")
    term.expect("Trusted 1 file(s)")

    assert term.wait() == 0
    assert "abilities/deploy.yaml (ability, edited)" in shown
    assert "settings.enforcement strict → loose" in shown
    assert "-settings: {enforcement: strict}" in shown and "+settings: {enforcement: loose}" in shown
    assert enforcement(project) == "loose"
    assert TrustStore(project.state_dir, root).record(root / "abilities" / "deploy.yaml").how == "trust"


def test_answering_no_trusts_nothing(root: Path, project: Project) -> None:
    edited_project(root, project)
    term = Terminal(cli(root, "trust"), root, env=person_env())
    term.expect("[y/N]")
    term.type("n")
    term.expect("Nothing trusted.")
    assert term.wait() == 1
    assert enforcement(project) == "strict"


def test_an_agents_shell_cannot_trust_through_a_pipe(root: Path, project: Project) -> None:
    edited_project(root, project)
    done = subprocess.run(
        cli(root, "trust", "--yes"), input="y\n", capture_output=True, text=True, timeout=COMMAND_TIMEOUT
    )
    assert done.returncode == 2
    assert "refused: stdin is not a terminal" in done.stderr and "nothing was recorded" in done.stderr
    assert enforcement(project) == "strict"


def test_a_terminal_made_inside_an_agent_client_cannot_trust(root: Path, project: Project) -> None:
    edited_project(root, project)
    term = Terminal(cli(root, "trust", "--yes"), root, env={**person_env(), "CLAUDECODE": "1"})
    said = term.expect("nothing was recorded")
    assert term.wait() == 2 and "CLAUDECODE" in said
    assert enforcement(project) == "strict"


def test_a_pythonpath_shim_that_fakes_a_terminal_does_not_run_in_the_command(
    root: Path, project: Project, tmp_path: Path
) -> None:
    edited_project(root, project)
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(FAKE_TERMINAL)
    done = subprocess.run(
        ["/bin/sh", "-c", shlex.join(cli(root, "trust", "--yes"))],
        input="y\n",
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        env={**person_env(), "PYTHONPATH": str(shim)},
    )
    assert "refused: stdin is not a terminal" in done.stderr, done.stdout + done.stderr
    assert enforcement(project) == "strict"


def test_list_shows_what_waits_without_a_terminal_and_trusts_nothing(root: Path, project: Project) -> None:
    edited_project(root, project)
    done = subprocess.run(cli(root, "trust", "--list"), capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
    assert done.returncode == 0, done.stderr
    assert "settings.enforcement strict → loose" in done.stdout and "1 file(s) differ" in done.stdout
    assert enforcement(project) == "strict"


def test_nothing_to_trust_says_so(root: Path, project: Project) -> None:
    (root / "abilities" / "deploy.yaml").write_text(GATED)
    trust_project(project)
    done = subprocess.run(cli(root, "trust", "--list"), capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
    assert done.stdout.startswith("Nothing waits for trust")


def test_what_is_trusted_is_the_content_shown_not_a_file_swapped_after(root: Path, project: Project) -> None:
    path = edited_project(root, project)
    shown = changes(project)
    path.write_text(GATED.replace("enforcement: strict", "enforcement: loose").replace("touch", "rm -rf . ; touch"))
    trust_all(project, shown, "trust", "test")
    definition = Catalog(project).get("deploy")
    assert definition.trust == "waiting"  # the swapped-in command waits for its own trust
    assert "run changed" in (definition.trust_note or "")


def test_init_at_a_persons_terminal_counts_as_trust(root: Path, project: Project) -> None:
    (root / "abilities" / "deploy.yaml").write_text(GATED.replace("strict", "loose"))
    term = Terminal(cli(root, "init", "claude", "--command", "abilities-mcp"), root, env=person_env())
    said = term.expect("Trusted 1 file(s)")
    assert term.wait() == 0 and "(init counts as trust): abilities/deploy.yaml." in said
    assert enforcement(project) == "loose"
    assert TrustStore(project.state_dir, root).record(root / "abilities" / "deploy.yaml").how == "init"


def test_init_from_an_agents_shell_writes_the_config_but_trusts_nothing(root: Path, project: Project) -> None:
    (root / "abilities" / "deploy.yaml").write_text(GATED.replace("strict", "loose"))
    done = subprocess.run(
        cli(root, "init", "claude", "--command", "abilities-mcp"),
        input="",
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    assert (root / ".mcp.json").exists()
    assert "1 file(s) that decide gates were not trusted (stdin is not a terminal)" in done.stderr
    assert "abilities-mcp trust" in done.stderr and "deploy.yaml" not in done.stdout
    assert enforcement(project) == "strict"
