"""``tools-without-text``: many tool calls have gone by without the agent saying a word.

What it catches
    Grinding in silence. Every other detector asks a question about the calls
    or their results — is this call identical to the last, does the window
    have a period, does one name dominate, did they all fail, did the tools
    say they did nothing, is the data already known — and each comparison has
    an evasion: rewording beats the argument-keyed ones, success beats the
    failure streak, a tool that never sets ``no_op`` beats the no-op streak,
    genuinely different answers beat the stall detector. This one compares
    nothing. It counts tool calls since the agent last spoke, and the only
    way to evade it is to talk, which is the behaviour wanted. Silence is the
    one property every recorded runaway shares: the re-read loop, the
    alternation, the interleaved dominant call and the thirteen rejected
    checkpoint calls all ran without a word of assistant text.

    Only the agent's own speech re-arms it: non-whitespace assistant text. Not
    tool output (the runtime talking), not injected notes or this watchdog's
    feedback (us talking), not reasoning the provider marks as private — a
    trace nobody is shown does not tell anyone anything. The watchdog applies
    that filter and calls ``on_text`` only for real speech, which resets the
    count completely. Results and turn boundaries do not: a turn that ended in
    silence carries its count into the next one. Parallel calls count one by
    one.

Threshold: 12 calls (clamped to at least 2), measured rather than guessed
    An early design guessed 15. The number shipped was taken from a committed
    corpus of 64 archived infrastructure-triage sessions, real runs against a
    live cluster that were all judged good: the longest stretch of calls
    without assistant text was 10, the 95th percentile 5 and the median 2
    (the count runs across turn markers, just as the signal does). 12 clears
    the observed maximum by a fifth and still fires before the recorded
    fifteen-call checkpoint loop ends. The margin is kept honest by a gate:
    the default must stay above the corpus maximum and within three times it,
    and every trace in the corpus must stay silent. One alert per silent run;
    the next speech re-arms it.

Severity: warn — the least close call of all
    All it knows is that a counter got large. A deep but legitimate sweep and
    a runaway are the same observation to it, so it never halts. Under
    feedback it costs a working agent one paragraph and gives a stuck one the
    only nudge that has stopped these loops without a human. The note is
    withdrawn (``withdrawn_by_text``) if the agent speaks after the trip and
    before the note is delivered: the silence it describes is over. The
    operator log and metrics still count the trip.

From the first word (``after_first_text``, default on)
    The count starts once the agent has said something in the session. Silence
    means something only against speech: a stream that never carries the
    agent's text, or an agent that never narrates by design (a one-request tool
    agent), looked like one endless silent run to the reference and warned once
    in every session (26 of 210 AgentDojo runs and 26 of 38 mini-SWE-agent runs
    of the development corpus). Off is the reference behaviour.

Command runners (``runner_threshold``, default 25)
    A silent stretch made only of command-runner calls (``bash``, ``python``,
    an editor tool: the policy's ``[command_runners]`` list) trips at 25, not
    12. Coding agents that drive a shell narrate far less than assistants with
    named actions, and reasoning models narrate least of all: they deliberate
    in a trace the provider keeps private, then send the command. In the
    real-session benchmark (``bench/detection.py``), the normally-ended
    mini-SWE-agent sessions of a reasoning model had silent stretches of p90
    16 and at most 24 calls after their first word, and 7 of 38 of them
    warned at 12 while every command differed and each answered something new.
    Sessions with named tools stayed at 2 or below, and Claude Code sessions at
    14. At 25 none of the normally-ended sessions warns; a silent grind through
    a shell still does, and its loops are the loop detectors' to halt. One
    call to a named tool in the stretch puts it back on ``threshold``, so the
    reference cases, which use named tools, are unchanged.

Coding agents' own tools (``coding_tools``) and words in a tool (``speech_tools``)
    Claude Code and its kin work through tools of their own rather than a
    shell: ``Read``, ``Edit``, ``Grep``, ``Glob``... Each names what it does,
    but they are a coding agent's hands as much as ``bash`` is, and a coding
    agent narrates as little through them: the healthy Claude Code sessions of
    the forty-sixth blind batch ran silent for 14 to 16 calls reading and
    editing file after file, and warned at 12. A silent stretch of these and of
    command runners only trips at ``runner_threshold``. The defaults are the
    names those runtimes use, matched with their case (``Read``, not
    ``read_file``: a named ``read_file`` in an assistant's toolbox is the
    reference's named tool and keeps ``threshold``); OpenHands' ``think``, the
    note a coding agent writes itself between its shell and editor calls, is one
    of them (it tells the person nothing, but it makes no stretch a named
    tool's: four healthy OpenHands sessions of the forty-third batch, 13 to 24
    silent calls with a ``think`` among them, warned at 12). A plan the agent updates
    for the person to see (Claude Code's ``TodoWrite``, Codex CLI's
    ``update_plan``, Gemini CLI's ``write_todos``) says where it is, and a
    message written to the person through a tool is the agent speaking
    (OpenHands' ``finish``, Cline's ``attempt_completion`` and
    ``ask_followup_question``, smolagents' ``final_answer``): such a call is
    counted as speech, not as a silent call; the same plan or message sent again
    word for word (a completion the harness keeps rejecting) is not. Five of the seven healthy Claude
    Code sessions of the forty-sixth batch that warned stay silent with these;
    the other two went 26 and 39 calls without a word or a plan, and still
    warn. And in a session that has driven a shell (a command runner's call) or called
    one of the coding tools (Cursor's ``grep_search`` before its first terminal
    command; not ``think`` or ``file_search``, whose names other agents use too), a
    call whose arguments name a file (a path-shaped argument holding a slash or
    a dot: ``src/a.ts``, not ``direction="down"``) is a coding agent's file tool, whatever
    its runtime calls it (Cursor's ``search_replace``, Copilot's
    ``replace_string_in_file``, Windsurf's ``view_file``, Cline's
    ``replace_in_file``, a ``read_file`` beside ``run_terminal_cmd``): IDE
    agents of the fiftieth blind batch, 13 to 79 silent calls of edits and
    test runs, warned in 30 healthy sessions of 42 (41 before these lists).
    A session of named tools only, the reference's kind, keeps ``threshold``
    whatever its calls name.

Known false positives
    Long silent sweeps. The corpus is cluster triage; a twelve-call silent
    walk through a code base is far more plausible, and an operator who sees
    this fire on one should raise the threshold rather than treat it as a
    finding. A stream that never carries the agent's text at all looks like
    one endless silent run: it trips once, early, in every session and never
    re-arms, so such a source should disable the signal.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from typing import Annotated, Any

from msgspec import Meta, Struct, field

from ..canonical import truncate_middle
from ..events import Text
from .base import CallView, Finding, Signal, SignalConfig

SIGNAL_ID = "tools-without-text"

CORPUS_LONGEST_SILENT_RUN = 10
"""Longest textless run of calls in the reference corpus of 64 good sessions."""

DEFAULT_CODING_TOOLS = (
    # Claude Code
    "Read", "Write", "Edit", "MultiEdit", "Grep", "Glob", "LS", "NotebookRead", "NotebookEdit",
    # Codex CLI, Gemini CLI, Cline and Roo Code, Cursor: the names only they use
    "apply_patch", "read_many_files", "search_file_content", "write_to_file", "replace_in_file",
    "apply_diff", "list_code_definition_names", "codebase_search", "grep_search", "file_search",
    "search_replace", "read_lints",
    # OpenHands' (and the think-tool pattern's) note to itself beside its shell and editor
    "think",
    # searches and a background shell's output, as IDE agents name them
    "grep", "grep_search", "search_files", "find_by_name", "BashOutput", "get_terminal_output",
)
"""Coding agents' own tools, by the names their runtimes give them (not the generic
``read_file``, which assistants of every kind are given)."""
DEFAULT_SPEECH_TOOLS = (
    # plans shown to the person: Claude Code, Codex CLI, Gemini CLI, and others
    "TodoWrite", "update_plan", "write_todos", "todo_write", "update_todo_list", "manage_todo_list",
    "todo_list",
    # messages written to the person: OpenHands, Cline and Roo Code, smolagents
    "finish", "attempt_completion", "ask_followup_question", "final_answer",
)
"""Tools whose call is the agent telling the person something: a plan, or a message."""
SHARED_TOOL_NAMES = frozenset({"think", "file_search"})
"""Coding tools whose names other agents use too (the think-tool pattern, OpenAI's hosted
``file_search``): a call of one does not make a session a coding agent's."""


