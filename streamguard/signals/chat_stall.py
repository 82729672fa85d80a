"""``chat-stall``: the agent repeats itself to the user, or talks turn after turn without acting.

What it catches
    Chat agents loop without a single tool call: they ask the user the same
    question turn after turn ("Could you confirm your booking reference?"),
    rephrased a little each time, or they keep replying without ever doing
    anything. Every other detector reads calls or results and sees nothing. This
    one reads the agent's own messages (assistant ``text`` events, and the turn's
    ``final_answer``, which some runtimes send instead: once, when it repeats the
    turn's latest text; reasoning, user and tool text never count):

    * *repeated message*: a message near-identical to one of the agent's last
      ``memory`` messages. Messages are compared by a MinHash sketch (the 8
      smallest CRC-32 hashes of their word pairs, after lower-casing, masking
      digits and dropping punctuation), which estimates the share of word pairs
      two messages have in common; they are near-identical at
      ``min_similarity`` (0.7) or more (re-worded greetings and apologies share
      far less). The warning fires when one message has come back ``repeats``
      times (default 3: said three times) with no tool call since its first
      appearance;
    * *talking without acting*: ``max_messages`` assistant messages in a row
      (default 12) within one turn, with no tool call in between, in a session
      where the agent has made at least one tool call (an agent with no tools is
      meant to talk). A new turn (the user speaking) starts the count again: a
      tutor answering twelve questions in twelve turns is doing its job.

    * *promising without acting*: ``promised_turns`` turns in a row (default 3) that
      each ended on a message announcing an act ("I'll now update the migration",
      "let me get to it", "I'm applying the fix now", an analyst's "I'll query the
      connection metrics", "Next step: ...", a service agent's "let me check the
      availability", or an act under way, "I'm cancelling your order right now",
      "Cancelling it now", "I'm on it": :data:`PROMISE`; not what a model does in
      its own text, a draft or a calculation, nor an offer, "I'll look into it if you
      want") with no tool
      call in the turn, in a session where the agent has made a tool call. A call known
      to only look (``CallView.read``: a status read, a search) is no act: before the
      announcement it does not count, after it it keeps an announced look ("let me
      check the availability", then the check), and it never ends the run of turns, so
      "I'm raising the escalation ticket now" after the same claim-status read, turn
      after turn, is warned at the third. The user
      answering "go ahead" each time does not clear it: that is the shape, an agent
      that says it will act and ends its turn instead. Counted at the next turn's
      start (the turn that ended is judged whole).

    A tool call resets all three: the agent did something. Except a question put to the
    user through a tool (a call the shared facts call ``ask``: ``ask_human``, Roo's
    ``ask_followup_question``, ``kind: "user_input"``): it is a message to the user,
    compared like one (its ``question``, ``prompt`` or ``message`` argument), and the
    agent's other calls do not clear it. An agent that re-reads a file between askings of
    one question its user keeps answering is stalled on that question; three askings
    warn. Said in plain text, the same question with calls between is not counted so
    (a call may have been the work the question was about).

Thresholds
    In the development corpus of customer-service simulations (docs/detection.md)
    no healthy agent said the same thing twice (the closest pair of distinct
    messages shared about half their words), and the longest run of assistant
    messages without a tool call was 8. Three near-identical messages are
    therefore a stall, not a style; twelve messages without acting clear the
    healthy maximum by half. An announced act is normally the call that follows it
    in the same turn; once is a slip, three turns running is a stall (the blind
    batches of docs/detection.md hold one such session, and none of their healthy
    sessions draws this warning). An act put to the user as a question ("I will
    update the schema as follows. Shall I go ahead?") or waiting on them ("once you
    confirm") is no promise broken.

Severity: warn
    Text is the weakest evidence the watchdog reads: a user may be the one
    stalling (not answering the question), and the agent's repetition may be
    the right move. The warning tells the operator and, under feedback, the
    model; it never halts.

State: the sketches of the last ``memory`` messages (32 bytes each) and their
repeat counts, three counters, and the first 200 and last 120 characters of the turn's
latest message while the turn has made no tool call. Cost per message: one regular-expression pass
and one CRC-32 per word pair over at most the first 512 characters (a question to
the user fits; a long report that repeats its opening is still the same opening).
"""

from __future__ import annotations

import re
import zlib
from itertools import pairwise
from typing import Annotated, Any, ClassVar

from msgspec import Meta, Struct

from ..canonical import truncate_middle
from ..events import FinalAnswer, Text
from .base import CallView, Finding, Signal, SignalConfig

