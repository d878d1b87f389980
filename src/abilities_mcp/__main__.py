"""The `abilities-mcp` command (and `python -m abilities_mcp`).

`hook CLIENT EVENT [--root ROOT] [--url URL]`, the form the clients' configs call on every tool call, goes straight
to the hook (with `--url`, team mode: to the team server, clients/remote.py): no argparse, no server imports (it must
start fast), and, run as a command, no interpreter teardown after its answer (`_exit_now`). Everything else is
cli/main.py.
"""

import os
import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["hook"] and (hooked := _hook_args(args[1:])):
        client, event, options = hooked
        if "--url" in options:  # team mode: the team server decides (clients/remote.py)
            from .clients.remote import main as remote

            return remote(client, event, options["--url"], root=options.get("--root"))
        from .clients.hook import main as hook

        code = hook(client, event, root=options.get("--root"))
        return _exit_now(code) if argv is None else code  # (a caller that passes argv goes on after the answer)
    from .cli.main import main as cli

    return cli(args)


def _exit_now(code: int) -> int:
    """The hook's process ends as soon as its answer is out: the interpreter's teardown (every module freed, the
    state file's connection closed, which checkpoints and syncs its WAL when no server holds it open) would cost
    the client milliseconds on every tool call and decides nothing. Whatever the hook wrote to the state file is
    committed already, and SQLite takes a WAL left behind as it takes one after a crash. Not while a span waits
    for the exporter's flush at exit (tracing.py), nor when an answer cannot be flushed: then the usual exit."""
    from .tracing import exporting

    if exporting():
        return code
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return code
    os._exit(code)


# The hook's options: the project init pins (`--root`), the team server that decides (`--url`, team mode).
HOOK_OPTIONS = ("--root", "--url")


def _hook_args(args: list[str]) -> tuple[str, str, dict[str, str]] | None:
    """CLIENT EVENT, then any of `--root ROOT` and `--url URL` (or `--root=ROOT`, `--url=URL`), each at most once;
    None for any other form, which argparse reads (and refuses, if it must)."""
    if len(args) < 2:
        return None
    options: dict[str, str] = {}
    rest = args[2:]
    while rest:
        word = rest.pop(0)
        option, equals, value = word.partition("=")
        if option not in HOOK_OPTIONS or option in options:
            return None
        if not equals:
            if not rest:
                return None
            value = rest.pop(0)
        if not value:
            return None
        options[option] = value
    return args[0], args[1], options


if __name__ == "__main__":
    raise SystemExit(main())
