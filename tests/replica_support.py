"""Replicas of a team server as real processes on one PostgreSQL state, for the failover tests and
benchmarks/failover.py: each is `serve_http` (what `abilities-mcp serve --http` runs) with the tests' token
verifier, so no OpenID provider is needed; killed with SIGKILL, cut from the database, started again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx2

TESTS = Path(__file__).resolve().parent
# What a replica process runs: the team server of the project at argv[1], state argv[2], port argv[3].
LAUNCH = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
from pathlib import Path
from abilities_mcp.server.http import serve_http
from abilities_mcp.state.project import Project
from team_support import Tokens, team_options
root, state, port = sys.argv[1:4]
serve_http(Project.resolve(Path(root), state=state), team_options(int(port)), verifier=Tokens(ada="ada", grace="grace"),
           retry_base=0.01)
"""
# How long a replica gets to answer once started (imports, the schema, the lock).
START_SECONDS = 30.0


class Replica:
    """One team server process; `origin` is its http://127.0.0.1:PORT."""

    def __init__(self, root: Path, state: str, port: int, log: Path):
        self.log = log
        self.origin = f"http://127.0.0.1:{port}"
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", LAUNCH, str(root), state, str(port)],
                cwd=root,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def ready(self) -> None:
        """Wait until it answers (its protected-resource metadata), or fail with what it printed."""
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the replica exited: {self.log.read_text()}")
            try:
                if httpx2.get(f"{self.origin}/.well-known/oauth-protected-resource/mcp", timeout=1).status_code == 200:
                    return
            except httpx2.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"the replica did not answer within {START_SECONDS} s: {self.log.read_text()}")

    def kill(self) -> None:
        """SIGKILL, as a crash or the OOM killer would."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
