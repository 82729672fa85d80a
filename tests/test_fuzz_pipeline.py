"""Fuzzing the record path: decode -> engine -> outputs -> snapshot -> restore.

Whatever bytes arrive, the only exceptions allowed out of decoding are the
documented refusals (``msgspec.DecodeError`` and its subclasses,
``UnknownEventType``), and everything that decodes must be processable, give
outputs that round-trip through the output decoder, and leave a state that
snapshots, restores and snapshots again to the same bytes.

CI runs a bounded number of examples; a longer run is one environment variable
away (``docs/guarantees.md``)::

    STREAMGUARD_FUZZ_EXAMPLES=20000 .venv/bin/python -m pytest -q tests/test_fuzz_pipeline.py
"""

from __future__ import annotations

import os
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamguard.engine import Engine
from streamguard.events import (
    Reset,
    UnknownEventType,
    decode_operator_event,
    encode,
    output_decoder,
)
from streamguard.kafka.changelog import decode_entry, encode_entry
from streamguard.policy import Policy

EXAMPLES = int(os.environ.get("STREAMGUARD_FUZZ_EXAMPLES", "300"))
TYPES = ["tool_call", "tool_result", "text", "turn_start", "turn_end", "usage", "final_answer", "reset", "future"]
SESSIONS = ["s-a", "s-b", "s-c"]

# Values chosen to hit the edges: huge and negative integers, non-finite-looking
# floats, long and odd strings, containers nested past the bound.
edge_ints = st.sampled_from([0, 1, -1, 2**31, 2**53, 2**53 + 1, 2**63, 2**64, 2**70, -(2**63) - 1])
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    edge_ints,
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
    st.sampled_from(["", " ", "{", "[1,", '{"a":1}', "main.go", "./main.go", "x" * 300]),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


def deep(depth: int) -> Any:
    value: Any = 1
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


free_form = st.one_of(json_values, st.integers(60, 70).map(deep))
field_values = {
    "session": st.one_of(st.sampled_from(SESSIONS), st.text(max_size=5), scalars),
    "agent": st.one_of(st.sampled_from(["coder", "ops", None]), scalars),
    "tool": st.one_of(st.sampled_from(["read_file", "grep", "bash", "ls"]), scalars),
    "args": free_form,
    "result": free_form,
    "error": st.one_of(st.none(), st.sampled_from(["", "boom", "Traceback"]), scalars),
    "seq": st.one_of(st.integers(0, 50), edge_ints, scalars),
    "ts": st.one_of(st.floats(1e9, 2e9), scalars),
    "turn": st.one_of(st.integers(0, 3), st.sampled_from(["t1", "t2"]), scalars),
    "text": st.one_of(st.sampled_from(["working", "", "done"]), scalars),
    "role": st.one_of(st.sampled_from(["assistant", "reasoning", "user"]), scalars),
    "input_tokens": st.one_of(st.integers(0, 10**6), edge_ints),
    "output_tokens": st.one_of(st.integers(0, 10**6), edge_ints),
    "cost_usd": st.one_of(st.floats(0, 10), scalars),
    "context_window": st.one_of(st.integers(1, 10**6), edge_ints),
    "result_bytes": st.one_of(st.integers(0, 10**6), edge_ints),
    "no_op": st.one_of(st.booleans(), scalars),
    "kind": st.one_of(st.sampled_from(["read", "write", "resolve"]), scalars),
    "guardrail": st.one_of(st.sampled_from(["watchdog", "all"]), scalars),
    "by": st.one_of(st.text(max_size=5), free_form),
    "additional_budget_usd": st.one_of(st.floats(0.01, 5), scalars),
}


@st.composite
def records(draw: Any) -> bytes:
    if draw(st.integers(0, 19)) == 0:
        return draw(st.binary(max_size=60))  # not even JSON
    obj: dict[str, Any] = {"type": draw(st.sampled_from(TYPES))}
    for name in draw(st.lists(st.sampled_from(sorted(field_values)), max_size=7, unique=True)):
        obj[name] = draw(field_values[name])
    if draw(st.booleans()):
        obj["session"] = draw(st.sampled_from(SESSIONS))
    if obj["type"] in ("tool_call", "tool_result") and draw(st.booleans()):
        obj["tool"] = draw(st.sampled_from(["read_file", "grep"]))
    data = msgspec.json.encode(obj)
    if draw(st.integers(0, 9)) == 0:  # a cut or spliced record
        cut = draw(st.integers(0, len(data)))
        data = data[:cut] + draw(st.binary(max_size=4))
    return data


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(records(), min_size=1, max_size=40))
def test_any_record_stream_is_refused_cleanly_or_processed_to_a_restorable_state(stream) -> None:
    engine = Engine(Policy(mode="enforce"))
    for data in stream:
        try:
            event = decode_operator_event(data)
        except (msgspec.DecodeError, UnknownEventType):
            continue  # refused: the processor dead-letters or skips these
        if isinstance(event, Reset):
            outputs = engine.control(event, 1.7e9)
        else:
            outputs = engine.process(event, 1.7e9)
        for output in outputs:
            assert output_decoder.decode(encode(output)) == output
    restored = Engine(Policy(mode="enforce"))
    for session in list(engine.sessions):
        snapshot = engine.snapshot(session)
        assert snapshot is not None
        entry = decode_entry(encode_entry(2**62, -1, 1.7e9, snapshot))
        restored.restore(session, entry.state)
        assert restored.snapshot(session) == snapshot