class ToolsWithoutTextConfig(SignalConfig, kw_only=True, forbid_unknown_fields=True):
    """Policy table of ``tools-without-text``."""

    threshold: Annotated[int, Meta(ge=2)] = 12
    """Tool calls without assistant speech that trip the signal."""
    runner_threshold: Annotated[int, Meta(ge=2)] = 25
    """The same, for a silent stretch made only of command-runner calls (a coding
    agent driving a shell, which narrates far less than an assistant with named
    actions)."""
    after_first_text: bool = True
    """Count only once the agent has spoken in this session (false: the reference
    behaviour, which also counts the calls before its first word)."""
    coding_tools: list[str] = field(default_factory=lambda: list(DEFAULT_CODING_TOOLS))
    """Coding agents' own tools (globs, case-sensitive): a silent stretch of these and of
    command runners trips at ``runner_threshold``."""
    speech_tools: list[str] = field(default_factory=lambda: list(DEFAULT_SPEECH_TOOLS))
    """Tools whose call tells the person something, a plan or a message (globs,
    case-sensitive): a call of one is counted as speech."""


class ToolsWithoutTextState(Struct, tag=SIGNAL_ID, gc=False, omit_defaults=True):
    """Per-session state of ``tools-without-text``."""

    calls: int = 0
    """Tool calls since the agent last spoke."""
    spoke: bool = False
    """The agent has said something in this session."""
    named: bool = False
    """A call of the current silent stretch was to neither a command runner nor a coding
    tool."""
    reported: bool = False
    """The current silent stretch has alerted."""
    shell: bool = False
    """The session has called a command runner or a coding tool: it is a coding agent's."""
    said: int = 0
    """Call key of the latest speech tool's call: the same plan or message again says
    nothing new."""



