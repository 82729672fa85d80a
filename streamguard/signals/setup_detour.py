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

    Each call is sorted by what it runs (for a command runner, the call's
    action, see :mod:`streamguard.signals.facts`, which looks through ``sudo
    -u x``, ``bash -lc "..."``, ``conda run -n env`` and comment lines, and
    its command line):

    * *machine work*: a package manager (``apt-get``, ``yum``, ``pip``,
      ``conda``, ``brew``...; ``npm``, ``yarn``, ``poetry``, ``uv``, ``cargo``
      and ``go`` when they install or configure packages), service and network
      management (``systemctl``, ``service``, ``ping``, ``ifconfig``,
      ``nslookup``, ``curl -I`` or ``wget --spider`` of a mirror...), a
      toolchain lookup (``which``, ``command -v``, ``type``,
      ``update-alternatives``, a bare version check such as ``java -version``;
      ``-v`` only for programs where it means the version, not ``pytest -v``),
      an ``export``, a listing or search of the system's roots (``find /``,
      ``ls /usr/lib/jvm``; not ``/usr/src`` or ``/opt/app``, where projects
      live in containers), any command naming the system's configuration or
      package state (``/etc/...``, ``/var/cache/...``, ``/var/lib/apt``; before
      a here-document, whose text may mention them), and a file tool's read or
      edit of such a path (``Edit /etc/apt/sources.list``);
    * *neutral*: what says nothing either way (``echo``, ``pwd``, ``env``,
      ``cd``, ``source``, ``conda activate``, ``whoami``, a comment, a command
      line with no readable action, a note-keeping tool such as
      ``TodoWrite``): it neither extends nor ends the stretch;
    * anything else (an editor command in the project, a build, a test run, a
      ``grep`` in the project, code handed to an interpreter, ``sudo docker
      compose exec api pytest``) is work on the task and ends the stretch.

    The signal trips on a stretch of ``threshold`` machine-work calls with no
    task work between them, of which at least ``min_failures`` failed, when
    the stretch's latest answer is a failure and the stretch spans at least
    three rounds (a call that follows an answer starts a new round): eight
    ``which`` calls sent at once in one parallel batch are a survey, and a
    repair whose last step just worked (the install went through) is given
    its chance. A detour needs something to turn from: a session that has
    done nothing but machine work so far (asked to install a package or fix
    the network, it has worked on the machine from its first call) is doing a
    machine task, and is not halted for it (``needs_task_work``, default on;
    false: any session). A coding agent's first call is nearly always task
    work (a listing or a search of the project), so this costs no catch in the
    benchmark.

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
    A session asked only for machine work is spared by ``needs_task_work``;
    an agent that does both (a coding task, then a deployment) is not: switch
    the signal off for those agents (``[[agents]]`` with ``disabled_signals``)
    or exempt their tools. One Claude Code session of the corpus (no exit
    label) is of this kind: asked to install a desktop package, it retried
    ``sudo`` commands that need a password it did not have, and was halted 6
    calls before it stopped until ``needs_task_work``; it now raises nothing.

State: whether the session has worked on a task (a session restored from a
snapshot of a version without this field counts as not yet having worked, so its
next detour is reported after one call of task work), the stretch's length and
failures, whether it alerted, the keys of its
calls still awaiting a result (at most 8, to credit each result to its call)
and the last three distinct actions (for the alert text, 64 bytes each).
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from msgspec import Meta, Struct, field

from .base import CallView, Finding, ResultView, Signal, SignalConfig, streak_tools
from .facts import FLAG_SEARCH, NEUTRAL_TOOLS, command_text

SIGNAL_ID = "setup-detour"
TEXT_LIMIT = 1024
"""Characters of a command line read for the path, probe and version patterns."""

DEFAULT_PROGRAMS = (
    # package managers
    "apt", "apt-get", "aptitude", "apt-cache", "dpkg", "dpkg-deb", "add-apt-repository",
    "yum", "dnf", "rpm", "zypper", "apk", "pacman", "brew", "port", "snap", "flatpak",
    "pip", "pip3", "conda", "mamba", "micromamba", "gem", "sdk", "jenv", "pyenv", "nvm",
    "rustup",
    # services and the network
    "systemctl", "service", "ping", "traceroute", "ifconfig", "ip", "nmcli", "nslookup",
    "dig", "host", "netstat", "resolvconf", "systemd-resolve", "resolvectl", "ldconfig",
    # toolchain lookups and the environment
    "which", "whereis", "locate", "update-alternatives", "update-java-alternatives", "export",
)
# Sub-commands of language package managers that install or configure packages; their
# other sub-commands (`npm test`, `cargo build`, `go vet`) are work on the project.
MACHINE_SUBCOMMANDS = {
    "npm": frozenset({"install", "i", "ci", "add", "uninstall", "cache", "config"}),
    "yarn": frozenset({"install", "add", "cache", "config"}),
    "pnpm": frozenset({"install", "i", "add", "store", "config"}),
    "poetry": frozenset({"install", "add", "lock", "env", "config", "self"}),
    "uv": frozenset({"pip", "sync", "add", "venv", "python", "tool"}),
    "cargo": frozenset({"install"}),
    "go": frozenset({"install", "get"}),
}
NEUTRAL_PROGRAMS = frozenset({
    "", "echo", "printf", "cd", "pwd", "env", "printenv", "source", ".", "whoami", "id",
    "uname", "hostname", "date", "true", ":", "sleep", "clear", "conda activate",
    "conda deactivate",
})

