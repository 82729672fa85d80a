"""Encoding SDK spans and logs the way the Collector's Kafka exporter writes them."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan


def spans_proto(spans: Sequence[ReadableSpan]) -> bytes:
    """``otlp_proto``: a serialized TracesData (wire-identical to ExportTraceServiceRequest)."""
    return encode_spans(spans).SerializeToString()


def _hex_ids(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            k: (base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId") and v else _hex_ids(v))
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_hex_ids(v) for v in node]
    return node


def spans_json(spans: Sequence[ReadableSpan]) -> bytes:
    """``otlp_json``: lowerCamelCase keys, hex ids, int64 values as strings, enums as numbers."""
    as_dict = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    return json.dumps(_hex_ids(as_dict)).encode()


def proto_from_dict(kind: str, document: dict[str, Any]) -> bytes:
    """A hand-written OTLP/JSON document (protobuf JSON mapping) as protobuf bytes."""
    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.logs.v1 import logs_pb2
    from opentelemetry.proto.trace.v1 import trace_pb2

    message = trace_pb2.TracesData() if kind == "traces" else logs_pb2.LogsData()
    return ParseDict(document, message).SerializeToString()
