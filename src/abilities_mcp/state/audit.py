"""The audit trail: every gate decision, record, answer, trust change and refusal, appended to one table of the
state database, each entry chained to the one before it by a SHA-256 hash, so that an edited, deleted or inserted row
is found.

An entry's hash covers its id, its fields and the previous entry's hash; `audit_chain` holds the head (the last entry
and its hash: a tail cut off is found too) and, once old entries are pruned, the anchor (the last pruned entry and its
hash, which the remaining chain starts from). Writers append inside the caller's transaction where there is one,
else their own: `Database.transaction` serializes writers (SQLite's BEGIN IMMEDIATE, an advisory lock on PostgreSQL),
so "read the head, append the next" holds across processes and replicas.

What the chain proves, and what not (docs/state.md): an accidental or partial edit, a deleted or inserted row, is
named by `verify`; someone who can write the database can still recompute every hash from the row they changed on.
Exporting the head hash elsewhere (`abilities-mcp audit --verify --json`) is what catches that.

Retention: $ABILITIES_AUDIT_DAYS (default and floor 90 days; 0 keeps everything), or `audit --prune --days N`, which
may keep more, never less; never a project file, which an agent can edit. Stdlib only, and no hashlib (OpenSSL's
load would cost the hook): the hook appends to it.
"""

from __future__ import annotations

import json
import os
import sys
import time

from ..records import Record
from .acting import ACTING

# typing's TYPE_CHECKING without importing typing: the hook would pay milliseconds for it on every call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# The fields of an entry after its id, in the order they are hashed and stored.
FIELDS = ("at", "kind", "session_id", "client", "tool", "verdict", "rule", "reason", "actor", "channel", "detail")
# What an entry is about.
KINDS = ("gate", "record", "answer", "approval", "trust", "refused")
# The hash the first entry follows.
GENESIS = "0" * 64
# A reason is kept this long: a gate's message names every missing step, never pages of text.
MAX_REASON_CHARS = 2000
RETENTION_ENV = "ABILITIES_AUDIT_DAYS"
DEFAULT_RETENTION_DAYS = 90.0
# Old entries are pruned once every this many appends (and by `audit --prune`): a DELETE on every hook would cost.
PRUNE_EVERY = 500

_COLUMNS = "id, " + ", ".join(FIELDS) + ", prev, hash"


class Entry(Record, fields="id at kind session_id client tool verdict rule reason actor channel detail prev hash"):
    """One entry of the trail as stored."""

    __slots__ = ()

    id: int
    at: float
    kind: str
    session_id: str | None
    client: str | None
    tool: str | None
    verdict: str | None
    rule: str | None
    reason: str | None
    actor: str | None
    channel: str | None
    detail: str | None  # JSON text
    prev: str
    hash: str

    def as_dict(self) -> dict[str, Any]:
        """The entry for `--json`: detail parsed."""
        out = self._asdict()
        out["detail"] = json.loads(self.detail) if self.detail else None
        return out


class Broken(Record, fields="entry at problem"):
    """The first entry where the chain does not hold, and what is wrong with it."""

    __slots__ = ()

    entry: int
    at: float | None
    problem: str


def append(database: Any, kind: str, *, at: float | None = None, **fields: Any) -> int:
    """Append one entry (`kind` one of KINDS; `fields` among FIELDS, `detail` any JSON value) chained to the head;
    returns its id. In the caller's transaction when one is open. `actor` defaults to who the call acts for."""
    unknown = set(fields) - set(FIELDS)
    if unknown or kind not in KINDS:
        raise ValueError(f"audit entry {kind!r} with unknown fields {sorted(unknown)}; use {KINDS} and {FIELDS}")
    values = {name: fields.get(name) for name in FIELDS}
    values.update(at=time.time() if at is None else at, kind=kind)
    values["actor"] = values["actor"] if values["actor"] is not None else ACTING.get()
    if values["reason"] is not None:
        values["reason"] = str(values["reason"])[:MAX_REASON_CHARS]
    if values["detail"] is not None:
        values["detail"] = json.dumps(values["detail"], sort_keys=True, default=str)
    with database.transaction() as db:
        entry_id, prev = _next(db)
        digest = sha256_hex(_canonical(entry_id, values, prev).encode())
        db.execute(
            f"INSERT INTO audit_log ({_COLUMNS}) VALUES ({', '.join('?' * (len(FIELDS) + 3))})",
            (entry_id, *(values[name] for name in FIELDS), prev, digest),
        )
        _set(db, "head", entry_id, digest)
        if entry_id % PRUNE_EVERY == 0:
            prune(database, retention_days())
    return entry_id


def _next(db: Any) -> tuple[int, str]:
    """The next entry's id and the hash it follows: the head's; the last row's if the head row is gone."""
    head = db.execute("SELECT entry, hash FROM audit_chain WHERE name='head'").fetchone()
    last = db.execute("SELECT id, hash FROM audit_log ORDER BY id DESC LIMIT 1").fetchone()
    if head is None and last is None:
        anchor = db.execute("SELECT entry, hash FROM audit_chain WHERE name='anchor'").fetchone()
        return (1, GENESIS) if anchor is None else (int(anchor[0]) + 1, anchor[1])
    top = max(int(head[0]) if head else 0, int(last[0]) if last else 0)
    return top + 1, (head or last)[1]


def _set(db: Any, name: str, entry: int, digest: str) -> None:
    db.execute("DELETE FROM audit_chain WHERE name=?", (name,))
    db.execute("INSERT INTO audit_chain (name, entry, hash) VALUES (?, ?, ?)", (name, entry, digest))


