"""One small HTTP endpoint: ``/metrics``, ``/healthz``, ``/readyz``.

A plain asyncio server on the processor's event loop (no thread, no framework).
It answers ``GET`` and ``HEAD``, one request per connection, and bounds what it
reads from a client so a slow or hostile scraper cannot hold memory.

* ``/healthz`` (liveness): 200 while the processing loop is alive and has made
  progress recently; 503 once it died or stalled. A restart helps here.
* ``/readyz`` (readiness): 200 once the instance has joined the group and every
  assigned partition's sessions are restored; 503 before, while restoring, and
  while shutting down. A restart would not help here; waiting does.
* ``/metrics``: the Prometheus text format of the processor's registry.
* ``/sessions`` (``?halted=1``, ``?agent=GLOB``, ``?limit=N``) and
  ``/sessions/ID``: the sessions this instance holds, as JSON (when the owner
  passes a ``sessions`` view). ``streamguard sessions`` reads the whole
  fleet's from the changelog instead.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from urllib.parse import unquote

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

MAX_REQUEST_BYTES = 8192
READ_TIMEOUT_S = 5.0
WRITE_TIMEOUT_S = 10.0
"""How long a client may take to read its answer: one that never reads would otherwise
hold its handler and its body (a /sessions listing can be megabytes) for good."""

Probe = Callable[[], tuple[bool, str]]
# (path below /sessions, query) -> (status, JSON body)
SessionsView = Callable[[str, dict[str, str]], tuple[int, bytes]]


class HttpListener:
    """A plain asyncio HTTP listener on ``host:port`` (port 0: any free one).

    Subclasses answer connections in :meth:`_handle`; binding, the bound port and
    closing are here, once.
    """

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None

    async def start(self) -> int:
        """Bind and listen; returns the bound port (useful with port 0)."""
        self._server = await asyncio.start_server(
            self._handle, self.host, self.port, reuse_address=True
        )
        sockets = self._server.sockets or ()
        if sockets:
            self.port = int(sockets[0].getsockname()[1])
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            self._server = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError


class HealthServer(HttpListener):
    """Serves the three endpoints until :meth:`close`."""

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        liveness: Probe,
        readiness: Probe,
        host: str = "127.0.0.1",
        port: int = 0,
        sessions: SessionsView | None = None,
    ) -> None:
        super().__init__(host, port)
        self.registry = registry
        self.sessions = sessions
        self.liveness = liveness
        self.readiness = readiness

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(self._read_head(reader), READ_TIMEOUT_S)
            if head is None:
                await self._respond(writer, 400, b"bad request\n", "text/plain")
                return
            method, path = head
            if method not in ("GET", "HEAD"):
                await self._respond(writer, 405, b"method not allowed\n", "text/plain")
                return
            path, _, query = path.partition("?")
            if self.sessions is not None and (path == "/sessions" or path.startswith("/sessions/")):
                params: dict[str, str] = {}
                for item in unquote(query).split("&"):
                    if item:
                        name, sep, value = item.partition("=")
                        params[name] = value if sep else "1"
                status, body = self.sessions(unquote(path[len("/sessions") :].lstrip("/")), params)
                await self._respond(writer, status, body, "application/json", method == "HEAD")
            elif path == "/metrics":
                body = generate_latest(self.registry)
                await self._respond(writer, 200, body, CONTENT_TYPE_LATEST, method == "HEAD")
            elif path in ("/healthz", "/readyz"):
                probe = self.liveness if path == "/healthz" else self.readiness
                ok, detail = probe()
                text = (("ok" if ok else "unavailable") + (f": {detail}" if detail else "")) + "\n"
                await self._respond(
                    writer, 200 if ok else 503, text.encode(), "text/plain", method == "HEAD"
                )
            else:
                await self._respond(writer, 404, b"not found\n", "text/plain")
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    @staticmethod
    async def _read_head(reader: asyncio.StreamReader) -> tuple[str, str] | None:
        try:
            return await HealthServer._head(reader)
        except (ValueError, asyncio.LimitOverrunError):
            return None  # a line past the stream's limit: a bad request, not a traceback

    @staticmethod
    async def _head(reader: asyncio.StreamReader) -> tuple[str, str] | None:
        total = 0
        request_line = await reader.readline()
        total += len(request_line)
        parts = request_line.decode("latin-1").split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return None
        while True:  # drain headers, bounded
            line = await reader.readline()
            total += len(line)
            if total > MAX_REQUEST_BYTES:
                return None
            if line in (b"\r\n", b"\n", b""):
                break
        return parts[0], parts[1]

    @staticmethod
    async def _respond(
        writer: asyncio.StreamWriter,
        status: int,
        body: bytes,
        content_type: str,
        head_only: bool = False,
    ) -> None:
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}.get(
            status, "Service Unavailable"
        )
        header = (
            f"HTTP/1.1 {status} {reason}\r\n"
            f"Content-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n"
        ).encode("latin-1")
        writer.write(header if head_only else header + body)
        await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT_S)
