"""The local page hosted by the server process itself, for a client that asks a person by URL: started on 127.0.0.1
the first time a question needs it, under the connection's lifespan, and stopped with it.

A client that declares URL-mode elicitation but no forms (server/forms.py `ask_by_url`) is sent a one-time login
link to the waiting page's item for the run's question. The app is ui/'s (`create_app`, with a Gate of its own: a
fresh secret prefix, no printed link), served by uvicorn inside this event loop; the link's token is minted in that
Gate, in memory only, and lands on a target fixed here, never on one the request names. Nothing is printed: stdout
is the protocol; uvicorn logs through the process's logging (stderr), warnings only.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import anyio
from anyio.abc import TaskGroup

from ..state.project import Project

if TYPE_CHECKING:
    from ..ui.auth import Gate

log = logging.getLogger(__name__)
HOST = "127.0.0.1"  # loopback only: the page is for the person at this machine
# Open connections get this long to finish once the server stops.
GRACE_SECONDS = 1
BACKLOG = 64


class PageHost:
    """The page this server process serves, on demand: `link(run_id)` starts it the first time."""

    def __init__(self, project: Project, tg: TaskGroup):
        self.project, self._tg = project, tg
        self.gate: Gate | None = None
        self._server: Any = None
        self._stopping = threading.Event()
        self._lock = anyio.Lock()

    async def link(self, run_id: str) -> tuple[str, str]:
        """A one-time login link (and its token) that lands on the waiting page's item for `run_id`."""
        gate = await self._started()
        token = gate.mint(f"/waiting#ask-{quote(run_id, safe='')}")
        return gate.link(token), token

    def revoke(self, token: str) -> None:
        if self.gate is not None:
            self.gate.revoke(token)

    async def _started(self) -> Gate:
        async with self._lock:
            if self.gate is None:
                await self._start()
            assert self.gate is not None
            return self.gate

    async def _start(self) -> None:
        import uvicorn  # only a client that asks by URL pays for the page

        from ..ui.app import create_app
        from ..ui.auth import Gate

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind((HOST, 0))
            sock.listen(BACKLOG)
        except OSError:
            sock.close()
            raise
        sock.set_inheritable(False)  # no step process inherits it
        gate = Gate(sock.getsockname()[1], printed_link=False)
        config = uvicorn.Config(
            create_app(self.project, gate, stopping=self._stopping),
            log_config=None,  # the process's own logging (stderr), never stdout
            log_level="warning",
            access_log=False,
            lifespan="off",
            proxy_headers=False,
            server_header=False,
            ws="none",
            timeout_graceful_shutdown=GRACE_SECONDS,
        )

        class Server(uvicorn.Server):
            def capture_signals(self) -> contextlib.AbstractContextManager[None]:
                return contextlib.nullcontext()  # the process's signals are the MCP server's: left alone

        server = Server(config)
        started = anyio.Event()

        async def serve() -> None:
            try:
                await server.serve(sockets=[sock])
            except Exception:  # the page is one channel of several: the terminal still answers
                log.exception("the page for URL elicitation stopped")
            finally:
                sock.close()
                started.set()

        self._tg.start_soon(serve)
        while not server.started and not started.is_set():
            await anyio.sleep(0.01)
        if not server.started:
            raise OSError("the page did not start")
        self._server, self.gate = server, gate

    def stop(self) -> None:
        """Stop serving (the connection ends): the event streams end, open connections close."""
        self._stopping.set()
        if self._server is not None:
            self._server.should_exit = True
