"""``near-duplicate-calls``: one target, asked again and again with only the numbers changed.

What it catches
    Scans that no exact-match detector can see because no two calls are equal:
    paging through one file with shifting line ranges (``sed -n 1,50p a.py``,
    ``sed -n 50,100p a.py``, ``goto 200``, ``view_range [400, 450]``), walking a
    listing by offset, or re-running a search for one symbol with its spelling
    nudged (``parseConfig``, ``parse_config``, ``ParseConfig``, with ``-rn`` or
    ``-rni``). Each call is reduced to a *shape*: its command line (for a
    command runner) or its tool and canonical arguments, lower-cased, with digit
    runs masked, flag tokens (``-rn``) dropped and the characters ``_``, ``-``,
    quotes and trailing slashes removed. Calls that share a shape but differ
    exactly are near-duplicates. The signal keeps the last ``window`` calls as
    (shape, exact) fingerprint pairs, 32 bits each in two small byte arrays, and
    warns when the current
    shape has ``threshold`` distinct exact calls among them.

    This is cheap by construction: one normalisation of at most 1,024
    characters per new call (cached by call key), a scan of a fixed window of
    small integers per call, and per result its answer filed under its call
    (the window's last, or found by one search of the window); never a scan of
    the session.

Threshold: 8 distinct variants of one shape among the last 12 calls
    Reading a long file a page at a time is ordinary: coding agents that page
    with ``sed -n`` reached six pages of one file within a dozen calls in
    sessions that finished normally (docs/detection.md), so six would warn on
    careful reading. Eight of twelve, two thirds of the recent calls spent on
    one target's variations, did not occur in any normally ended session and is
    a scan that deserves a sentence to the model (say what you are looking for,
    search for it instead of paging). An exact repeat does not count twice (it is the
    repeat detector's), and the latch holds until the shape falls below half
    the threshold, so one scan warns once.

Severity: warn
    A scan is not proof of a loop: an agent reading a 2,000-line file carefully
    looks exactly like this. The alert names the count and the target so an
    operator can tell at a glance; the loop detectors stay responsible for
    halting (this signal defers to them).

Result-aware (``result_aware``, default on)
    Calls that differ *only in their numbers* (the same text once its digits
    are taken out, nothing reworded) are a walk over something numbered: pages of
    a log, offsets of a listing, ids of orders, dates of flights, values of a
    hyperparameter. Such a walk is reading when every step brings back
    something new, and a loop in disguise when it does not: the same view of a
    34-line file for ``goto 10``, ``goto 12``, ``goto 14``; empty pages past
    the end; an error each time. So the signal keeps, beside each call of its
    window, the code of the call's text with its digits taken out and a code
    of its answer (the payload's fingerprint; a write's success; failures,
    no-ops and empty answers as "nothing new"), and a walk in which at most a
    quarter of the earlier steps were unanswered, empty, failed or an answer
    already given does not warn. A rewording (``parseConfig``, ``parse_config``) is no walk and
    warns whatever came back: a re-spelled search finds the same nothing under
    another name. Without results (a runtime that publishes none, or content
    capture off) every step is unanswered and the rule is the call-only one;
    ``result_aware = false`` is that rule everywhere.

    Eleven of fifty hand-written healthy traces of other runtimes (docs/detection.md:
    log and API pagination, a learning-rate sweep, ticket labels, flight dates)
    warned under the call-only rule, and none does now; in the real-session
    benchmark the signal warned in no normally ended session either way.

Known false positives
    A walk whose steps answer the same thing on purpose (polling numbered
    jobs that are all still queued), and re-spelled searches that each find
    something. Exempt the tool, or raise the threshold.
"""

from __future__ import annotations

import re
import struct
import zlib
from typing import Annotated, Any, ClassVar

from msgspec import Meta, Struct

from ..canonical import truncate_middle
from .base import (
    DIGIT_CHARS,
    MASK_DIGITS,
    CallView,
    Finding,
    ResultView,
    Signal,
    SignalConfig,
    squeeze_marks,
)
from .facts import FLAG_WRITE, command_text

SIGNAL_ID = "near-duplicate-calls"
TEXT_LIMIT = 1024
WINDOW_LIMIT = 64
_M32 = (1 << 32) - 1

_FLAG = re.compile(rb"(?:^|\s)--?[a-z][\w-]*")
# Digits become "#" (runs are squeezed below) and the spelling noise characters go;
# on bytes, each step is one C-level pass.
_NOISE = b"_-'\"`"
# Answer codes besides a payload's fingerprint (which is mapped above them).
_UNANSWERED, _NOTHING_NEW, _WROTE = 0, 1, 2
_NO_NEWS = (_UNANSWERED.to_bytes(4, "little"), _NOTHING_NEW.to_bytes(4, "little"))
_WRITE_DONE = _WROTE.to_bytes(4, "little")
_put_answer = struct.Struct("<I").pack_into


def shape(text: str) -> str:
    """The near-duplicate shape of a call's text (see the module docstring)."""
    return shape_bytes(text).decode("utf-8", "replace")


