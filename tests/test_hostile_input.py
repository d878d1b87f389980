"""The hostile-input matrix (issue 16), one table per kind: hostile and broken files, authors' regexes, hook
payloads of the wrong types, skill reads that would leave a skill's folder, broken state files, protocol lines the
SDK would drop, and placeholders handed to commands that run them as code. Each case is named with what is wrong;
nothing crashes, hangs, reads without bound or answers with a traceback. Through real processes (the CLI, the hook,
the server over stdio) wherever a crash would otherwise be a dead test run rather than a failed case."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

import anyio
import pytest
from mcp import Client, MCPError

import abilities_mcp
from abilities_mcp.clients import hook
from abilities_mcp.clients.configs import HOOK_TIMEOUT_SECONDS
from abilities_mcp.files import MAX_NESTING
from abilities_mcp.server.skill_extension import DIRECTORY_PAGE_SIZE
from abilities_mcp.skills import manifest, skillset
from support import MODERN_ENVELOPE, as_nobody, get_skill, raw_server, read_directory, run_hook, state_db, write_skill

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
    "skill-deep-frontmatter": (
        "skills/s/SKILL.md",
        _text(f"---\nname: s\ndescription: {'[' * DEEP}\n---\n"),
        "flow lists `[…]` are refused",
    ),
    "skill-anchors": ("skills/s/SKILL.md", _text("---\nname: &n s\ndescription: *n\n---\nbody\n"), "anchors (`&name`)"),
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


# --- a skill's file swapped between the check and the read ---------------------------------------------------------


class _Rescue:
    """On the code before the fix, a read blocked on a FIFO with no writer forever (holding the event loop, for
    skill_read): after a bound, open it for writing once so the blocked read ends and the test fails, not hangs."""

    def __init__(self, fifo: Path):
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._unblock, args=(fifo,), daemon=True)
        self.thread.start()

    def _unblock(self, fifo: Path) -> None:
        if not self.done.wait(SWAP_RESCUE_SECONDS):
            with suppress(OSError):  # ENXIO: nobody is reading it, so nobody is blocked
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))

    def __enter__(self) -> _Rescue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()


SWAP_RESCUE_SECONDS = 5


def _swap_for_fifo(path: Path, _outside: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _swap_for_link_out(path: Path, outside: Path) -> None:
    path.unlink()
    path.symlink_to(outside)


SWAPS = {"fifo": (_swap_for_fifo, "is a FIFO"), "link-out": (_swap_for_link_out, "is a link")}


async def _read_skill_file(client: Client, via: str) -> str:
    """What the client gets back for skill s's notes.md: the refusal's text (an error for both routes)."""
    if via == "skill_read":
        result = await client.call_tool("skill_read", {"name": "s", "path": "notes.md"})
        text = " ".join(getattr(c, "text", "") for c in result.content)
        assert result.is_error, text
        return text
    with pytest.raises(MCPError) as refused:
        await client.read_resource("skill://s/notes.md")
    return str(refused.value)


@pytest.mark.parametrize("via", ["skill_read", "resources-read"])
@pytest.mark.parametrize("swap", list(SWAPS))
async def test_a_skill_file_swapped_after_its_check_is_refused_not_waited_on_or_followed_out(
    root: Path, tmp_path: Path, client: Client, monkeypatch: pytest.MonkeyPatch, swap: str, via: str
) -> None:
    make, words = SWAPS[swap]
    folder = write_skill(root, "s", "name: s\ndescription: a skill", files={"notes.md": "the notes\n"})
    outside = tmp_path / "secret.md"
    outside.write_text("SECRET\n")
    checked = skillset.resolve_inside

    def check_then_swap(skill, relative):  # the attacker wins the race every time
        target = checked(skill, relative)
        make(target, outside)
        return target

    monkeypatch.setattr(skillset, "resolve_inside", check_then_swap)
    with _Rescue(folder / "notes.md"), anyio.fail_after(CASE_TIMEOUT_SECONDS):
        text = await _read_skill_file(client, via)
        assert (await client.call_tool("skill_list", {})).structured_content["skills"], "the server still answers"

    assert f"'notes.md' of skill 's' {words}" in text and "SECRET" not in text, text


async def test_skills_get_refuses_a_skill_over_16_mib_without_reading_its_files(
    root: Path, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = write_skill(root, "s", "name: s\ndescription: a skill")
    with (folder / "huge.bin").open("wb") as f:
        f.truncate(3 << 30)  # 3 GiB, sparse: hashing it took 8-12 s before the refusal
    hashed: list[str] = []
    digest = manifest._digest
    monkeypatch.setattr(manifest, "_digest", lambda path, *rest: hashed.append(path.name) or digest(path, *rest))

    with pytest.raises(MCPError) as refused:
        await get_skill(client, "skill://s/SKILL.md")

    assert "holds more than 16 MiB" in str(refused.value), refused.value
    assert hashed == [], "the sizes are added up before any file is read"


async def test_skills_get_refuses_a_file_swapped_for_a_fifo_after_the_walk(
    root: Path, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = write_skill(root, "s", "name: s\ndescription: a skill", files={"notes.md": "the notes\n"})
    size = manifest._size

    def size_then_swap(path: Path) -> int:
        measured = size(path)
        if path.name == "notes.md":
            _swap_for_fifo(path, path)
        return measured

    monkeypatch.setattr(manifest, "_size", size_then_swap)
    with _Rescue(folder / "notes.md"), anyio.fail_after(CASE_TIMEOUT_SECONDS), pytest.raises(MCPError) as refused:
        await get_skill(client, "skill://s/SKILL.md")

    assert "notes.md is a FIFO, not a regular file" in str(refused.value), refused.value


async def test_a_folder_of_3000_files_is_read_in_pages_each_listed_once(root: Path, client: Client) -> None:
    folder = write_skill(root, "s", "name: s\ndescription: a skill")
    (folder / "many").mkdir()
    for i in range(3_000):  # 20,000 came back as one answer of 1.7 MB
        (folder / "many" / f"f{i:05}.txt").touch()

    names, cursor, pages = [], None, 0
    while True:
        page = await read_directory(client, "skill://s/many", cursor)
        assert len(page["resources"]) <= DIRECTORY_PAGE_SIZE, "one answer before the fix"
        names += [r["name"] for r in page["resources"]]
        pages += 1
        if (cursor := page.get("nextCursor")) is None:
            break

    assert names == [f"f{i:05}.txt" for i in range(3_000)] and pages == -(-3_000 // DIRECTORY_PAGE_SIZE)


# --- hook payloads built to take the guards quadratic time -------------------------------------------------------

MANY = 30_000
# (client, tool, its input, the words the answer holds; None: let through). Before: 58 s at 280 KB for a repeated
# `abilities-mcp `, 180 s at 112 KB for a patch header whose name ends in spaces: past every client's hook timeout,
# which lets the call through.
SLOW_PAYLOADS = {
    "bash-repeating-our-name-then-an-approval": (
        "claude",
        "Bash",
        {"command": "abilities-mcp " * MANY + "; abilities-mcp approve run_1"},
        "is a person's answer",
    ),
    "bash-repeating-our-name": ("claude", "Bash", {"command": "abilities-mcp " * MANY}, None),
    "patch-header-then-a-run-of-spaces": (
        "codex",
        "apply_patch",
        {"command": "*** Begin Patch\n*** Update File: a" + " " * (14 * MANY) + "b\n*** End Patch\n"},
        None,
    ),
    "patch-of-a-hook-file-with-trailing-spaces": (
        "codex",
        "apply_patch",
        {"command": "*** Begin Patch\n*** Update File: .codex/hooks.json" + " " * (14 * MANY) + "\n*** End Patch\n"},
        "decides what gates the agent",
    ),
}


@pytest.mark.parametrize("client", ["claude", "codex", "gemini"])
def test_a_tool_input_nested_too_deep_to_read_is_refused_not_let_through(tmp_path: Path, client: str) -> None:
    root, _ = _project(tmp_path, "abilities/x.yaml", _text(GOOD))
    deep = "[" * DEEP + "]" * DEEP  # an MCP tool's arguments are whatever JSON the agent writes
    event = "BeforeTool" if client == "gemini" else "PreToolUse"
    payload = f'{{"session_id":"s","cwd":{json.dumps(str(root))},"hook_event_name":"{event}",'
    payload += f'"tool_name":"mcp__pg__execute_query","tool_input":{{"sql":"drop table users","x":{deep}}}}}'

    done = subprocess.run(
        [sys.executable, "-m", "abilities_mcp", "hook", client, event],
        input=payload,
        capture_output=True,
        text=True,
        timeout=CASE_TIMEOUT_SECONDS,
    )

    assert "let through" not in done.stderr, done.stderr  # before: RecursionError, exit 1, "the call was let through"
    assert "nests too deep to read" in done.stdout and "deny" in done.stdout, (done.stdout, done.stderr)


@pytest.mark.parametrize("case", list(SLOW_PAYLOADS), ids=list(SLOW_PAYLOADS))
def test_a_payload_built_to_be_slow_is_decided_in_linear_time(tmp_path: Path, case: str) -> None:
    client, tool, tool_input, words = SLOW_PAYLOADS[case]
    root, _ = _project(tmp_path, "abilities/x.yaml", _text(GOOD))
    payload = {"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": tool_input}

    done = run_hook(root, client, "PreToolUse", payload)  # bounded: the old regexes ran past the bound

    assert "Traceback" not in done.stderr, done.stderr
    if words is None:
        assert done.returncode == 0 and "deny" not in done.stdout, (done.stdout[:500], done.stderr[:500])
    else:
        answer = json.loads(done.stdout)["hookSpecificOutput"]
        assert answer["permissionDecision"] == "deny" and words in answer["permissionDecisionReason"], answer


@pytest.mark.parametrize(("event", "refused"), [("PreToolUse", True), ("PostToolUse", False)])
def test_a_hook_that_cannot_decide_within_its_budget_refuses_a_tool_call(
    root: Path, monkeypatch: pytest.MonkeyPatch, event: str, refused: bool
) -> None:
    let_go = threading.Event()  # never set: only the budget ends the wait (30 s, then "allow", before the fix)
    for kind in ("before", "after"):
        monkeypatch.setitem(hook.HANDLERS, kind, lambda _hook: let_go.wait(30) and hook.Answer())
    monkeypatch.setenv(hook.BUDGET_ENV, "0.2")
    monkeypatch.setenv("ABILITIES_ROOT", str(root))
    payload = {"session_id": "s", "tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_response": {}}
    stdout, stderr = io.StringIO(), io.StringIO()

    code = hook.main("claude", event, stdin=io.StringIO(json.dumps(payload)), stdout=stdout, stderr=stderr)

    said = "no decision within 0.2 s"
    if refused:
        answer = json.loads(stdout.getvalue())["hookSpecificOutput"]
        assert code == 0 and answer["permissionDecision"] == "deny", answer
        assert said in answer["permissionDecisionReason"] and "refused" in answer["permissionDecisionReason"]
    else:  # nothing to refuse after the call: not recording it only leaves a gate closed
        assert code == 1 and said in stderr.getvalue() and stdout.getvalue() == ""


def test_the_hook_s_budget_leaves_room_within_every_timeout_init_writes() -> None:
    plugin = (Path(abilities_mcp.__file__).parent / "clients" / "opencode_plugin.js").read_text()
    assert hook.BUDGET_SECONDS * 2 <= HOOK_TIMEOUT_SECONDS
    assert f"const TIMEOUT_MS = {HOOK_TIMEOUT_SECONDS * 1000:_}" in plugin


# --- arguments a tool cannot use ---------------------------------------------------------------------------------

# (the tool's arguments, words its refusal holds). Before: a bare "Error executing tool skill_plan" (a NUL), the
# 5,000 characters echoed back, or the path's own resolution failing.
TOOL_ARGUMENTS = {
    "skill-plan-nul": (("skill_plan", {"plan": "\x00"}), "holds a NUL character"),
    "skill-plan-nul-inside": (("skill_plan", {"plan": "PLAN\x00.md"}), "holds a NUL character"),
    "skill-plan-empty": (("skill_plan", {"plan": " "}), "is empty"),
    "skill-plan-5000-characters": (("skill_plan", {"plan": "x" * 5000}), "cannot be read"),
    "skill-plan-link-loop": (("skill_plan", {"plan": "loop/PLAN.md"}), "cannot be found"),
}


@pytest.mark.parametrize("case", list(TOOL_ARGUMENTS), ids=list(TOOL_ARGUMENTS))
async def test_a_tool_argument_that_names_nothing_usable_is_refused_saying_why(
    root: Path, client: Client, case: str
) -> None:
    (root / "loop").symlink_to("loop")
    (tool, arguments), words = TOOL_ARGUMENTS[case]

    result = await client.call_tool(tool, arguments)

    text = " ".join(getattr(c, "text", "") for c in result.content)
    assert result.is_error and words in text, text
    assert len(text) < 1000, "a refusal names the argument, it does not echo 5,000 characters back"


# --- a project root the server cannot serve ---------------------------------------------------------------------

ROOTS = {
    "missing-folder": (lambda base: base / "no" / "such" / "folder", "does not exist"),
    "a-file": (lambda base: base / "a-file", "is not a folder"),
}


@pytest.mark.parametrize("command", [[], ["list"], ["validate"]], ids=["serve", "list", "validate"])
@pytest.mark.parametrize("case", list(ROOTS), ids=list(ROOTS))
def test_a_root_that_is_no_project_folder_stops_every_command_with_the_fix(
    tmp_path: Path, case: str, command: list[str]
) -> None:
    (tmp_path / "a-file").write_text("not a project")
    make, words = ROOTS[case]
    hello = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}

    done = subprocess.run(  # as a client starts it: a pipe on stdin with the handshake already in it
        [sys.executable, "-m", "abilities_mcp", "--root", str(make(tmp_path)), *command],
        input=json.dumps(hello) + "\n",
        capture_output=True,
        text=True,
        timeout=CASE_TIMEOUT_SECONDS,
    )

    assert done.returncode == 2 and done.stdout == "", (done.stdout, done.stderr)
    assert words in done.stderr and "--root" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "ExceptionGroup" not in done.stderr, done.stderr


# --- a broken state file -------------------------------------------------------------------------------------------


def _garbage(db: Path) -> None:
    db.write_bytes(b"\x00\xffnot a database\n" * 4096)


def _real_db(db: Path) -> None:
    from abilities_mcp.state.store import Store

    store = Store(db)
    with store.transaction() as conn:
        conn.execute("CREATE TABLE pad (x TEXT)")
        conn.executemany("INSERT INTO pad VALUES (?)", [("x" * 1000,) for _ in range(200)])
    store.close()


def _truncated(db: Path) -> None:
    _real_db(db)
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 2])


def _sqlite(*statements: str) -> Callable[[Path], None]:
    def make(db: Path) -> None:
        import sqlite3

        conn = sqlite3.connect(db)
        for statement in statements:
            conn.execute(statement)
        conn.commit()
        conn.close()

    return make


# (how the state file is broken, words of the reason)
BROKEN_STATE = {
    "state-garbage-bytes": (_garbage, "not a database"),
    "state-truncated-in-half": (_truncated, ""),
    "state-foreign-schema": (_sqlite("CREATE TABLE runs (id INTEGER, name TEXT)"), "'runs' table has no"),
    "state-runs-missing-columns-current-version": (
        _sqlite("CREATE TABLE runs (run_id TEXT PRIMARY KEY, ability TEXT)", "PRAGMA user_version=5"),
        "'runs' table has no",
    ),
}


def _broken_state(tmp_path: Path, case: str) -> tuple[Path, Path, bytes]:
    root, _ = _project(tmp_path, "abilities/x.yaml", _text(GOOD))
    db = state_db(root)  # where the server, the CLI and the hook find it by default
    db.parent.mkdir(parents=True)
    BROKEN_STATE[case][0](db)
    return root, db, db.read_bytes()


def _cli(root: Path, db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "abilities_mcp", "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=CASE_TIMEOUT_SECONDS,
        stdin=subprocess.DEVNULL,
    )


def _moved_aside(db: Path, before: bytes) -> Path:
    aside = [
        p
        for p in db.parent.iterdir()
        if p.name.startswith("state.db.corrupt-") and not p.name.endswith(("-wal", "-shm"))
    ]
    assert len(aside) == 1, sorted(p.name for p in db.parent.iterdir())
    assert aside[0].read_bytes() == before, "the old file is kept as it was"
    return aside[0]


@pytest.mark.parametrize("case", list(BROKEN_STATE), ids=list(BROKEN_STATE))
@pytest.mark.parametrize("command", ["status", "history"])
def test_a_broken_state_file_is_moved_aside_and_the_command_goes_on_with_a_fresh_one(
    tmp_path: Path, case: str, command: str
) -> None:
    root, db, before = _broken_state(tmp_path, case)

    done = _cli(root, db, command)

    assert done.returncode in (0, 2), done.stderr  # status: "No runs yet." is exit 2 (docs/cli.md)
    assert "Traceback" not in done.stderr, done.stderr
    aside = _moved_aside(db, before)
    assert f"the state file {str(db)!r} was damaged" in done.stderr and BROKEN_STATE[case][1] in done.stderr
    assert f"moved aside to {str(aside)!r}" in done.stderr and "nothing was deleted" in done.stderr
    assert "Lost from view: the runs" in done.stderr and "Kept: the project's abilities" in done.stderr
    again = _cli(root, db, command)
    assert "damaged" not in again.stderr, "the fresh file is sound: nothing is moved twice"


@pytest.mark.parametrize("case", list(BROKEN_STATE), ids=list(BROKEN_STATE))
async def test_the_server_starts_on_a_broken_state_file_moving_it_aside_and_saying_so(
    tmp_path: Path, case: str
) -> None:
    root, db, before = _broken_state(tmp_path, case)
    log = tmp_path / "server.log"

    async with raw_server(root, log) as server:
        listed = await server.call_tool("ability_list", {})
        run = await server.call_tool("ability_run", {"name": "good", "wait_seconds": 30})

    assert "good" in [a["name"] for a in listed["abilities"]] and run["status"] == "completed"
    aside = _moved_aside(db, before)
    stderr = log.read_text()
    assert "Traceback" not in stderr and f"moved aside to {str(aside)!r}" in stderr, stderr


@pytest.mark.parametrize("case", list(BROKEN_STATE), ids=list(BROKEN_STATE))
def test_the_hook_never_moves_a_broken_state_file_and_a_strict_gate_refuses(tmp_path: Path, case: str) -> None:
    root, db, before = _broken_state(tmp_path, case)
    shell = run_hook(root, "claude", "PreToolUse", {"session_id": "s", "tool_name": "Bash"})
    read = run_hook(root, "claude", "PreToolUse", {"session_id": "s", "tool_name": "Read"})

    assert shell.returncode == 2 and str(db) in shell.stderr and "cannot be read" in shell.stderr, shell.stderr
    assert read.returncode == 0, read.stderr  # read-only tools still work
    assert "Traceback" not in shell.stderr + read.stderr
    assert sorted(p.name for p in db.parent.iterdir()) == ["state.db"], "the hook moves nothing"
    if case in ("state-garbage-bytes", "state-truncated-in-half"):  # a sound SQLite file it opens like any other
        assert db.read_bytes() == before


def test_a_folder_in_place_of_the_state_file_stops_serve_and_the_cli_with_the_fix(tmp_path: Path) -> None:
    root, _ = _project(tmp_path, "abilities/x.yaml", _text(GOOD))
    db = state_db(root)
    (db / "inside").mkdir(parents=True)

    for args in (["status"], ["history"], ["serve"]):
        done = _cli(root, db, *args)
        assert done.returncode == 2, (args, done.stderr)
        assert f"abilities-mcp: the state file {str(db)!r} is a folder, not a file" in done.stderr, done.stderr
        assert "--state-dir" in done.stderr and "Traceback" not in done.stderr and done.stdout == ""
    assert (db / "inside").is_dir(), "a folder someone made is never moved"
    hooked = run_hook(root, "claude", "PreToolUse", {"session_id": "s", "tool_name": "Bash"})
    assert hooked.returncode == 2 and "is a folder" in hooked.stderr, hooked.stderr


@pytest.mark.parametrize("what", ["state-folder", "project-and-state-folder"])
def test_a_read_only_state_folder_stops_the_command_with_the_fix(what: str) -> None:
    python, env = as_nobody()
    base = Path(tempfile.mkdtemp(prefix="abilities-readonly-"))
    try:
        base.chmod(0o755)
        root, _ = _project(base, "abilities/x.yaml", _text(GOOD))
        state = base / "state"
        state.mkdir()
        for folder in [state, *([root, root / "abilities"] if what != "state-folder" else [])]:
            folder.chmod(0o555)
        env["HOME"] = str(base)
        for args in (["status"], ["serve"]):
            done = subprocess.run(
                [*python, "-m", "abilities_mcp", "--root", str(root), "--state-dir", str(state), *args],
                capture_output=True,
                text=True,
                timeout=CASE_TIMEOUT_SECONDS,
                stdin=subprocess.DEVNULL,
                env=env,
            )
            assert done.returncode == 2, (args, done.stderr)
            assert f"the state file {str(state / 'state.db')!r} cannot be opened for writing" in done.stderr
            assert "must be writable by this user" in done.stderr and "Traceback" not in done.stderr, done.stderr
    finally:
        for folder in base.rglob("*"):
            if folder.is_dir():
                folder.chmod(0o755)
        shutil.rmtree(base)


# --- protocol lines the SDK's reader would drop unanswered ----------------------------------------------------------

DEEP_PARAMS = b'{"jsonrpc":"2.0","id":44,"method":"ping","params":{"x":' + b"[" * 100_000 + b"]" * 100_000 + b"}}"
# (the raw line, the id the answer must carry, the error code; None: answered normally)
PROTOCOL_LINES = {
    "line-not-json": (b"this is not json", None, -32700),
    "line-cut-short": (b'{"jsonrpc":"2.0","id":41,"method":"ping"', 41, -32700),
    "request-jsonrpc-1.0": (b'{"jsonrpc":"1.0","id":42,"method":"ping"}', 42, -32600),
    "request-params-not-an-object": (b'{"jsonrpc":"2.0","id":43,"method":"ping","params":[1,2]}', 43, -32600),
    "request-params-100k-deep": (DEEP_PARAMS, 44, -32600),
    "request-lone-surrogate": (b'{"jsonrpc":"2.0","id":45,"method":"ping","params":{"x":"\\ud800"}}', 45, -32700),
    "request-id-without-a-method": (b'{"jsonrpc":"2.0","id":46}', 46, -32600),
    "top-level-array": (b'[{"jsonrpc":"2.0","id":47,"method":"ping"}]', None, -32600),
    "string-id-jsonrpc-missing": (b'{"id":"x-48","method":"ping"}', "x-48", -32600),
    "invalid-utf-8-in-a-string": (b'{"jsonrpc":"2.0","id":49,"method":"ping","params":{"x":"\xff"}}', 49, None),
    # The SDK read these as notifications (an id that is not a string or an integer is no id to it): no answer.
    "id-with-a-fraction": (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', None, -32600),
    "id-an-object": (b'{"jsonrpc":"2.0","id":{},"method":"ping"}', None, -32600),
    "id-null": (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', None, -32600),
    "id-true": (b'{"jsonrpc":"2.0","id":true,"method":"tools/list"}', None, -32600),
}


# Each line in the 2025-11-25 era; the ids in the 2026-07-28 one too (no handshake: a request stands alone there).
ERAS = [(case, False) for case in PROTOCOL_LINES] + [(case, True) for case in PROTOCOL_LINES if case.startswith("id-")]


@pytest.mark.parametrize(("case", "modern"), ERAS, ids=[f"{c}-{'2026' if m else '2025'}" for c, m in ERAS])
async def test_every_protocol_line_is_answered_and_the_server_goes_on_serving(
    tmp_path: Path, case: str, modern: bool
) -> None:
    line, request_id, code = PROTOCOL_LINES[case]
    root, _ = _project(tmp_path, "abilities/x.yaml", _text(GOOD))

    async with raw_server(root, tmp_path / "server.log", modern=modern) as server:
        assert server.process.stdin is not None
        await server.process.stdin.send(line + b"\n")
        with anyio.fail_after(CASE_TIMEOUT_SECONDS):  # before the fix: no answer, ever
            answer = json.loads(await server.stdout.receive_until(b"\n", 1 << 20))
        pong = await server.request("tools/list" if modern else "ping", {})

    assert answer["jsonrpc"] == "2.0" and answer["id"] == request_id, answer
    if code is None:
        assert "result" in answer, answer
    else:
        assert answer["error"]["code"] == code and "JSON-RPC 2.0" in answer["error"]["message"], answer
    assert pong == {} or pong["tools"], pong
    assert "Traceback" not in (tmp_path / "server.log").read_text()


HELD = "description: holds until the test lets it go\nsteps:\n  - {id: hold, type: script, run: 'while [ ! -e go ]; do sleep 0.02; done'}\n"


@pytest.mark.parametrize("modern", [False, True], ids=["2025-11-25", "2026-07-28"])
async def test_an_id_already_in_flight_is_refused_and_both_requests_are_answered(tmp_path: Path, modern: bool) -> None:
    root, _ = _project(tmp_path, "abilities/held.yaml", _text(HELD))
    meta = {"_meta": MODERN_ENVELOPE} if modern else {}

    async with raw_server(root, tmp_path / "server.log", modern=modern) as server:
        run = {"name": "ability_run", "arguments": {"name": "held", "wait_seconds": 60}, **meta}
        await server.send({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": run})
        await server.send({"jsonrpc": "2.0", "id": "7", "method": "tools/list", "params": meta})
        with anyio.fail_after(CASE_TIMEOUT_SECONDS):  # before the fix: the SDK took both for one id
            second = await server.read()
            (root / "go").touch()
            first = await server.read()
        await server.send({"jsonrpc": "2.0", "id": "7", "method": "tools/list", "params": meta})
        with anyio.fail_after(CASE_TIMEOUT_SECONDS):
            again = await server.read()

    assert second["id"] == "7" and second["error"]["code"] == -32600, second
    assert "already taken by a request still in flight" in second["error"]["message"], second
    assert first["id"] == 7 and first["result"]["structuredContent"]["status"] == "completed", first
    assert again["id"] == "7" and again["result"]["tools"], "an id is free again once it is answered"


# --- placeholders handed to commands that run their argument as code ------------------------------------------------

# (the step's command, what validate says: "warn" with the command's label, or "error" where it is refused outright)
EXECUTING = {
    "bash-norc-c": ("bash --norc -c 'echo {{inputs.x}}'", "warn", "sh -c"),
    "if-eval": ("if eval {{inputs.x}}; then echo y; fi", "warn", "eval"),
    "flock-c": ("flock /tmp/lock -c {{inputs.x}}", "warn", "flock -c"),
    "script-qec": ("script -qec {{inputs.x}} /dev/null", "warn", "script -c"),
    "pipe-to-sh": ("echo {{inputs.x}} | sh", "warn", "a shell reading a pipe (| sh)"),
    "pipe-to-bash": ("printf '%s ' {{inputs.x}} | bash", "warn", "a shell reading a pipe (| sh)"),
    "trap": ('trap "echo {{inputs.x}}" EXIT', "warn", "trap"),
    "python3-c": ('python3 -c "print({{inputs.x}})"', "warn", "python -c"),
    "awk-system": ("awk 'BEGIN{system(\"{{inputs.x}}\")}'", "warn", "awk system()"),
    "awk-v-system": ("awk -v v={{inputs.x}} 'BEGIN{system(v)}'", "warn", "awk system()"),
    "perl-e": ("perl -e {{inputs.x}}", "warn", "perl -e"),
    "node-e": ("node -e {{inputs.x}}", "warn", "node -e"),
    "ssh-after-if": ('if ssh host "{{inputs.x}}"; then :; fi', "warn", "ssh"),
    "eval": ("eval {{inputs.x}}", "error", "runs its argument as shell code"),
    "sh-c": ("sh -c {{inputs.x}}", "error", "runs its argument as shell code"),
    "xargs-sh-c": ("echo a | xargs sh -c {{inputs.x}}", "error", "runs its argument as shell code"),
    "find-exec-sh-c": ("find . -exec sh -c {{inputs.x}} \\;", "error", "runs its argument as shell code"),
    "ssh-host": ('ssh host "{{inputs.x}}"', "error", "runs its argument as shell code"),
    "data-only-echo-pipe-to-a-hash": ("echo {{inputs.x}} | sha256sum", "ok", ""),
    "data-only-grep-e": ("grep -e {{inputs.x}} README", "ok", ""),
}


@pytest.mark.parametrize("case", list(EXECUTING), ids=list(EXECUTING))
def test_validate_warns_where_a_value_reaches_a_command_that_runs_it_as_code(tmp_path: Path, case: str) -> None:
    command, verdict, words = EXECUTING[case]
    ability = f"description: d\ninputs:\n  x: {{type: string}}\nsteps:\n  - id: go\n    type: script\n    run: {json.dumps(command)}\n"
    root, target = _project(tmp_path, "abilities/risky.yaml", _text(ability))

    as_json = _cli(root, target, "validate", "--json", "risky")
    plain = _cli(root, target, "validate", "risky")

    [report] = json.loads(as_json.stdout)["files"]
    messages = [w["message"] for w in report["warnings"]]
    if verdict == "warn":
        assert as_json.returncode == 0 and plain.returncode == 0 and report["valid"], report  # it still loads
        [message] = messages
        assert report["warnings"][0]["path"] == "steps[0].run"
        assert f"step 'go' passes {{{{inputs.x}}}} to {words} (" in message and repr(command) in message, message
        assert "runs it as code" in message and "$ABILITIES_INPUT_X" in message, message
        assert f"warn  steps[0].run: step 'go' passes {{{{inputs.x}}}} to {words}" in plain.stdout, plain.stdout
    elif verdict == "error":
        assert as_json.returncode == 1 and not report["valid"] and not messages, report
        assert words in report["errors"][0]["message"]
    else:
        assert as_json.returncode == 0 and report["valid"] and not messages, report
        assert "\nwarn " not in plain.stdout, plain.stdout


async def test_ability_validate_carries_the_warnings_in_the_file_entry(root: Path, client: Client) -> None:
    (root / "abilities" / "risky.yaml").write_text(
        "description: d\ninputs:\n  x: {type: string}\nsteps:\n  - {id: go, type: script, run: 'echo {{inputs.x}} | sh'}\n"
    )

    result = await client.call_tool("ability_validate", {"name": "risky"})

    [entry] = result.structured_content["files"]
    assert entry["valid"] and result.structured_content["valid"]
    assert entry["warnings"][0]["path"] == "steps[0].run" and "(| sh)" in entry["warnings"][0]["message"]
