"""``no-op-streak``: several tool results in a row said, themselves, that they changed nothing.

What it catches
    A loop on a tool that keeps refusing to act. The recorded case (#905) is
    a session with sixteen ``mark_task_done`` calls, thirteen of them answered
    "already recorded for this turn", split 7 + 6 by a single read in between.
    The tool-side fix was working — every rejection was the tool doing its
    job — and yet every call-keyed detector stayed quiet: the arguments were
    reworded free text, and the name detector needs fifteen same-name calls in
    a row where the trace offered seven and then six. Nothing was reading the
    rejections. This signal reads them: the result's ``no_op``
    flag, which a tool sets explicitly (the agent runtime forwards it; no prose
    is ever parsed). Arguments never matter and the streak spans tools: three
    inert calls spread over two idempotent tools are no less stuck.

Threshold: 3 consecutive no-op results (clamped to at least 2)
    A no-op is a confession, not an inference, so it needs no statistical
    margin: the tool itself has said the call was pointless. Two in a row can
    still be a harmless double check; three cannot. At 1 every idempotent write
    in the fleet would raise an alert, hence the clamp at 2. Any result without
    the flag ends the streak and re-arms the alert — including a failure,
    because "nothing needed doing" and "something needed doing and did not
    happen" are opposite claims, and the second one has its own signal
    (``tool-failure-streak``). For the same reason a result that is both failed
    and flagged counts as a failure here, not as a no-op. One alert per streak:
    the 7 + 6 trace raises two, because the interleaved read really did end one
    loop and the model really did start another.

Severity: critical, scope ``turn``
    The two result readers are split by what a halt costs. A failure streak
    may be a legitimate probe still collecting answers; a no-op streak has
    nothing in flight — each call in it has reported that it did nothing. A
    warn would not have stopped the recorded loop, which ran until a human
    interrupted it. But the evidence never reaches beyond the turn: the streak
    resets on any productive result, so the calls it counts are consecutive
    and belong to one turn, and cutting that turn ends the loop as completely
    as halting the session would. Halting the session for it turned an
    operator's ordinary refusal (answered by the model recording the denial
    again and again) into a manual reset every time. So the finding is
    turn-scoped; a model that restarts the loop on every fresh turn is left to
    the watchdog's escalation after consecutive cut turns.

    This signal does not defer to the argument-keyed loop detectors: they read
    calls and cannot know that a result came back inert, so five identical
    no-op calls raise both this and ``repeated-tool-call``. Under enforce this
    one trips first and the halt is idempotent.

A sweep whose no-ops name their items
    A no-op whose answer says something the streak has not heard (a directory
    update answering ``{"npi": "1493028645", "updated_fields": []}`` for the next
    provider) names what it left alone: the sweep converging item by item. The
    streak starts again at it; answers heard before in the streak, or no-ops that
    say nothing, count on. A sweep of thirty providers' attestations, twenty of
    them answered this way, was halted at its third in a blind batch. A no-op of an act
    about another item starts it again too (``ResultView.sent``: ``qbo_attach_receipt(
    receipt_id="dx_712014")`` answered ``{"status": "skipped", "reason":
    "already_attached"}`` for the third receipt in a row): that item's answer. Three
    sweeps of the blind batches (receipts already attached, markets already settled,
    headshots unchanged) were cut at their third to sixteenth item. A command runner's
    no-op is read with its command line, which names what it acts on (``finops
    import-bank --file .../amex_morales_c_202510.csv``): eighteen card statements imported
    one by one, several answering "imported 0 new rows (all rows already present)", were
    cut at the third in a row in a blind batch; the same line answered so again counts
    on. The recorded loop's
    ``mark_task_done`` sends the same task (or no id, only reworded text) each time,
    and counts on.

Known false positives
    A deliberately idempotent workflow: three converge-to-desired-state calls
    in a row that all find nothing to do, answered alike (a replay of messages
    each answering "duplicate, no change"). That is why the flag is opt-in per
    tool — a tool whose no-ops are ordinary (deleting a file that is already
    gone during a cleanup sweep) should not set it, or can be listed in
    ``exempt_tools``.

State: the run length and up to ``threshold`` distinct tool names (each cut
to 64 bytes; real tool names are far shorter) for the guidance. Nothing is recorded once the streak has
alerted.
"""

from __future__ import annotations

import zlib
from typing import Annotated, Any

from msgspec import Meta, Struct

from .base import (
    Finding,
    ResultView,
    Signal,
    SignalConfig,
    fingerprint_payload,
    streak_tools,
    tool_list_text,
)
from .facts import FLAG_RUNNER

