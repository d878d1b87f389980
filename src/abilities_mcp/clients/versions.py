"""The client versions CI drives for real, pinned once: the real-client tests install them, `doctor` compares."""

from __future__ import annotations

from typing import NamedTuple


class Pin(NamedTuple):
    """A client as npm ships it: the package, the version CI verifies, the command it installs, its name."""

    package: str
    version: str
    binary: str
    label: str

    @property
    def install(self) -> str:
        """The command that installs exactly this version (pinned: on Node 20 npm silently picks an older Claude
        Code, whose 2.1.330 declares Node >= 22 and runs on 20)."""
        return f"npm install -g {self.package}@{self.version}"


# init's client name -> the version tests/clients/test_<client>.py drive headless on every CI run. Cursor, VS Code
# and Claude Desktop have none: no CLI in the package registries that a test could drive.
VERIFIED: dict[str, Pin] = {
    "claude": Pin("@anthropic-ai/claude-code", "2.1.330", "claude", "Claude Code"),
    "opencode": Pin("opencode-ai", "1.18.33", "opencode", "OpenCode"),
    "codex": Pin("@openai/codex", "0.169.0", "codex", "Codex"),
    "gemini": Pin("@google/gemini-cli", "0.61.0", "gemini", "Gemini CLI"),
}