def shape_bytes(text: str, encoded: bytes | None = None) -> bytes:
    """:func:`shape` before it is decoded: what the shape code hashes when it is ASCII.

    ``encoded``: ``text`` as UTF-8 when the caller already has it (the canonical
    arguments' encoder output), for a text of at most :data:`TEXT_LIMIT` characters.
    """
    if encoded is None:
        encoded = text[:TEXT_LIMIT].encode("utf-8", "surrogatepass")
    data = encoded.lower()
    if data.find(b" -") >= 0 or data[:1] == b"-":  # find: see squeeze_marks
        data = _FLAG.sub(b" ", data)
    data = squeeze_marks(data.translate(MASK_DIGITS, _NOISE))
    data = b" ".join(data.split()).replace(b"/ ", b" ").replace(b"/,", b",").replace(b"/]", b"]")
    return data.rstrip(b"/")


class NearDuplicateCallsConfig(SignalConfig, kw_only=True, forbid_unknown_fields=True):
    """Policy table of ``near-duplicate-calls``."""

    window: Annotated[int, Meta(ge=4, le=WINDOW_LIMIT)] = 12
    """Recent calls considered."""
    threshold: Annotated[int, Meta(ge=3, le=WINDOW_LIMIT)] = 8
    """Distinct calls of one shape among them that raise the warning (at most ``window``)."""

    result_aware: bool = True
    """A walk differing only in numbers whose every step answered something new is
    reading, not a scan to warn about (the module docstring)."""

    at_most = (("threshold", "window"),)


class NearDuplicateCallsState(Struct, tag=SIGNAL_ID, gc=False, omit_defaults=True):
    """Per-session state of ``near-duplicate-calls``."""

    shapes: bytearray = bytearray()
    """Shape codes of the last ``window`` calls, 4 bytes each, oldest first."""
    exacts: bytearray = bytearray()
    """Their exact call codes (the low 32 bits of the call key), parallel to ``shapes``."""
    answers: bytearray = bytearray()
    """Per call of the window, 8 bytes: the code of its text with its digits taken out,
    then the code of its answer (0: none yet); kept only when result-aware."""
    newest: int = 0
    """Call key of the window's last call (when result-aware): where its answer goes."""
    latched: int = 0
    """shape32 of the reported scan (0: none)."""


