"""verification: changes made blind, stacked unchecked, or reported without a look.

This is the session state machine of Pulse's chat agent, watched from outside the
agent. Pulse enforces its rules in code because a prompt can be argued with; a
stream watchdog sees a call only after the agent made it, so it cannot block
one. It reports the same three violations instead, each under its own id:

* ``write-without-target``: a write-kind call while nothing has been resolved
  yet (no resolve or read call has succeeded in this session). Further writes
  before anything is resolved are the same blind writing, not a second rule;
* ``unverified-write``: a write-kind call while an earlier change has not been
  checked since (a write in flight, or a successful write with no successful
  read or verify call after it);
* ``unverified-final-answer``: a final answer while a change is unchecked.

**Tool kinds.** ``CallView.kind`` (the kind the agent declared on the event)
wins; otherwise :meth:`VerificationConfig.classify` matches the tool name
against the glob lists ``resolve_tools``, ``read_tools``, ``verify_tools``,
``write_tools`` and ``user_input_tools`` (case-insensitive; a namespaced name
such as ``fs.read_file`` or ``srv__read_file`` is also tried by its last part).
A name matched by several lists takes the first kind in the order user_input,
verify, read, resolve, write: an ambiguous name is never taken for a write, so a
classification doubt can cost a missed alert but never a false one. Unknown
tools are ignored entirely (Pulse treats them as writes; an observer that does
not know a tool must fail open). ``verify`` is a read that checks an outcome
(tests, health checks): it verifies a change but does not resolve a target.

**States** (a small int, :class:`Phase`):

* ``RESOLVING`` (start): no target established. A *successful* resolve or read
  result moves to ``READING``.
* ``READING``: a target is known; reading is free.
* ``WRITING``: a write call is in flight. Its successful result moves to
  ``VERIFYING``; a failed one returns to the state the write left (nothing
  changed, so nothing needs checking).
* ``VERIFYING``: a change happened and has not been checked. A successful
  read, resolve or verify result, for a call issued after the write call, moves
  back to ``READING``. A read issued before the write call (still in flight when
  the write ran), or one whose result arrives before the write's own result,
  does not count: it cannot have observed the change.

``user_input`` calls change nothing: asking is neither discovery nor checking.

**Invariants kept from the reference.** Reads are never flagged (only write-kind
calls and final answers can be). A flagged write never counts as a resolution
or a verification, and repeating it does not wear the rule down: targets and
checks come only from successful resolve, read and verify results, however many
flagged writes come in between. (A blind write that succeeded did change
something, so it still leads to ``VERIFYING``: the watchdog cannot undo it, only
insist that it is checked.) Each rule alerts once per episode (until the target
is resolved, the change verified, or the next turn starts), so a burst of writes
gives one alert, not one per write.

**State.** The phase, the phase a failed in-flight write returns to, a bit set
(three alert latches and "a target was resolved"), and up to 8 classified calls
awaiting their result (their ids, at most 64 characters kept, and small kind
codes), so a result is judged by the kind of the call that produced it: matched
by ``call_id``, else to the newest id-less call of the same tool, else by the
tool's name.

**Turn boundary.** A turn start keeps the state and re-arms the alerts. Pulse
keeps its machine for the whole chat session (only a full clear resets it), and
so does this signal: a target found in one turn is still known in the next, and
a change left unchecked at the end of a turn is still unchecked at the start of
the next one, so the next write or final answer is flagged again (it is a new
claim, made after the feedback about the previous one). An operator reset
returns the machine to ``RESOLVING``.

**Severity: warn**, for all three. Pulse can refuse the call; here the write
has already happened, and the kinds usually come from tool-name patterns, so a
critical would turn a naming heuristic into a turn cut or a session halt. What
helps is the feedback to the model (check the change now, or say it is
unchecked) and the alert to the operator. Scope ``session`` (unused for warn).

**Off by default.** It needs tool kinds (declared ``kind`` on the events, or tool
names the patterns understand) and ``tool_result`` events; a stream without
results never leaves ``RESOLVING`` and flags the first write of every turn.
**Known false positives:** creating a new file (a write with nothing to resolve first);
editing several files before one test run (``unverified-write`` on the second
edit); changes verified by a tool the patterns do not classify (a shell
command); final answers that honestly say the change is unchecked.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import IntEnum
from typing import ClassVar

from msgspec import Struct, field

from ..events import FinalAnswer, Scope, Severity
from .base import CallView, Finding, ResultView, Signal, SignalConfig
from .facts import tool_glob_matcher

SIGNAL_ID = "verification"
WRITE_WITHOUT_TARGET = "write-without-target"
UNVERIFIED_WRITE = "unverified-write"
UNVERIFIED_FINAL_ANSWER = "unverified-final-answer"
FINDING_IDS = (WRITE_WITHOUT_TARGET, UNVERIFIED_WRITE, UNVERIFIED_FINAL_ANSWER)


class Phase(IntEnum):
    RESOLVING = 0
    READING = 1
    WRITING = 2
    VERIFYING = 3


# Plain ints on the hot path (enum attribute access is slow).
_RESOLVING, _READING, _WRITING, _VERIFYING = 0, 1, 2, 3


KINDS = ("resolve", "read", "verify", "write", "user_input")
_KIND_CODE = {"resolve": 1, "read": 2, "verify": 3, "write": 4, "user_input": 5}
_RESOLVE, _READ, _VERIFY, _WRITE, _USER_INPUT = 1, 2, 3, 4, 5
_CLASSIFY_ORDER = ("user_input", "verify", "read", "resolve", "write")

# Bits of State.flags: three alert latches, and whether a target was ever resolved.
_L_TARGET, _L_WRITE, _L_ANSWER, _RESOLVED = 1, 2, 4, 8
_LATCHES = _L_TARGET | _L_WRITE | _L_ANSWER

MAX_INFLIGHT = 8
# In-flight call: its id (or tool name) in inflight_ids; in inflight_kinds the kind
# code, | 8 once a later write makes it stale, | 16 when keyed by the tool name.
_STALE, _BY_TOOL = 8, 16
_NAME_MAX = 64
_CACHE_MAX = 512


DEFAULT_RESOLVE_TOOLS = (
    "discover*", "find*", "search*", "list*", "lookup*", "locate*", "resolve*", "query*",
    "glob", "ls",
    # searches named by what they search: web_search, google_search, code_search,
    # Claude Code's WebSearch
    "*_search", "*websearch", "*_lookup",
    # threat hunts: Defender's advanced hunting, Graph's runHuntingQuery, a SIEM's hunt_*
    "*_hunting", "*hunting_query", "*huntingquery", "hunt_*",
)
DEFAULT_READ_TOOLS = (
    "read*", "get*", "view*", "show*", "describe*", "inspect*", "fetch*", "cat", "head",
    "tail", "grep", "logs*", "metrics*", "status*",
)
DEFAULT_VERIFY_TOOLS = (
    "verify*", "validate*", "check_*", "test*", "run_tests*", "wait_and_verify", "health*",
    "healthcheck*", "probe*",
)
DEFAULT_WRITE_TOOLS = (
    "write*", "edit*", "create*", "update*", "delete*", "remove*", "rm", "mv", "move*",
    "rename*", "patch*", "apply*", "set_*", "put*", "restart*", "start*", "stop*", "kill*",
    "reboot*", "scale*", "deploy*", "install*", "uninstall*", "enable*", "disable*",
    # Messages and comments sent: each lands somewhere (a channel, a pull request). Named
    # whole (not post*, send*, submit* alone: post_deploy_check, send_request, submit_query
    # read).
    "post_comment*", "post_message*", "send_message*", "send_email*", "send_mail*",
    "send_sms*", "send_notification*", "reply_to_*", "add_*comment*", "*_post_comment",
    "*_postmessage", "*_send_message",
    # The editors of the common coding harnesses whose names open with another word:
    # Claude Code's MultiEdit and NotebookEdit, Cline's replace_in_file, Gemini CLI's
    # replace, insert/append/overwrite tools, and any *_edit.
    "multiedit", "multi_edit", "notebookedit", "notebook_edit", "*_edit", "replace*",
    "str_replace", "insert*", "append*", "overwrite*", "modify*", "save*",
    "search_replace*", "search_and_replace*", "find_and_replace*", "find_replace*",
    # A browser agent's input: typing into a field, filling or choosing in a form changes
    # the page ("Typed ... into ..." is an acknowledgement, like "File written").
    "browser_type", "browser_fill*", "browser_select*", "fill_form*", "type_text", "input_text",
    # A desktop agent's typing (UFO's pywinauto actions, Bytebot's computer_type_*,
    # Selenium's send_keys): the same, for a window's controls. A click stays no write:
    # most clicks move through the interface.
    "keyboard_input", "set_edit_text", "*_type_text", "*_type_keys", "send_keys",
)
DEFAULT_USER_INPUT_TOOLS = (
    "ask*", "confirm*", "prompt_user*", "request_user_input*", "*user_input*",
)


class VerificationConfig(SignalConfig, kw_only=True, forbid_unknown_fields=True, dict=True):
    """Tool-name globs per kind (case-insensitive, :mod:`fnmatch` syntax).

    Treat an instance as read-only once a signal is built from it: the compiled
    patterns and the name cache are taken at that point.
    """

    resolve_tools: list[str] = field(default_factory=lambda: list(DEFAULT_RESOLVE_TOOLS))
    read_tools: list[str] = field(default_factory=lambda: list(DEFAULT_READ_TOOLS))
    verify_tools: list[str] = field(default_factory=lambda: list(DEFAULT_VERIFY_TOOLS))
    write_tools: list[str] = field(default_factory=lambda: list(DEFAULT_WRITE_TOOLS))
    user_input_tools: list[str] = field(default_factory=lambda: list(DEFAULT_USER_INPUT_TOOLS))

    def _compile(self) -> None:
        def matcher(patterns: list[str]) -> Callable[[str], bool]:
            match = tool_glob_matcher(patterns)
            assert match is not None  # (only non-empty lists are compiled)
            return match

        matchers = []
        # An editor named by the search that finds what it replaces (Mistral Vibe's
        # `search_replace`, `find_and_replace`) is a write, not the search `search*` names:
        # the write globs that name a replacement are tried before every other kind.
        replacing = [p for p in self.write_tools if "replace" in p.lower()]
        if replacing:
            matchers.append(("write", matcher(replacing)))
        by_end: list[str] = []
        for kind in _CLASSIFY_ORDER:
            patterns = getattr(self, f"{kind}_tools")
            if kind == "resolve":
                # A resolve glob that names only the end (`*_search`: web_search,
                # code_search) yields to a verb at the start: `create_search` and
                # `save_search` write, so those globs are tried after the write globs.
                by_end = [p for p in patterns if p.startswith("*")]
                patterns = [p for p in patterns if not p.startswith("*")]
            if patterns:
                matchers.append((kind, matcher(patterns)))
            if kind == "write" and by_end:
                matchers.append(("resolve", matcher(by_end)))
        self._matchers = tuple(matchers)
        self._cache: dict[str, str | None] = {}

    def classify(self, tool: str) -> str | None:
        """The kind of ``tool`` by name: resolve, read, verify, write, user_input, or None."""
        try:
            cache = self._cache
        except AttributeError:
            self._compile()
            cache = self._cache
        try:
            return cache[tool]
        except KeyError:
            pass
        kind = self._match(tool)
        if kind is None:
            short = re.split(r"\.|/|:|__", tool)[-1]
            if short and short != tool:
                kind = self._match(short)
        if len(cache) >= _CACHE_MAX:  # bounded: tool names come from untrusted input
            cache.clear()
        cache[tool] = kind
        return kind

    def _match(self, name: str) -> str | None:
        for kind, match in self._matchers:
            if match(name):
                return kind
        return None


class VerificationState(Struct, tag=SIGNAL_ID, gc=False, omit_defaults=True):
    phase: int = _RESOLVING
    """The machine's state (a :class:`Phase` value)."""
    before_write: int = _RESOLVING
    """The state a failed in-flight write returns to."""
    flags: int = 0
    """Bits 1, 2, 4: the target, write and final-answer rules alerted in this episode;
    bit 8: a resolve or read call has succeeded (a target is known)."""
    inflight_ids: list[str] = []
    """Classified calls awaiting a result, oldest first: the call id, or the tool name
    for a call without one (last 64 characters; at most MAX_INFLIGHT)."""
    inflight_kinds: list[int] = []
    """Their kind codes, parallel to ``inflight_ids`` (+8: issued before a later write;
    +16: keyed by the tool name)."""