SIGNAL_ID = "no-op-streak"
ANSWERS_KEPT = 8
"""No-op answers of a streak remembered to tell a sweep's from a refusal heard again."""


class NoOpStreakConfig(SignalConfig, kw_only=True, forbid_unknown_fields=True):
    """Policy table of ``no-op-streak``."""

    threshold: Annotated[int, Meta(ge=2)] = 3
    """Consecutive no-op results that trip the signal."""


class NoOpStreakState(Struct, tag=SIGNAL_ID, gc=False, omit_defaults=True):
    """Per-session state of ``no-op-streak``."""

    run: int = 0
    """Consecutive no-op results so far."""
    tools: tuple[str, ...] = ()
    """Distinct tool names of the streak, at most ``threshold`` of them."""
    answers: tuple[int, ...] = ()
    """Fingerprints of the streak's no-op answers that named something, at most
    ``ANSWERS_KEPT`` of them (``on_result``)."""




def _mixed_item(answer: int, sent: tuple[str, ...]) -> int:
    """``answer`` (a payload's fingerprint, 0 for none) mixed with the values naming what
    its act was about (``ResultView.sent``)."""
    return zlib.crc32("\0".join(sent).encode("utf-8", "surrogatepass"), answer & 0xFFFFFFFF) or 1


class NoOpStreak(Signal):
    """Turn-scoped critical after ``threshold`` consecutive results flagged ``no_op``."""

    id = SIGNAL_ID
    severity = "critical"
    scope = "turn"
    State = NoOpStreakState
    Config = NoOpStreakConfig

    config: NoOpStreakConfig

    def __init__(self, config: SignalConfig | None = None) -> None:
        super().__init__(config)
        self.threshold = self.config.threshold

    def is_latched(self, state: Any) -> bool:
        return state.run >= self.threshold

    def on_result(self, state: Any, result: ResultView) -> Finding | None:
        if self.exempt and result.tool in self.exempt:
            return None
        if not result.no_op or result.failed:
            if state.run:
                state.run = 0
                state.tools = ()
                state.answers = ()
            return None
        answer = fingerprint_payload(result.event.result, result.event.result_digest)
        if result.sent:
            # The item the act was about (`qbo_attach_receipt(receipt_id="dx_712014")`
            # answered {"status": "skipped", "reason": "already_attached"}): the same answer
            # for another item is that item's.
            answer = _mixed_item(answer, result.sent)
        elif result.call_flags & FLAG_RUNNER and result.call_key:
            # A command line names what it acts on in itself (`finops import-bank --file
            # .../amex_morales_c_202510.csv`): another line's no-op is another item's, the
            # same line's again counts on.
            answer = zlib.crc32(result.call_key.to_bytes(8, "little"), answer & 0xFFFFFFFF) or 1
        if answer and answer not in state.answers:
            # A no-op that says something new names what it left alone (a directory
            # update answering {"npi": "1493028645", "updated_fields": []} for the next
            # provider of a sweep): the sweep converging, item by item, not a refusal
            # heard again. The streak starts again at it. Answers alike ("already
            # recorded for this turn"), or saying nothing, count on.
            state.answers = (*state.answers[-(ANSWERS_KEPT - 1) :], answer)
            if state.run:
                state.run = 0
                state.tools = ()
        state.run += 1
        threshold = self.threshold
        if state.run > threshold:
            return None  # already reported this streak
        state.tools = streak_tools(state.tools, result.tool, threshold)
        if state.run < threshold:
            return None
        return self._finding(state)

    def _finding(self, state: Any) -> Finding:
        count = state.run
        names = tool_list_text(state.tools)
        return Finding(
            signal=self.id,
            severity=self.severity,
            scope=self.scope,
            reason=(
                f"{count} tool results in a row reported that they changed nothing "
                f"({names}). This is the tools' own statement about their results, not "
                "an inference: the agent keeps asking for a state that already holds. "
                "If the same loop returns on every new turn, interrupt the session; if "
                "these tools report no-ops as part of normal work, exempt them in the policy."
            ),
            guidance=(
                f"Your last {count} calls ({names}) each came back saying they changed "
                "nothing: what you asked for was already the case. Stop calling them. "
                "Say what you still owe the user, or end the turn with a reply instead "
                "of another tool call."
            ),
            detail={
                "count": count,
                "threshold": self.threshold,
                "tools": [name or "unnamed tool" for name in state.tools],
            },
        )
