"""OTLP/HTTP receiver: ``POST /v1/traces`` and ``POST /v1/logs``, protobuf or JSON.

For fleets without a Collector: an SDK's ``OTEL_EXPORTER_OTLP_ENDPOINT`` can
point at the bridge. The receiver is a small Collector: it checks that a body
is OTLP, then writes it unchanged to the spans or logs topic, exactly as the
Collector's Kafka exporter would, and answers only once the broker has
acknowledged it. The bridge's consumer group then maps it like any other
record, so the receiver adds no second path with its own guarantees: what is
acknowledged to the SDK is durable, and everything after is the bridge's
at-least-once processing.

Status codes follow the OTLP/HTTP specification: 200 with an
``Export*ServiceResponse`` (``partial_success`` when some spans or records
cannot be used: no span id, no session), 400 for a body that is not OTLP
(not retryable), 404, 405, 411 (neither ``Content-Length`` nor chunked), 413
(too large), 415 (neither ``application/x-protobuf`` nor ``application/json``),
501 (a transfer coding other than chunked), 503 when the broker did not
acknowledge (retryable). Bodies come with a ``Content-Length`` or chunked
(``Transfer-Encoding: chunked``), and may be gzip-compressed
(``Content-Encoding: gzip``); reading and decompression are bounded by the same
size limit, and a request by the read timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import zlib
from typing import Any

import msgspec
from aiokafka import AIOKafkaProducer

from ..kafka.health import HttpListener
from . import otlp
from .config import BridgeConfig

log = logging.getLogger("streamguard.otel")

MAX_HEAD_BYTES = 16 * 1024
READ_TIMEOUT_S = 30.0
REASONS = {
    200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
    411: "Length Required", 413: "Payload Too Large", 415: "Unsupported Media Type",
    501: "Not Implemented", 503: "Service Unavailable",
}
BUFFERED_BODIES = 4
"""Request bodies of ``max_payload_bytes`` the receiver holds at once, at most, across
its connections: past that, a request is answered 503 (retryable) rather than read, so
a few slow or many small-chunked uploads cannot take the bridge's memory."""
PATHS = {"/v1/traces": "traces", "/v1/logs": "logs"}


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def export_response(kind: str, rejected: int, message: str, *, json: bool) -> bytes:
    """An ``Export{Trace,Logs}ServiceResponse``, with ``partial_success`` when ``rejected``."""
    if json:
        if not rejected:
            return b"{}"
        name = "rejectedSpans" if kind == "traces" else "rejectedLogRecords"
        return msgspec.json.encode(
            {"partialSuccess": {name: str(rejected), "errorMessage": message}}
        )
    if not rejected:
        return b""
    inner = _varint(1 << 3 | 0) + _varint(rejected) + _field(2, message.encode())
    return _field(1, inner)


def error_status(code: int, message: str, *, json: bool) -> bytes:
    """A ``google.rpc.Status`` body (code, message)."""
    if json:
        return msgspec.json.encode({"code": code, "message": message})
    return _varint(1 << 3 | 0) + _varint(code) + _field(2, message.encode())


