"""Which agents may run which abilities: exclusive_agent, compatible_agents, and claims in agent files."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from abilities_mcp.abilities import agents
from abilities_mcp.abilities.agents import AGENT_FOLDERS, agent_files, agent_may_run, allowed_agents, refuse_agent
from abilities_mcp.abilities.catalog import Catalog
from abilities_mcp.errors import NextCall, Refused, UnknownName
from abilities_mcp.state.project import Project
from support import trust_project

STEPS = "steps:\n  - {id: s, type: script, run: 'true'}\n"


@pytest.fixture
def ability(write) -> Callable[..., Path]:
    """ability("name", "exclusive_agent: x\\n") writes a runnable ability with those extra keys."""

    def _ability(name: str, rules: str = "") -> Path:
        return write(name, f"description: {name}\n{rules}{STEPS}")

    return _ability


@pytest.fixture
def agent_file(root: Path, project: Project) -> Callable[..., Path]:
    """agent_file("deployer.md", frontmatter) writes an agent definition (default folder: .claude/agents), trusted
    as a person would after reading it (`trusted=False`: as an agent wrote it)."""

    def _agent_file(filename: str, frontmatter: str, folder: str = ".claude/agents", trusted: bool = True) -> Path:
        path = root / folder / filename
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"---\n{textwrap.dedent(frontmatter).strip()}\n---\n\nYou are an agent.\n")
        if trusted:
            trust_project(project)
        return path

    return _agent_file


@pytest.fixture
def catalog(project: Project) -> Catalog:
    return Catalog(project)


def may(catalog: Catalog, name: str, agent: str) -> bool:
    return agent_may_run(catalog.refresh(), name, agent)


@pytest.mark.parametrize("folder", AGENT_FOLDERS)
def test_an_agent_file_in_any_agent_folder_claims_abilities(ability, agent_file, catalog, folder: str) -> None:
    ability("deploy/production", "compatible_agents: [release-manager]\n")
    assert not may(catalog, "deploy/production", "deployer")
    agent_file("deployer.md", "description: Deploys\nabilities: [deploy/production, rollback]", folder)
    assert may(catalog, "deploy/production", "deployer")
    assert agent_files(catalog).claims == {"deploy/production": {"deployer"}, "rollback": {"deployer"}}


def test_the_agent_is_named_by_its_frontmatter_else_by_its_file(ability, agent_file, catalog) -> None:
    ability("restricted", "compatible_agents: [nobody]\n")
    agent_file("file-name.md", "name: named-agent\nabilities: [restricted]")
    agent_file("release-bot.md", "description: no name here\nabilities: [restricted]", ".opencode/agent")
    assert allowed_agents(catalog.refresh(), "restricted") == ["named-agent", "nobody", "release-bot"]
    assert not may(catalog, "restricted", "file-name")


def test_abilities_may_be_a_single_name(ability, agent_file, catalog) -> None:
    ability("restricted", "compatible_agents: [nobody]\n")
    agent_file("solo.md", "abilities: restricted")
    assert may(catalog, "restricted", "solo")


@pytest.mark.parametrize(
    "text",
    [
        "---\nabilities: [restricted\n---\n",
        "---\nabilities: [restricted]\n",
        "---\n- restricted\n---\n",
        "---\nabilities: {restricted: true}\n---\n",
        "---\nabilities: 5\n---\n",
        "---\nabilities: [[restricted], 7]\n---\n",
        "abilities: [restricted]\n",
        "",
        "---\nabilities: [restricted]\n" + "# padding\n" * 10_000 + "---\n",
    ],
    ids=[
        "yaml-error",
        "no-closing-fence",
        "not-a-mapping",
        "abilities-a-mapping",
        "abilities-a-number",
        "abilities-not-names",
        "no-frontmatter",
        "empty",
        "frontmatter-too-large",
    ],
)
def test_a_broken_agent_file_claims_nothing_and_hides_no_other_file(
    ability, agent_file, root: Path, catalog, text: str
) -> None:
    ability("restricted", "compatible_agents: [nobody]\n")
    (root / ".claude/agents").mkdir(parents=True)
    (root / ".claude/agents/broken.md").write_text(text)
    agent_file("good.md", "abilities: [restricted]", ".opencode/agents")
    assert not may(catalog, "restricted", "broken")
    assert may(catalog, "restricted", "good")


def test_an_agent_file_that_is_not_utf8_is_skipped(ability, agent_file, root: Path, catalog) -> None:
    ability("restricted", "compatible_agents: [nobody]\n")
    (root / ".claude/agents").mkdir(parents=True)
    (root / ".claude/agents/latin1.md").write_bytes(b"---\nname: caf\xe9\nabilities: [restricted]\n---\n")
    agent_file("good.md", "abilities: [restricted]")
    assert allowed_agents(catalog.refresh(), "restricted") == ["good", "nobody"]


def test_only_markdown_files_directly_in_the_folders_are_agents(ability, agent_file, catalog) -> None:
    ability("restricted", "compatible_agents: [nobody]\n")
    agent_file("notes.txt", "name: text\nabilities: [restricted]")
    agent_file(".hidden.md", "name: hidden\nabilities: [restricted]")
    agent_file("nested/deep.md", "name: deep\nabilities: [restricted]")
    assert allowed_agents(catalog.refresh(), "restricted") == ["nobody"]


RULES = {
    "open": "",
    "compatible": "compatible_agents: [builder, tester]\n",
    "exclusive": "exclusive_agent: deployer\n",
    "exclusive-and-compatible": "exclusive_agent: deployer\ncompatible_agents: [claimer]\n",
}


@pytest.mark.parametrize(
    ("rules", "agent", "allowed"),
    [
        ("open", "anyone", True),
        ("open", "claimer", True),
        ("compatible", "builder", True),
        ("compatible", "stranger", False),
        ("compatible", "claimer", True),
        ("exclusive", "deployer", True),
        ("exclusive", "stranger", False),
        ("exclusive", "claimer", False),
        ("exclusive-and-compatible", "claimer", False),
    ],
    ids=[
        "open-to-anyone",
        "open-to-a-claimer",
        "compatible-listed",
        "compatible-unlisted",
        "compatible-unlisted-but-claimed",
        "exclusive-owner",
        "exclusive-other",
        "exclusive-beats-a-claim",
        "exclusive-beats-compatible",
    ],
)
def test_who_may_run_an_ability(ability, agent_file, catalog, rules: str, agent: str, allowed: bool) -> None:
    ability("target", RULES[rules])
    agent_file("claimer.md", "abilities: [target]")
    assert may(catalog, "target", agent) is allowed


def test_an_unreadable_ability_may_be_run_by_no_agent_and_a_checked_one_keeps_its_rules(
    write, agent_file, catalog
) -> None:
    write("unreadable", "description: [unclosed\nsteps: []\n")
    write("flawed", "description: d\ncompatible_agents: [a]\nsteps: [{id: s, type: script, run: 'true', needs: [n]}]\n")
    agent_file("claimer.md", "abilities: [unreadable]")
    assert not may(catalog, "unreadable", "claimer") and not may(catalog, "unreadable", "anyone")
    assert not catalog.is_valid(catalog.winners["flawed"])
    assert may(catalog, "flawed", "a") and not may(catalog, "flawed", "b")


def test_agent_files_are_reread_only_when_they_change(
    ability, agent_file, catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    ability("restricted", "compatible_agents: [nobody]\n")
    path = agent_file("claimer.md", "abilities: [restricted]")
    agent_file("other.md", "abilities: [elsewhere]")
    reads: list[Path] = []
    real_read = agents.read_agent_file

    def counted(p: Path, raw: bytes | None = None):
        if raw is None:  # the file itself, not the version a person trusted
            reads.append(p)
        return real_read(p, raw)

    monkeypatch.setattr(agents, "read_agent_file", counted)
    for _ in range(3):
        assert may(catalog, "restricted", "claimer")
    assert len(reads) == 2  # once each, on first look
    path.write_text("---\nabilities: []\n---\n")
    trust_project(catalog.project)  # (reads the files for its own catalog: not this catalog's reads)
    del reads[2:]
    assert not may(catalog, "restricted", "claimer")
    assert reads[2:] == [path], "only the changed file is read again"
    path.unlink()
    assert not may(catalog, "restricted", "claimer") and agent_files(catalog).claims == {"elsewhere": {"other"}}


def test_each_catalog_keeps_its_own_agent_files(tmp_path: Path) -> None:
    first, second = (Catalog(Project(root=tmp_path / n, state_dir=tmp_path / n / ".s")) for n in ("a", "b"))
    (tmp_path / "a/.claude/agents").mkdir(parents=True)
    (tmp_path / "a/.claude/agents/x.md").write_text("---\nabilities: [one]\n---\n")
    trust_project(first.project)
    assert agent_files(first).claims == {"one": {"x"}}
    assert agent_files(second).claims == {}


# Refusals, for ability_run(agent=...).


def test_refusing_an_exclusive_ability_names_its_agent_and_the_next_call(ability, catalog) -> None:
    ability("deploy/production", "exclusive_agent: deployer\n")
    with pytest.raises(Refused) as refused:
        refuse_agent(catalog, "deploy/production", "reviewer")
    assert refused.value.next_calls == [NextCall("ability_list", {"agent": "reviewer"})]
    assert str(refused.value) == (
        "Refused: agent 'reviewer' may not run ability 'deploy/production'; only 'deployer' may (exclusive_agent). "
        "Delegate to an agent that may, or pick an ability this agent may run (state: agent 'reviewer' not allowed). "
        "Legal next call(s): ability_list(agent='reviewer')."
    )


def test_refusing_a_compatible_ability_names_every_agent_that_may(ability, agent_file, catalog) -> None:
    ability("build", "compatible_agents: [tester, builder]\n")
    agent_file("claimer.md", "abilities: build")
    with pytest.raises(Refused) as refused:
        refuse_agent(catalog, "build", "reviewer")
    message = str(refused.value)
    assert "only 'builder', 'claimer', 'tester' may (compatible_agents)" in message
    assert "Delegate to an agent that may" in message and "ability_list(agent='reviewer')" in message


def test_an_agent_bound_by_its_file_runs_only_what_it_claims(ability, agent_file, catalog) -> None:
    ability("open")
    ability("build")
    agent_file("builder.md", "abilities: [build]")
    assert refuse_agent(catalog, "build", "builder") is None
    assert refuse_agent(catalog, "open", "someone-else") is None  # agents without claims are not bound
    with pytest.raises(Refused) as refused:
        refuse_agent(catalog, "open", "builder")
    assert "bound by its definition file's `abilities:` list, which does not name 'open'" in str(refused.value)


def test_an_agent_that_may_run_the_ability_is_not_refused(ability, agent_file, catalog) -> None:
    ability("open")
    ability("build", "compatible_agents: [builder]\n")
    agent_file("claimer.md", "abilities: build")
    for name, agent in [("open", "anyone"), ("build", "builder"), ("build", "claimer")]:
        assert refuse_agent(catalog, name, agent) is None


def test_refusing_an_unknown_ability_says_did_you_mean_and_an_unreadable_one_is_left_to_the_run(write, catalog) -> None:
    write("broken", "description: [unclosed\nexclusive_agent: x\n")
    with pytest.raises(UnknownName, match="Did you mean 'broken'"):
        refuse_agent(catalog, "brokn", "reviewer")
    assert refuse_agent(catalog, "broken", "reviewer") is None


# Through the MCP tool.


async def test_ability_list_for_an_agent_lists_what_it_may_run(client, ability, agent_file) -> None:
    ability("open")
    ability("build", "compatible_agents: [builder]\n")
    ability("deploy/production", "exclusive_agent: deployer\n")
    ability("deploy/staging", "compatible_agents: [deployer]\n")
    agent_file("release.md", "name: release-manager\nabilities: [build, deploy/production]", ".opencode/agent")

    async def listed(agent: str | None = None) -> list[str]:
        result = await client.call_tool("ability_list", {"agent": agent} if agent else {})
        assert not result.is_error, result.content[0].text
        return [a["name"] for a in result.structured_content["abilities"]]

    assert await listed() == ["build", "deploy/production", "deploy/staging", "open"]
    assert await listed("builder") == ["build", "open"]
    assert await listed("deployer") == ["deploy/production", "deploy/staging", "open"]
    assert await listed("release-manager") == ["build"]  # bound to its claims; deploy/production is exclusive
    assert await listed("stranger") == ["open"]


async def test_ability_list_sees_a_new_agent_file_without_a_restart(client, ability, agent_file) -> None:
    ability("build", "compatible_agents: [builder]\n")
    first = await client.call_tool("ability_list", {"agent": "helper"})
    assert first.structured_content["abilities"] == []
    agent_file("helper.md", "abilities: [build]", ".opencode/agents")
    second = await client.call_tool("ability_list", {"agent": "helper"})
    assert [a["name"] for a in second.structured_content["abilities"]] == ["build"]


async def test_ability_run_refuses_an_agent_that_may_not_run_it_and_starts_for_one_that_may(
    client, ability, agent_file
) -> None:
    ability("deploy/production", "exclusive_agent: deployer\n")
    agent_file("builder.md", "abilities: [build]")
    refused = await client.call_tool("ability_run", {"name": "deploy/production", "agent": "reviewer"})
    assert refused.is_error
    assert "only 'deployer' may (exclusive_agent)" in refused.content[0].text
    assert "ability_list(agent='reviewer')" in refused.content[0].text
    history = (await client.call_tool("ability_history", {})).structured_content["runs"]
    assert history == []  # nothing started
    ran = await client.call_tool("ability_run", {"name": "deploy/production", "agent": "deployer"})
    assert not ran.is_error and ran.structured_content["status"] == "completed"


# --- claims under trust (docs/trust.md) ---------------------------------------------------------------------------


def test_claims_nobody_trusted_bind_nothing(ability, agent_file, catalog) -> None:
    ability("deploy/production", "compatible_agents: [release-manager]\n")
    agent_file("deployer.md", "abilities: [deploy/production]", trusted=False)  # the agent wrote it
    assert not may(catalog, "deploy/production", "deployer")
    assert "`abilities-mcp trust`" in next(iter(agent_files(catalog).pending.values()))


def test_a_claim_added_to_a_trusted_agent_file_waits_for_trust(ability, agent_file, catalog, project) -> None:
    ability("deploy/production", "compatible_agents: [release-manager]\n")
    ability("docs")
    agent_file("deployer.md", "abilities: [docs]")
    agent_file("deployer.md", "abilities: [docs, deploy/production]", trusted=False)
    assert not may(catalog, "deploy/production", "deployer") and may(catalog, "docs", "deployer")
    trust_project(project)
    assert may(catalog, "deploy/production", "deployer")