# The system's roots, where a listing or a search looks for an installed tool. Not
# the project's tree nor $HOME, and not the directories projects live in inside
# containers (/usr/src/app, /opt/app): /opt only as itself or a toolchain's home.
_ROOT = (
    r"/(?:usr(?!/(?:local/)?src\b)|lib|lib64|etc|Library|Applications|System|snap|nix"
    r"|opt(?=[\s'\"]|$|/(?:java|jdk|openjdk|homebrew|conda|miniconda|anaconda|local|hostedtoolcache)))?"
    r"(?=[/\s'\"]|$)"
)
_LOOKING = frozenset({"find", "ls", "cat", "head", "tail", "du", "tree", "stat"})
_SYSTEM_ROOTS = re.compile(
    r"(?:^|[\s;&|(])(?:find|ls|cat|head|tail|du|tree|stat)\s+(?:-\S+\s+)*['\"]?" + _ROOT
)
# The system's configuration and package state, named anywhere on a command line
# (before a here-document: a unit file written into the project may mention /etc).
_SYSTEM_PATH = re.compile(r"(?:^|[\s'\"=>:])/(?:etc|var/cache|var/lib/(?:apt|dpkg))/")
# A bare version check (`java -version`, `node --version 2>&1 | head -1`); `-v` and
# `-V` only for programs where they mean the version (`pytest -v` is verbose).
_VERSION_CHECK = re.compile(
    r"\s*(\S+)\s+(-version|--version|version|-v|-V)(?:\s+2>&1)?(?:\s*\|\s*(?:head|tail)\b[^|;&]*)?\s*"
)
_SHORT_VERSION_PROGRAMS = frozenset({
    "java", "javac", "mvn", "node", "npm", "python", "python3", "go", "gcc", "g++", "clang",
    "rustc", "cargo", "ruby", "perl", "php", "dotnet", "gradle", "make", "cmake", "git",
})
VERSION_LIMIT = 80
"""Longest command line read as a bare version check."""
# Lookups of an installed program, and probes of a package mirror.
_LOOKUP = re.compile(r"\s*(?:command\s+-v|type(?:\s+-[aPpt]+)?)\s+\S+")
_NETWORK_PROBE = re.compile(
    # Bounded gaps: unbounded, the lazy scan restarts at every "curl" of a crafted line.
    r"\bcurl\b[^|;&\n]{0,200}?\s(?:-[A-Za-z]*I[A-Za-z]*|--head)\b"
    r"|\bwget\b[^|;&\n]{0,200}?\s--spider\b"
)

MACHINE, NEUTRAL, TASK = 1, 0, -1
OPEN_LIMIT = 8
"""Machine-work calls in flight whose results are matched (parallel calls are few)."""
MIN_ROUNDS = 3
"""Separate decisions a stretch must span: a machine-work call counts as a new round
when a result came back since the previous call. Eight lookups sent at once in
one parallel batch are one survey of the machine, not a repair going round."""


def _program_of(action: str) -> tuple[str, str]:
    program, _, sub = action.partition(" ")
    if program.startswith("pip") and program[3:].replace(".", "").isdigit():
        program = "pip"  # pip3.11
    return program, sub


def classify(action: str, command: str | None, programs: frozenset[str]) -> int:
    """``MACHINE``, ``NEUTRAL`` or ``TASK`` for one command-runner call.

    ``action`` is the call's action (program and sub-command, ``""`` when it
    cannot be read); ``command`` its command line (``None``: the call carries
    none, such as code handed to an interpreter, which is work on the task).
    """
    if command is None:
        return TASK
    program, sub = _program_of(action)
    if program in programs:
        return MACHINE
    subs = MACHINE_SUBCOMMANDS.get(program)
    if subs is not None and sub in subs:
        return MACHINE
    text = command[:TEXT_LIMIT]
    # The patterns run only where a C-level substring test says they can match:
    # agents paste long text into commands, and a regex pass costs per character.
    if "/" in text:
        head = text.split("<<", 1)[0] if "<<" in text else text
        if ("/etc/" in head or "/var/" in head) and _SYSTEM_PATH.search(head):
            return MACHINE
        if program in _LOOKING and _SYSTEM_ROOTS.search(head):
            return MACHINE
    if len(text) <= VERSION_LIMIT and "v" in text:
        version = _VERSION_CHECK.fullmatch(text)
        if version is not None and (
            version.group(2) not in ("-v", "-V")
            or version.group(1).rpartition("/")[2] in _SHORT_VERSION_PROGRAMS
        ):
            return MACHINE
    if (program in ("command", "type") or "command -v" in text) and _LOOKUP.match(text):
        return MACHINE
    if (
        ("curl" in text and ("I" in text or "--head" in text)) or ("wget" in text and "--spider" in text)
    ) and _NETWORK_PROBE.search(text):
        return MACHINE
    if action in NEUTRAL_PROGRAMS or program in NEUTRAL_PROGRAMS:
        return NEUTRAL
    return TASK


