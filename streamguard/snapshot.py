"""The snapshot format of a session's watchdog state: encoding, decoding, evolving it.

A snapshot is msgpack, one array:

* **version 2** (written now): ``[2, [signal ids...], state]``. ``state`` is the
  whole :class:`~streamguard.watchdog.SessionState` as a map, fields at their
  defaults left out, its ``signals`` an array of per-signal states in the order
  of the ids. One encoding pass; a session that did little is a few hundred bytes.
* **version 1** (still read): ``[1, state without signals, {signal id: state}]``.

The envelope is read without decoding what it wraps, so
:func:`peek_agent` can find the agent (and with it the policy) of a snapshot
before the state is decoded by that policy's watchdog.

Rules for evolving the format (``tests/test_watchdog.py`` checks versions 1 and 2,
signals added, removed and reordered, omitted defaults, and a field added since):

1. **Adding a field** to ``SessionState`` or to a signal's ``State``: give it a
   default. Older snapshots lack it and decode to the default; older readers
   never see it, since a map with an unknown key is refused only by a
   ``forbid_unknown_fields`` Struct, which these are not.
2. **Removing a field**: stop writing it; readers ignore the key in old snapshots.
3. **Changing a field's type or meaning**: not in place. Add a new field, read
   the old one as a fallback for one release, then remove it (rule 2).
4. **Signals**: states are matched by signal id, not by position, so a policy
   may add, remove or reorder signals between the writer and the reader: an
   added signal starts fresh, a removed one is dropped.
5. **A new layout**: bump the version, keep decoding every version still on a
   changelog (a compacted topic keeps a session's last snapshot indefinitely),
   and write only the newest.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any, get_type_hints

import msgspec
from msgspec import Struct

SNAPSHOT_VERSION = 2

_encoder = msgspec.msgpack.Encoder()


class _Envelope(Struct, array_like=True):
    """The outer array of a snapshot, read without decoding what it wraps."""

    version: int
    first: msgspec.Raw
    second: msgspec.Raw


class _AgentOnly(Struct):
    agent: str | None = None


_envelope_decoder = msgspec.msgpack.Decoder(_Envelope)
_agent_decoder = msgspec.msgpack.Decoder(_AgentOnly)
_ids_decoder = msgspec.msgpack.Decoder(list[str])
_v1_signals_decoder = msgspec.msgpack.Decoder(dict[str, msgspec.Raw])


def peek_agent(data: bytes) -> str | None:
    """The agent a snapshot belongs to (to pick its policy before decoding it)."""
    envelope = _envelope_decoder.decode(data)
    body = envelope.second if envelope.version >= 2 else envelope.first
    return _agent_decoder.decode(body).agent


@cache
def _wire_type(state_type: type[Struct]) -> type[Struct]:
    """``state_type``'s wire twin: the same fields, signal states left undecoded."""
    hints = get_type_hints(state_type)
    fields = state_type.__struct_fields__
    defaults = dict(
        zip(
            fields[len(fields) - len(state_type.__struct_defaults__) :],
            state_type.__struct_defaults__,
            strict=True,
        )
    )
    spec: list[Any] = []
    for name in fields:
        kind = list[msgspec.Raw] if name == "signals" else hints[name]
        spec.append((name, kind, defaults[name]) if name in defaults else (name, kind))
    return msgspec.defstruct(f"_Wire{state_type.__name__}", spec, kw_only=True)


class SnapshotCodec:
    """Encodes and decodes one watchdog's session states (its signals, by id)."""

    def __init__(self, state_type: type[Struct], signal_ids: Sequence[str]) -> None:
        self._state_type = state_type
        # Snapshots name their signal states by id; the id list is encoded once.
        self._ids = msgspec.Raw(_encoder.encode(list(signal_ids)))
        self._wire_decoder = msgspec.msgpack.Decoder(_wire_type(state_type))
        self._v1_decoder = msgspec.msgpack.Decoder(state_type)

    def encode(self, state: Any) -> bytes:
        """Version-2 snapshot bytes of ``state``, in one pass."""
        return _encoder.encode((SNAPSHOT_VERSION, self._ids, state))

    def decode(self, data: bytes) -> tuple[Any, dict[str, msgspec.Raw]]:
        """The state (its ``signals`` still undecoded) and its signal states by id."""
        envelope = _envelope_decoder.decode(data)
        if envelope.version == SNAPSHOT_VERSION:
            wire = self._wire_decoder.decode(envelope.second)
            fields = msgspec.structs.asdict(wire)
            by_id = dict(zip(_ids_decoder.decode(envelope.first), wire.signals, strict=True))  # type: ignore[attr-defined]
            return self._state_type(**fields), by_id
        if envelope.version == 1:
            return self._v1_decoder.decode(envelope.first), _v1_signals_decoder.decode(
                envelope.second
            )
        raise ValueError(f"unsupported snapshot version {envelope.version}")
