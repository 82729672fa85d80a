"""``setup-detour``: the agent has stopped working on its task and is repairing the machine.

What it catches
    A coding agent that meets a missing tool (``java: command not found``, no
    network for the package index) and, instead of reporting it, turns system
    administrator: package-index updates, installs that time out, mirror edits
    under ``/etc``, ``ping``, ``systemctl``, ``which java``, ``find / -name
    javac``, for the rest of its budget. None of the loop detectors sees it:
    every command and every answer is new (the package lists change, the
    installs are reworded, a probe now and then succeeds), so there is no
    repetition to find, and the failure detectors see a debugging session. What
    is constant is *what the calls work on*: the machine, not the project.

    Each command-runner call is sorted by what it runs (the call's action, see
    :mod:`streamguard.signals.facts`, and its command line):

    * *machine work*: a package manager (``apt-get``, ``yum``, ``pip``,
      ``conda``, ``brew``...), service and network management (``systemctl``,
      ``service``, ``ping``, ``ifconfig``, ``nslookup``...), a toolchain lookup
      (``which``, ``whereis``, ``update-alternatives``, a bare version check
      such as ``java -version``), an ``export``, a listing or search of the
      system's roots (``find / ...``, ``ls /usr/lib/jvm``, ``cat
      /etc/apt/sources.list``) or a write under ``/etc``;
    * *neutral*: a command that says nothing either way (``echo``, ``pwd``,
      ``env``, ``cd``, ``source``, ``whoami``, a comment, a command line with
      no readable action): it neither extends nor ends the stretch;
    * anything else (an editor command, a build, a test run, a ``grep`` in the
      project, any call to a tool that is not a command runner) is work on the
      task and ends the stretch.

    The signal trips on a stretch of ``threshold`` machine-work calls with no
    task work between them, of which at least ``min_failures`` failed.

Threshold: 8 calls, 3 of them failed (``threshold``, ``min_failures``)
    Installing a missing dependency is ordinary: an index update, an install,
    a version check, an ``export``, perhaps a retry. In the real-session
    benchmark (docs/detection.md) no normally finished session (617, 119 of
    them coding agents with a shell) had a stretch longer than 3, and no
    budget-stopped session judged *not* a loop one longer than 6. The judged
    loops this signal halts had stretches of 9 to 51 calls (5 to 36 of them
    failing); eight is past the honest maximum with room. The failures are
    what separate a repair that is going nowhere from a provisioning job that
    works: an agent whose installs succeed is not stuck, however many it runs.
    A search of the system's roots that finds nothing (the JDK that is not
    there) counts as a failure: it is the same dead end.

Severity: critical, session scope
    Eight calls spent on the machine rather than the task, with its repairs
    failing, is an agent that cannot get back to its work by itself: in the
    judged loops every such stretch ran until the budget was spent. Under
    enforce the session is halted, and the guidance tells the agent to report
    what is missing rather than repair it. ``failure-loop``, ``long-loop``,
    ``result-stall`` and ``tool-failure-streak`` defer to it while it is
    latched: the same install re-sent between mirror edits, or "nothing
    found" again, is this one behaviour and raises one alert. It defers in
    turn to the exact-repeat detectors (the same command four times with the
    same answer is ``repeated-tool-call``'s).

Known false positives
    An agent whose task *is* the machine: provisioning, a devops runbook, a
    workstation set-up on a flaky network. Its stretches are machine work by
    design, and a run of failing installs there is the job's own trouble.
    Switch the signal off for those agents (``[[agents]]`` with
    ``disabled_signals``) or exempt their tools. One Claude Code session of the
    corpus (no exit label) is of this kind: asked to install a desktop
    package, it retried ``sudo`` commands that need a password it did not have
    and would have been halted 6 calls before it stopped.

State: the stretch's length and failures, whether it alerted, the keys of its
calls still awaiting a result (at most 8, to credit each result to its call)
and the last three distinct actions (for the alert text, 64 bytes each).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Self

from msgspec import Meta, Struct, field, structs

from .base import CallView, Finding, ResultView, Signal, SignalConfig, streak_tools
from .facts import FLAG_SEARCH, command_text

SIGNAL_ID = "setup-detour"
TEXT_LIMIT = 1024
"""Characters of a command line read for the system-root and version patterns."""

DEFAULT_PROGRAMS = (
    # package managers
    "apt", "apt-get", "aptitude", "apt-cache", "dpkg", "dpkg-deb", "add-apt-repository",
    "yum", "dnf", "rpm", "zypper", "apk", "pacman", "brew", "port", "snap", "flatpak",
    "pip", "pip3", "conda", "mamba", "gem", "sdk", "jenv",
    # services and the network
    "systemctl", "service", "ping", "traceroute", "ifconfig", "ip", "nmcli", "nslookup",
    "dig", "host", "netstat", "resolvconf",
    # toolchain lookups and the environment
    "which", "whereis", "locate", "update-alternatives", "update-java-alternatives", "export",
    "systemd-resolve", "resolvectl", "journalctl", "ldconfig",
)
NEUTRAL_PROGRAMS = frozenset({
    "", "echo", "printf", "cd", "pwd", "env", "printenv", "source", ".", "whoami", "id",
    "uname", "hostname", "date", "true", ":", "sleep", "clear",
})
# A listing, search or read of the system's roots (not the project's tree, nor $HOME),
# for the programs that list, search or read.
_LOOKING = frozenset({"find", "ls", "cat", "head", "tail", "du", "tree", "stat"})
_SYSTEM_ROOTS = re.compile(
    r"(?:^|[\s;&|(])(?:find|ls|cat|head|tail|du|tree|stat)\s+(?:-\S+\s+)*['\"]?"
    r"/(?:usr|opt|lib|lib64|etc|Library|Applications|System|snap|nix)?(?=[/\s'\"]|$)"
)
# A command run as root, or one that names the system's configuration (``/etc/...``).
_AS_ROOT_OR_ETC = re.compile(r"(?:^|[;&|\n(]\s*)sudo\s|(?:^|[\s'\"=>])/etc/")
_VERSION_CHECK = re.compile(r"\s*(?:sudo\s+)?\S+\s+(?:-version|--version|-v|-V|version)\s*")
VERSION_LIMIT = 80
"""Longest command line read as a bare version check."""

MACHINE, NEUTRAL, TASK = 1, 0, -1
OPEN_LIMIT = 8
"""Machine-work calls in flight whose results are matched (parallel calls are few)."""


def classify(action: str, command: str | None, programs: frozenset[str]) -> int:
    """``MACHINE``, ``NEUTRAL`` or ``TASK`` for one command-runner call.

    ``action`` is the call's action (program and sub-command, ``""`` when it
    cannot be read); ``command`` its command line, if any.
    """
    program = action.split(" ", 1)[0]
    if program in programs:
        return MACHINE
    if command:
        text = command[:TEXT_LIMIT]
        # The patterns run only where a C-level substring test says they can match:
        # agents paste long text into commands, and a regex pass costs per character.
        if ("sudo" in text or "/etc/" in text) and _AS_ROOT_OR_ETC.search(text):
            return MACHINE
        if program in _LOOKING and _SYSTEM_ROOTS.search(text):
            return MACHINE
        if len(text) <= VERSION_LIMIT and "v" in text and _VERSION_CHECK.fullmatch(text):
            return MACHINE
        if text.lstrip().startswith("#"):
            return NEUTRAL  # a comment runs nothing
    if program in NEUTRAL_PROGRAMS:
        return NEUTRAL
    return TASK


class SetupDetourConfig(SignalConfig, kw_only=True, forbid_unknown_fields=True):
    """Policy table of ``setup-detour``."""

    threshold: Annotated[int, Meta(ge=3, le=1000)] = 8
    """Machine-work calls in a row (neutral ones aside) that trip the signal."""
    min_failures: Annotated[int, Meta(ge=0, le=1000)] = 3
    """Of which at least this many failed (0: failures are not required)."""
    programs: list[str] = field(default_factory=lambda: list(DEFAULT_PROGRAMS))
    """Programs whose calls work on the machine (exact names, as the action reads them)."""

    def validate(self) -> None:
        if self.min_failures > self.threshold:
            raise ValueError(
                f"min_failures ({self.min_failures}) must not exceed threshold ({self.threshold})"
            )

    def resolved(self) -> Self:
        config = super().resolved()
        if config.min_failures > config.threshold:  # hand-built: the threshold
            return structs.replace(config, min_failures=config.threshold)
        return config


class SetupDetourState(Struct, tag=SIGNAL_ID, gc=False, omit_defaults=True):
    """Per-session state of ``setup-detour``."""

    run: int = 0
    """Machine-work calls in the current stretch."""
    failures: int = 0
    """Of which failed."""
    open_keys: tuple[int, ...] = ()
    """Call keys of the stretch's calls still awaiting their results (the latest
    :data:`OPEN_LIMIT`)."""
    actions: tuple[str, ...] = ()
    """The stretch's last distinct actions (at most three), for the alert text."""
    reported: bool = False
    """The stretch has alerted."""


