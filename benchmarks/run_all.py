"""Run every benchmark one after the other (never together: they would share the cores), showing their detail as
it comes, then print their final lines together.

    .venv/bin/python benchmarks/run_all.py [--quick]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHMARKS = (
    "startup.py",
    "roundtrip.py",
    "script_steps.py",
    "routing_bench.py",
    "hook_latency.py",
    "audit_cost.py",
    "gateway_roundtrip.py",
    "tool_routing.py",
    "team_load.py",
    "failover.py",
)
# Result lines say "NAME: ratio …"; a benchmark without one (routing quality) is summed up by its last line.
RESULT_MARK = ": ratio "


def run(script: str, quick: bool) -> tuple[list[str], int]:
    """Run one benchmark, echoing its output; returns its result lines and exit code."""
    command = [sys.executable, str(HERE / script), *(["--quick"] if quick else [])]
    results, last = [], ""
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            print(line, end="", flush=True)
            last = line.rstrip("\n") or last
            if RESULT_MARK in line:
                results.append(line.rstrip("\n"))
    if not results and last:
        results.append(last)
    if proc.returncode:
        results.append(f"{script}: FAILED with exit code {proc.returncode}")
    return results, proc.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="pass --quick to every benchmark")
    args = parser.parse_args()
    lines, failed = [], 0
    for script in BENCHMARKS:
        results, code = run(script, args.quick)
        lines += results
        failed = failed or code
    print("\n" + "\n".join(lines))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