def _canonical(entry_id: int, values: dict[str, Any], prev: str) -> str:
    """What an entry's hash covers: its id, every field and the previous hash, as compact JSON."""
    row = [entry_id, *(values[name] for name in FIELDS), prev]
    return json.dumps(row, separators=(",", ":"), ensure_ascii=False)


def hash_of(entry: Entry) -> str:
    """The hash an entry's content gives (what `verify` compares with the stored one)."""
    values = entry._asdict()
    values["at"] = float(values["at"])
    return sha256_hex(_canonical(int(entry.id), values, entry.prev).encode())


def sha256_hex(data: bytes) -> str:
    """SHA-256 from CPython's own C module: hashlib loads OpenSSL first, 3 to 7 ms on a hook call that writes."""
    try:
        if sys.version_info >= (3, 12):  # (a module that is not there costs a search of every path entry)
            from _sha2 import sha256
        else:
            from _sha256 import sha256
    except ImportError:  # a build without them
        from hashlib import sha256
    return sha256(data).hexdigest()


def retention_days(flag: float | None = None) -> float:
    """How many days entries are kept: `flag` (the CLI's --days), else $ABILITIES_AUDIT_DAYS, else 90; 0 keeps
    everything. Either may lengthen it, never shorten it below the 90 days: whoever starts a command chooses its
    flags and environment, an agent's shell too, and the trail is what says what that agent was allowed. Never a
    project file: the project is the agent's to edit, the trail is not."""
    chosen: float | None = flag
    if chosen is None:
        try:
            chosen = float(os.environ.get(RETENTION_ENV) or DEFAULT_RETENTION_DAYS)
        except ValueError:
            chosen = DEFAULT_RETENTION_DAYS
    if chosen <= 0:
        return 0.0
    return max(chosen, DEFAULT_RETENTION_DAYS)


def prune(database: Any, days: float) -> int:
    """Delete the entries older than `days` (0: none), recording the last deleted one as the anchor the remaining
    chain starts from; returns how many were deleted."""
    if days <= 0:
        return 0
    cutoff = time.time() - days * 86400
    with database.transaction() as db:
        found = db.execute("SELECT max(id) FROM audit_log WHERE at < ?", (cutoff,)).fetchone()[0]
        if found is None:
            return 0
        last = db.execute("SELECT id, hash FROM audit_log WHERE id=?", (found,)).fetchone()
        _set(db, "anchor", int(last[0]), last[1])
        return db.execute("DELETE FROM audit_log WHERE id <= ?", (found,)).rowcount


def entries(
    database: Any, since: float | None = None, session: str | None = None, limit: int | None = None
) -> list[Entry]:
    """The entries in order, from `since` (a time) and of one session when given; the newest `limit` of them."""
    where, args = [], []
    if since is not None:
        where, args = [*where, "at >= ?"], [*args, since]
    if session is not None:
        where, args = [*where, "session_id = ?"], [*args, session]
    sql = f"SELECT {_COLUMNS} FROM audit_log" + (" WHERE " + " AND ".join(where) if where else "")
    if limit is not None:
        sql = f"SELECT * FROM ({sql} ORDER BY id DESC LIMIT {int(limit)}) AS newest"
    rows = database.db.execute(sql + " ORDER BY id", args).fetchall()
    return [_entry(row) for row in rows]


def _entry(row: Any) -> Entry:
    values = list(row)
    values[0], values[1] = int(values[0]), float(values[1])
    return Entry(*values)


def verify(database: Any) -> tuple[int, Broken | None]:
    """Walk the chain from its anchor: how many entries hold, and the first broken one (None: intact)."""
    db = database.db
    anchor = db.execute("SELECT entry, hash FROM audit_chain WHERE name='anchor'").fetchone()
    head = db.execute("SELECT entry, hash FROM audit_chain WHERE name='head'").fetchone()
    top = None if head is None else int(head[0])
    before, expected = (int(anchor[0]), anchor[1]) if anchor else (0, GENESIS)
    count, last = 0, None
    for row in db.execute(f"SELECT {_COLUMNS} FROM audit_log ORDER BY id"):
        entry = _entry(row)
        problem = _problem(entry, before, top)
        if not problem and entry.prev != expected:
            if last is None:  # the anchor, or the first entry's link, was changed
                problem = f"it is not chained to where the trail starts (after entry #{before}): rewritten"
            else:  # this entry is whole: the one before changed since it was chained to it
                return count - 1, Broken(
                    last.id,
                    last.at,
                    f"entry #{entry.id} was chained to another version of it: rewritten, its hash recomputed",
                )
        if problem:
            return count, Broken(entry.id, entry.at, problem)
        before, expected, last, count = entry.id, entry.hash, entry, count + 1
    if top is not None and (last is None or (last.id, last.hash) != (top, head[1])):
        if last is not None and last.id == top:
            return count - 1, Broken(last.id, last.at, "it is not the entry the trail's head names: rewritten")
        gone = f"#{before + 1}" + (f" to #{top}" if top > before + 1 else "")
        where = f"after entry #{last.id}" if last is not None else "before any entry"
        return count, Broken(
            before + 1, None, f"missing: the trail ends {where}, but its head is #{top}: {gone} deleted"
        )
    return count, None


def _problem(entry: Entry, before: int, top: int | None) -> str:
    """What is wrong with one entry on its own, following entry `before`; empty when nothing."""
    if entry.id <= before:
        return f"it lies before the start of the chain (entry #{before}): inserted"
    if top is not None and entry.id > top:
        return f"it comes after the trail's head (entry #{top}): inserted"
    if hash_of(entry) != entry.hash:
        return "its content does not match its hash: edited"
    if entry.id != before + 1:
        missing = f"#{before + 1}" + (f" to #{entry.id - 1}" if entry.id - 1 > before + 1 else "")
        return f"the entry before it is missing: {missing} deleted"
    return ""
