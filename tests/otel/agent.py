"""A test agent instrumented with the real OpenTelemetry SDK and GenAI attributes.

No model, no tools: the agent's steps are scripted, and each step is recorded
the way GenAI instrumentations record it (an ``invoke_agent`` root span per
run, ``chat`` spans with usage, ``execute_tool`` spans with the tool's name,
call id and, when content capture is on, its arguments and result).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import Status, StatusCode


class Collecting(SpanExporter):
    """Keeps every exported span, in export order."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def provider(exporter: SpanExporter, service: str = "test-agent", processor: Any = None) -> TracerProvider:
    tp = TracerProvider(resource=Resource.create({"service.name": service}))
    tp.add_span_processor(processor or SimpleSpanProcessor(exporter))
    return tp


def run_agent(
    tp: TracerProvider,
    conversation: str | None,
    calls: list[tuple[str, dict[str, Any]]],
    *,
    capture: bool = True,
    agent: str = "triage-bot",
    failing: frozenset[int] = frozenset(),
) -> None:
    """One agent run (one trace): a model call before each tool call, then an answer."""
    tracer = tp.get_tracer("tests.otel.agent")
    common = {"gen_ai.agent.name": agent}
    if conversation is not None:
        common["gen_ai.conversation.id"] = conversation
    with tracer.start_as_current_span(f"invoke_agent {agent}", attributes={
        **common, "gen_ai.operation.name": "invoke_agent"
    }):
        for i, (tool, args) in enumerate(calls):
            with tracer.start_as_current_span("chat model-x", attributes={
                **common,
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "model-x",
                "gen_ai.usage.input_tokens": 1000 + 10 * i,
                "gen_ai.usage.output_tokens": 20,
                "gen_ai.response.finish_reasons": ["tool_calls"],
            }):
                pass
            attributes = {
                **common,
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool,
                "gen_ai.tool.call.id": f"call-{i}",
            }
            if capture:
                attributes["gen_ai.tool.call.arguments"] = json.dumps(args)
                attributes["gen_ai.tool.call.result"] = f"contents of {json.dumps(args)}"
            with tracer.start_as_current_span(f"execute_tool {tool}", attributes=attributes) as span:
                if i in failing:
                    span.set_attribute("error.type", "ToolError")
                    span.set_status(Status(StatusCode.ERROR, "tool failed"))
        answer = {
            **common,
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "model-x",
            "gen_ai.usage.input_tokens": 2000,
            "gen_ai.usage.output_tokens": 50,
            "gen_ai.response.finish_reasons": ["stop"],
        }
        if capture:
            answer["gen_ai.output.messages"] = json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": "Done."}]}]
            )
        with tracer.start_as_current_span("chat model-x", attributes=answer):
            pass


LOOP = [("read_file", {"path": "./main.go"})] * 6
SWEEP = [("read_file", {"path": f"src/file_{i}.go"}) for i in range(6)]
