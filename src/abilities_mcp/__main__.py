"""The `abilities-mcp` command (and `python -m abilities_mcp`).

`hook CLIENT EVENT [--root ROOT]`, the form the clients' configs call on every tool call, goes straight to the hook:
no argparse, no server imports (it must start fast). Everything else is cli/main.py.
"""

import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["hook"] and (hooked := _hook_args(args[1:])):
        from .clients.hook import main as hook

        client, event, root = hooked
        return hook(client, event, root=root)
    from .cli.main import main as cli

    return cli(args)


def _hook_args(args: list[str]) -> tuple[str, str, str | None] | None:
    """CLIENT EVENT, optionally followed by `--root ROOT` or `--root=ROOT` (the project init pins); None for any
    other form, which argparse reads (and refuses, if it must)."""
    if len(args) == 2:
        return args[0], args[1], None
    if len(args) == 4 and args[2] == "--root" and args[3]:
        return args[0], args[1], args[3]
    if len(args) == 3 and args[2].startswith("--root=") and len(args[2]) > len("--root="):
        return args[0], args[1], args[2].removeprefix("--root=")
    return None


if __name__ == "__main__":
    raise SystemExit(main())