SIGNAL_ID = "chat-stall"
TEXT_LIMIT = 512
_WORD = re.compile(r"[^\W\d_]+|\d+", re.UNICODE)
SKETCH = 8
_SLOT = SKETCH * 4
ASKED = 0x80
"""The bit of a memory entry's count byte that says it was put to the user through a
user-input tool: kept past the agent's other calls. The low 7 bits count the times."""
_TIMES = 0x7F
_ACTS_UNDER_WAY = (
    r"(?:cancell?ing|processing|submitting|booking|reserving|creating|adding|updating|sending"
    r"|placing|issuing|refunding|scheduling|rescheduling|applying|making|changing|checking"
    r"|looking (?:up|into)|initiating|finali[sz]ing|transferring|resetting|setting up"
    r"|arranging|filing|generating|preparing|running|fixing|editing|deleting|removing"
    r"|uploading|requesting|escalating|confirming your|registering|implementing|modifying"
    r"|gathering|querying|pulling|raising|opening)"
)
"""The acts a turn may announce as under way ("I'm cancelling ...", "Processing ... now")."""
PROMISE = re.compile(
    r"(?i)\b(?:I['\u2019]ll|I will|I['\u2019]m (?:going|about) to|I am (?:going|about) to|let me)"
    r"\s+(?:(?:now|just|go ahead and|quickly|then|first|next|\(?\d\)|\d\.)\s+)*"
    r"(?:edit|update|apply|modify|change|fix|implement|write|create|add|remove|delete"
    r"|refactor|patch|get to it|do (?:it|that|this|so)|proceed|execute"
    r"|make (?:the|this|that|these|those) (?:change|edit|fix)|run (?:the|it|them|this|these)"
    # the acts of an analyst or an operator through tools: a query run, figures gathered
    # (not what a model does in its own text: a draft, a calculation, an analysis)
    r"|query|retrieve|look (?:up|into)|gather|pull|fetch|search|investigate"
    # the acts of a service agent through its back office, on a thing named: an order
    # cancelled, a slot booked, an availability checked ("let me check: 12 x 4" is a
    # calculation, "let me place this in context" no act)
    r"|(?:cancel|book|reserve|submit|send|process|schedule|place|check|initiate|finali[sz]e"
    r"|file|refund|issue|transfer|set up|arrange) (?:the|your|that|it|them|those|these)\b)\b"
    # an act under way as the turn ends: "I'm cancelling your order right now",
    # "Processing the cancellation now", "I'm on it" (acts, not "I'm assuming", and not
    # "Shipping is now free")
    rf"|\bI['\u2019]m (?:now |just |going ahead and )?{_ACTS_UNDER_WAY}\b[^.!?\n]{{0,60}}"
    r"\b(?:right )?(?:now|away)\b"
    rf"|\b{_ACTS_UNDER_WAY}\s+(?:the|your|it|this|that|these|those|them|order|a|an)\b"
    r"[^.!?\n]{0,60}\bnow\b"
    r"|\bI['\u2019]ll (?:[a-z]+ ){1,5}?(?:right now|right away)\b|\bI['\u2019]m on it\b"
    r"|^(?:proceeding[.!]|next step:)"
)
"""A message that announces an act of the agent's own ("I'll now update", "let me get to
it", "making the change now", "I'll query the metrics", "Next step: ..."); not "let me
know", "I'll need your reference", "let me make sure", "I'm about to run out of context"."""
LOOK_ANNOUNCED = re.compile(
    r"(?i)\b(?:check(?:ing)?|look(?:ing)? (?:up|into)|quer(?:y|ying)|retriev(?:e|ing)"
    r"|gather(?:ing)?|pull(?:ing)?|fetch(?:ing)?|search(?:ing)?|investigat(?:e|ing))\b"
)
"""The looks among the announced acts (:data:`PROMISE`): kept by a look."""
ACT_ANNOUNCED = re.compile(
    r"(?i)\b(?:cancel|book|reserve|submit|send|process|schedul|plac|issu|refund|transfer"
    r"|creat|updat|appl|edit|modif|chang|fix|writ|add|remov|delet|rais|open|escalat"
    r"|initiat|finali[sz]|set(?:ting)? up|arrang|fil(?:e|ing)\b|reset|regist|implement)\w*"
)
"""The acts among the announced ones that change something: no look keeps them."""
AWAITS_USER = re.compile(
    r"(?i)\b(?:once|after|when|if|as soon as) you(?:'ve| have)? (?:confirm|approve|agree|reply"
    r"|answer|give|send|provide|tell|say|decide|choose|sign|ok)\w*"
    r"|\byour (?:approval|confirmation|go-ahead|ok)\b"
    # an offer, or a plan put to the user: "if you want", "whenever you're ready", "let
    # me know if that works", "if anything else comes up"
    r"|\bif you(?:'d)? (?:want|like|prefer|need|wish)\b|\bif anything\b|\bwhenever you\b"
    r"|\blet me know if (?:that|this|it|you(?:'d)? (?:want|like|prefer|agree))\b"
)
"""An announced act that waits on the user ("I'll fix that once you confirm"): a
question, not a promise broken."""
PROMISE_HEAD, PROMISE_TAIL = 200, 120
"""Characters at a message's start, and at its end, read for an announced act ("I'll now
update the migration: ...", a plan, then "I'll apply it now")."""


