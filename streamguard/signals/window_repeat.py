"""window-repeat: the same call keeps coming back inside a short sliding window.

**What it catches.** An agent that re-issues one call (same tool, equivalent
arguments) every few steps with other work in between: ``search q``, ``read a``,
``search q``, ``grep b``, ``search q``. Nothing errors, each call is quick, and
the consecutive-run detector never sees a run. The signal keeps the keys of the
last ``window`` calls and trips when the current call's key occurs ``threshold``
times among them (this call included). Defaults: window 8, threshold 3, the
sliding-window rule of the tool-loop-guard crate.

**Why these numbers, and why opt-in.** Three in eight is an early hint, not a
proof. The default set already covers the proven shapes with stronger evidence:
``repeated-tool-call`` (5 in a row), ``alternating-tool-cycle`` (three identical
laps) and ``dominant-tool-call`` (8 of the last 12). This signal fires long
before any of them, which is its value for an operator who wants an early
warning, and also why it is off by default (``default_enabled = False``): a
poll that checks a status between two steps of real work reaches 3 in 8 quickly.

**Configuration rules** (those of the crate, in its order): ``window >= 2``,
``threshold >= 2``, ``threshold <= window``. :func:`validate` (and
:meth:`WindowRepeatConfig.validate`, which the policy loader calls after decoding) raises
:class:`ValueError` with a message that starts with the offending field; the
signal validates its config when it is built, as the crate does when a guard is
constructed. Invalid values are rejected, not clamped, because the reference
rejects them. The policy additionally caps both at 64 (``msgspec.Meta``) so the
ring stays a few hundred bytes per session.

**Key.** Normally the shared call key (tool plus canonical arguments, with the
policy's global noise fields already dropped). ``ignore_fields`` drops further
top-level fields for this signal only before keying, which is the crate's
custom-key idea (ignore a ``request_id`` or a ``timestamp``); the key is then
recomputed, but only for calls whose canonical text mentions such a field.

**Severity: warn.** The crate raises an error, which is a hard stop, but the
evidence is too thin for this watchdog to cut or halt a session on it: the same
three-in-eight shape is a legitimate poll, a re-read after an edit, or a status
check around a long operation. As with the name, failure, stall and silence
signals, a detector that cannot tell a loop from a poll warns. Scope is
``session`` (it is never read for warn findings). Callers that want the crate's
blocking behaviour can gate a call on :meth:`WindowRepeat.would_trip` before
executing it.

**One behaviour, one alert.** A key alerts once and stays latched while it still
occurs at least ``threshold`` times in the window; it re-arms when evictions take
it below the threshold. The signal defers to ``repeated-tool-call``,
``alternating-tool-cycle`` and ``dominant-tool-call``: while any of them is
latched the watchdog silences this one (which keeps its own latch, so it does
not speak up later about the behaviour they reported).

**Known false positives.** Hand-written polls (exempt the poll tool, or prefer a
wait-and-verify tool), re-reading a file after each edit, and tools whose
arguments carry no per-call variation although each call is different work
(a ``next_page`` with the cursor held server-side).
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Self

import msgspec
from msgspec import Meta, Struct

from ..canonical import stable_hash, truncate_middle
from ..events import Scope, Severity
from .base import CallView, Finding, Signal, SignalConfig

SIGNAL_ID = "window-repeat"
MAX_WINDOW = 64
"""Policy-level cap on ``window`` and ``threshold`` (per-session memory bound)."""

_decoder = msgspec.json.Decoder()
_sorted_encoder = msgspec.json.Encoder(order="sorted")


def validate(window: int, threshold: int) -> None:
    """Check a window/threshold pair with the crate's rules, in the crate's order.

    Raises :class:`ValueError` whose message starts with the offending field.
    """
    for name, value in (("window", window), ("threshold", threshold)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{name}: must be an integer (got {value!r})")
    if window < 2:
        raise ValueError(f"window: must be at least 2 (got {window})")
    if threshold < 2:
        raise ValueError(f"threshold: must be at least 2 (got {threshold})")
    if threshold > window:
        raise ValueError(
            f"threshold: must not exceed window (got threshold={threshold}, window={window})"
        )


class WindowRepeatConfig(SignalConfig, kw_only=True, forbid_unknown_fields=True):
    window: Annotated[int, Meta(ge=2, le=MAX_WINDOW)] = 8
    threshold: Annotated[int, Meta(ge=2, le=MAX_WINDOW)] = 3
    ignore_fields: list[str] = []

    def validate(self) -> None:
        """Check this table with the crate's rules (see :func:`validate`).

        The policy loader calls it after decoding, and the signal calls it when it
        is built, so an invalid pair never reaches a session.
        """
        validate(self.window, self.threshold)

    def resolved(self) -> Self:
        """Refused, not clamped: the crate rejects an invalid guard at construction."""
        self.validate()
        return self


class WindowRepeatState(Struct, tag=SIGNAL_ID, gc=False, omit_defaults=True):
    keys: list[int] = []
    """Keys of the last ``window`` calls, oldest first."""
    latched: list[int] = []
    """Keys that alerted and still reach the threshold (at most window // threshold)."""



class WindowRepeat(Signal):
    id: ClassVar[str] = SIGNAL_ID
    severity: ClassVar[Severity] = "warn"
    scope: ClassVar[Scope] = "session"
    default_enabled: ClassVar[bool] = False
    State = WindowRepeatState
    Config = WindowRepeatConfig
    defers_to: ClassVar[tuple[str, ...]] = (
        "repeated-tool-call",
        "alternating-tool-cycle",
        "dominant-tool-call",
    )

    config: WindowRepeatConfig

    def __init__(self, config: SignalConfig | None = None) -> None:
        super().__init__(config)
        cfg = self.config
        self.window = cfg.window
        self.threshold = cfg.threshold
        fields = tuple(dict.fromkeys(cfg.ignore_fields))
        self.ignore_fields = fields
        # A field can only be present if its encoded name followed by ':' is in the text.
        self._needles = tuple(_sorted_encoder.encode(f).decode() + ":" for f in fields)

    # ------------------------------------------------------------------ keying

    def key_of(self, call: CallView) -> int:
        """The key this signal counts for ``call``."""
        if not self._needles:
            return call.key
        text = call.canonical.text
        if text[:1] != "{":
            return call.key
        for needle in self._needles:
            if needle in text:
                break
        else:
            return call.key
        try:
            obj = _decoder.decode(text)
        except msgspec.DecodeError:
            return call.key
        if not isinstance(obj, dict):
            return call.key
        for field in self.ignore_fields:
            obj.pop(field, None)
        return stable_hash(call.tool, _sorted_encoder.encode(obj).decode())

    # ------------------------------------------------------------------ hooks

    def on_call(self, state: WindowRepeatState, call: CallView) -> Finding | None:
        if call.tool in self.exempt:
            return None
        key = self.key_of(call)
        keys = state.keys
        latched = state.latched
        while len(keys) >= self.window:
            evicted = keys.pop(0)
            # An evicted key other than this call's loses one occurrence: re-arm it
            # once the window no longer holds enough of it.
            if (
                latched
                and evicted != key
                and evicted in latched
                and keys.count(evicted) < self.threshold
            ):
                latched.remove(evicted)
        keys.append(key)
        if len(keys) < self.threshold:
            return None
        count = keys.count(key)
        if count < self.threshold or key in latched:
            return None
        latched.append(key)
        return self._finding(call, count)

    def would_trip(self, state: WindowRepeatState, call: CallView) -> bool:
        """Whether recording ``call`` next would meet the threshold (state untouched).

        Not the shared preview (:meth:`Signal.preview_state`): the crate's preview counts.

        Like the crate's preview, it accounts for the eviction of the oldest key
        when the window is full. It answers the counting question only: a key
        that is already latched would meet the threshold without a second alert.
        """
        if call.tool in self.exempt:
            return False
        key = self.key_of(call)
        keys = state.keys
        count = keys.count(key)
        evict = len(keys) - self.window + 1
        if evict > 0:
            count -= keys[:evict].count(key)
        return count + 1 >= self.threshold

    def is_latched(self, state: WindowRepeatState) -> bool:
        return bool(state.latched)

    # ------------------------------------------------------------------ text

    def _finding(self, call: CallView, count: int) -> Finding:
        tool = call.tool
        window = self.window
        args = truncate_middle(call.canonical.text, 200)
        reason = (
            f"tool {tool!r} was called {count} times with equivalent arguments among the "
            f"last {window} calls (threshold {self.threshold}; not necessarily in a row); "
            f"arguments: {args}. This is an early, windowed repeat warning: it does not halt. "
            "If the tool is a legitimate poll, exempt it or raise the threshold in the policy; "
            "if the agent is looping, interrupt it."
        )
        guidance = (
            f"{count} of your last {window} tool calls were {tool} with these same arguments. "
            "Calling it again is unlikely to tell you anything new. Use what it already "
            "returned, change the arguments, or stop and say what you are waiting for."
        )
        return Finding(
            signal=SIGNAL_ID,
            severity="warn",
            scope="session",
            reason=reason,
            guidance=guidance,
            detail={
                "tool": tool,
                "count": count,
                "window": window,
                "threshold": self.threshold,
                "args": args,
            },
        )
