"""`abilities-mcp events`: the skill events the server recorded, filtered, with their counters."""

from __future__ import annotations

import argparse
import json
import time

from ..durations import parse_duration
from ..state import skill_events
from ..state.project import Project
from ..state.store import Store
from .inert import inert


def events(project: Project, args: argparse.Namespace) -> int:
    """Print the newest events (oldest first) and the counters over the same filters."""
    since = time.time() - parse_duration(args.since) if args.since else None
    store = Store.open(project)
    try:
        found = skill_events.events(store, args.kind, args.session, args.run, since, args.limit)
        totals = skill_events.counters(store, args.session, since)
    finally:
        store.close()
    if args.json:
        print(json.dumps({"events": found, "counters": totals}, indent=2, ensure_ascii=False))
        return 0
    for event in found:
        when = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(event.pop("at")))
        kind, session, run = event.pop("kind"), event.pop("session_id"), event.pop("run_id")
        where = f"session {session}" + (f", run {run}" if run else "")
        print(f"{when}  {kind:20} {inert(where)}  {inert(json.dumps(event, ensure_ascii=False))}")
    if not found:
        print("No skill events yet.")
    print("  ".join(f"{name} {count}" for name, count in totals.items()))
    return 0
