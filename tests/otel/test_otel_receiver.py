"""The OTLP/HTTP receiver without a broker: request bodies by length or chunked.

The real OpenTelemetry SDK exporter posts to the receiver (its bodies sent as
they are, and sent chunked, as streaming clients send them); raw sockets send
what no well-behaved client does. The broker is a stand-in that records what it
was given and acknowledges it.
"""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator
from typing import Any

import pytest
import requests
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from streamguard.otel import otlp
from streamguard.otel.bridge import BridgeMetrics
from streamguard.otel.config import BridgeConfig
from streamguard.otel.receiver import OtlpReceiver

from .agent import LOOP, Collecting, provider, run_agent
from .otlp_fixtures import spans_proto

LIMIT = 64 * 1024


class AcknowledgingProducer:
    """Takes every record and acknowledges it at once."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes]] = []
        self.headers: list[list[tuple[str, bytes]]] = []

    async def send(
        self, topic: str, value: bytes, headers: list[tuple[str, bytes]] | None = None
    ) -> asyncio.Future[None]:
        self.sent.append((topic, value))
        self.headers.append(list(headers or ()))
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


class ChunkingSession(requests.Session):
    """A session that streams every body (``Transfer-Encoding: chunked``) in
    pieces of ``size`` bytes, as clients that stream their exports do."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def request(self, method: str | bytes, url: str | bytes, *args: Any, **kwargs: Any) -> Any:
        body = kwargs.get("data")
        if isinstance(body, bytes):
            size = self.size
            kwargs["data"] = iter([body[i : i + size] for i in range(0, len(body), size)])
        return super().request(method, url, *args, **kwargs)


@pytest.fixture
async def receiver() -> AsyncIterator[OtlpReceiver]:
    config = BridgeConfig.build({"max_payload_bytes": LIMIT})
    server = OtlpReceiver(AcknowledgingProducer(), config, BridgeMetrics())
    await server.start()
    yield server
    await server.close()


def sent(server: OtlpReceiver) -> list[tuple[str, bytes]]:
    producer = server.producer
    assert isinstance(producer, AcknowledgingProducer)
    return producer.sent


def requests_counted(server: OtlpReceiver, path: str, code: int) -> float:
    value = server.metrics.registry.get_sample_value(
        "streamguard_bridge_http_requests_total", {"path": path, "code": str(code)}
    )
    return value or 0.0


def sdk_loop_spans() -> list[Any]:
    exporter = Collecting()
    run_agent(provider(exporter), "conv-http", LOOP[:3])
    return exporter.spans


async def export_with_sdk(server: OtlpReceiver, spans: list[Any], **options: Any) -> SpanExportResult:
    exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{server.port}/v1/traces", **options)
    try:
        # the SDK exporter blocks: it runs in a thread, the receiver on this loop
        return await asyncio.to_thread(exporter.export, spans)
    finally:
        exporter.shutdown()


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"session": ChunkingSession(size=100)},
        {"session": ChunkingSession(size=7), "compression": Compression.Gzip},
    ],
    ids=["content-length", "chunked", "chunked-gzip"],
)
async def test_the_sdk_exporter_is_received_by_length_and_chunked(
    receiver: OtlpReceiver, options: dict[str, Any]
) -> None:
    spans = sdk_loop_spans()
    assert await export_with_sdk(receiver, spans, **options) is SpanExportResult.SUCCESS
    [(topic, body)] = sent(receiver)
    assert topic == receiver.config.spans_topic
    # what reaches the spans topic is the export request itself, decompressed
    assert otlp.decode_spans(body, "otlp_proto") == otlp.decode_spans(spans_proto(spans), "otlp_proto")
    assert requests_counted(receiver, "/v1/traces", 200) == 1


