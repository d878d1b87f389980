"""An upstream's environment and why it failed: it starts with a bare environment, and an `env` entry written
`${VAR:-}` (what `gateway add --env VAR` writes) passes VAR on only when it is set; an edit that passes one on is
an edit of the launch, which waits for trust; an upstream that fails the usual ways (a server written for the mcp
1.x SDK, a certificate or proxy variable it never got) is named with its stderr and the fix in plain words; and a
`tools refresh` that cannot list every server writes nothing, so no cache with 0 tools replaces a good one."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from abilities_mcp.gateway.config import Upstream, lowerings, parse_gateway
from abilities_mcp.gateway.hints import fix
from abilities_mcp.server.app import create_server
from abilities_mcp.state.project import Project
from support import CLI, REPO
from upstream_servers import SQLITE, everything_server

CLI_TIMEOUT_SECONDS = 120
PASSED = {"SSL_CERT_FILE": "${SSL_CERT_FILE:-}", "HTTPS_PROXY": "${HTTPS_PROXY:-}", "MODE": "ro"}

# mcp-server-sqlite 2025.4.25 started by `uvx mcp-server-sqlite` (it gets mcp 2.x), as its stderr ends.
OLD_SDK_TAIL = """  File "/home/you/.cache/uv/archive-v0/x/lib/python3.11/site-packages/mcp_server_sqlite/server.py", line 173
    @server.list_resources()
     ^^^^^^^^^^^^^^^^^^^^^
AttributeError: 'Server' object has no attribute 'list_resources'
"""
# uvx fetching a package behind a company CA it was not told about.
TLS_TAIL = """error: Failed to fetch: https://pypi.org/simple/mcp-server-sqlite/
  cause: client error (Connect)
  cause: invalid peer certificate: UnknownIssuer
