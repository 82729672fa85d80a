"""``repeated-tool-call``: the same call, issued again and again in a row.

What it catches
    The plainest runaway there is: an agent that keeps issuing one tool call
    with the same arguments back to back, most often re-reading one file. The
    run is anchored on its *first* call: a call extends the run when it names
    the same tool and its arguments are equivalent to the anchor's under
    :func:`streamguard.canonical.args_equivalent` (path-shaped values cleaned,
    plus the path suffix relation, so ``main.go``, ``./main.go`` and
    ``/workspace/main.go`` are one call). Anything else starts a new run of one.
    Anchoring, rather than comparing with the previous call, is what keeps the
    non-transitive suffix relation from chaining: ``/repo/a/main.go`` followed
    by ``b/main.go`` is a break. The price is accepted: ``main.go``,
    ``a/main.go``, ``b/main.go``, ... all relate to the anchor, so they are one
    run.

Threshold
    Five calls (``threshold``, clamped to at least 2). Re-issuing a call once
    or twice is ordinary (a re-read after an edit, a retry after a transient
    error); by the fifth unchanged call the agent has had four identical
    answers and is learning nothing. One alert per run: the latch clears only
    when a non-equivalent call starts a new run (or on a reset), and the next
    run alerts again.

Severity
    Critical, session scope. This detector can prove what it reports: the
    arguments are equivalent on every call, so the results are too, and no
    progress is possible by repeating. Under enforce it halts the session.

Known false positives
    A hand-rolled poll that re-issues one status call until something changes
    (``wait_and_verify`` is the supported way to wait), and the anchoring
    consequence above, where calls naming different files that all end in the
    anchor's path are counted as one run. Free-text arguments go the other way
    (a reworded call is a different call); ``repeated-tool-name`` covers them.
"""

from __future__ import annotations

from sys import intern
from typing import Annotated, Any

from msgspec import Meta, Struct
from msgspec.structs import replace

from ..canonical import CanonicalArgs, args_equivalent, restore_canonical, truncate_middle
from .base import CallView, Finding, Signal, SignalConfig

SIGNAL_ID = "repeated-tool-call"
ARGS_LIMIT = 200
"""Bytes of arguments quoted in alert text."""
ANCHOR_TEXT_LIMIT = 512
"""Largest anchor text kept for the path suffix comparison (bytes of canonical JSON).

Larger anchors are compared by call key only: cleaned spellings still match,
only the suffix relation (``/workspace/a.go`` against ``a.go``) is lost. This
bounds per-session state when path-bearing calls carry bulky content.
"""


class RepeatedToolCall(Signal):
    """Trips on ``threshold`` consecutive calls equivalent to the run's first call."""

    id = SIGNAL_ID
    severity = "critical"
    scope = "session"

    class Config(SignalConfig, kw_only=True):
        """Policy table of ``repeated-tool-call``."""

        threshold: Annotated[int, Meta(ge=2)] = 5
        """Consecutive equivalent calls that trip the signal."""

    class State(Struct, tag=SIGNAL_ID, gc=False, omit_defaults=True):
        """Per-session state: the current run and its anchor (never raw payloads)."""

        run: int = 0
        """Length of the current run of equivalent calls (0: no call seen yet)."""
        latched: bool = False
        """The current run has already been reported."""
        tool: str = ""
        """Tool name of the anchor."""
        key: int = 0
        """Call key of the anchor (tool plus cleaned arguments)."""
        text: str = ""
        """The anchor's canonical text, kept only when it has path-shaped keys and
        is at most :data:`ANCHOR_TEXT_LIMIT` long; empty otherwise."""

    def __init__(self, config: SignalConfig | None = None) -> None:
        super().__init__(config)
        try:
            threshold = int(getattr(self.config, "threshold", 5))
        except (TypeError, ValueError):  # a hand-built Config holding garbage
            threshold = 5
        self.threshold: int = max(2, threshold)
        # One-entry cache of the last anchor parsed back from its text: a sweep
        # compares every call with the previous one, which was just canonicalised.
        self._anchor_text: str | None = None
        self._anchor: CanonicalArgs | None = None

    def is_latched(self, state: Any) -> bool:
        return bool(state.latched)

    def on_call(self, state: Any, call: CallView) -> Finding | None:
        if self.exempt and call.tool in self.exempt:
            return None
        if state.run and (call.key == state.key or self._equivalent(state, call)):
            state.run += 1
        else:
            canonical = call.canonical
            state.run = 1
            state.latched = False
            state.tool = intern(call.tool)
            state.key = call.key
            if canonical.paths and len(canonical.text) <= ANCHOR_TEXT_LIMIT:
                state.text = canonical.text
                self._anchor_text = canonical.text
                self._anchor = canonical
            else:
                state.text = ""
        if state.run < self.threshold or state.latched:
            return None
        state.latched = True
        return self._finding(call, state.run)

    def would_trip(self, state: Any, call: CallView) -> bool:
        """Whether ``call``, observed next, would find this signal tripped (state untouched).

        For a caller that gates a call before running it. A behaviour that was
        already reported still counts: the latch is ignored, so every call that
        continues a reported loop answers ``True``.
        """
        if call.tool in self.exempt:
            return False
        return self.on_call(replace(state, latched=False), call) is not None

    def _equivalent(self, state: Any, call: CallView) -> bool:
        """Slow path (keys differ): same tool and path-suffix equivalent arguments."""
        paths = call.canonical.paths
        if not state.text or not paths or call.tool != state.tool:
            return False
        text = state.text
        for value in paths.values():
            # Suffix-equivalent paths share their last component: a cheap necessary
            # condition that spares decoding the anchor for a sweep of distinct files.
            if value.rpartition("/")[2] not in text:
                return False
        anchor = self._anchor
        if anchor is None or self._anchor_text != state.text:
            anchor = restore_canonical(state.text)
            self._anchor_text = state.text
            self._anchor = anchor
        return args_equivalent(anchor, call.canonical)

    def _finding(self, call: CallView, count: int) -> Finding:
        tool = call.tool
        args = truncate_middle(call.canonical.text, ARGS_LIMIT)
        reason = (
            f"{tool} was called {count} times in a row with equivalent arguments {args}; "
            "the agent is most likely stuck in a loop. Under enforce the halting controller "
            "stops the session; look at what it was trying to do, then `streamguard reset` "
            "the session. A cost ceiling is the hard backstop if nobody steps in."
        )
        guidance = (
            f"You have called {tool} {count} times in a row with the same arguments {args}. "
            "An unchanged call gives back an unchanged answer, so another one cannot move "
            "you forward. Vary the arguments or reach for another tool; if no step different "
            "from this one is left, stop making tool calls and explain where you are blocked. "
            "Issuing this call again as it is will not help."
        )
        return Finding(
            signal=SIGNAL_ID,
            severity="critical",
            scope="session",
            reason=reason,
            guidance=guidance,
            detail={"tool": tool, "count": count, "threshold": self.threshold, "args": args},
        )