def classify_tool(tool: str, args: object) -> int:
    """``MACHINE``, ``NEUTRAL`` or ``TASK`` for a call to a tool that is not a command
    runner: a file tool reading or writing the system's configuration is machine work
    (``Edit /etc/apt/sources.list``), a note-keeping tool is neutral, the rest is work."""
    if tool in NEUTRAL_TOOLS:
        return NEUTRAL
    if type(args) is dict:
        # The path keys file tools use (Claude Code's file_path, the editors' path); a
        # prefix test first, since this runs on every call to a named tool.
        path = args.get("file_path") or args.get("path")
        if type(path) is str and path[:5] in ("/etc/", "/var/") and _SYSTEM_PATH.match(path):
            return MACHINE
    return TASK


class SetupDetourConfig(SignalConfig, kw_only=True, forbid_unknown_fields=True):
    """Policy table of ``setup-detour``."""

    threshold: Annotated[int, Meta(ge=3, le=1000)] = 8
    """Machine-work calls in a row (neutral ones aside) that trip the signal."""
    min_failures: Annotated[int, Meta(ge=0, le=1000)] = 3
    """Of which at least this many failed (0: failures are not required)."""
    programs: list[str] = field(default_factory=lambda: list(DEFAULT_PROGRAMS))
    """Programs whose calls work on the machine (exact names, as the action reads them)."""
    needs_task_work: bool = True
    """Trip only in a session that has worked on a task before (a session that has done
    nothing but machine work is doing a machine task: installing, provisioning);
    false: any session."""

    at_most = (("min_failures", "threshold"),)


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
    """The stretch's latest distinct actions (at most three), for the alert text."""
    rounds: int = 0
    """Separate decisions in the stretch (see :data:`MIN_ROUNDS`)."""
    answered: bool = False
    """A result came back since the latest call."""
    last_failed: bool = False
    """The stretch's latest answer was a failure."""
    reported: bool = False
    """The stretch has alerted."""
    worked: bool = False
    """A call of the session worked on the task (a detour needs something to turn from)."""


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
        self.needs_task_work = self.config.needs_task_work

    def is_latched(self, state: Any) -> bool:
        return state.reported

    def on_call(self, state: Any, call: CallView) -> Finding | None:
        if self.exempt and call.tool in self.exempt:
            return None
        if call.runner:
            kind = classify(call.action, command_text(call.args), self.programs)
        else:
            kind = classify_tool(call.tool, call.args)
        if kind == NEUTRAL:
            return None
        if kind == TASK:
            if not state.worked:  # a state field's store costs several times the test
                state.worked = True
            if state.run:
                self._end(state)
            return None
        state.run += 1
        if state.answered or state.run == 1:
            state.rounds += 1
        state.answered = False
        state.open_keys = (*state.open_keys[1 - OPEN_LIMIT:], call.key)
        name = streak_tools((), call.action or call.tool, 1)[0]
        if name in state.actions:  # the latest three, most recent last
            state.actions = (*(a for a in state.actions if a != name), name)
        else:
            state.actions = (*state.actions[-2:], name)
        # With failures required, a trip needs the latest answer to be a failure: a
        # repair whose last step just worked (the install went through) gets its chance.
        return self._check(state) if state.last_failed or not self.min_failures else None

    def on_result(self, state: Any, result: ResultView) -> Finding | None:
        if not state.answered:  # a state field's store costs several times the test
            state.answered = True
        keys = state.open_keys
        if not keys or result.call_key not in keys:
            return None
        i = keys.index(result.call_key)
        state.open_keys = keys[:i] + keys[i + 1:]
        if not result.failed and (result.outcome or not result.call_flags & FLAG_SEARCH):
            state.last_failed = False
            return None  # a success, unless it is a search that found nothing
        state.failures += 1
        state.last_failed = True
        return self._check(state)

    @staticmethod
    def _end(state: Any) -> None:
        state.run = state.failures = state.rounds = 0
        state.open_keys = state.actions = ()
        state.reported = state.last_failed = False

    def _check(self, state: Any) -> Finding | None:
        if (state.reported or state.run < self.threshold or state.failures < self.min_failures
                or state.rounds < MIN_ROUNDS or (self.needs_task_work and not state.worked)):
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
