"""The systemd unit docs/team.md ships (deploy/abilities-mcp.service) starts a team server `abilities-mcp` accepts, as
a user of its own, with its secrets from a file and not its command line."""

from __future__ import annotations

import configparser
import os
import re
import shlex
import shutil
import subprocess

import pytest

from abilities_mcp.cli.parser import build_parser
from abilities_mcp.server.http import Listen
from support import REPO

UNIT = REPO / "deploy" / "abilities-mcp.service"
# What /etc/abilities-mcp.env would hold, for the ${VAR}s systemd expands in ExecStart.
ENVIRONMENT = {"ABILITIES_ISSUER": "https://login.example.com", "ABILITIES_PUBLIC_URL": "https://abilities.example.com"}


def service() -> configparser.SectionProxy:
    unit = configparser.ConfigParser(strict=False, interpolation=None, comment_prefixes=("#", ";"))
    unit.optionxform = str  # systemd's keys are case-sensitive
    unit.read_string(UNIT.read_text())
    return unit["Service"]


def test_the_units_command_is_a_team_server_the_cli_accepts() -> None:
    words = shlex.split(re.sub(r"\$\{(\w+)\}", lambda m: ENVIRONMENT[m.group(1)], service()["ExecStart"]))
    assert words[0].endswith("/abilities-mcp")
    args = build_parser().parse_args(words[1:])
    assert args.command == "serve" and args.issuer == ENVIRONMENT["ABILITIES_ISSUER"]
    listen = Listen.parse(args.http, args.public_url)
    assert listen.host == "127.0.0.1" and listen.public_url == ENVIRONMENT["ABILITIES_PUBLIC_URL"]  # TLS in front


def test_the_unit_runs_as_its_own_user_with_its_secrets_in_a_file() -> None:
    unit = service()
    assert unit["User"] not in ("", "root") and unit["EnvironmentFile"] == "/etc/abilities-mcp.env"
    assert "SECRET" not in unit["ExecStart"] and "CLIENT_ID" not in unit["ExecStart"]
    assert unit["Restart"] == "on-failure" and unit["NoNewPrivileges"] == "yes"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_reads_the_unit_without_complaint(tmp_path) -> None:
    copy = tmp_path / UNIT.name
    copy.write_text(UNIT.read_text())
    found = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(copy)], capture_output=True, text=True, env=dict(os.environ)
    )
    problems = [line for line in found.stderr.splitlines() if UNIT.name in line and "/opt/abilities-mcp" not in line]
    assert not problems, found.stderr
