"""Whose call is this? The session of a tool call that reaches the server without one, told by the client's hook;
and which sessions the client's hooks observe.

OpenCode sends `tools/call` with no session id, and one OpenCode process serves all its sessions through one
connection; but it runs its plugin's `tool.execute.before` (which waits for `abilities-mcp hook opencode
tool-before`) before it sends the call. So the hook announces the call in the state file: session, tool (this
server's name for it), a hash of the arguments, the client process and the time. The server, given a call with no
session id, claims the newest unclaimed announcement of the same tool with the same arguments from the same client
process, and files the call under that session. One announcement answers one call; unclaimed ones are forgotten
after CLAIM_WINDOW_SECONDS, and the table never holds more than MAX_ANNOUNCED rows.

The hook also marks a session as observed when it sees the session call this server's workflow_record or
workflow_check (mark_observed): the client runs the hooks in that session, so every tool call of it passes them,
and a prerequisite it ran is recorded as seen. The server then refuses a self-report under enforce there
(server/workflow_tools.py). The mark is honest both ways: only a hook that runs can set it (disabled hooks mark
nothing), and the hook runs before the call it marks for reaches the server, so the server's answer to that very
call already knows.

Stdlib only: the hook runs this on every call to this server's tools.
"""

from __future__ import annotations

import json
import time
import weakref

from .database import Database

# typing's TYPE_CHECKING without importing typing: the hook would pay milliseconds for it on every call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# An announced call is claimable this long: the client may ask a person for permission between hook and call.
CLAIM_WINDOW_SECONDS = 600.0
# The table's bound, whatever the clients do: the oldest rows go first.
MAX_ANNOUNCED = 1000
# An observed session's mark is kept this long: past a session's records (24 hours unless configured, sessions.py).
OBSERVED_FOR_SECONDS = 7 * 86400.0

Client = tuple[int, int] | None  # the client process (pid, start time) as owners.client_of finds it
# For each open SQLite state file, its data_version (SQLite's count of other connections' commits) when call_claims
# was last seen empty: until another process writes, a call without a session id costs one pragma, not a query.
_EMPTY_AT: weakref.WeakKeyDictionary[Database, int] = weakref.WeakKeyDictionary()


def arguments_hash(arguments: Any) -> str:
    """The same for the same JSON arguments however they were written (key order, spacing); {} for none."""
    canonical = json.dumps(arguments or {}, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    from .audit import sha256_hex  # CPython's own SHA-256: hashlib would load OpenSSL, milliseconds on a hook call

    return sha256_hex(canonical.encode("utf-8", "surrogatepass"))[:32]


def announce(
    db: Database, session_id: str, tool: str, arguments: Any, client: Client, now: float | None = None
) -> None:
    """The hook saw `session_id` about to call this server's `tool` with `arguments`."""
    now = time.time() if now is None else now
    pid, start = client or (None, None)
    _EMPTY_AT.pop(db, None)  # this connection's own writes leave its data_version as it was
    with db.transaction() as conn:
        conn.execute("DELETE FROM call_claims WHERE at < ?", (now - CLAIM_WINDOW_SECONDS,))
        conn.execute(
            "INSERT INTO call_claims (session_id, tool, args_hash, client_pid, client_start, at) VALUES (?,?,?,?,?,?)",
            (session_id, tool, arguments_hash(arguments), pid, start, now),
        )
        conn.execute(
            "DELETE FROM call_claims WHERE id <= (SELECT id FROM call_claims ORDER BY id DESC LIMIT 1 OFFSET ?)",
            (MAX_ANNOUNCED,),
        )


def claim(db: Database, tool: str, arguments: Any, client: Client, now: float | None = None) -> str | None:
    """The session of the newest unclaimed announcement of this call (same tool, same arguments, same client
    process when both sides know it), which it uses up; None when there is none."""
    now = time.time() if now is None else now
    pid, start = client or (None, None)
    version = db.data_version()  # None on PostgreSQL: other servers write there, so every call looks
    if version is not None and _EMPTY_AT.get(db) == version:  # the table was empty, and nobody has written since
        return None
    match = (tool, arguments_hash(arguments), now - CLAIM_WINDOW_SECONDS, pid, pid, start)
    if db.db.execute(_NEWEST, match).fetchone() is None:  # most calls: nothing announced, so no write lock taken
        if version is not None and db.db.execute("SELECT 1 FROM call_claims LIMIT 1").fetchone() is None:
            _EMPTY_AT[db] = version
        return None
    with db.transaction() as conn:  # found: claimed under the write lock, which another server may race us for
        row = conn.execute(_NEWEST, match).fetchone()
        if row is None:
            return None
        conn.execute("DELETE FROM call_claims WHERE id=?", (row["id"],))
        return row["session_id"]


_NEWEST = (
    "SELECT id, session_id FROM call_claims WHERE tool=? AND args_hash=? AND at >= ? "
    "AND (client_pid IS NULL OR ? IS NULL OR (client_pid=? AND client_start=?)) "
    "ORDER BY at DESC, id DESC LIMIT 1"
)


def mark_observed(db: Database, session_id: str, client: str, now: float | None = None) -> None:
    """The client's hook saw `session_id` call this server's workflow tools: its hooks run in that session. Read
    before write: a session marked already costs one query, no write lock."""
    if observed(db, session_id):
        return
    now = time.time() if now is None else now
    with db.transaction() as conn:
        conn.execute("DELETE FROM observed_sessions WHERE at < ?", (now - OBSERVED_FOR_SECONDS,))
        conn.execute(
            "INSERT OR REPLACE INTO observed_sessions (session_id, client, at) VALUES (?,?,?)",
            (session_id, client, now),
        )


def observed(db: Database, session_id: str) -> bool:
    """Whether a client's hook marked this session as one whose tool calls it sees."""
    row = db.db.execute("SELECT 1 FROM observed_sessions WHERE session_id=?", (session_id,)).fetchone()
    return row is not None
