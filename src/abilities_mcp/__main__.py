"""The `abilities-mcp` command (and `python -m abilities_mcp`).

`hook CLIENT EVENT`, the form the clients' configs call on every tool call, goes straight to the hook: no
argparse, no server imports (it must start fast). Everything else is cli/main.py.
"""

import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if len(args) == 3 and args[0] == "hook":
        from .clients.hook import main as hook

        return hook(args[1], args[2])
    from .cli.main import main as cli

    return cli(args)


if __name__ == "__main__":
    raise SystemExit(main())