class ToolsWithoutText(Signal):
    """Warns after ``threshold`` tool calls without a word from the agent."""

    id = SIGNAL_ID
    # A silent grind that is a proven loop is reported once, by the loop detector.
    defers_to = (
        "failure-loop",
        "repeated-tool-call",
        "alternating-tool-cycle",
        "dominant-tool-call",
        "long-loop",
        "result-stall",
    )
    severity = "warn"
    State = ToolsWithoutTextState
    Config = ToolsWithoutTextConfig
    withdrawn_by_text = True

    config: ToolsWithoutTextConfig

    def __init__(self, config: SignalConfig | None = None) -> None:
        super().__init__(config)
        self.threshold = self.config.threshold
        self.runner_threshold = self.config.runner_threshold
        self.after_first_text = self.config.after_first_text
        self._coding_tools = _glob_matcher(self.config.coding_tools)
        self._speech_tools = _glob_matcher(self.config.speech_tools)
        # tool name -> 1 coding tool, 2 speech tool, 0 neither (bounded: names are untrusted)
        self._kinds: dict[str, int] = {}

    def _kind(self, tool: str) -> int:
        kind = self._kinds.get(tool)
        if kind is None:
            kind = 2 if self._speech_tools(tool) else 1 if self._coding_tools(tool) else 0
            if len(self._kinds) >= 512:
                self._kinds.clear()
            self._kinds[tool] = kind
        return kind

    def is_latched(self, state: Any) -> bool:
        return state.reported

    def on_call(self, state: Any, call: CallView) -> Finding | None:
        if self.exempt and call.tool in self.exempt:
            return None
        kind: int | None
        if call.runner:
            kind = 0
            if not state.shell:
                state.shell = True
        else:
            kind = self._kinds.get(call.tool)
            if kind is None:
                kind = self._kind(call.tool)
            if kind == 1 and not state.shell and call.tool not in SHARED_TOOL_NAMES:
                state.shell = True  # a coding agent's own tool: a coding agent's session
            elif kind == 2 and call.key != state.said:
                # a plan shown to the person, or a message to them: speech (the same
                # plan or message again, word for word, is a silent call like any other)
                self.on_text(state, None)
                state.said = call.key
                return None
        if self.after_first_text and not state.spoke:
            return None
        state.calls += 1
        if state.reported:
            return None
        if kind != 1 and not call.runner and not (
            state.shell and (kind == 2 or _names_a_file(call))
        ):
            # (a call naming a file, in a session that drives a shell: a coding agent's
            # own file tool, whatever its runtime calls it; and there a plan sent again as
            # it was, no speech, is still the agent's own tool, no named action)
            state.named = True
        if state.calls >= (self.threshold if state.named else self.runner_threshold):
            state.reported = True
            return self._finding(state, call.tool)
        return None

    def on_text(self, state: Any, event: Text | None) -> Finding | None:
        state.calls = 0
        state.spoke = True
        state.named = False
        state.reported = False
        return None

    def _finding(self, state: Any, tool: str) -> Finding:
        count = state.calls
        label = truncate_middle(tool, 200) if tool else "unnamed tool"
        return Finding(
            signal=self.id,
            severity=self.severity,
            scope=self.scope,
            reason=(
                f"{count} tool calls since the agent last wrote anything (latest: "
                f"{label!r}); nothing has been reported. Every recorded runaway looks "
                "like this, and so does a long sweep, so this only warns. If this "
                "workload sweeps silently by design, raise the threshold in the policy."
            ),
            guidance=(
                "The person you are working for cannot see your tool calls, only what "
                f"you write, and you have made {count} of them (the latest to {label}) "
                "without a word. Say where you are and what you have found so far. If "
                "you are not converging, say what you were trying to establish, what you "
                "observed and what you need. Do not carry on in silence."
            ),
            detail={
                "count": count,
                "threshold": self.threshold if state.named else self.runner_threshold,
                "tool": label,
            },
        )


def _names_a_file(call: CallView) -> bool:
    """Whether a call's path-shaped arguments hold a path: a value with a slash or a dot in
    it (``src/a.ts``, ``README.md``), not any value under a name that holds "dir" or "file"
    (``direction="down"``, ``profile="default"``, ``target="e12"``)."""
    paths = call.canonical.paths
    return paths is not None and any(value and ("/" in value or "." in value) for value in paths.values())


def _glob_matcher(patterns: list[str]) -> Callable[[str], bool]:
    """Whether a tool name matches one of ``patterns`` (:mod:`fnmatch` globs, with case)."""
    if not patterns:
        return lambda tool: False
    match = re.compile("|".join(fnmatch.translate(p) for p in patterns)).match
    return lambda tool: match(tool) is not None