def _said(text: str) -> int:
    """A code of a message: its first 64 characters, white space around them left out (a
    runtime may send the text with a newline and the answer without; enough to tell the
    turn's answer from another message; read for every message, so kept short)."""
    return zlib.crc32(text[:96].strip()[:64].encode("utf-8", "surrogatepass")) or 1


def sketch(text: str) -> bytes:
    """Bottom-8 MinHash sketch of ``text``'s word pairs (lower-cased, digits masked)."""
    words = ["#" if w.isdigit() else w for w in _WORD.findall(text[:TEXT_LIMIT].lower())]
    if not words:
        return b""
    pairs = {f"{a} {b}" for a, b in pairwise(words)} or set(words)
    smallest = sorted({zlib.crc32(p.encode("utf-8", "surrogatepass")) for p in pairs})[:SKETCH]
    return b"".join(v.to_bytes(4, "little") for v in smallest)


_QUESTION_KEYS = ("question", "prompt", "message", "text", "query")


def _question(args: Any) -> str:
    """The question a user-input call puts to the user: its ``question`` (``prompt``,
    ``message``...) argument, else its longest string argument; "" when it has none."""
    if type(args) is str:
        return args
    if type(args) is not dict:
        return ""
    for key in _QUESTION_KEYS:
        value = args.get(key)
        if type(value) is str and value:
            return value
    best = ""
    for value in args.values():
        if type(value) is str and len(value) > len(best):
            best = value
    return best


def similarity(a: bytes, b: bytes) -> float:
    """Estimated share of word pairs two sketched messages have in common."""
    if not a or not b:
        return 0.0
    # Zero padding (a message with fewer than 8 word pairs) is not a hash.
    left = {int.from_bytes(a[i : i + 4], "little") for i in range(0, len(a), 4)} - {0}
    right = {int.from_bytes(b[i : i + 4], "little") for i in range(0, len(b), 4)} - {0}
    if not left or not right:
        return 0.0
    union = sorted(left | right)[:SKETCH]
    return sum(1 for v in union if v in left and v in right) / len(union)


class ChatStallConfig(SignalConfig, kw_only=True, forbid_unknown_fields=True):
    """Policy table of ``chat-stall``."""

    repeats: Annotated[int, Meta(ge=2, le=20)] = 3
    """Times one message is said (near-identically) before the warning."""
    min_similarity: Annotated[float, Meta(ge=0.3, le=1.0)] = 0.7
    """Estimated share of word pairs in common from which two messages are one."""
    memory: Annotated[int, Meta(ge=2, le=32)] = 6
    """Recent messages compared against."""
    max_messages: Annotated[int, Meta(ge=0)] = 12
    """Assistant messages in a row without a tool call that raise the warning (0: off)."""
    promised_turns: Annotated[int, Meta(ge=0, le=100)] = 3
    """Turns in a row ended on an announced act with no tool call that raise the warning
    (0: off)."""


class ChatStallState(Struct, tag=SIGNAL_ID, gc=False, omit_defaults=True):
    """Per-session state of ``chat-stall``."""

    sketches: bytearray = bytearray()
    """Sketches of the recent messages, 32 bytes each, oldest first."""
    counts: bytearray = bytearray()
    """How often each was said since the last tool call, one byte each (parallel): the
    low 7 bits; :data:`ASKED` set for a question put through a user-input tool, which
    the agent's other calls do not clear."""
    messages: int = 0
    """Assistant messages since the last tool call."""
    acted: bool = False
    """The agent has made a tool call in this session."""
    latched: bool = False
    """A warning was raised since the last tool call."""
    last: str = ""
    """The head and tail of the turn's latest message while the turn has made no tool call
    (read for an announced act, :data:`PROMISE`, when the turn ends: once a turn, not
    once a message)."""
    promises: int = 0
    """Turns in a row since the last tool call that ended on an announced act."""
    turn_acted: bool = False
    """A tool call was made in the current turn (its messages are then no promise unkept)."""
    turn_looked: bool = False
    """A call known to only look was made in the current turn: an announced look ("I'm
    checking order 101 now: ...") is then a report of it, no promise unkept."""
    said: int = 0
    """A code of the turn's latest message (:func:`_said`): a final answer that repeats it
    is the same message, not a second one."""