"""
# npx behind a proxy it was not told about.
PROXY_TAIL = "npm error code ENOTFOUND\nnpm error request to https://registry.npmjs.org/x failed, reason: getaddrinfo\n"


def test_the_documented_sqlite_command_runs_what_the_tests_run() -> None:
    """docs/gateway.md's `gateway add sqlite` is the server tests/upstream_servers.py installs: the same release with
    the same SDK (uv is not on the CI machine; the tests build that environment with pip)."""
    package, version, sdk = SQLITE
    page = (REPO / "docs" / "gateway.md").read_text()
    added = [line for line in page.splitlines() if line.startswith("$ abilities-mcp gateway add sqlite")]

    assert any(f"-- uvx --with '{sdk}' {package}@{version} --db-path" in line for line in added), added
    assert f'"args": ["--with", "{sdk}", "{package}@{version}"' in page  # gateway.json's example
    assert f"pip install -q {package}=={version} '{sdk}'" in page  # and the way without uv


def config(env: dict[str, str], environ: dict[str, str], root: Path = Path("/p")) -> Any:
    data = {"mcpServers": {"db": {"command": "uvx", "args": ["mcp-server-sqlite"], "env": env}}}
    return parse_gateway(root / "gateway.json", (json.dumps(data).encode(), []), root, environ)


def upstream(command: str = "uvx", *args: str, env: dict[str, str] | None = None) -> Upstream:
    return Upstream("sqlite", command, args, env or {}, None, None, {}, 60.0)


def test_a_passed_on_variable_reaches_the_upstream_when_set_and_is_left_out_when_not() -> None:
    set_here = config(PASSED, {"SSL_CERT_FILE": "/etc/ca.pem"}).upstreams["db"]
    unset = config(PASSED, {}).upstreams["db"]
    empty = config(PASSED, {"HTTPS_PROXY": ""}).upstreams["db"]

    assert set_here.env == {"SSL_CERT_FILE": "/etc/ca.pem", "MODE": "ro"}
    assert unset.env == {"MODE": "ro"}  # not SSL_CERT_FILE="": an empty one breaks TLS where an unset one does not
    assert empty.env == {"MODE": "ro"}
    # Only a value that is exactly ${VAR:-} is left out; a default or a literal empty value still goes.
    other = config({"A": "${A:-x}", "B": "", "C": "pre${C:-}"}, {}).upstreams["db"]
    assert other.env == {"A": "x", "B": "", "C": "pre"}


def test_passing_a_set_variable_on_is_an_edit_of_the_launch_that_waits_for_trust() -> None:
    environ = {"NODE_OPTIONS": "--require ./evil.js"}
    trusted = config({"MODE": "ro"}, environ)

    edited = config({"MODE": "ro", "NODE_OPTIONS": "${NODE_OPTIONS:-}"}, environ)

    assert lowerings(trusted, edited) == [
        "upstream 'db' re-pointed (its command, arguments, environment, folder, url or headers)"
    ]


async def test_the_upstream_gets_the_variables_passed_on_and_no_other_of_this_servers(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("ABILITIES_TEST_NOT_PASSED", "1")
    monkeypatch.delenv("NO_PROXY", raising=False)
    env = {"HTTPS_PROXY": "${HTTPS_PROXY:-}", "NO_PROXY": "${NO_PROXY:-}"}
    server = {"command": str(everything_server()), "args": ["stdio"], "env": env}
    (project.root / "gateway.json").write_text(json.dumps({"mcpServers": {"everything": server}}))

    async with Client(create_server(project)) as client:
        result = await client.call_tool("tool_call", {"tool": "get-env", "arguments": {}})

    assert not result.is_error, result.content
    seen = json.loads(result.structured_content["text"])
    assert seen["HTTPS_PROXY"] == "http://proxy.example:3128"
    assert "NO_PROXY" not in seen and "ABILITIES_TEST_NOT_PASSED" not in seen


def test_a_server_written_for_the_old_sdk_is_told_how_to_pin_it() -> None:
    said = fix(upstream("uvx", "mcp-server-sqlite", "--db-path", "./shop.db"), OLD_SDK_TAIL, {})

    assert "written for the MCP Python SDK 1.x" in said
    assert "`uvx --with 'mcp<2' mcp-server-sqlite --db-path ./shop.db`" in said
    # Not started by uvx: how to install it with the SDK it needs.
    assert "pip install 'mcp<2'" in fix(upstream("/opt/sqlite/bin/mcp-server-sqlite"), OLD_SDK_TAIL, {})


def test_a_certificate_or_proxy_failure_names_the_variables_this_server_has_and_how_to_pass_them() -> None:
    environ = {"SSL_CERT_FILE": "/etc/ca.pem", "HTTPS_PROXY": "http://proxy:3128"}

    tls = fix(upstream(), TLS_TAIL, environ)
    proxy = fix(upstream("npx"), PROXY_TAIL, environ)

    assert "could not verify a TLS certificate" in tls and "bare environment" in tls
    assert '"env": {"SSL_CERT_FILE": "${SSL_CERT_FILE:-}"}' in tls and "--env SSL_CERT_FILE" in tls
    assert "could not reach the network" in proxy and '{"HTTPS_PROXY": "${HTTPS_PROXY:-}"}' in proxy
    # Passed on already, or no proxy here: a network failure is not blamed on the environment.
    assert fix(upstream("npx", env={"HTTPS_PROXY": "x"}), PROXY_TAIL, environ) == ""
    assert fix(upstream("npx"), PROXY_TAIL, {}) == ""
    assert fix(upstream(), "some other failure\n", environ) == ""


def refresh(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, "--root", str(root), "tools", "refresh"], capture_output=True, text=True, timeout=CLI_TIMEOUT_SECONDS
    )


def fake_uvx(root: Path, stderr: str) -> dict[str, Any]:
    """The entry of `uvx mcp-server-sqlite` where uvx is a script that writes `stderr` and exits before the
    handshake, as mcp-server-sqlite does when uvx gives it mcp 2.x."""
    (root / "bin").mkdir()
    script = root / "bin" / "uvx"
    script.write_text(f"#!/bin/sh\ncat >&2 <<'EOF'\n{stderr}EOF\nexit 1\n")
    script.chmod(0o755)
    return {"command": "uvx", "args": ["mcp-server-sqlite"], "env": {"PATH": f"{root / 'bin'}:/usr/bin:/bin"}}


def test_a_refresh_whose_upstream_fails_says_why_in_plain_words_and_writes_no_empty_cache(root: Path) -> None:
    (root / "gateway.json").write_text(json.dumps({"mcpServers": {"sqlite": fake_uvx(root, OLD_SDK_TAIL)}}))

    done = refresh(root)

    assert done.returncode == 1
    assert "Upstream server 'sqlite' failed to start" in done.stderr
    assert "AttributeError: 'Server' object has no attribute 'list_resources'" in done.stderr  # its stderr's tail
    assert "Pin the SDK it needs" in done.stderr and "uvx --with 'mcp<2' mcp-server-sqlite" in done.stderr
    assert "Nothing written" in done.stderr
    assert not (root / ".opencode" / "agent-skill-tools.json").exists()


def test_a_refresh_that_cannot_list_every_server_leaves_the_cache_as_it_was(root: Path) -> None:
    cache = root / ".opencode" / "agent-skill-tools.json"
    cache.parent.mkdir()
    good = '{"version": "1.0.0", "mcp_servers": ["sqlite"], "tool_count": 6, "categories": {}}\n'
    cache.write_text(good)
    (root / "gateway.json").write_text(json.dumps({"mcpServers": {"sqlite": {"command": "/nonexistent/server"}}}))

    done = refresh(root)

    assert done.returncode == 1
    assert "cannot run '/nonexistent/server'" in done.stderr
    assert f"{cache} is left as it was" in done.stderr
    assert cache.read_text() == good
