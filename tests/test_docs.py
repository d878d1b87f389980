"""The README and docs/ say what the code does: links resolve, examples load, transcripts run as shown.

Each page's fenced blocks are checked by their kind: `yaml` blocks are abilities `validate` accepts, `json` blocks
parse (a workflows.json one validates too), `console` blocks run in a copy of the repository's project files and
print what the page shows. A comment right above a block changes how it is checked:
`<!-- doc-test: init CLIENT FILE [contains] -->` (the block is what `init CLIENT` writes into FILE),
`<!-- doc-test: setup: COMMAND -->` (run before the block), `<!-- doc-test: not run: WHY -->`,
`<!-- doc-test: settings|gateway -->` (a JSON block `validate` must accept as abilities-mcp.json or gateway.json).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import NamedTuple

import pytest

from support import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
# The names a transcript may use for the project folder; the test's copy of the project stands in for them.
PROJECT_NAMES = ("/home/you/demo", "/repo")
# What a JSON block marked `<!-- doc-test: KIND -->` is, for `validate`.
FILES = {"settings": "abilities-mcp.json", "gateway": "gateway.json", "workflows": "workflows.json"}
MARKER = re.compile(r"<!--\s*doc-test:\s*(.*?)\s*-->")
LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)\)")
RUN_ID = re.compile(r"run_\d{8}_[0-9a-f]{8}")
MILLISECONDS = re.compile(r"\(\d+ ms\)")
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?[+-]\d\d:\d\d")


class Block(NamedTuple):
    page: Path
    line: int  # of the opening fence, 1-based
    kind: str
    text: str
    marker: str  # the doc-test comment right above, or ""

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    found: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        fence = re.match(r"^(`{3,})(\S*)", lines[i])
        if not fence:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith(fence.group(1)))
        above = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = MARKER.fullmatch(above.strip())
        found.append(
            Block(page, i + 1, fence.group(2), "\n".join(lines[i + 1 : end]), marker.group(1) if marker else "")
        )
        i = end + 1
    return found


def prose(page: Path) -> str:
    """The page without its fenced blocks and inline code, where links are links."""
    text = re.sub(r"^(`{3,}).*?^\1", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (underscores and hyphens kept), spaces to hyphens."""
    kept = "".join(c for c in heading.strip().lower() if c in " -_" or unicodedata.category(c)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    headings = re.findall(r"^#{1,6}\s+(.*?)\s*#*$", prose(page), flags=re.M)
    return {slug(h) for h in headings}


ALL_BLOCKS = [b for page in PAGES for b in blocks(page)]


def of_kind(*kinds: str) -> list[Block]:
    return [b for b in ALL_BLOCKS if b.kind in kinds and not b.marker.startswith("not run")]


# --- links -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_link_leads_to_a_file_and_heading_that_exist(page: Path) -> None:
    broken = []
    for target in LINK.findall(prose(page)):
        if re.match(r"[a-z]+:", target):
            continue  # the web
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no file {dest}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading '{anchor}' in {dest.name} (has {sorted(anchors(dest))})")
    assert not broken, f"{page.name}: " + "; ".join(broken)


def test_the_readme_links_every_docs_page_and_every_page_links_back() -> None:
    readme_links = {(REPO / t.partition("#")[0]).resolve() for t in LINK.findall(prose(REPO / "README.md"))}
    for page in (REPO / "docs").glob("*.md"):
        assert page.resolve() in readme_links, f"README.md does not link {page.relative_to(REPO)}"
        assert "](../README.md)" in page.read_text(), f"{page.name} does not link back to the README"


def test_slugs_follow_githubs_rule() -> None:
    assert slug("Hooks: the gates on the client's own tools") == "hooks-the-gates-on-the-clients-own-tools"
    assert slug("What no agent tool may touch, in any session") == "what-no-agent-tool-may-touch-in-any-session"
    assert slug("`ability_run` and friends") == "ability_run-and-friends"


# --- the README's two commands -------------------------------------------------------------------------------------


def test_the_readme_test_command_is_the_one_ci_runs() -> None:
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    command = re.search(r"^# Run the tests.*\n(.+)$", readme, flags=re.M).group(1)
    assert command in ci.splitlines(), f"README's test command {command!r} is not a line of .ci/run"


def test_the_readme_server_command_serves_this_repository() -> None:
    readme = (REPO / "README.md").read_text()
    command = re.search(r"^# Run the server.*\n(.+)$", readme, flags=re.M).group(1)
    assert command.endswith(".venv/bin/abilities-mcp --root ."), command  # tests/server/test_smoke.py starts it


# --- yaml and json ------------------------------------------------------------------------------------------------


@pytest.fixture
def shim(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH finds `abilities-mcp` as this interpreter's, as the pages type it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "abilities-mcp"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m abilities_mcp "$@"\n')
    script.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def validate(root: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["abilities-mcp", "--root", str(root), "validate"], env=env, capture_output=True, text=True, timeout=60
    )


def test_every_yaml_example_is_an_ability_validate_accepts(tmp_path: Path, shim: dict[str, str]) -> None:
    examples = of_kind("yaml")
    assert examples, "the docs have no ability example"
    root = tmp_path / "project"
    (root / "abilities").mkdir(parents=True)
    for i, block in enumerate(examples):
        (root / "abilities" / f"example-{i}.yaml").write_text(block.text)
    result = validate(root, shim)
    names = {f"example-{i}": b.name for i, b in enumerate(examples)}
    assert result.returncode == 0, "\n".join(
        [f"{names.get(m, m)}: {line}" for m, line in _errors(result.stdout)] or [result.stdout + result.stderr]
    )


def _errors(output: str) -> list[tuple[str, str]]:
    found, current = [], ""
    for line in output.splitlines():
        if line.startswith("ERROR"):
            current = line.split()[2]
        elif line.startswith("      ") and current:
            found.append((current, line.strip()))
    return found


def test_every_json_example_parses_and_a_workflows_json_one_validates(tmp_path: Path, shim: dict[str, str]) -> None:
    for block in of_kind("json"):
        try:
            data = json.loads(block.text)
        except json.JSONDecodeError as e:
            pytest.fail(f"{block.name}: not JSON: {e}")
        workflows = isinstance(data, dict) and any(isinstance(v, dict) and "prerequisites" in v for v in data.values())
        file = "workflows.json" if workflows else FILES.get(block.marker)
        if file:
            root = tmp_path / block.name.replace("/", "_").replace(":", "_")
            root.mkdir()
            (root / file).write_text(block.text)
            result = validate(root, shim)
            assert result.returncode == 0, f"{block.name}: {result.stdout}{result.stderr}"


# --- what init writes ----------------------------------------------------------------------------------------------

INIT_BLOCKS = [b for b in ALL_BLOCKS if b.marker.startswith("init ")]


def test_every_client_has_its_init_files_shown() -> None:
    shown = {b.marker.split()[1] for b in INIT_BLOCKS}
    assert shown == {"claude", "opencode", "cursor", "vscode", "codex", "gemini", "desktop"}


@pytest.mark.parametrize("block", INIT_BLOCKS, ids=lambda b: b.marker)
def test_the_files_shown_for_a_client_are_what_init_writes(block: Block, tmp_path: Path, shim: dict[str, str]) -> None:
    _, client, file, *how = block.marker.split()
    # Claude Desktop's entry holds absolute paths: the page shows them for /home/you, so the test lays that out.
    home = tmp_path / "home" / "you"
    root, local_bin = home / "proj", home / ".local" / "bin"
    root.mkdir(parents=True)
    local_bin.mkdir(parents=True)
    shutil.copy(Path(shim["PATH"].split(os.pathsep)[0]) / "abilities-mcp", local_bin / "abilities-mcp")
    env = {**shim, "PATH": f"{local_bin}{os.pathsep}{shim['PATH']}", "XDG_CONFIG_HOME": str(home / ".config")}
    command = ["abilities-mcp", "init", client, "--command", "abilities-mcp", "--root", str(root)]
    result = subprocess.run(command, env=env, cwd=root, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    written = (home / ".config" / file) if client == "desktop" else (root / file)
    text = written.read_text().replace(str(tmp_path), "")
    if how == ["contains"]:
        assert block.text in text, f"{block.name}: {file} does not contain the lines shown"
    else:
        assert text.strip() == block.text.strip(), f"{block.name}: init {client} wrote:\n{text}"


# --- console transcripts -------------------------------------------------------------------------------------------

CONSOLE_BLOCKS = of_kind("console")


class Command(NamedTuple):
    line: str
    expected: list[str]


def commands(block: Block) -> list[Command]:
    found: list[Command] = []
    for line in block.text.splitlines():
        if line.startswith("$ "):
            found.append(Command(line[2:], []))
        elif found:
            found[-1].expected.append(line)
    return found


def normalize(text: str, root: Path) -> str:
    text = text.replace(str(root), "/home/you/demo")
    text = MILLISECONDS.sub("(N ms)", RUN_ID.sub("run_…", TIMESTAMP.sub("T", text)))
    return text.rstrip()


def matches(expected: list[str], actual: list[str]) -> bool:
    """Line by line; `…` in a line stands for any text, a line of only `…` for any number of lines."""
    if not expected:
        return not actual
    if expected[0].strip() == "…":
        return any(matches(expected[1:], actual[i:]) for i in range(len(actual) + 1))
    if not actual:
        return False
    pattern = ".*".join(re.escape(part) for part in expected[0].split("…"))
    return re.fullmatch(pattern, actual[0]) is not None and matches(expected[1:], actual[1:])


def test_there_are_transcripts_to_run() -> None:
    assert len(CONSOLE_BLOCKS) >= 3


@pytest.mark.parametrize("block", CONSOLE_BLOCKS, ids=lambda b: b.name)
def test_each_transcript_prints_what_the_page_shows(block: Block, tmp_path: Path, shim: dict[str, str]) -> None:
    root = tmp_path / "demo"
    root.mkdir()
    for name in ("abilities", "skills"):
        shutil.copytree(REPO / name, root / name)
    shutil.copy(REPO / "workflows.json", root / "workflows.json")
    env = {**shim, "ABILITIES_ROOT": str(root)}
    if block.marker.startswith("setup:"):
        subprocess.run(["sh", "-c", block.marker[len("setup:") :]], cwd=root, env=env, check=True, timeout=60)
    steps = commands(block)
    assert steps, f"{block.name}: a console block with no `$ ` command"
    # One shell for the block, so `echo $?` sees the command before it; a marker line splits the outputs.
    script = "".join(
        f"{_localize(step.line, root)}\n__rc=$?; printf '\\n@@doc-test rc=%d@@\\n' $__rc; (exit $__rc)\n"
        for step in steps
    )
    result = subprocess.run(["bash", "-c", script], cwd=root, env=env, capture_output=True, text=True, timeout=300)
    parts = re.split(r"\n?@@doc-test rc=(\d+)@@\n", result.stdout)  # output, rc, output, rc, ..., rest
    for i, step in enumerate(steps):
        actual = normalize(parts[2 * i], root).splitlines()
        expected = [normalize(line, root) for line in step.expected]
        assert matches(expected, actual), (
            f"{block.name}: `{step.line}` printed:\n" + "\n".join(actual) + f"\nstderr: {result.stderr[-2000:]}"
        )
        shown_failing = i + 1 < len(steps) and steps[i + 1].line.strip() == "echo $?"
        assert parts[2 * i + 1] == "0" or shown_failing, (
            f"{block.name}: `{step.line}` exited {parts[2 * i + 1]} without the page showing it: {result.stderr[-2000:]}"
        )


def _localize(command: str, root: Path) -> str:
    for name in PROJECT_NAMES:
        command = command.replace(name, str(root))
    return command.replace(".venv/bin/abilities-mcp", "abilities-mcp")


# --- every command a page shows -------------------------------------------------------------------------------------

# A command line that runs abilities-mcp, however the page spells the program: a path to it, the venv's, uvx's.
PROGRAM = re.compile(r"^(?:\S*/)?abilities-mcp$")
SHELL_KINDS = ("bash", "sh", "shell", "console", "text", "")


def shown_commands() -> list[tuple[str, list[str]]]:
    """(where, arguments) for each abilities-mcp command in a page's shell-like blocks, placeholders left as they
    stand: a command is `PROGRAM ARGS…` up to a shell operator or a comment, after a `$ ` prompt in a transcript."""
    import shlex

    found = []
    for block in ALL_BLOCKS:
        if block.kind not in SHELL_KINDS:
            continue
        for n, line in enumerate(block.text.splitlines(), start=block.line + 1):
            text = line[2:] if block.kind == "console" and line.startswith("$ ") else line
            if block.kind == "console" and not line.startswith("$ "):
                continue
            try:
                words = shlex.split(text, comments=True)
            except ValueError:
                continue
            for i, word in enumerate(words):
                starts = i == 0 or words[i - 1] in ("&&", "||", ";", "|", "exec") or words[i - 2 : i - 1] == ["--from"]
                if PROGRAM.match(word) and starts:
                    rest = words[i + 1 :]
                    cut = next((j for j, w in enumerate(rest) if w in ("&&", "||", ";", "|", ">", "2>&1")), len(rest))
                    found.append((f"{block.page.relative_to(REPO)}:{n}", rest[:cut]))
    return found


COMMANDS = shown_commands()
# Words that stand for a value the reader chooses.
PLACEHOLDERS = re.compile(r"[A-Z][A-Z_]*|run_…|…|<[^>]+>|\[.*\]|.*\|.*")


def test_pages_show_commands_to_check() -> None:
    assert len(COMMANDS) > 30, COMMANDS


@pytest.mark.parametrize(("where", "words"), COMMANDS, ids=[w for w, _ in COMMANDS])
def test_every_command_a_page_shows_is_one_the_cli_takes(where: str, words: list[str]) -> None:
    from abilities_mcp.cli.parser import parse_args

    if any(PLACEHOLDERS.fullmatch(w) for w in words if not w.startswith("-")) and "--" not in words:
        words = [w if not PLACEHOLDERS.fullmatch(w) else "x" for w in words]  # a placeholder parses as a value
    try:
        parse_args(words)
    except SystemExit as exc:
        pytest.fail(f"{where}: `abilities-mcp {' '.join(words)}` is not a command the CLI takes (exit {exc.code})")