class ChatStall(Signal):
    """Warns when the agent repeats a message or keeps talking without acting."""

    id: ClassVar[str] = SIGNAL_ID
    severity = "warn"
    scope = "session"
    State = ChatStallState
    Config = ChatStallConfig

    config: ChatStallConfig

    def __init__(self, config: SignalConfig | None = None) -> None:
        super().__init__(config)
        cfg = self.config
        self.repeats = cfg.repeats
        self.min_similarity = cfg.min_similarity
        self.memory = cfg.memory
        self.max_messages = cfg.max_messages
        self.promised_turns = cfg.promised_turns
        self._sketches: dict[str, bytes] = {}

    def is_latched(self, state: Any) -> bool:
        return bool(state.latched)

    def on_call(self, state: Any, call: CallView) -> Finding | None:
        if self.exempt and call.tool in self.exempt:
            return None
        if not state.acted:  # a state field's store costs several times the test
            state.acted = True
        if call.read and not call.ask:
            # A look (a status read, a search) after the turn's announced act may be the
            # look it announced ("let me check the availability"): that promise is kept.
            # It does not do an act: "I'm raising the escalation ticket now" after the
            # same claim status read, turn after turn, is still a promise unkept, and the
            # looks before it do not count as acting.
            if state.last:
                state.last = ""
            if not state.turn_looked:
                state.turn_looked = True
        else:
            # Any other call ends the turn's promise: an act keeps it, and a question put
            # to the user through a tool waits on them.
            if state.promises or state.last:
                state.promises = 0
                state.last = ""
            if not state.turn_acted:
                state.turn_acted = True
        if call.ask:
            # A question put to the user through a tool (ask_followup_question, ask_human)
            # is a message to the user, not an act: it is compared like one, and kept
            # past the agent's other calls (re-reading a file between two askings of one
            # answered question is no progress on it).
            question = _question(call.args)
            return self._message(state, question, ASKED) if question else None
        if state.messages or state.counts or state.latched:
            state.messages = 0
            counts = state.counts
            if counts and max(counts) >= ASKED:
                # Questions put through a tool stay; what was said stays only until an act.
                sketches = state.sketches
                for i in range(len(counts) - 1, -1, -1):
                    if counts[i] < ASKED:
                        del sketches[i * _SLOT : (i + 1) * _SLOT], counts[i]
            else:
                state.sketches.clear()
                counts.clear()
            state.latched = False
        return None

    def on_turn_start(self, state: Any) -> Finding | None:
        # A new turn is the user speaking: answering the next question is the job, not a
        # monologue. Sketches persist: the same question asked turn after turn is the
        # repeated-message rule's case.
        state.messages = 0
        if state.said:
            state.said = 0
        if state.turn_acted:
            state.turn_acted = False
        looked = state.turn_looked
        if looked:
            state.turn_looked = False
        last = state.last
        if (
            not last or PROMISE.search(last) is None or last.rstrip().endswith("?")
            or AWAITS_USER.search(last) is not None
            # a look announced in a turn that looked: a report of it ("I'm checking order
            # 101 now: it is in transit"), not a promise
            or (looked and LOOK_ANNOUNCED.search(last) is not None and ACT_ANNOUNCED.search(last) is None)
        ):
            # no announced act; or one put to the user as a question, or waiting on them
            if state.promises:
                state.promises = 0
            if last:
                state.last = ""
            return None
        # The turn that ended announced an act and made no call (a call clears `last`).
        state.last = ""
        state.promises += 1
        # (At the threshold, once: looks between the turns clear the latch, not the run.)
        if (
            self.promised_turns and state.acted and state.promises == self.promised_turns
            and not state.latched
        ):
            state.latched = True
            return self._finding("promised_without_acting", state.promises, "")
        return None

    def on_final_answer(self, state: Any, event: FinalAnswer) -> Finding | None:
        # The turn's answer to the user is a message to the user: runtimes that send the
        # assistant's words only as the turn's final answer are read like the others.
        # One that sends both sends one message: the answer repeating the turn's latest
        # message is not read twice.
        text = event.text
        if not text or text.isspace() or _said(text) == state.said:
            return None
        return self._text(state, text)

    def on_text(self, state: Any, event: Text) -> Finding | None:
        text = event.text
        if text is None:
            state.messages += 1
            return None  # only a length: nothing to compare
        return self._text(state, text)

    def _text(self, state: Any, text: str) -> Finding | None:
        state.said = _said(text)
        if self.promised_turns and state.acted and not state.turn_acted:
            # Kept, not read: only the turn's last message counts, read when the turn ends.
            last = (
                text if len(text) <= PROMISE_HEAD + PROMISE_TAIL
                else f"{text[:PROMISE_HEAD]}\n{text[-PROMISE_TAIL:]}"
            )
            if not last.isascii():
                # state is snapshotted as UTF-8: a lone surrogate would make it unwritable
                last = last.encode("utf-8", "replace").decode("utf-8")
            state.last = last
        return self._message(state, text)

    def _message(self, state: Any, text: str, asked: int = 0) -> Finding | None:
        """Count and compare one message to the user (``asked``: :data:`ASKED` for a
        question put through a user-input tool)."""
        state.messages += 1
        value = self._sketches.get(text)
        if value is None:
            value = sketch(text)  # a pure function of the text: cached per process
            if len(text) <= 2048:  # a cache of short texts: a long one would pin its bytes
                if len(self._sketches) >= 1024:
                    self._sketches.clear()
                self._sketches[text] = value
        if not value:
            return None
        value = value.ljust(_SLOT, b"\0")  # short messages have fewer than 8 pairs
        sketches, counts = state.sketches, state.counts
        count = 1
        head = value[:4]
        for i in range(len(counts)):
            other = bytes(sketches[i * _SLOT : (i + 1) * _SLOT])
            # MinHash: the smallest hashes of near-identical messages mostly coincide, so
            # a sketch that holds neither smallest hash of the other is no match.
            # find, not ``in``: a bytes ``in`` first tries its operand as an integer and
            # raises and clears a TypeError, several times the cost of the search.
            if other.find(head) < 0 and value.find(other[:4]) < 0:
                continue
            if similarity(other, value) >= self.min_similarity:
                count = min((counts[i] & _TIMES) + 1, _TIMES)
                asked |= counts[i] & ASKED
                del sketches[i * _SLOT : (i + 1) * _SLOT], counts[i]
                break
        if len(counts) >= self.memory:
            del sketches[:_SLOT], counts[0]
        sketches.extend(value)
        counts.append(count | asked)
        if state.latched:
            return None
        if count >= self.repeats:
            state.latched = True
            return self._finding("repeated_message", count, text)
        if self.max_messages and state.acted and state.messages >= self.max_messages:
            state.latched = True
            return self._finding("talking_without_acting", state.messages, text)
        return None

    def _finding(self, rule: str, count: int, text: str) -> Finding:
        quote = truncate_middle(" ".join(text[:4096].split()), 160)  # cut first: texts are unbounded
        if rule == "repeated_message":
            reason = (
                f"The agent has said the same thing {count} times without doing anything in "
                f"between (latest: {quote!r}). A chat agent asking one question turn after "
                "turn is stalled, or its user is; this warns only."
            )
            guidance = (
                f"You have now said essentially the same thing {count} times. Repeating it "
                "again will not get a different reply. Try a different question, explain "
                "what you need and why, offer what you can do without it, or hand over."
            )
        elif rule == "promised_without_acting":
            reason = (
                f"{count} turns in a row ended on the agent announcing what it would do, with "
                "no tool call: it says it will act and does not. This warns only."
            )
            guidance = (
                f"For {count} turns you have said you would act and then stopped without a "
                "tool call. Make the call now, or say plainly what stops you."
            )
        else:
            reason = (
                f"The agent has sent {count} messages in a row without a tool call (latest: "
                f"{quote!r}): it talks but does not act. This warns only."
            )
            guidance = (
                f"You have sent {count} messages in a row without doing anything. If you have "
                "what you need, act on it now; if you do not, say exactly what is missing."
            )
        return Finding(
            signal=SIGNAL_ID,
            severity="warn",
            scope="session",
            reason=reason,
            guidance=guidance,
            detail={"rule": rule, "count": count, "latest": quote},
        )
