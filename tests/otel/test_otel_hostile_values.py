"""Any attribute value a producer can send maps without an exception.

OTLP attributes are typed by the sender: a token count may arrive as a string, a
double (``Infinity`` and ``NaN`` included), a huge int, a list or a nested
key-value list. A value the mapping cannot use is dropped or mapped as text, span by
span; it must never raise, since an exception at stage 1 dead-letters the whole
payload (every other span of the batch with it) as ``processing_error``.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamguard.otel.direct import span_session_records
from streamguard.otel.mapping import MappingConfig, TraceSessions, map_logs, map_spans
from streamguard.otel.otlp import LogRecordView, SpanRecord
from streamguard.otel.records import session_records

from .test_otel_direct import ATTRIBUTES, OPERATIONS

# Every value type OTLP's AnyValue can carry once decoded, at its edges.
SCALARS = st.one_of(
    st.text(max_size=8),
    st.sampled_from(["", "Infinity", "-1", "1e400", "9" * 40, "\x00", "é" * 300,
                     "9999-12-31T23:59:59+00:00", "0001-01-01T00:00:00Z", "2026-01-01T00:00:00Z"]),
    st.integers(10**300, 10**400),
    st.integers(-(2**63), 2**64),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([float("inf"), float("-inf"), float("nan"), 1e300, -0.0, 2.0**63]),
    st.booleans(),
    st.binary(max_size=4),
    st.none(),
)
WILD = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
LOG_KEYS = (
    "event.name", "session.id", "event.timestamp", "tool_name", "success", "error", "duration_ms", "model",
    "input_tokens", "output_tokens", "cache_read_tokens", "cost_usd", "tool_parameters",
    "decision", "prompt", "user.id",
)


@st.composite
def wild_spans(draw: st.DrawFn) -> SpanRecord:
    keys = draw(st.lists(st.sampled_from(sorted(ATTRIBUTES)), min_size=1, max_size=8, unique=True))
    attrs: dict[str, Any] = {key: draw(WILD) for key in keys}
    operation = draw(st.one_of(OPERATIONS, OPERATIONS, WILD))
    if operation is not None:
        attrs["gen_ai.operation.name"] = operation
    attrs.setdefault("gen_ai.conversation.id", "conv-1")
    return SpanRecord(
        trace_id=f"{1:032x}", span_id=draw(st.sampled_from(["00000000000000aa"] * 3 + [""])),
        parent_span_id="", name=draw(st.sampled_from(["execute_tool x", "chat m", ""])),
        start_ns=draw(st.sampled_from([1_760_000_000 * 10**9] * 3 + [0, 2**64 - 1])),
        end_ns=draw(st.sampled_from([1_760_000_001 * 10**9] * 3 + [0, 2**64 - 1])),
        status_code=draw(st.sampled_from([0, 1, 2])), status_message=draw(st.sampled_from(["", "x"])),
        attrs=attrs, resource=draw(st.sampled_from([{}, {"service.name": "svc"}])), events=[],
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(wild_spans(), min_size=1, max_size=6))
def test_no_attribute_value_makes_the_span_mapping_raise(batch: list[SpanRecord]) -> None:
    config = MappingConfig()
    reference = map_spans(batch, config, TraceSessions())
    session_records(reference.mapped)
    fast = span_session_records(batch, config, TraceSessions())
    assert fast.mapped == len(reference.mapped)
    # a span's failure would be contained (``mapping_error``), but each value is handled
    assert "mapping_error" not in fast.ignored and "mapping_error" not in reference.ignored


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.dictionaries(st.sampled_from(LOG_KEYS), WILD, max_size=8), min_size=1, max_size=4))
def test_no_attribute_value_makes_the_log_mapping_raise(records: list[dict[str, Any]]) -> None:
    names = ("claude_code.tool_result", "claude_code.api_request", "claude_code.user_prompt")
    views = [
        LogRecordView(time_ns=1_760_000_000 * 10**9, observed_ns=0, event_name=names[i % 3],
                      body=None, attrs={"session.id": "s", **attrs},
                      resource={"service.name": "claude-code"}, trace_id="", span_id="")
        for i, attrs in enumerate(records)
    ]
    result = map_logs(views, MappingConfig())
    session_records(result.mapped)
    assert "mapping_error" not in result.ignored
