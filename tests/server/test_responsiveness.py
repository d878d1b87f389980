"""Loading and checking the project's files happens off the event loop: a huge or slow ability file holds up
the call that needs it, never the others (issue 16: a 10,000-step ability kept even ping waiting 22 s)."""

from __future__ import annotations

import threading

import anyio
from mcp import Client

import abilities_mcp.abilities.catalog as catalog_module
from abilities_mcp.server import create_server
from support import until

# How long the stalled load waits to be released; the test releases it as soon as the other call answered.
STALL_SECONDS = 20


async def test_a_slow_ability_load_does_not_hold_up_other_calls(project, write, monkeypatch) -> None:
    write("a", "description: a\nsteps:\n  - {id: s, type: script, run: 'true'}\n")
    entered, release = threading.Event(), threading.Event()
    real = catalog_module.load_in_force

    def stalled(*args, **kwargs):
        entered.set()
        release.wait(STALL_SECONDS)  # were this on the event loop, nothing else could answer meanwhile
        return real(*args, **kwargs)

    monkeypatch.setattr(catalog_module, "load_in_force", stalled)
    answered: list[str] = []
    async with Client(create_server(project)) as client:
        async with anyio.create_task_group() as tg:

            async def listing() -> None:
                await client.call_tool("ability_list", {})
                answered.append("ability_list")

            tg.start_soon(listing)
            await until(entered.is_set)
            await client.call_tool("ability_history", {})
            answered.append("ability_history")
            release.set()

    assert answered == ["ability_history", "ability_list"]
