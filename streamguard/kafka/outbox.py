"""Everything the processor produces, on its way out: outputs, dead letters, re-routes.

Records are queued as :class:`OutputRecord` while a batch is processed and sent
in order between batches. Sends are asynchronous; the outbox keeps the
futures of the sends not yet handed to a checkpoint, bounded by
``max_in_flight`` (backpressure: fetching pauses until half are acknowledged).
A checkpoint takes them (:meth:`Outbox.take_in_flight`) and waits for them
before it writes any snapshot.

What streamguard writes is bounded: an output over ``max_output_bytes`` is
produced as a stub of the same type, a dead letter copies at most a bounded
part of a hostile record's key, value and headers, and incoming headers in
streamguard's own namespaces are never copied.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

import msgspec
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.errors import MessageSizeTooLargeError

from ..canonical import truncate_middle
from ..events import Alert, Feedback, GuardrailTrip, Output, encode
from .checkpoint import within
from .config import ProcessorConfig
from .metrics import Metrics
from .routing import DeadLetterReason

log = logging.getLogger("streamguard.kafka")

REROUTED_HEADER = "streamguard.rerouted-from"
TRUNCATED_HEADER = "streamguard.truncated"
# Header namespaces only streamguard writes. An incoming record's headers in them
# are dropped (and counted) before the record is copied anywhere: a writer must
# not be able to pre-fill a dead letter's reason or fake a re-route.
OWNED_HEADER_PREFIXES = ("dlq.", "streamguard.")
MAX_ERROR_HEADER = 1000
# What a dead letter copies of a hostile record's key and headers.
MAX_DEAD_LETTER_KEY = 1024
MAX_COPIED_HEADER_BYTES = 16 * 1024
def _cut_bytes(text: str, limit: int) -> bytes:
    """``text`` as UTF-8, at most ``limit`` bytes (a character cut in two is dropped)."""
    return text.encode("utf-8", "replace")[:limit].decode("utf-8", "ignore").encode()


# A record's framing and a header's (lengths as varints, attributes, timestamps), at most.
_RECORD_OVERHEAD = 128
_HEADER_OVERHEAD = 10
# Text fields of an output cut down to a stub (reason, guidance, feedback text).
STUB_TEXT_BYTES = 2048
# Queued records after which the processor sends mid-batch.
SEND_EVERY = 256

Headers = list[tuple[str, bytes | None]]


class OutputRecord(NamedTuple):
    """One record to produce. ``partition`` is explicit only for re-routes;
    ``record_ts_ms`` (the causing input's timestamp) feeds the latency histogram."""

    topic: str
    key: bytes | None
    value: bytes | None
    partition: int | None
    headers: Headers
    record_ts_ms: int | None


def _tag(obj: Any) -> str:
    return type(obj).__struct_config__.tag


class Outbox:
    """The processor's outgoing records: queued, in flight, and what they may copy."""

    def __init__(self, config: ProcessorConfig, metrics: Metrics) -> None:
        self.config = config
        self.metrics = metrics
        self.queued: list[OutputRecord] = []
        self.in_flight: deque[asyncio.Future[Any]] = deque()

    def busy(self) -> bool:
        return bool(self.queued or self.in_flight)

    # -------------------------------------------------------------- building

    def emit(self, output: Output, record_ts_ms: int | None) -> None:
        """Queue one engine output for the alerts topic, keyed by its session."""
        tag = _tag(output)
        headers: Headers = [("type", tag.encode())]
        metrics = self.metrics
        agent = metrics.agent_label(output.agent)
        if isinstance(output, Alert):
            headers.append(("signal", output.signal.encode()))
            metrics.alerts.labels(output.signal, output.severity, agent).inc()
        elif isinstance(output, GuardrailTrip):
            headers.append(("signal", output.signal.encode()))
            headers.append(("guardrail", output.guardrail.encode()))
            metrics.trips.labels(output.guardrail, output.signal, output.scope, agent).inc()
        elif isinstance(output, Feedback):
            headers.append(("signal", ",".join(output.signals).encode()))
        else:
            guardrail = getattr(output, "guardrail", None)
            if guardrail:
                headers.append(("guardrail", str(guardrail).encode()))
        metrics.outputs.labels(tag).inc()
        value = encode(output)
        if len(value) > self.config.max_output_bytes:
            value = self.output_stub(output, len(value))
            headers.append((TRUNCATED_HEADER, b"1"))
        self.queued.append(
            OutputRecord(
                self.config.alerts_topic, output.session.encode(), value, None, headers, record_ts_ms
            )
        )

    def output_stub(self, output: Output, size: int) -> bytes:
        """``output`` cut down to fit: its identity and decision kept, free text cut,
        its ``detail`` replaced by a note saying what was cut. Consumers parse it as
        the same output type."""
        self.metrics.outputs_truncated.labels("output").inc()
        log.warning(
            "%s %s of session %r is %d bytes, over max_output_bytes: produced as a stub",
            _tag(output),
            output.id,
            output.session[:64],
            size,
        )
        changes: dict[str, Any] = {}
        for field in msgspec.structs.fields(output):
            value = getattr(output, field.name)
            if isinstance(value, str) and len(value) > STUB_TEXT_BYTES // 4:
                changes[field.name] = truncate_middle(value, STUB_TEXT_BYTES)
            elif isinstance(value, list) and field.name != "signals":
                changes[field.name] = []
        if isinstance(output, Alert):
            changes["detail"] = {"truncated": True, "original_bytes": size}
        elif isinstance(output, Feedback):
            changes["signals"] = [truncate_middle(s, 256) for s in output.signals[:16]]
        return encode(msgspec.structs.replace(output, **changes))

    def copied_headers(self, record: Any) -> Headers:
        """The headers of ``record`` that may be copied onto what streamguard writes:
        none in streamguard's own namespaces, and a bounded amount in all."""
        copied: Headers = []
        # an eighth of an output at most: a dead letter must fit --max-output-bytes
        budget = min(MAX_COPIED_HEADER_BYTES, self.config.max_output_bytes // 8)
        for name, value in record.headers or ():
            if name.startswith(OWNED_HEADER_PREFIXES):
                self.metrics.security_events.labels("forged_header").inc()
                continue
            size = len(name.encode("utf-8", "replace")) + (len(value) if value else 0)
            if size > budget:
                copied.append(("streamguard.headers-truncated", b"1"))
                break
            budget -= size
            copied.append((name, value))
        return copied

    def dead_letter(
        self, tp: TopicPartition, record: Any, reason: DeadLetterReason, error: str
    ) -> None:
        """Queue ``record`` for the dead-letter topic with its reason and provenance."""
        limit = self.config.max_output_bytes
        # Each part bounded to a share of the limit, so that the whole dead letter fits
        # it whatever the limit (4 KiB at least): copied headers and key an eighth each,
        # the error an eighth, the value what is left, half the limit at most.
        eighth = limit // 8
        headers = self.copied_headers(record)
        headers += [
            ("dlq.reason", reason.encode()),
            ("dlq.error", _cut_bytes(error, min(MAX_ERROR_HEADER, eighth))),
            ("dlq.source.topic", tp.topic.encode()),
            ("dlq.source.partition", str(tp.partition).encode()),
            ("dlq.source.offset", str(record.offset).encode()),
            ("dlq.source.timestamp", str(record.timestamp).encode()),
        ]
        key, value = record.key, record.value
        key_limit = min(MAX_DEAD_LETTER_KEY, eighth)
        if key is not None and len(key) > key_limit:
            headers.append(("dlq.key-truncated-from", str(len(key)).encode()))
            key = key[:key_limit]
        if value is not None:
            used = sum(
                len(name.encode("utf-8", "replace")) + len(v or b"") + _HEADER_OVERHEAD for name, v in headers
            )
            room = limit - used - (len(key) if key else 0) - _RECORD_OVERHEAD
            if len(value) > room:
                # Too big to produce again with our headers: keep the start, say so.
                self.metrics.outputs_truncated.labels("dead_letter").inc()
                headers.append(("dlq.value-truncated-from", str(len(value)).encode()))
                value = value[: max(0, min(limit // 2, room - 64))]
        self.metrics.dead_letters.labels(reason).inc()
        self.queued.append(OutputRecord(self.config.dlq_topic, key, value, None, headers, None))

    def reroute(self, tp: TopicPartition, record: Any, session: str, target: int) -> None:
        """Queue a control record for its session's home control partition."""
        headers = self.copied_headers(record)
        headers.append((REROUTED_HEADER, f"{tp.partition}:{record.offset}".encode()))
        self.metrics.rerouted.inc()
        log.info(
            "control record %s[%d]@%d for session %r re-routed to partition %d",
            tp.topic,
            tp.partition,
            record.offset,
            session,
            target,
        )
        self.queued.append(
            OutputRecord(
                self.config.control_topic, session.encode(), record.value, target, headers, None
            )
        )

    # --------------------------------------------------------------- sending

    async def send(
        self,
        producer: AIOKafkaProducer,
        pause: Callable[[], set[TopicPartition]],
        resume: Callable[[set[TopicPartition]], None],
    ) -> None:
        """Send what is queued, in order; at ``max_in_flight`` unacknowledged sends,
        pause fetching (``pause``/``resume``) until half are acknowledged."""
        if not self.queued:
            return
        queued, self.queued = self.queued, []
        limit = self.config.max_in_flight
        for record in queued:
            try:
                future = await producer.send(
                    record.topic,
                    value=record.value,
                    key=record.key,
                    partition=record.partition,
                    headers=record.headers,
                )
            except MessageSizeTooLargeError:
                # Every output is capped before it gets here; this is the last line
                # of defence (headers, a smaller producer limit): a stub, never a crash.
                future = await producer.send(
                    self.config.dlq_topic,
                    value=None,
                    key=record.key[:MAX_DEAD_LETTER_KEY] if record.key else record.key,
                    headers=[
                        ("dlq.reason", b"output_too_large"),
                        (
                            "dlq.error",
                            f"{len(record.value or b'')} bytes for {record.topic}".encode(),
                        ),
                    ],
                )
                self.metrics.outputs_truncated.labels("unproducible").inc()
                self.metrics.dead_letters.labels("output_too_large").inc()
            if record.record_ts_ms is not None:
                future.add_done_callback(self._latency_observer(record.record_ts_ms))
            self.in_flight.append(future)
            if len(self.in_flight) >= limit:
                await self._relieve(pause, resume)

    def take_in_flight(self) -> list[asyncio.Future[Any]]:
        """Hand every unacknowledged send to a checkpoint (which waits for them)."""
        taken, self.in_flight = list(self.in_flight), deque()
        return taken

    def _latency_observer(self, record_ts_ms: int) -> Callable[[asyncio.Future[Any]], None]:
        histogram = self.metrics.latency

        def observe(future: asyncio.Future[Any]) -> None:
            if not future.cancelled() and future.exception() is None:
                histogram.observe(max(0.0, time.time() - record_ts_ms / 1000.0))

        return observe

    async def _relieve(
        self,
        pause: Callable[[], set[TopicPartition]],
        resume: Callable[[set[TopicPartition]], None],
    ) -> None:
        """Backpressure: pause fetching until half the in-flight sends are acknowledged."""
        self.metrics.backpressure.inc()
        paused: set[TopicPartition] = set()
        with contextlib.suppress(Exception):
            paused = pause()
        try:
            target = self.config.max_in_flight // 2
            timeout = self.config.send_timeout_ms / 1000
            while len(self.in_flight) > target:
                future = self.in_flight.popleft()
                await within(
                    asyncio.shield(future),
                    timeout,
                    "backpressure: the brokers did not acknowledge a produced record "
                    "(send_timeout_ms)",
                )
        finally:
            resume(paused)
