"""`abilities-mcp logs RUN [STEP]`: everything a run's steps printed that was kept (the first and last 24 KiB of
each stream, with the total size), made inert for the terminal."""

from __future__ import annotations

import argparse
import sys

from ..state.project import Project
from ..state.store import Store
from .inert import inert


def logs(project: Project, args: argparse.Namespace) -> int:
    store = Store(project.state_db)
    try:
        record = store.get_run(args.run_id)
        if record is None:
            print(f"abilities-mcp: no run {args.run_id!r}; `abilities-mcp history` lists the runs", file=sys.stderr)
            return 2
        steps = record.steps if args.step is None else [s for s in record.steps if s.step_id == args.step]
        if not steps:
            known = ", ".join(s.step_id for s in record.steps)
            print(f"abilities-mcp: run {record.run_id} has no step {args.step!r}; its steps: {known}", file=sys.stderr)
            return 2
        for step in steps:
            print(
                f"=== {step.step_id} ({step.type}, {step.status}"
                + (f", exit {step.exit_code}" if step.exit_code is not None else "")
                + ")"
            )
            for label, text, size in (
                ("stdout", step.output, step.output_bytes),
                ("stderr", step.stderr, step.stderr_bytes),
            ):
                if text:
                    kept = f"{size} bytes" if size is not None else "size unknown"
                    cut = ", head and tail kept" if "bytes truncated of" in text else ""
                    print(f"--- {label} ({kept}{cut})")
                    print(inert(text.rstrip("\n")))
            if step.child_run:
                print(f"--- a child run: abilities-mcp logs {step.child_run}")
        return 0
    finally:
        store.close()