class BodyBudget:
    """Bytes of request bodies held at once, bounded (see :data:`BUFFERED_BODIES`)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0

    def take(self, size: int) -> None:
        if self.held + size > self.limit:
            raise HttpError(503, "too many request bodies in flight; retry")
        self.held += size

    def give(self, size: int) -> None:
        self.held -= size


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


MAX_CHUNK_LINE_BYTES = 1024
_HEX_DIGITS = frozenset(b"0123456789abcdefABCDEF")


async def _chunk_line(reader: asyncio.StreamReader) -> bytes:
    """One line of chunked framing (a size line or a trailer), bounded, without its CRLF."""
    try:
        line = await reader.readuntil(b"\n")
    except asyncio.LimitOverrunError:
        raise HttpError(400, "chunk framing line too long") from None
    if len(line) > MAX_CHUNK_LINE_BYTES:
        raise HttpError(400, "chunk framing line too long")
    if not line.endswith(b"\r\n"):
        raise HttpError(400, "chunk framing line not ended by CRLF")
    return line[:-2]


async def read_chunked(
    reader: asyncio.StreamReader, limit: int, budget: BodyBudget | None = None
) -> bytes:
    """A chunked body (RFC 9112 §7.1): ``size[;ext] CRLF data CRLF`` ... ``0 CRLF``,
    trailers, ``CRLF``. 413 as soon as the chunks announced pass ``limit``; 400 for
    any framing that is not exactly this (sizes are hex digits only: no sign, no
    ``0x``, no spaces, at most 16 of them). The body grows in one buffer (a list of
    two-byte chunks would hold some 40 bytes of objects per byte sent), each chunk
    taken from ``budget`` before it is read; the caller gives back ``len(body)``, and
    what a failed read took is given back here."""
    body = bytearray()
    taken = 0
    try:
        while True:
            size_text = (await _chunk_line(reader)).split(b";", 1)[0]
            if not size_text or len(size_text) > 16 or not _HEX_DIGITS.issuperset(size_text):
                raise HttpError(400, f"bad chunk size {size_text[:20]!r}")
            size = int(size_text, 16)
            if size == 0:
                break
            if len(body) + size > limit:
                raise HttpError(413, f"chunked body over max_payload_bytes ({limit} bytes)")
            if budget is not None:
                budget.take(size)
                taken += size
            body += await reader.readexactly(size)
            if await reader.readexactly(2) != b"\r\n":
                raise HttpError(400, "chunk data not followed by CRLF")
        trailers = 0
        while True:  # trailer fields, ignored, bounded like a head
            line = await _chunk_line(reader)
            if not line:
                return bytes(body)
            trailers += len(line)
            if trailers > MAX_HEAD_BYTES:
                raise HttpError(400, "trailers too large")
    except BaseException:
        if budget is not None:
            budget.give(taken)
        raise


class OtlpReceiver(HttpListener):
    """Serves OTLP/HTTP on ``host:port`` and hands bodies to ``producer``."""

    def __init__(
        self,
        producer: AIOKafkaProducer,
        config: BridgeConfig,
        metrics: Any,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        wanted: otlp.AttributeFilter | None = None,
    ) -> None:
        super().__init__(host, port)
        self.producer = producer
        # The bridge's span filter: spans are checked as the bridge will read them, so
        # an attribute the mapping never reads (nested too deep, say) refuses no batch.
        self.wanted = wanted
        self.config = config
        self.metrics = metrics
        self.budget = BodyBudget(BUFFERED_BODIES * config.max_payload_bytes)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:  # keep-alive: SDK exporters reuse their connection
                keep = await asyncio.wait_for(self._one(reader, writer), READ_TIMEOUT_S)
                if not keep:
                    break
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            pass
        except ValueError:  # a head line past the stream's limit: nothing to answer
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        request_line = await reader.readline()
        if not request_line:
            return False
        parts = request_line.decode("latin-1").split()
        headers: dict[str, str] = {}
        total = len(request_line)
        while True:
            line = await reader.readline()
            total += len(line)
            if total > MAX_HEAD_BYTES:
                await self._respond(writer, "?", 400, b"headers too large", "text/plain", False)
                return False
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        if len(parts) != 3:
            await self._respond(writer, "?", 400, b"bad request line", "text/plain", False)
            return False
        method, target, _ = parts
        path = target.split("?", 1)[0]
        content_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        json = content_type == "application/json"
        keep = headers.get("connection", "").lower() != "close"
        kind = PATHS.get(path)
        held = 0
        try:
            if kind is None:
                raise HttpError(404, f"no such path {path[:100]!r}: POST /v1/traces or /v1/logs")
            if method != "POST":
                raise HttpError(405, "only POST")  # before the body: there is none to read
            body = await self._read_body(reader, headers)
            held = len(body)
            if content_type not in ("application/x-protobuf", "application/json"):
                raise HttpError(415, "Content-Type must be application/x-protobuf or application/json")
            encoding = headers.get("content-encoding", "identity").lower()
            if encoding == "gzip":
                body = self._gunzip(body)
                self.budget.take(len(body))  # the inflated body is held too
                held += len(body)
            elif encoding not in ("identity", ""):
                raise HttpError(415, f"unsupported Content-Encoding {encoding[:40]!r}")
            rejected, message = self._check(kind, body, json)
            await self._forward(kind, body, json)
        except HttpError as exc:
            await self._respond(
                writer, path, exc.status, error_status(exc.status, str(exc), json=json),
                "application/json" if json else "application/x-protobuf", False,
            )
            return False  # the body may be unread: this connection is done
        finally:
            self.budget.give(held)
        await self._respond(
            writer, path, 200, export_response(kind, rejected, message, json=json),
            "application/json" if json else "application/x-protobuf", keep,
        )
        return keep

    async def _read_body(self, reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
        """The request body, by ``Content-Length`` or chunked (``Transfer-Encoding:
        chunked``, as streaming clients send it), never more than
        ``max_payload_bytes``. A request carrying both is refused: a proxy in front
        could read it the other way (request smuggling). The caller's timeout
        bounds how long a client may take over it."""
        limit = self.config.max_payload_bytes
        transfer = headers.get("transfer-encoding")
        if transfer is not None:
            if "content-length" in headers:
                raise HttpError(400, "both Transfer-Encoding and Content-Length")
            if transfer.strip().lower() != "chunked":
                raise HttpError(501, f"unsupported Transfer-Encoding {transfer[:40]!r}: only chunked")
            return await read_chunked(reader, limit, self.budget)
        length_text = headers.get("content-length")
        if length_text is None or not length_text.isdigit() or not length_text.isascii():
            raise HttpError(411, "Content-Length (or Transfer-Encoding: chunked) is required")
        if len(length_text) > 18:  # past any limit (and past what int() may parse)
            raise HttpError(413, "Content-Length over max_payload_bytes")
        length = int(length_text)
        if length > limit:
            raise HttpError(413, f"{length} bytes, over max_payload_bytes")
        self.budget.take(length)
        try:
            return await reader.readexactly(length)
        except BaseException:
            self.budget.give(length)
            raise

    def _gunzip(self, body: bytes) -> bytes:
        limit = self.config.max_payload_bytes
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out = inflater.decompress(body, limit + 1)
        except zlib.error as exc:
            raise HttpError(400, f"not gzip: {exc}") from None
        if len(out) > limit or inflater.unconsumed_tail:
            raise HttpError(413, "decompressed body over max_payload_bytes")
        if not inflater.eof:
            raise HttpError(400, "gzip body cut short")
        if inflater.unused_data:
            raise HttpError(400, "data after the gzip body")
        return out

    def _check(self, kind: str, body: bytes, json: bool) -> tuple[int, str]:
        """Decode the body: 400 if it is not OTLP; the count of unusable items."""
        encoding: otlp.Encoding = "otlp_json" if json else "otlp_proto"
        try:
            if kind == "traces":
                spans = otlp.decode_spans(body, encoding, self.wanted)
                rejected = sum(1 for s in spans if not s.span_id)
                noun = "spans without a span id"
            else:
                otlp.decode_logs(body, encoding)  # the bridge reads logs unfiltered too
                rejected = 0
                noun = "log records"
        except otlp.OtlpError as exc:
            raise HttpError(400, f"{exc.reason}: {exc}") from None
        return rejected, f"{rejected} {noun}" if rejected else ""

    async def _forward(self, kind: str, body: bytes, json: bool) -> None:
        topic = self.config.spans_topic if kind == "traces" else self.config.logs_topic
        # The encoding goes with the body: the bridge reads it as its Content-Type said,
        # whatever --otlp-encoding says and however the body starts.
        encoding = [(otlp.ENCODING_HEADER, b"otlp_json" if json else b"otlp_proto")]
        try:
            future = await self.producer.send(topic, value=body, headers=encoding)
            await asyncio.wait_for(future, self.config.send_timeout_ms / 1000)
        except Exception as exc:
            log.warning("OTLP/HTTP body not acknowledged by the broker: %r", exc)
            raise HttpError(503, "the broker did not acknowledge; retry") from None

    async def _respond(
        self, writer: asyncio.StreamWriter, path: str, status: int, body: bytes,
        content_type: str, keep: bool,
    ) -> None:
        self.metrics.http_requests.labels(path if path in PATHS else "other", str(status)).inc()
        head = (
            f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\n"
            f"Content-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n"
            + ("" if keep else "Connection: close\r\n")
            + "\r\n"
        ).encode("latin-1")
        writer.write(head + body)
        await writer.drain()