class Verification(Signal):
    id: ClassVar[str] = SIGNAL_ID
    severity: ClassVar[Severity] = "warn"
    scope: ClassVar[Scope] = "session"
    default_enabled: ClassVar[bool] = False
    policy_table: ClassVar[str] = "verification"
    State = VerificationState
    Config = VerificationConfig
    needs_fingerprint = False  # reads only the failed bit
    alert_ids = FINDING_IDS

    config: VerificationConfig

    def __init__(self, config: SignalConfig | None = None) -> None:
        super().__init__(config)
        cfg = self.config
        cfg._compile()  # pick up the lists as they are now
        self.classify = cfg.classify
        self._codes: dict[str, int] = {}  # tool name -> kind code (bounded)

    def _code(self, tool: str) -> int:
        codes = self._codes
        code = codes.get(tool)
        if code is None:
            code = _KIND_CODE.get(self.classify(tool) or "", 0)
            if len(codes) >= _CACHE_MAX:
                codes.clear()
            codes[tool] = code
        return code

    # ------------------------------------------------------------------ calls

    def on_call(self, state: VerificationState, call: CallView) -> Finding | None:
        tool = call.tool
        if tool in self.exempt:
            return None
        kind = call.kind
        code = _KIND_CODE.get(kind, 0) if kind else self._code(tool)
        if code == 0 or code == _USER_INPUT:
            return None
        ids, kinds = state.inflight_ids, state.inflight_kinds
        call_id = call.call_id
        if call_id:
            key = call_id if len(call_id) <= _NAME_MAX else call_id[-_NAME_MAX:]
            entry = code
        else:
            # The newest id-less call of a tool stands for it.
            key = tool if len(tool) <= _NAME_MAX else tool[-_NAME_MAX:]
            entry = code | _BY_TOOL
            if key in ids:
                i = ids.index(key)
                if kinds[i] & _BY_TOOL:
                    del ids[i], kinds[i]
        if len(ids) >= MAX_INFLIGHT:
            del ids[0], kinds[0]

        finding: Finding | None = None
        if code == _WRITE:
            phase, flags = state.phase, state.flags
            if not flags & _RESOLVED:
                # Blind writes, however many, are one behaviour: one alert.
                if not flags & _L_TARGET:
                    state.flags = flags | _L_TARGET
                    finding = self._write_finding(WRITE_WITHOUT_TARGET, tool)
            elif phase != _READING and not flags & _L_WRITE:
                state.flags = flags | _L_WRITE
                finding = self._write_finding(UNVERIFIED_WRITE, tool)
            if phase != _WRITING:
                state.before_write = phase
                state.phase = _WRITING
            # Checks already in flight ran (or may have run) before this change.
            for i, entry_kind in enumerate(kinds):
                if entry_kind & 7 != _WRITE:
                    kinds[i] = entry_kind | _STALE
        ids.append(key)
        kinds.append(entry)
        return finding

    # ------------------------------------------------------------------ results

    def on_result(self, state: VerificationState, result: ResultView) -> Finding | None:
        tool = result.tool
        if tool in self.exempt:
            return None
        # The kind of the call this result answers (by call id, else the tool's
        # newest id-less call), else the tool's kind by name.
        entry = 0
        ids = state.inflight_ids
        if ids:
            kinds = state.inflight_kinds
            call_id = result.call_id
            i = -1
            if call_id:
                key = call_id if len(call_id) <= _NAME_MAX else call_id[-_NAME_MAX:]
                if key in ids and not kinds[j := ids.index(key)] & _BY_TOOL:
                    i = j
            if i < 0:
                key = tool if len(tool) <= _NAME_MAX else tool[-_NAME_MAX:]
                if key in ids and kinds[j := ids.index(key)] & _BY_TOOL:
                    i = j
            if i >= 0:
                del ids[i]
                entry = kinds.pop(i)
        if entry:
            code, stale = entry & 7, entry & _STALE
        else:
            code, stale = self._code(tool), 0
        if code == 0 or code == _USER_INPUT:
            return None
        phase = state.phase
        if code == _WRITE:
            if not result.failed:
                state.phase = _VERIFYING
            elif phase == _WRITING and not any(k & 7 == _WRITE for k in state.inflight_kinds):
                state.phase = state.before_write
            return None
        if result.failed:
            return None
        if code != _VERIFY:
            # Discovery, even by a read that ran before a write: a target is known.
            state.flags = (state.flags | _RESOLVED) & ~_L_TARGET
            if phase == _RESOLVING:
                state.phase = _READING
            elif phase == _WRITING and state.before_write == _RESOLVING:
                # Too early to verify the write in flight; should it fail, the
                # session is back to reading, not resolving.
                state.before_write = _READING
        if phase == _VERIFYING and not stale:
            state.phase = _READING
            state.flags &= ~(_L_WRITE | _L_ANSWER)
        return None

    # ------------------------------------------------------------------ turns, answers

    def on_turn_start(self, state: VerificationState) -> Finding | None:
        state.flags &= _RESOLVED
        return None

    def on_final_answer(self, state: VerificationState, event: FinalAnswer) -> Finding | None:
        phase = state.phase
        if phase not in (_WRITING, _VERIFYING) or state.flags & _L_ANSWER:
            return None
        state.flags |= _L_ANSWER
        pending = phase == _WRITING
        reason = (
            "the agent gave a final answer while its last change has not been checked: "
            + ("the write's result had not even arrived" if pending else
               "no read or verification call succeeded after the write")
            + ". The answer may report an outcome nobody observed. Advisory; if the change "
            "was checked by a tool this signal does not classify, add it to verify_tools "
            "in the policy."
        )
        guidance = (
            "Your last answer came after a change you never checked. Before saying that a "
            "change worked, read back its result (its state, its logs, or a test). If you "
            "cannot check it, say plainly that the change is unverified."
        )
        return Finding(
            signal=UNVERIFIED_FINAL_ANSWER,
            severity="warn",
            scope="session",
            reason=reason,
            guidance=guidance,
            detail={"state": Phase(phase).name},
        )

    def is_latched(self, state: VerificationState) -> bool:
        return bool(state.flags & _LATCHES)

    # ------------------------------------------------------------------ text

    def _write_finding(self, signal: str, tool: str) -> Finding:
        if signal == WRITE_WITHOUT_TARGET:
            reason = (
                f"write tool {tool!r} was called before any discovery or read call had "
                "succeeded: the agent is changing something it has not looked up. Advisory; "
                "if the tool needs no target, exempt it or fix its kind in the policy."
            )
            guidance = (
                f"You called {tool}, which changes things, before confirming what it acts on. "
                "Find the target and read its current state first, then change it, then "
                "check the result."
            )
        else:
            reason = (
                f"write tool {tool!r} was called while the previous change had not been "
                "checked by a successful read or verification call. Advisory; batched edits "
                "followed by one test run also look like this."
            )
            guidance = (
                f"You called {tool} to make another change before checking that the previous "
                "one worked. Read back the result of the previous change first, so that a "
                "failure is caught where it happened."
            )
        return Finding(
            signal=signal,
            severity="warn",
            scope="session",
            reason=reason,
            guidance=guidance,
            detail={"tool": tool},
        )
