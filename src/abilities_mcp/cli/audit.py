"""`abilities-mcp audit`: the audit trail listed (readable or `--json`), its hash chain verified, old entries pruned."""

from __future__ import annotations

import argparse
import json
import sys
import time

from ..durations import parse_duration
from ..state import audit as trail
from ..state.database import Database
from ..state.project import Project
from .inert import inert

# A reason is shown on one line, cut to this many characters (`--json` has it whole).
REASON_CHARS = 160
EXIT_BROKEN = 1


def audit(project: Project, args: argparse.Namespace) -> int:
    """List, verify or prune, as the flags say."""
    database = Database.open(project)
    try:
        if args.verify:
            return verify(database, args.json)
        if args.prune:
            days = trail.retention_days(args.days)
            print(f"Pruned {trail.prune(database, days)} entries older than {days:g} days.")
            return 0
        since = time.time() - parse_duration(args.since) if args.since else None
        found = trail.entries(database, since, args.session, args.limit)
    finally:
        database.close()
    if args.json:
        print(json.dumps({"entries": [e.as_dict() for e in found]}, indent=2, ensure_ascii=False))
        return 0
    for entry in found:
        print(inert(line(entry)))
    if not found:
        print("No audit entries" + (" match." if args.since or args.session else " yet."))
    return 0


def line(entry: trail.Entry) -> str:
    """One entry on one line: #id, time, kind, verdict, tool, rule, who and channel, session, the reason."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(entry.at))
    parts = [f"#{entry.id}", when, f"{entry.kind:8}", f"{entry.verdict or '-':11}", entry.tool or "-"]
    if entry.rule:
        parts.append(f"[{entry.rule}]")
    who = " via ".join(p for p in (entry.actor, entry.channel) if p)
    if who:
        parts.append(f"by {who}" if entry.actor else f"via {who}")
    if entry.session_id:
        parts.append(f"session {entry.session_id}" + (f" ({entry.client})" if entry.client else ""))
    text = " ".join((entry.reason or "").split())
    if text:
        parts.append("— " + (text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"))
    return "  ".join(parts)


def verify(database: Database, as_json: bool) -> int:
    """Check the chain: "intact" and 0, or the first broken entry named and 1."""
    count, broken = trail.verify(database)
    head = database.db.execute("SELECT entry, hash FROM audit_chain WHERE name='head'").fetchone()
    if as_json:
        found = {
            "intact": broken is None,
            "entries": count,
            "head": None if head is None else {"entry": head[0], "hash": head[1]},
        }
        found["broken"] = None if broken is None else broken._asdict()
        print(json.dumps(found, indent=2))
    elif broken is None:
        print(f"audit trail intact: {count} entries" + (f", head #{head[0]} {head[1]}" if head else ""))
    else:
        when = "" if broken.at is None else time.strftime(" (%Y-%m-%d %H:%M:%S)", time.localtime(broken.at))
        print(f"audit trail broken at entry #{broken.entry}{when}: {broken.problem}", file=sys.stderr)
    return 0 if broken is None else EXIT_BROKEN
