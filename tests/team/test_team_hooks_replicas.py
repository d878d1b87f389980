"""A team hook sees a live run owned by a replica on another host: its step gate holds while that replica's lock is
held, whatever the pids of the answering machine say, and lifts once the lock is gone (the run's owner is dead)."""

from __future__ import annotations

from contextlib import closing

import psycopg
import pytest
from test_team_hooks import AGENT_STEP, TOKENS, ask, bash, decision

from abilities_mcp.cli.team_hooks import hook_endpoint
from abilities_mcp.state.project import Project
from abilities_mcp.state.replicas import lock_space
from abilities_mcp.state.store import Store
from postgres_support import wait_for_backend_exit
from support import trust_project
from team_support import team_client, team_server

pytestmark = pytest.mark.anyio

# A pid no process here has (above the kernel's pid_max), a replica key no replica here took: another host's.
ELSEWHERE_PID, ELSEWHERE_REPLICA = 2**23 + 1, 97531


async def test_a_run_owned_on_another_host_gates_the_callers_bash_while_its_replica_holds_its_lock(
    root, write, postgres_url
):
    write("think", AGENT_STEP)
    project = Project.resolve(root, state=postgres_url)
    trust_project(project)
    async with team_server(project, TOKENS, hook=hook_endpoint) as origin:
        async with team_client(origin, "alice_token", mode="legacy") as alice:
            run = await alice.call_tool("ability_run", {"name": "think"}, meta={"sessionID": "s1"})
            run_id = run.structured_content["run_id"]
            assert decision(await ask(origin, "alice_token", "PreToolUse", bash("s1"))) == "deny"

            with closing(Store(postgres_url)) as store, psycopg.connect(postgres_url, autocommit=True) as elsewhere:
                space = lock_space(store.db.database, store.db.schema)
                elsewhere.execute("SELECT pg_advisory_lock(%s, %s)", (space, ELSEWHERE_REPLICA))
                backend = elsewhere.info.backend_pid
                # the run moved to a replica on another machine (as a take-over writes it)
                store.db.execute(
                    "UPDATE runs SET owner_pid=?, owner_start=?, owner_replica=?, owner_host=? WHERE run_id=?",
                    (ELSEWHERE_PID, 1, ELSEWHERE_REPLICA, "another-host:1", run_id),
                )
                assert decision(await ask(origin, "alice_token", "PreToolUse", bash("s1"))) == "deny"
            # that replica is gone (its lock with its connection): the run's owner is dead, its gate no longer holds
            wait_for_backend_exit(postgres_url, backend)
            assert decision(await ask(origin, "alice_token", "PreToolUse", bash("s1"))) == "allow"
