"""`abilities-mcp ui`: the local page, served on 127.0.0.1 to the person at this terminal.

It runs under the same person check as `approve` (an agent's tools are refused, exit 2), listens on loopback only,
prints one line, `Open http://127.0.0.1:PORT/s/PREFIX/login?token=TOKEN`, and serves until Ctrl-C or SIGTERM (exit
0). The token and the page's path prefix live in this process's memory only; the token works once and for 10 minutes,
the prefix as long as the process (ui/auth.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator

import uvicorn

from ..state.project import Project
from . import person

EXIT_USAGE = 2
# Only loopback: the page is for the person at this machine.
HOST = "127.0.0.1"
# After a stop signal, open connections get this long to finish before they are cut.
GRACE_SECONDS = 3
# Connections the kernel queues before the server accepts them.
BACKLOG = 64
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def serve_page(project: Project, args: argparse.Namespace, harden: Callable[[], None]) -> int:
    """Check the person, bind, print the link, serve until a stop signal."""
    if (why := person.refusal()) is not None:
        print(
            f"abilities-mcp: refused: {why}. The page is opened by a person typing `abilities-mcp ui` in their own "
            "terminal; an agent's tools cannot open it.",
            file=sys.stderr,
        )
        return EXIT_USAGE
    harden()  # the token and the prefix are in this process's memory: closed to other processes of the user
    try:
        sock = _listen(args.port)
    except OSError as exc:
        taken = " (taken by another program)" if exc.errno == errno.EADDRINUSE else ""
        print(
            f"abilities-mcp: cannot listen on {HOST}:{args.port}{taken}: {exc.strerror}. Choose another --port, or "
            "leave it out for a free one.",
            file=sys.stderr,
        )
        return EXIT_USAGE
    from ..ui.app import create_app
    from ..ui.auth import Gate

    gate = Gate(sock.getsockname()[1])
    stopping = threading.Event()
    server = _Server(_config(create_app(project, gate, session_ttl=args.session_ttl, stopping=stopping)), stopping)
    with server.stopped_by_signals():  # before the link shows: a stop sent once it is read must end it cleanly
        print(f"Open {gate.login_url()}", flush=True)
        asyncio.run(server.serve(sockets=[sock]))
    return 0


def _listen(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, port))
        sock.listen(BACKLOG)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(False)
    return sock


def _config(app) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        log_level="warning",  # the terminal shows the link, then only what goes wrong
        access_log=False,
        lifespan="off",
        proxy_headers=False,  # nothing sits in front of it: a forwarded-for header is a lie
        server_header=False,
        ws="none",
        timeout_graceful_shutdown=GRACE_SECONDS,
    )


class _Server(uvicorn.Server):
    """uvicorn's server, stopped by SIGINT, SIGTERM or SIGHUP and then exiting 0 (uvicorn's own handlers raise the
    signal again once it stopped, which would end the process by it). A second signal cuts open connections."""

    def __init__(self, config: uvicorn.Config, stopping: threading.Event):
        super().__init__(config)
        self.stopping = stopping

    @contextlib.contextmanager
    def stopped_by_signals(self) -> Iterator[None]:
        previous = {sig: signal.signal(sig, self._stop) for sig in STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # stopped_by_signals holds them, from before the link is printed

    def _stop(self, signum: int, frame: object) -> None:
        self.force_exit = self.should_exit
        self.should_exit = True
        self.stopping.set()  # the event streams end, so their connections close