async def exchange(server: OtlpReceiver, request: bytes, *, half_close: bool = True) -> bytes:
    """Send raw bytes; everything the receiver answers until it closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(request)
    await writer.drain()
    if half_close:
        writer.write_eof()
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return answer


def chunked_request(chunks: bytes, *, extra_headers: str = "", content_type: str = "application/x-protobuf") -> bytes:
    return (
        "POST /v1/traces HTTP/1.1\r\nHost: x\r\n"
        f"Content-Type: {content_type}\r\nTransfer-Encoding: chunked\r\n{extra_headers}\r\n"
    ).encode() + chunks


def chunk(data: bytes, extension: bytes = b"") -> bytes:
    return b"%x%s\r\n%s\r\n" % (len(data), extension, data)


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


async def test_chunked_framing_with_extensions_and_trailers_is_read(receiver: OtlpReceiver) -> None:
    body = spans_proto(sdk_loop_spans())
    framed = chunk(body[:10], b";name=value") + chunk(body[10:]) + b"0\r\nX-Trailer: 1\r\n\r\n"
    answer = await exchange(receiver, chunked_request(framed, extra_headers="Connection: close\r\n"))
    assert status_of(answer) == 200
    assert sent(receiver) == [(receiver.config.spans_topic, body)]


async def test_keep_alive_survives_a_chunked_request(receiver: OtlpReceiver) -> None:
    body = spans_proto(sdk_loop_spans())
    framed = chunk(body) + b"0\r\n\r\n"
    answer = await exchange(receiver, chunked_request(framed) * 2)
    assert answer.count(b"HTTP/1.1 200 OK") == 2
    assert len(sent(receiver)) == 2


@pytest.mark.parametrize(
    "framed, code",
    [
        (b"zz\r\nabc\r\n0\r\n\r\n", 400),  # not hex
        (b"-5\r\nabc\r\n0\r\n\r\n", 400),  # a sign
        (b"0x3\r\nabc\r\n0\r\n\r\n", 400),  # a prefix
        (b" 3\r\nabc\r\n0\r\n\r\n", 400),  # a space
        (b"\r\nabc\r\n0\r\n\r\n", 400),  # no size at all
        (b"3\nabc\r\n0\r\n\r\n", 400),  # a bare LF
        (b"3\r\nabcXY0\r\n\r\n", 400),  # data not followed by CRLF
        (b"1" * 17 + b"\r\n", 400),  # more hex digits than any size
        (b"3;" + b"e" * 2000 + b"\r\nabc\r\n0\r\n\r\n", 400),  # an extension past the line bound
        (b"%x\r\n" % (LIMIT + 1), 413),  # announced over the limit: refused before it is sent
        (chunk(b"a" * 40_000) + b"%x\r\n" % 40_000, 413),  # the sum passes the limit
    ],
    ids=[
        "not-hex", "sign", "0x", "space", "empty", "bare-lf", "no-crlf-after-data", "too-many-digits",
        "long-extension", "chunk-over-limit", "sum-over-limit",
    ],
)
async def test_malformed_or_oversized_chunks_get_a_status_and_nothing_is_forwarded(
    receiver: OtlpReceiver, framed: bytes, code: int
) -> None:
    answer = await exchange(receiver, chunked_request(framed))
    assert status_of(answer) == code
    assert b"Connection: close" in answer
    assert sent(receiver) == []
    assert requests_counted(receiver, "/v1/traces", code) == 1


async def test_too_many_trailers_are_refused(receiver: OtlpReceiver) -> None:
    trailers = b"".join(b"X-T%d: %s\r\n" % (i, b"v" * 900) for i in range(40))
    answer = await exchange(receiver, chunked_request(b"0\r\n" + trailers + b"\r\n"))
    assert status_of(answer) == 400 and sent(receiver) == []


async def test_length_and_chunked_together_and_other_codings_are_refused(receiver: OtlpReceiver) -> None:
    both = chunked_request(b"3\r\nabc\r\n0\r\n\r\n", extra_headers="Content-Length: 3\r\n")
    assert status_of(await exchange(receiver, both)) == 400
    gzip_coding = (
        b"POST /v1/traces HTTP/1.1\r\nContent-Type: application/x-protobuf\r\n"
        b"Transfer-Encoding: gzip, chunked\r\n\r\n"
    )
    assert status_of(await exchange(receiver, gzip_coding)) == 501
    neither = b"POST /v1/traces HTTP/1.1\r\nContent-Type: application/x-protobuf\r\n\r\n"
    assert status_of(await exchange(receiver, neither)) == 411
    assert sent(receiver) == []


async def test_a_chunked_body_that_is_not_otlp_is_a_400_with_a_reason(receiver: OtlpReceiver) -> None:
    answer = await exchange(
        receiver, chunked_request(chunk(b'{"resourceSpans": 7}') + b"0\r\n\r\n", content_type="application/json")
    )
    assert status_of(answer) == 400 and b"malformed_otlp" in answer
    assert sent(receiver) == []


async def test_a_gzip_bomb_sent_chunked_is_refused(receiver: OtlpReceiver) -> None:
    bomb = gzip.compress(b"\0" * (LIMIT * 4))
    request = chunked_request(
        chunk(bomb) + b"0\r\n\r\n", extra_headers="Content-Encoding: gzip\r\n"
    )
    assert status_of(await exchange(receiver, request)) == 413
    assert sent(receiver) == []


async def test_a_client_that_stops_mid_chunk_is_dropped_and_the_receiver_goes_on(
    receiver: OtlpReceiver,
) -> None:
    assert await exchange(receiver, chunked_request(b"100\r\nonly a little")) == b""
    assert await exchange(receiver, b"GET / HTTP/1.1\r\n" + b"X: " + b"h" * 70_000 + b"\r\n\r\n") == b""
    # the receiver still serves: nothing a client sent stopped it
    assert await export_with_sdk(receiver, sdk_loop_spans()) is SpanExportResult.SUCCESS


async def test_a_get_is_refused_before_any_body_is_awaited(receiver: OtlpReceiver) -> None:
    answer = await exchange(receiver, b"GET /v1/traces HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status_of(answer) == 405
    options = await exchange(receiver, b"OPTIONS /v1/logs HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status_of(options) == 405


async def test_a_length_of_a_thousand_digits_is_too_large_not_a_dropped_connection(
    receiver: OtlpReceiver,
) -> None:
    request = (
        b"POST /v1/traces HTTP/1.1\r\nContent-Type: application/x-protobuf\r\n"
        b"Content-Length: " + b"9" * 1000 + b"\r\n\r\n"
    )
    assert status_of(await exchange(receiver, request)) == 413
    coding = (
        b"POST /v1/traces HTTP/1.1\r\nContent-Type: application/x-protobuf\r\n"
        b"Transfer-Encoding: compress\r\n\r\n"
    )
    assert (await exchange(receiver, coding)).startswith(b"HTTP/1.1 501 Not Implemented\r\n")


async def test_gzip_cut_short_or_followed_by_more_is_refused(receiver: OtlpReceiver) -> None:
    body = gzip.compress(spans_proto(sdk_loop_spans()))

    def post(data: bytes) -> bytes:
        return (
            b"POST /v1/traces HTTP/1.1\r\nContent-Type: application/x-protobuf\r\n"
            b"Content-Encoding: gzip\r\nConnection: close\r\n"
            b"Content-Length: %d\r\n\r\n" % len(data)
        ) + data

    assert status_of(await exchange(receiver, post(body))) == 200
    assert status_of(await exchange(receiver, post(body[:-9]))) == 400
    assert status_of(await exchange(receiver, post(body + b"more"))) == 400
    assert len(sent(receiver)) == 1


async def until(condition: Any) -> None:
    """Yield to the receiver until ``condition()`` holds (callers bound the wait)."""
    while not condition():
        await asyncio.sleep(0)


async def test_request_bodies_held_at_once_are_bounded(receiver: OtlpReceiver) -> None:
    """Uploads that hold their bodies open take the budget; past it a request is told
    to retry (503) instead of being read, and the budget comes back when they end."""
    from streamguard.otel.receiver import BUFFERED_BODIES

    held = []
    for _ in range(BUFFERED_BODIES):  # each announces a whole body and sends half of it
        reader, writer = await asyncio.open_connection("127.0.0.1", receiver.port)
        writer.write(
            b"POST /v1/traces HTTP/1.1\r\nContent-Type: application/x-protobuf\r\n"
            b"Content-Length: %d\r\n\r\n" % LIMIT + b"\0" * (LIMIT // 2)
        )
        await writer.drain()
        held.append((reader, writer))
    # the receiver takes each one's share as it starts reading its body
    await asyncio.wait_for(until(lambda: receiver.budget.held == BUFFERED_BODIES * LIMIT), 10)
    body = spans_proto(sdk_loop_spans())
    request = (
        b"POST /v1/traces HTTP/1.1\r\nContent-Type: application/x-protobuf\r\nConnection: close\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body)
    ) + body
    assert status_of(await exchange(receiver, request)) == 503
    for _, writer in held:
        writer.close()
    await asyncio.wait_for(until(lambda: receiver.budget.held == 0), 10)
    assert status_of(await exchange(receiver, request)) == 200


def length_request(body: bytes, content_type: str) -> bytes:
    return (
        "POST /v1/traces HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body


@pytest.mark.parametrize(
    ("content_type", "encoding"),
    [("application/x-protobuf", b"otlp_proto"), ("application/json", b"otlp_json")],
)
async def test_each_forwarded_body_says_the_encoding_its_content_type_named(
    receiver: OtlpReceiver, content_type: str, encoding: bytes
) -> None:
    proto = spans_proto(sdk_loop_spans())
    body = proto if encoding == b"otlp_proto" else b"\n" * 80 + otlp_json_of(proto)
    answer = await exchange(receiver, length_request(body, content_type))
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    producer = receiver.producer
    assert isinstance(producer, AcknowledgingProducer)
    # the bridge follows the header, whatever its --otlp-encoding and however the body starts
    assert producer.headers == [[(otlp.ENCODING_HEADER, encoding)]]


def otlp_json_of(proto: bytes) -> bytes:
    from google.protobuf.json_format import MessageToJson
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    return MessageToJson(ExportTraceServiceRequest.FromString(proto)).encode()


async def test_an_attribute_the_bridge_never_reads_refuses_no_batch() -> None:
    """Spans are checked as the bridge reads them: an attribute outside its filter,
    nested past the bound, is not converted, so the batch is taken (a 400 would make
    the SDK drop every span of it, other sessions' too)."""
    import json

    from streamguard.otel.mapping import MappingConfig, span_filter

    deep: dict[str, Any] = {"stringValue": "x"}
    for _ in range(70):
        deep = {"arrayValue": {"values": [deep]}}
    span = {
        "traceId": "01" * 16, "spanId": "02" * 8, "name": "execute_tool grep",
        "startTimeUnixNano": "1", "endTimeUnixNano": "2",
        "attributes": [
            {"key": "gen_ai.conversation.id", "value": {"stringValue": "c1"}},
            {"key": "http.request.body", "value": deep},
        ],
    }
    body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()
    config = BridgeConfig.build({"max_payload_bytes": LIMIT})
    unfiltered = OtlpReceiver(AcknowledgingProducer(), config, BridgeMetrics())
    filtered = OtlpReceiver(
        AcknowledgingProducer(), config, BridgeMetrics(), wanted=span_filter(MappingConfig())
    )
    for server in (unfiltered, filtered):
        await server.start()
    try:
        refused = await exchange(unfiltered, length_request(body, "application/json"))
        taken = await exchange(filtered, length_request(body, "application/json"))
    finally:
        for server in (unfiltered, filtered):
            await server.close()
    assert refused.startswith(b"HTTP/1.1 400")  # the check without the filter: what was wrong
    assert taken.startswith(b"HTTP/1.1 200"), taken[:200]
