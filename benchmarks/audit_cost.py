"""Audit trail cost: the hook's gated calls with the trail written (the product as it ships) against the same calls
with `state.audit.append` made a no-op (a sitecustomize on the off arm's PYTHONPATH), interleaved, in one run.

    .venv/bin/python benchmarks/audit_cost.py [--quick]

    deny    PreToolUse mcp__pg__execute_query in a session with nothing recorded: denied by workflows.json (1 entry)
    record  PostToolUse mcp__pg__list_databases, each round in a fresh session: recorded (1 entry)

The ratio is on-median over off-median per call (1.00: no cost); printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import isolated_env, log, ms, spread

HERE = Path(__file__).resolve().parent
WORKFLOWS = HERE.parent / "workflows.json"
ROUNDS, QUICK_ROUNDS = 40, 8
CALL_TIMEOUT_S = 30.0
NO_TRAIL = "import abilities_mcp.state.audit as a\na.append = lambda *args, **kwargs: 0\n"
CASES = {
    "deny": ("PreToolUse", lambda n: {"session_id": "bench-empty", "tool_name": "mcp__pg__execute_query"}),
    "record": (
        "PostToolUse",
        lambda n: {"session_id": f"bench-{n}", "tool_name": "mcp__pg__list_databases", "tool_response": "ok"},
    ),
}


def timed(root: Path, env: dict[str, str], event: str, payload: dict) -> float:
    argv = [sys.executable, "-m", "abilities_mcp", "hook", "claude", event, "--root", str(root)]
    body = json.dumps({"hook_event_name": event, "tool_input": {}, **payload})
    start = time.perf_counter()
    done = subprocess.run(argv, input=body, capture_output=True, text=True, env=env, timeout=CALL_TIMEOUT_S)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"hook {event} failed: {done.stderr}")
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    rounds = QUICK_ROUNDS if parser.parse_args().quick else ROUNDS
    with tempfile.TemporaryDirectory() as tmp:
        root, off_path = Path(tmp) / "project", Path(tmp) / "off"
        root.mkdir()
        off_path.mkdir()
        (root / "workflows.json").write_text(WORKFLOWS.read_text())
        (off_path / "sitecustomize.py").write_text(NO_TRAIL)
        on = isolated_env(Path(tmp) / "home")
        on["ABILITIES_STATE_DIR"] = str(Path(tmp) / "state")
        off = {**on, "PYTHONPATH": str(off_path)}
        lines = []
        for name, (event, payload) in CASES.items():
            samples: dict[str, list[float]] = {"on": [], "off": []}
            timed(root, on, event, payload(-1))  # the state file created, the caches warm
            for n in range(rounds):
                for arm, env in (("on", on), ("off", off)):
                    samples[arm].append(timed(root, env, event, payload(f"{arm}-{n}")))
            for arm in samples:
                log(f"  {name:6} trail {arm:3}  {spread(samples[arm])}")
            mine, base = statistics.median(samples["on"]), statistics.median(samples["off"])
            lines.append(
                f"audit {name}: ratio {mine / base:.2f} (trail on / off, no goal) median {ms(mine)} ms vs "
                f"{ms(base)} ms over {rounds} calls"
            )
    for line in lines:
        log(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