class SetupDetour(Signal):
    """Trips on ``threshold`` machine-work calls in a row, ``min_failures`` of them failed."""

    id = SIGNAL_ID
    defers_to = ("repeated-tool-call", "alternating-tool-cycle", "dominant-tool-call")
    needs_pairing = True  # which call a failed result answers
    severity = "critical"
    State = SetupDetourState
    Config = SetupDetourConfig

    config: SetupDetourConfig

    def __init__(self, config: SignalConfig | None = None) -> None:
        super().__init__(config)
        self.threshold = self.config.threshold
        self.min_failures = self.config.min_failures
        self.programs = frozenset(self.config.programs)

    def is_latched(self, state: Any) -> bool:
        return state.reported

    def on_call(self, state: Any, call: CallView) -> Finding | None:
        if self.exempt and call.tool in self.exempt:
            return None
        if not call.runner:
            if state.run:
                self._end(state)
            return None
        kind = classify(call.action, command_text(call.args), self.programs)
        if kind == NEUTRAL:
            return None
        if kind == TASK:
            if state.run:
                self._end(state)
            return None
        state.run += 1
        state.open_keys = (*state.open_keys[1 - OPEN_LIMIT:], call.key)
        action = call.action or call.tool
        if action not in state.actions:
            state.actions = (*state.actions[-2:], *streak_tools((), action, 1))
        return self._check(state)

    def on_result(self, state: Any, result: ResultView) -> Finding | None:
        keys = state.open_keys
        if not keys or result.call_key not in keys:
            return None
        i = keys.index(result.call_key)
        state.open_keys = keys[:i] + keys[i + 1:]
        if not result.failed and (result.outcome or not result.call_flags & FLAG_SEARCH):
            return None  # a success, unless it is a search that found nothing
        state.failures += 1
        return self._check(state)

    @staticmethod
    def _end(state: Any) -> None:
        state.run = state.failures = 0
        state.open_keys = state.actions = ()
        state.reported = False

    def _check(self, state: Any) -> Finding | None:
        if state.reported or state.run < self.threshold or state.failures < self.min_failures:
            return None
        state.reported = True
        actions = ", ".join(state.actions)
        return Finding(
            signal=self.id,
            severity=self.severity,
            scope=self.scope,
            reason=(
                f"{state.run} calls in a row worked on the machine rather than the task "
                f"(package managers, services, the network, toolchain lookups; lately: "
                f"{actions}), and {state.failures} of them failed: the agent is repairing "
                "its environment instead of doing its work."
            ),
            guidance=(
                f"Your last {state.run} commands tried to repair the environment "
                f"({actions}) and {state.failures} of them failed. Stop changing the "
                "machine. Report what is missing (the tool, the package, the network "
                "access) and what you would need, then continue with what you can do "
                "without it."
            ),
            detail={
                "count": state.run,
                "failures": state.failures,
                "threshold": self.threshold,
                "min_failures": self.min_failures,
                "actions": list(state.actions),
            },
        )
