"""Hostile and broken files, one table: each is named with what is wrong, the rest of the project still loads,
and nothing crashes, hangs or reads without bound — through the CLI (`validate`) and the hook (a prompt's
briefing reads every ability file) as real processes, so a crash is a failed case, not a dead test run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from mcp import Client

from abilities_mcp.files import MAX_NESTING
from support import run_hook

# A case is over in well under this; a hang (a FIFO opened for reading) would sit here until the bound.
CASE_TIMEOUT_SECONDS = 60
# The C YAML composer recursed on the C stack and died (SIGSEGV) a few thousand levels down.
DEEP = 20_000
GOOD = "description: fine\nsteps:\n  - {id: a, type: script, run: 'true'}\n"


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _device(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _text(content: str) -> Callable[[Path], None]:
    return lambda path: path.write_text(content)


def _bytes(content: bytes) -> Callable[[Path], None]:
    return lambda path: path.write_bytes(content)


def _folder(path: Path) -> None:
    path.mkdir()


def _deep_block(levels: int) -> str:
    return "description: d\nsteps:\n" + "".join(" " * i + f"k{i}:\n" for i in range(2, levels)) + " " * levels + "x\n"


LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
)

# (where, how the file is made, words the message must hold)
CASES = {
    "ability-fifo": ("abilities/x.yaml", _fifo, "a FIFO, not a regular file"),
    "ability-dev-zero": ("abilities/x.yaml", _device, "a device, not a regular file"),
    "ability-folder-named-yaml": ("abilities/x.yaml/ability.yaml", _fifo, "a FIFO"),
    "ability-deep-flow-nesting": ("abilities/x.yaml", _text("description: " + "[" * DEEP + "]" * DEEP), "nests"),
    "ability-deep-mapping-nesting": ("abilities/x.yaml", _text("a: " + "{b: " * DEEP + "1" + "}" * DEEP), "nests"),
    "ability-deep-block-nesting": ("abilities/x.yaml", _text(_deep_block(MAX_NESTING * 3)), "nests"),
    "ability-deep-sequence-dashes": ("abilities/x.yaml", _text("steps:\n" + "- " * DEEP + "x\n"), "nests"),
    "ability-billion-laughs": ("abilities/x.yaml", _text(LAUGHS), "aliases"),
    "ability-not-utf8": ("abilities/x.yaml", _bytes(b"description: \xff\xfe\n"), "not UTF-8"),
    "ability-huge": ("abilities/x.yaml", _text("description: d\n" + "#" * (2 << 20)), "larger than"),
    "skill-fifo": ("skills/s/SKILL.md", _fifo, "not a regular file"),
    "skill-deep-frontmatter": ("skills/s/SKILL.md", _text(f"---\nname: s\ndescription: {'[' * DEEP}\n---\n"), "nests"),
    "skill-anchors": ("skills/s/SKILL.md", _text("---\nname: &n s\ndescription: *n\n---\nbody\n"), "aliases"),
    "workflows-fifo": ("workflows.json", _fifo, "a FIFO"),
    "workflows-dev-zero": ("workflows.json", _device, "a device"),
    "workflows-deep-json": ("workflows.json", _text("[" * DEEP + "]" * DEEP), "nests too deeply"),
    "agent-fifo": (".claude/agents/a.md", _fifo, None),
    "agent-deep-frontmatter": (".claude/agents/a.md", _text(f"---\nname: a\nabilities: {'[' * DEEP}\n---\n"), None),
}


def _project(tmp_path: Path, where: str, make: Callable[[Path], None]) -> tuple[Path, Path]:
    root = tmp_path / "project"
    (root / "abilities").mkdir(parents=True)
    (root / "abilities" / "good.yaml").write_text(GOOD)
    target = root / where
    target.parent.mkdir(parents=True, exist_ok=True)
    make(target)
    return root, target


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_a_hostile_file_is_named_with_its_problem_and_the_rest_of_the_project_still_loads(
    tmp_path: Path, case: str
) -> None:
    where, make, words = CASES[case]
    root, target = _project(tmp_path, where, make)

    done = subprocess.run(
        [sys.executable, "-m", "abilities_mcp", "--root", str(root), "validate", "--json"],
        capture_output=True,
        text=True,
        timeout=CASE_TIMEOUT_SECONDS,
        stdin=subprocess.DEVNULL,
    )

    assert done.returncode in (0, 1), f"exit {done.returncode}: {done.stderr[-2000:]}"  # -11 was the SIGSEGV
    assert "Traceback" not in done.stderr, done.stderr
    report = json.loads(done.stdout)
    files = {f["path"]: f for f in report["files"]}
    assert files[str(root / "abilities" / "good.yaml")]["valid"], "one bad file must not hide the others"
    if words is not None:  # agent files are read for ability_list(agent=), not validated: they must only not hurt
        shown = files.get(str(target)) or files.get(str(target.parent / "SKILL.md"))
        assert shown is not None and not shown["valid"], report
        messages = " ".join(e["message"] for e in shown["errors"])
        assert words in messages, messages


@pytest.mark.parametrize("case", [c for c in CASES if c.startswith("ability-")], ids=lambda c: c)
def test_the_hook_s_briefing_reads_past_a_hostile_ability_file(tmp_path: Path, case: str) -> None:
    where, make, _ = CASES[case]
    root, _ = _project(tmp_path, where, make)

    done = run_hook(root, "claude", "UserPromptSubmit", {"session_id": "s", "prompt": "deploy it"})

    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr


# --- authors' regexes against text an agent or a user chose ------------------------------------------------------

# Exponential in the length of a run of a's that ends badly: Python's re would spin for hours on this input.
EXPONENTIAL = "^(a|aa)+$"
BAD_TEXT = "a" * 60 + "!"


def test_an_input_pattern_that_backtracks_catastrophically_refuses_the_value_at_once(tmp_path: Path) -> None:
    root, _ = _project(
        tmp_path,
        "abilities/slow.yaml",
        _text(
            f"description: slow\ninputs:\n  v: {{type: string, pattern: '{EXPONENTIAL}'}}\n"
            "steps:\n  - {id: a, type: script, run: 'true'}\n"
        ),
    )

    done = subprocess.run(
        [sys.executable, "-m", "abilities_mcp", "--root", str(root), "run", "slow", "-i", f"v={BAD_TEXT}"],
        capture_output=True,
        text=True,
        timeout=CASE_TIMEOUT_SECONDS,
        stdin=subprocess.DEVNULL,
    )

    assert done.returncode != 0 and "did not finish within" in done.stderr, done.stdout + done.stderr


def test_a_trigger_pattern_that_backtracks_catastrophically_does_not_hold_up_the_prompt(tmp_path: Path) -> None:
    root, _ = _project(
        tmp_path,
        "abilities/slow.yaml",
        _text(
            f"description: slow\ntriggers: {{patterns: ['{EXPONENTIAL}']}}\nsteps:\n  - {{id: a, type: script, run: 'true'}}\n"
        ),
    )

    done = run_hook(root, "claude", "UserPromptSubmit", {"session_id": "s", "prompt": BAD_TEXT})

    assert done.returncode == 0, done.stderr


def test_a_handback_pattern_that_backtracks_catastrophically_refuses_the_handback_saying_why() -> None:
    # In a process of its own: were the bound gone, the match would spin for hours, and only a process can be cut off.
    code = (
        "import sys; from abilities_mcp.abilities.models import AgentStep; "
        "from abilities_mcp.engine.handoff import check_handback; "
        "step = AgentStep.model_validate({'id': 'a', 'type': 'agent', 'prompt': 'p', "
        "'validation': {'output_matches': sys.argv[1]}}); print(check_handback(step, sys.argv[2], True))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, EXPONENTIAL, BAD_TEXT],
        capture_output=True,
        text=True,
        timeout=CASE_TIMEOUT_SECONDS,
    )

    assert "did not finish within" in done.stdout, done.stdout + done.stderr


def test_a_10000_step_chain_is_checked_in_linear_time_and_is_valid(tmp_path: Path) -> None:
    # Checking was quadratic (the order, each step's ancestors) and the cycle search recursed once per step.
    steps = "  - {id: s0, type: script, run: 'true'}\n" + "".join(
        f"  - {{id: s{i}, type: script, run: 'echo {{{{steps.s{i - 1}.output}}}}', needs: [s{i - 1}]}}\n"
        for i in range(1, 10_000)
    )
    root, target = _project(tmp_path, "abilities/chain.yaml", _text("description: chain\nsteps:\n" + steps))

    done = subprocess.run(
        [sys.executable, "-m", "abilities_mcp", "--root", str(root), "validate", "--json", "chain"],
        capture_output=True,
        text=True,
        timeout=CASE_TIMEOUT_SECONDS,
        stdin=subprocess.DEVNULL,
    )

    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert json.loads(done.stdout)["files"][0]["valid"]


# --- the hook given JSON of the wrong types ------------------------------------------------------------------------

# (client, event, the payload's JSON text, words the reason must hold): each is a failure the client shows (exit 1).
WRONG_TYPES = {
    "claude-tool-name-number": (
        "claude",
        "PreToolUse",
        '{"session_id": "s", "tool_name": 5}',
        "'tool_name' is a number",
    ),
    "claude-tool-input-string": (
        "claude",
        "PreToolUse",
        '{"session_id": "s", "tool_name": "Bash", "tool_input": "x"}',
        "'tool_input' is a string",
    ),
    "claude-top-level-list": ("claude", "PreToolUse", '[{"tool_name": "Bash"}]', "is an array, not a JSON object"),
    "claude-session-id-object": ("claude", "PostToolUse", '{"session_id": {}, "tool_name": "Bash"}', "'session_id'"),
    "claude-prompt-list": ("claude", "UserPromptSubmit", '{"session_id": "s", "prompt": ["a"]}', "'prompt' is an arr"),
    "claude-stop-flag-string": ("claude", "Stop", '{"session_id": "s", "stop_hook_active": "yes"}', "true or false"),
    "opencode-tool-number": ("opencode", "tool-before", '{"sessionID": "s", "tool": 5}', "'tool' is a number"),
    "opencode-args-string": ("opencode", "tool-before", '{"sessionID": "s", "tool": "bash", "args": "x"}', "'args'"),
    "opencode-session-object": ("opencode", "tool-after", '{"sessionID": {}, "tool": "bash"}', "'sessionID'"),
    "opencode-top-level-string": ("opencode", "tool-after", '"bash"', "is a string, not a JSON object"),
}


@pytest.mark.parametrize("case", list(WRONG_TYPES), ids=list(WRONG_TYPES))
def test_the_hook_given_json_of_the_wrong_types_fails_saying_which_field(tmp_path: Path, case: str) -> None:
    client, event, payload, words = WRONG_TYPES[case]
    root, _ = _project(tmp_path, "abilities/x.yaml", _text(GOOD))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "ABILITIES_"))}

    done = subprocess.run(
        [sys.executable, "-m", "abilities_mcp", "hook", client, event],
        input=payload,
        capture_output=True,
        text=True,
        env={**env, "ABILITIES_ROOT": str(root)},
        timeout=CASE_TIMEOUT_SECONDS,
    )

    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    assert done.stdout == "" and "Traceback" not in done.stderr
    assert f"abilities-mcp hook {client} {event}: " in done.stderr and words in done.stderr, done.stderr
    assert "let through" in done.stderr


# --- skill reads that would leave the skill's folder ---------------------------------------------------------------

SKILL = "---\nname: s\ndescription: a skill\n---\nthe body\n"


def _skill_md_linked_outside(root: Path, tmp_path: Path) -> None:
    secret = tmp_path / "elsewhere" / "SKILL.md"  # neither in the project nor in the home folder
    secret.parent.mkdir()
    secret.write_text("---\nname: s\ndescription: a skill\n---\nSECRET body\n")
    (root / "skills" / "s" / "SKILL.md").unlink()
    (root / "skills" / "s" / "SKILL.md").symlink_to(secret)


# (how the skill is spoiled, the call, words the refusal must hold)
SKILL_CASES = {
    "skill-load-of-skill-md-linked-outside": (
        _skill_md_linked_outside,
        ("skill_load", {}),
        "outside the skill's folder",
    ),
    "skill-read-of-skill-md-linked-outside": (
        _skill_md_linked_outside,
        ("skill_read", {"path": "SKILL.md"}),
        "outside the skill's folder",
    ),
    "skill-read-of-a-5000-character-path": (None, ("skill_read", {"path": "a/" * 2500}), "has no file 'a/a/a/"),
    "skill-read-of-a-name-too-long-for-the-os": (None, ("skill_read", {"path": "x" * 300}), "file name too long"),
    "skill-read-of-a-link-loop": (
        lambda root, _: (root / "skills" / "s" / "loop").symlink_to("loop"),
        ("skill_read", {"path": "loop"}),
        "has no file 'loop'",
    ),
}


@pytest.mark.parametrize("case", list(SKILL_CASES), ids=list(SKILL_CASES))
async def test_a_skill_read_that_cannot_be_served_is_refused_saying_why(
    root: Path, tmp_path: Path, client: Client, case: str
) -> None:
    spoil, (tool, arguments), words = SKILL_CASES[case]
    (root / "skills" / "s").mkdir(parents=True)
    (root / "skills" / "s" / "SKILL.md").write_text(SKILL)
    if spoil is not None:
        spoil(root, tmp_path)

    result = await client.call_tool(tool, {"name": "s", **arguments})

    text = " ".join(getattr(c, "text", "") for c in result.content)
    assert result.is_error, text
    assert words in text and "SECRET" not in text, text
    assert len(text) < 2000, "a refusal names the path, it does not echo 5,000 characters back"
