"""One ability file as the server enforces it: as written when a person trusted it or the edit only tightens; the
trusted version while an edit would lower a gate (lowering.py); the strictest reading while nobody trusted it.

The file is read once: the bytes compared with the trusted version are the bytes parsed, so a file swapped
between the two cannot be judged as one and run as the other.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from ..errors import Diagnostic
from ..state.trust import TrustStore, new_note, waiting_note
from .loader import Definition, load_definition, read_raw
from .lowering import lowerings

# What a file nobody trusted runs under: the strictest enforcement (a person answers every approval; one live run
# a session; the client's tools held to the step).
STRICTEST = {"enforcement": "strict"}


def load_in_force(path: Path, name: str, scope: str, trust: TrustStore) -> Definition:
    """The definition the server runs for this file, with its trust status and the note runs carry."""
    raw = read_raw(path)
    if isinstance(raw, str):  # never read it again to see why: a second read may find another file
        return Definition(name, path, scope, None, [Diagnostic(str(path), "", raw)])
    now = load_definition(path, name, scope, raw)
    if now.ability is None:
        return now  # it does not load: nothing runs, trusted or not; validate says why
    record = trust.record(path)
    if record is not None and hashlib.sha256(raw).hexdigest() == record.sha256:
        return now
    trusted_raw = trust.trusted(path) if record is not None else None
    then = load_definition(path, name, scope, trusted_raw) if trusted_raw is not None else None
    if then is None or then.ability is None:
        return _strictest(now, trust.key(path))  # nothing a person trusted loads: as good as new
    reasons = lowerings(then.ability, now.ability)
    if not reasons:
        now.trust = "tightened"
        return now
    return _noted(then, "waiting", waiting_note(trust.key(path), reasons))


def _strictest(definition: Definition, shown: str) -> Definition:
    """Nobody trusted this file: strict enforcement, so only a person answers its approvals."""
    ability = definition.ability
    assert ability is not None
    definition.ability = ability.model_copy(update={"settings": ability.settings.model_copy(update=STRICTEST)})
    return _noted(definition, "new", new_note(shown))


def _noted(definition: Definition, status: str, note: str) -> Definition:
    definition.trust, definition.trust_note = status, note
    if status == "waiting":  # validate says so; a file nobody trusted yet is no problem of the file (ability_list says)
        definition.warnings = [*definition.warnings, Diagnostic(str(definition.path), "", note)]
    return definition
