"""The records of the bridge's sessions topic (stage 1 to stage 2), pure.

Stage 1 writes, per input payload, **one record per session**: the session is
the key, the value a msgpack array of ``[key, [[time_ns, rank, event_json], ...]]``
pairs, one pair per span or log record of that session in the payload. Grouping
by session means a payload of 500 spans from 200 conversations is about 200
records rather than 500 (each record costs a produce, a fetch and a decode),
while every record still belongs to exactly one session and so to one
partition. Events are carried as their contract-v1 JSON without ``seq``:
stage 2 only appends the ``seq`` it assigns.

A session's pairs go into records of at most :data:`MAX_RECORD_BYTES` (a
payload of many spans of one session is several records, consecutive on its
partition): a broker refuses a record over its ``message.max.bytes`` (1 MB by
default) for good, and a refused record would stop the bridge at every restart.

Records written before this grouping (one pair per record, ``[key, items]``)
are still read.
"""

from __future__ import annotations

import msgspec

from ..events import encoder
from .mapping import Mapped

EventItems = list[tuple[int, int, bytes]]
SessionEntries = list[tuple[str, EventItems]]

MAX_RECORD_BYTES = 512 * 1024
"""Largest sessions-topic record written, in bytes (a record over it is written again as
several, each estimated from its events' JSON and keys; a record holds at least one
span's events, which the mapping bounds)."""
_PAIR_OVERHEAD = 32
"""msgpack's framing of one ``(key, items)`` pair and its items, at most, in bytes."""

_encode = msgspec.msgpack.Encoder().encode
_decode_grouped = msgspec.msgpack.Decoder(SessionEntries).decode
_decode_single = msgspec.msgpack.Decoder(tuple[str, EventItems]).decode


def session_records(mapped: list[Mapped]) -> list[tuple[str, bytes]]:
    """One payload's mapped records as ``(session, value)``, one per session, in
    the order each session first appears."""
    grouped: dict[str, SessionEntries] = {}
    encode_event = encoder.encode
    for record in mapped:
        items = record.items
        # a span is one or two events: no comprehension (a frame of its own) per span
        if len(items) == 1:
            t, rank, event = items[0]
            encoded: EventItems = [(t, rank, encode_event(event))]
        else:
            encoded = []
            for t, rank, event in items:
                encoded.append((t, rank, encode_event(event)))
        entries = grouped.get(record.session)
        if entries is None:
            grouped[record.session] = [(record.key, encoded)]
        else:
            entries.append((record.key, encoded))
    return grouped_records(grouped)


def grouped_records(grouped: dict[str, SessionEntries]) -> list[tuple[str, bytes]]:
    """Each session's pairs as ``(session, value)`` records of at most
    :data:`MAX_RECORD_BYTES`, in the order each session first appears, a session's
    records in the order of its pairs."""
    out: list[tuple[str, bytes]] = []
    for session, entries in grouped.items():
        value = _encode(entries)
        if len(value) <= MAX_RECORD_BYTES:
            out.append((session, value))  # nearly always: one record
            continue
        chunk: SessionEntries = []
        size = 0
        for entry in entries:
            key, items = entry
            entry_size = len(key) + _PAIR_OVERHEAD + sum(len(i[2]) + _PAIR_OVERHEAD for i in items)
            if chunk and size + entry_size > MAX_RECORD_BYTES:
                out.append((session, _encode(chunk)))
                chunk, size = [], 0
            chunk.append(entry)
            size += entry_size
        out.append((session, _encode(chunk)))
    return out


def decode_session_record(value: bytes) -> SessionEntries:
    """The ``(key, items)`` pairs of one sessions-topic record (raises
    :class:`msgspec.DecodeError` for anything the bridge did not write)."""
    try:
        return _decode_grouped(value)
    except msgspec.DecodeError:
        return [_decode_single(value)]


__all__ = ["MAX_RECORD_BYTES", "SessionEntries", "decode_session_record", "grouped_records", "session_records"]