class NearDuplicateCalls(Signal):
    """Warns when one call shape has ``threshold`` distinct variants in the window."""

    id: ClassVar[str] = SIGNAL_ID
    severity = "warn"
    scope = "session"
    State = NearDuplicateCallsState
    sees_waits = False  # a wait's answers are no loop evidence (signals/facts.py)
    Config = NearDuplicateCallsConfig
    defers_to = ("repeated-tool-call", "alternating-tool-cycle", "dominant-tool-call",
                 "failure-loop", "long-loop", "result-stall")

    config: NearDuplicateCallsConfig

    def __init__(self, config: SignalConfig | None = None) -> None:
        super().__init__(config)
        self.window, self.threshold = self.config.window, self.config.threshold
        self.result_aware: bool = self.config.result_aware
        # Answers are read (paired with their calls, fingerprinted) only when result-aware.
        self.needs_pairing = self.needs_fingerprint = self.result_aware
        self._shapes: dict[int, tuple[int, str | bytes, bytes]] = {}
        self._seeds: dict[str, int] = {}
        self._bytes = self.window * 4

    def is_latched(self, state: Any) -> bool:
        return bool(state.latched)

    def on_result(self, state: Any, result: ResultView) -> Finding | None:
        key = result.call_key
        answers = state.answers
        if key == state.newest and key:
            at = len(answers) - 4  # the usual case: the answer to the window's last call
        else:
            if not key or not self.result_aware:
                return None
            # An earlier call's answer (parallel calls): its newest entry, by a C-level
            # search from the end and the alignment test (a hit straddling two entries
            # is no hit).
            exacts = state.exacts
            key32 = (key & _M32).to_bytes(4, "little")
            at = exacts.rfind(key32)
            while at > 0 and at % 4:
                at = exacts.rfind(key32, 0, at + 3)
            if at < 0 or len(answers) != len(exacts) * 2:
                return None
            at = at * 2 + 4
        if result.failed or result.no_op or not result.outcome:
            code = _NOTHING_NEW
        elif result.call_flags & FLAG_WRITE:
            code = _WROTE  # each write of a sweep changed something, whatever it said
        else:
            code = result.outcome & _M32
            if code <= _WROTE:
                code += 3
        _put_answer(answers, at, code)  # in place, without a slice or a bytes object
        return None

    def on_call(self, state: Any, call: CallView) -> Finding | None:
        if self.exempt and call.tool in self.exempt:
            return None
        cached = self._shapes.get(call.key)
        if cached is None:
            text = command_text(call.args) if call.runner else None
            if text is None:
                canonical = call.canonical
                text = canonical.text
                # The encoder's bytes are the text's UTF-8: no second encode.
                encoded = (canonical.raw if len(text) <= TEXT_LIMIT else None) or text[
                    :TEXT_LIMIT
                ].encode("utf-8", "surrogatepass")
            else:
                encoded = text[:TEXT_LIMIT].encode("utf-8", "surrogatepass")
            data = shape_bytes(text, encoded)
            tool = call.tool
            if data.isascii() and tool.isascii():
                # ASCII decodes and re-encodes to itself: hash the bytes, decode on a finding.
                # The CRC of the tool's prefix is the same for every call of it: kept.
                seed = self._seeds.get(tool)
                if seed is None:
                    if len(self._seeds) >= 512:  # bounded: tool names come from untrusted input
                        self._seeds.clear()
                    seed = self._seeds[tool] = zlib.crc32(tool.encode() + b"\0")
                shape32 = zlib.crc32(data, seed) or 1
                form: str | bytes = data
            else:
                form = data.decode("utf-8", "replace")
                shape32 = zlib.crc32(f"{tool}\0{form}".encode("utf-8", "surrogatepass")) or 1
            # Whether two calls of one shape differ only in their numbers: the code of
            # the text with its digits taken out (no case, flag or spelling folded),
            # beside an unanswered answer code: the call's entry in ``answers``.
            entry = (
                zlib.crc32(encoded.translate(None, DIGIT_CHARS)).to_bytes(4, "little")
                + _NO_NEWS[0]
                if self.result_aware else b""
            )
            # A pure function of the call: cached per process, keyed by the call key.
            if len(self._shapes) >= 4096:
                self._shapes.clear()
            self._shapes[call.key] = cached = (shape32, form, entry)
        shape32, form, entry = cached
        packed = shape32.to_bytes(4, "little")
        shapes, exacts = state.shapes, state.exacts
        full = len(shapes) >= self._bytes
        if full:
            del shapes[:4], exacts[:4]
        shapes.extend(packed)
        exacts.extend((call.key & _M32).to_bytes(4, "little"))
        if entry:
            answers = state.answers
            if full:
                del answers[:8]
            if len(answers) != len(shapes) * 2 - 8:
                # A snapshot written without answers (or by a call-only policy): start
                # them unanswered, so that the window reads as the call-only rule does.
                answers[:] = bytes(len(shapes) * 2 - 8)
            answers += entry
            state.newest = call.key
        elif state.answers:
            # Kept by a result-aware policy: stale once this one slides the window alone.
            state.answers = bytearray()
            state.newest = 0
        latched = state.latched
        if latched:
            if latched != shape32:
                if self._variants(state, latched.to_bytes(4, "little")) * 2 < self.threshold:
                    state.latched = 0
                return None
            if shapes.count(packed) * 2 < self.threshold:
                state.latched = 0
            return None
        if shapes.count(packed) < self.threshold:
            return None  # too few calls of this shape to hold enough variants
        count = self._variants(state, packed)
        if count < self.threshold:
            return None
        if self.result_aware and self._reading(state, packed):
            return None
        state.latched = shape32
        return self._finding(call, count, form if isinstance(form, str) else form.decode())

    @staticmethod
    def _reading(state: Any, packed: bytes) -> bool:
        """Whether the window's calls of shape ``packed`` are a walk differing only in
        numbers whose answered steps brought back something new (see the docstring)."""
        shapes, answers = state.shapes, state.answers
        numbers = answers[-8:-4]
        seen: set[bytes] = set()
        steps = stale = 0
        for i in range(0, len(shapes) - 4, 4):  # the current call has no answer yet
            if shapes[i : i + 4] != packed:
                continue
            if answers[2 * i : 2 * i + 4] != numbers:
                return False  # reworded, not only renumbered
            answer = bytes(answers[2 * i + 4 : 2 * i + 8])
            steps += 1
            if answer in _NO_NEWS:
                stale += 1  # unanswered, failed, empty or a no-op
            elif answer != _WRITE_DONE:
                if answer in seen:
                    stale += 1  # the same answer again
                seen.add(answer)
        return stale * 4 <= steps

    @staticmethod
    def _variants(state: Any, packed: bytes) -> int:
        """Distinct exact calls among the window's calls of shape ``packed``."""
        shapes, exacts = state.shapes, state.exacts
        return len({bytes(exacts[i : i + 4]) for i in range(0, len(shapes), 4)
                    if shapes[i : i + 4] == packed})

    def _finding(self, call: CallView, count: int, form: str) -> Finding:
        target = truncate_middle(form, 160)
        what = f"{call.tool} ({call.action})" if call.runner and call.action else call.tool
        return Finding(
            signal=SIGNAL_ID,
            severity="warn",
            scope="session",
            reason=(
                f"{count} different calls of one shape among the last {self.window} ({what}; "
                f"shape {target!r}): they differ only in numbers or in small rewordings, such "
                "as a file paged through by line ranges or a search re-spelled. A scan, or "
                "a loop in disguise; this warns only. Exempt the tool if it paginates by design."
            ),
            guidance=(
                f"Your last calls to {what} have been {count} variations of one request, "
                "differing only in numbers or spelling. If you are looking for something "
                "specific, search for it directly instead of paging; if it is not there, say "
                "so and move on."
            ),
            detail={"tool": call.tool, "action": call.action, "count": count,
                    "window": self.window, "threshold": self.threshold, "target": target},
        )
