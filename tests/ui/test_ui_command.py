"""`abilities-mcp ui` at a person's terminal (a real pseudo-terminal): one printed line, the login link under the
page's secret prefix, served on 127.0.0.1 and usable once, nothing answering outside the prefix; refused with exit 2
for an agent's shell (a pipe, an agent's environment) or a taken port; SIGTERM and Ctrl-C end it with exit 0."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx2 as httpx
import pytest

from abilities_mcp.cli import person
from support import Terminal, cli

# How long the command may take to start (a Python start, the state file) or to stop, on 2 busy cores.
SETTLE_SECONDS = 30
# Open http://127.0.0.1:PORT/s/PREFIX/login?token=TOKEN: groups 1 the origin, 2 the port, 3 the page's address (its
# prefix), 4 the prefix, 5 the token.
LINK = re.compile(r"Open ((http://127\.0\.0\.1:(\d+))/s/([\w-]{22})/)login\?token=([\w-]{43})")


def _person_env(**extra: str) -> dict[str, str]:
    """This environment without what agent clients give their tools' commands: a person's own shell."""
    return {**{k: v for k, v in os.environ.items() if k not in person.AGENT_ENV}, **extra}


@pytest.fixture
def started(root: Path) -> Iterator[tuple[Terminal, re.Match[str]]]:
    term = Terminal(cli(root, "ui"), root, env=_person_env())
    line = term.expect("\n", SETTLE_SECONDS).splitlines()[0]
    found = LINK.fullmatch(line)
    assert found, f"the first line is not the login link: {term.text!r}"
    yield term, found
    if term.proc.poll() is None:
        term.proc.kill()
        term.wait(SETTLE_SECONDS)


def _browser(home: str) -> httpx.Client:
    """A browser whose URLs are under the page's prefix (`home`, the printed link's address)."""
    return httpx.Client(base_url=home, follow_redirects=False, trust_env=False, timeout=SETTLE_SECONDS)


def test_it_prints_one_link_that_logs_in_once_and_sigterm_ends_it_with_exit_0(
    started: tuple[Terminal, re.Match[str]], tmp_path: Path
) -> None:
    term, link = started
    home, origin, prefix, token = link.group(1), link.group(2), link.group(4), link.group(5)
    with _browser(home) as browser:
        login = browser.get(f"login?token={token}")
        assert login.status_code == 303 and login.headers["location"] == f"/s/{prefix}/"
        assert f"HttpOnly; SameSite=Strict; Path=/s/{prefix}/" in login.headers["set-cookie"]
        assert '<table id="runs">' in browser.get("").text
        cookie = {"cookie": f"abilities_ui={browser.cookies['abilities_ui']}"}
        outside = browser.get(f"{origin}/", headers=cookie)  # what another server on 127.0.0.1 would be sent: none
        assert outside.status_code == 404 and outside.content == b""
        with _browser(home) as other:
            again = other.get(f"login?token={token}")
            assert again.status_code == 403 and "set-cookie" not in again.headers
            assert other.get("").status_code == 401
    assert _listening(int(link.group(3))) == {"127.0.0.1"}  # loopback only

    term.proc.send_signal(signal.SIGTERM)

    assert term.wait(SETTLE_SECONDS) == 0
    assert term.text.strip().splitlines() == [link.group(0)]  # exactly one line, the link
    secrets = (token.encode(), prefix.encode())
    written = [p for p in tmp_path.rglob("*") if p.is_file() and any(s in p.read_bytes() for s in secrets)]
    assert written == []  # neither the token nor the prefix ever touched the disk


def test_ctrl_c_at_the_terminal_ends_it_with_exit_0(started: tuple[Terminal, re.Match[str]]) -> None:
    term, link = started
    with _browser(link.group(1)) as browser:
        assert browser.get("").status_code == 401  # serving
    os.write(term.master, b"\x03")
    assert term.wait(SETTLE_SECONDS) == 0


def test_it_is_refused_with_exit_2_when_stdin_is_a_pipe(root: Path) -> None:
    done = subprocess.run(
        cli(root, "ui"), stdin=subprocess.PIPE, capture_output=True, text=True, env=_person_env(), timeout=60
    )
    assert done.returncode == 2
    assert "refused: stdin is not a terminal" in done.stderr and "abilities-mcp ui" in done.stderr
    assert done.stdout == ""  # no link


def test_it_is_refused_with_exit_2_in_an_agents_environment_even_at_a_terminal(root: Path) -> None:
    term = Terminal(cli(root, "ui"), root, env=_person_env(CLAUDECODE="1"))
    assert "refused: it runs with CLAUDECODE set" in term.expect("refused", SETTLE_SECONDS)
    assert term.wait(SETTLE_SECONDS) == 2
    assert "login?token=" not in term.text


def test_a_taken_port_is_refused_with_exit_2_and_a_free_one_is_used_as_asked(root: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        term = Terminal(cli(root, "ui", "--port", str(port)), root, env=_person_env())
        said = term.expect("--port", SETTLE_SECONDS)
        assert term.wait(SETTLE_SECONDS) == 2
    assert f"cannot listen on 127.0.0.1:{port} (taken by another program)" in said

    term = Terminal(cli(root, "ui", "--port", str(port)), root, env=_person_env())
    line = term.expect("\n", SETTLE_SECONDS).splitlines()[0]
    assert (found := LINK.fullmatch(line)) and found.group(3) == str(port), line
    term.proc.send_signal(signal.SIGTERM)
    assert term.wait(SETTLE_SECONDS) == 0


def _listening(port: int) -> set[str]:
    """The addresses a TCP socket listens on at `port`, whoever holds it (the command cannot be read through /proc:
    it makes itself undumpable)."""
    import psutil

    return {
        c.laddr.ip for c in psutil.net_connections("inet") if c.status == psutil.CONN_LISTEN and c.laddr.port == port
    }
