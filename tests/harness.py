"""A minimal driver for testing one signal in isolation (no watchdog).

It builds the same views the watchdog builds: canonical arguments, the stable
call key and the shared recent-call history.
"""

from __future__ import annotations

import signal
from typing import Any

from streamguard.canonical import canonicalize, fingerprint_payload, payload_size, stable_hash
from streamguard.engine import Engine
from streamguard.events import Alert, FinalAnswer, Text, ToolCall, ToolResult, TurnStart, Usage
from streamguard.policy import parse_policy_set
from streamguard.signals.base import CallView, Finding, ResultView, Signal


class Driver:
    def __init__(self, signal: Signal, history: int | None = None) -> None:
        self.signal = signal
        self.state = signal.new_state()
        self.history: list[int] = []
        self.capacity = history if history is not None else max(signal.history_needed(), 1)
        self.findings: list[Finding] = []

    def _keep(self, finding: Finding | None) -> Finding | None:
        if finding is not None:
            self.findings.append(finding)
        return finding

    def call(self, tool: str, args: Any = None, kind: str | None = None) -> Finding | None:
        event = ToolCall(session="s", tool=tool, args=args, kind=kind)
        canonical = canonicalize(args)
        key = stable_hash(tool, canonical.text)
        self.history.append(key)
        if len(self.history) > self.capacity:
            del self.history[0]
        view = CallView(event, canonical, key, self.history, kind)
        return self._keep(self.signal.on_call(self.state, view))

    def result(
        self,
        tool: str,
        result: Any = None,
        error: str | None = None,
        no_op: bool = False,
        result_bytes: int | None = None,
        call_flags: int = 0,
        result_digest: str | None = None,
    ) -> Finding | None:
        event = ToolResult(session="s", tool=tool, result=result, error=error, no_op=no_op,
                           result_bytes=result_bytes, result_digest=result_digest)
        failed = bool(error)
        fingerprint = 0 if failed or no_op else fingerprint_payload(result)
        size = result_bytes if result_bytes is not None else payload_size(result)
        return self._keep(self.signal.on_result(self.state, ResultView(event, failed, fingerprint, size, call_flags=call_flags)))

    def text(self, text: str = "progress update") -> Finding | None:
        return self._keep(self.signal.on_text(self.state, Text(session="s", text=text)))

    def turn_start(self) -> Finding | None:
        return self._keep(self.signal.on_turn_start(self.state))

    def turn_end(self) -> Finding | None:
        return self._keep(self.signal.on_turn_end(self.state))

    def usage(self, **fields: Any) -> Finding | None:
        return self._keep(self.signal.on_usage(self.state, Usage(session="s", **fields)))

    def final_answer(self, text: str | None = None) -> Finding | None:
        return self._keep(self.signal.on_final_answer(self.state, FinalAnswer(session="s", text=text)))

    def reset(self) -> None:
        self.state = self.signal.new_state()
        self.history.clear()

    def ids(self) -> list[str]:
        return [f.signal for f in self.findings]


def engine_alerts(trace: list[Any], policy: str, session: str) -> list[Alert]:
    """The alerts a fresh engine under ``policy`` (TOML) raises on ``trace``, after a turn
    start for ``session``: the whole watchdog, as ``replay`` runs it."""
    engine = Engine(parse_policy_set(policy))
    engine.process(TurnStart(session=session))
    out: list[Alert] = []
    for event in trace:
        out += [o for o in engine.process(event) if isinstance(o, Alert)]
    return out


def interruptible() -> None:
    """For a child process a test stops with SIGINT (``preexec_fn``): the signal's default
    action restored, so that Python raises KeyboardInterrupt in it even when the suite was
    started as a background job of a non-interactive shell, where SIGINT is ignored and a
    child inherits that."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
