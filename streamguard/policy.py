"""Policy: which signals run, with which thresholds, in which mode, for which agents.

A policy is a TOML file. Every key has the seeds' default, so an empty file is a
complete policy::

    mode = "enforce"                 # off | warn | feedback | enforce
    disabled_signals = ["repeated-tool-name"]

    [arguments]                      # noise fields dropped before args-keyed detectors compare calls
    ignore_fields = ["request_id"]
    [arguments.tools.http_get]
    ignore_fields = ["timestamp"]

    [signals.repeated-tool-call]     # one table per signal id
    threshold = 6
    exempt_tools = ["wait_and_verify"]

    [cost_ceiling]                   # guardrails with a table of their own
    max_session_usd = 10.0

    [[agents]]                       # overrides, selected by a glob on the event's `agent`
    match = "billing-*"
    mode = "warn"

Overrides are merged key by key onto the base policy (tables deeply, lists and
scalars replaced); every override is validated at load time as the complete
policy it produces, so a bad override is a start-up error, not a surprise at the
first matching event. Errors name the field and the allowed range.
"""

from __future__ import annotations

import copy
import fnmatch
import tomllib
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct, field

from .fleet_windows import METRICS as FLEET_METRICS
from .fleet_windows import FleetRule, validate_rules
from .signals import signal_classes
from .signals.base import Signal, SignalConfig
from .signals.facts import DEFAULT_COMMAND_RUNNERS, DEFAULT_WAIT_TOOLS

Mode = Literal["off", "warn", "feedback", "enforce"]
MODES: tuple[str, ...] = ("off", "warn", "feedback", "enforce")


class PolicyError(ValueError):
    """A policy that cannot be loaded; the message names the field."""


_CURSOR_TOOLS = ("run_terminal_cmd", "read_file", "edit_file", "list_dir", "codebase_search",
                 "grep_search", "file_search", "delete_file")
DEFAULT_TOOL_IGNORE_FIELDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # The runtimes' narration beside what a call does (docs/policy.md, "[arguments]").
    ("Bash", ("description",)),  # Claude Code
    ("run_shell_command", ("description",)),  # Gemini CLI
    ("execute_bash", ("is_input", "security_risk")),  # OpenHands
    ("str_replace_editor", ("security_risk",)),
    ("execute_ipython_cell", ("security_risk",)),
    ("run_in_terminal", ("explanation",)),  # GitHub Copilot
    *((tool, ("explanation",)) for tool in _CURSOR_TOOLS),  # Cursor
)


class ToolArguments(Struct, kw_only=True, forbid_unknown_fields=True):
    ignore_fields: list[str] = []


class ArgumentsPolicy(Struct, kw_only=True, forbid_unknown_fields=True, dict=True):
    """Argument fields that are noise (request ids, timestamps) and must not make calls differ."""

    ignore_fields: list[str] = []
    tools: dict[str, ToolArguments] = field(default_factory=lambda: {
        tool: ToolArguments(ignore_fields=list(fields)) for tool, fields in DEFAULT_TOOL_IGNORE_FIELDS
    })

    @cached_property
    def _per_tool(self) -> dict[str, tuple[str, ...]]:
        return {
            tool: tuple(dict.fromkeys([*self.ignore_fields, *spec.ignore_fields]))
            for tool, spec in self.tools.items()
        }

    @cached_property
    def _every_tool(self) -> tuple[str, ...]:
        return tuple(self.ignore_fields)

    def fields_for(self, tool: str) -> tuple[str, ...]:
        fields = self._per_tool.get(tool)
        if fields is not None:
            return fields
        return self._every_tool


class CommandRunnersPolicy(Struct, kw_only=True, forbid_unknown_fields=True):
    """Tools whose name says nothing about what a call does (see ``signals/facts.py``).

    For these the name-based rules key on the call's action (program and
    sub-command, or editor command and path) instead of the tool name.
    """

    tools: list[str] = field(default_factory=lambda: list(DEFAULT_COMMAND_RUNNERS))


class WaitsPolicy(Struct, kw_only=True, forbid_unknown_fields=True):
    """Tools whose name says they wait (see ``signals/facts.py``): their calls are waits,
    which the loop and failure signals read as a poll's pauses, not as steps; and how
    long a session must go quiet for the quiet to be a pause."""

    tools: list[str] = field(default_factory=lambda: list(DEFAULT_WAIT_TOOLS))
    pause_seconds: Annotated[float, Meta(ge=0, le=86400)] = 10.0
    """A gap of at least this many seconds (event time) between two events of a session
    is a pause, as a call that waits is (and, before the call after a failure that asks
    for its own back-off, ``"retry_after": 6``, a gap as long as it asked): a status that says the work is still under way,
    asked again after a pause, is a poll waiting for it (signals/base.py,
    ``says_in_progress``). 0: only calls that wait, the user's messages and
    ``wait_seconds`` of quiet are pauses."""
    wait_seconds: Annotated[float, Meta(ge=0, le=86400)] = 120.0
    """Quiet of at least this many seconds before the agent's next step is a deliberate
    wait, as a ``sleep`` is: a check scheduled every few minutes (a job queue, an inbox
    watched for a message) whose unchanged answer is waiting, not a loop
    (``ResultView.waited``); whatever ``pause_seconds`` says. 0: only calls that wait
    are deliberate waits."""
    asked_intervals: bool = True
    """Whether the interval a user's message asks checks at ("Watch breaker 52-T2 ...
    Check about every 30 seconds", "poll the job every minute": ``asked_interval`` in
    signals/facts.py) paces deliberate waits: after it, a quiet of at least half that
    interval (and of ``pause_seconds``) before the agent's next step is a deliberate wait,
    as ``wait_seconds`` of quiet is, so an unchanged reading checked at the asked pace
    is watched, not a loop (``ResultView.waited``). The same reading asked as fast as the
    agent can ask is judged as before."""
    asked_watches: bool = True
    """Whether a user's message asking the agent to watch for something to happen ("keep
    an eye on my inbox and text me the moment it arrives", "tell me if anything fires",
    "let me know once it's live": ``asks_watch`` in signals/facts.py; a pace asked, as
    ``asked_intervals`` reads it, is one too) is read: from then on, nothing yet (an empty
    list or object, a command's empty output, a zero count, a short answer known only by its
    digest) asked again after a deliberate
    wait is a poll's answer, not a loop (and, when ``watch_seconds`` is set, a watch asked
    without a pace paces deliberate waits at it). ``false`` judges such sessions as any,
    restored ones too."""
    asked_repetitions: bool = True
    """Whether a user's message asking for something to be done a number of times ("run it
    15 times and tell me the failure rate", "repeat the request twenty times":
    ``asked_repetitions`` in signals/facts.py) is read: from then on, the same call made up
    to that many times in a row is what the user asked for, not a loop
    (``repeated-tool-call`` and ``failure-loop`` wait past it). ``false`` judges such runs
    as any."""
    watch_seconds: Annotated[float, Meta(ge=0, le=86400)] = 0.0
    """The interval a watch asked without one is taken at (``asked_watches``): a quiet of
    half of it (and of ``pause_seconds``) before the agent's next step is a deliberate wait.
    0 (the default): such a watch paces nothing, and only minutes of quiet, a wait call or
    a ``sleep`` are deliberate waits in it (docs/policy.md says why)."""
    restart_seconds: Annotated[float, Meta(ge=0, le=86400)] = 1200.0
    """For this many seconds (the event's time, else its record's) after a call that
    restarts something (a device's ``reload`` or ``reboot``, ``systemctl restart``,
    ``reboot_device``) was answered without a failure, a read asked again after a pause
    whose answer is the same again and says no end, or whose failure says what it
    reached for is down, is a probe waiting for what was restarted to come back (a router
    answering no ping for ten minutes while it boots an upgrade), not a loop
    (``ResultView.restarting``). Past it, the same answers are judged as before. 0: no
    such waits."""


def _table_name(cls: type[Signal]) -> str:
    return cls.policy_table or cls.id


def _field_name(table: str) -> str:
    return table.replace("-", "_")


def _build_tables() -> tuple[type[Struct], list[type[Signal]], list[type[Signal]]]:
    """The ``[signals.*]`` table type and the top-level guardrail tables, from the registry."""
    classes = signal_classes()
    nested = [c for c in classes if c.policy_table is None]
    top = [c for c in classes if c.policy_table is not None]
    signals_struct = msgspec.defstruct(
        "SignalsPolicy",
        [(_field_name(c.id), c.Config, field(default_factory=c.Config)) for c in nested],
        rename={_field_name(c.id): c.id for c in nested},
        kw_only=True,
        forbid_unknown_fields=True,
    )
    return signals_struct, nested, top


SignalsPolicy, _NESTED, _TOP = _build_tables()
SIGNAL_IDS: tuple[str, ...] = tuple(c.id for c in signal_classes())

_policy_fields: list[Any] = [
    ("mode", Mode, "enforce"),
    ("disabled_signals", list[str], field(default_factory=list)),
    ("feedback_queue_size", Annotated[int, Meta(ge=1, le=64)], 4),
    ("halt_after_cut_turns", Annotated[int, Meta(ge=2, le=100)], 3),
    ("arguments", ArgumentsPolicy, field(default_factory=ArgumentsPolicy)),
    ("command_runners", CommandRunnersPolicy, field(default_factory=CommandRunnersPolicy)),
    ("waits", WaitsPolicy, field(default_factory=WaitsPolicy)),
    ("signals", SignalsPolicy, field(default_factory=SignalsPolicy)),
]
def _table(cls: type[Signal]) -> str:
    """The top-level policy table of a guardrail in ``_TOP`` (each has one)."""
    assert cls.policy_table is not None
    return cls.policy_table


_policy_fields += [(_field_name(_table(c)), c.Config, field(default_factory=c.Config)) for c in _TOP]

_PolicyBase = msgspec.defstruct(
    "_PolicyBase",
    _policy_fields,
    rename={_field_name(_table(c)): _table(c) for c in _TOP},
    kw_only=True,
    forbid_unknown_fields=True,
)


class Policy(_PolicyBase, kw_only=True, forbid_unknown_fields=True):  # type: ignore[misc,valid-type,call-arg]
    """A resolved, validated policy (the base, or the base with one agent's overrides)."""

    def config_for(self, cls: type[Signal]) -> SignalConfig:
        table = cls.policy_table
        if table is not None:
            return getattr(self, _field_name(table))  # a field named after the table
        return getattr(self.signals, _field_name(cls.id))

    def enabled(self, cls: type[Signal]) -> bool:
        if cls.id in self.disabled_signals:
            return False
        configured = self.config_for(cls).enabled
        return cls.default_enabled if configured is None else configured


class PolicySet:
    """The base policy plus its ``[[agents]]`` overrides, resolved per agent name."""

    def __init__(self, raw: dict[str, Any] | None = None, source: str = "<policy>") -> None:
        raw = copy.deepcopy(raw or {})
        overrides = raw.pop("agents", [])
        self.source = source
        self.fleet: list[FleetRule] = _convert_fleet(raw.pop("fleet", []), source)
        self.base: Policy = _convert(raw, source, "")
        if not isinstance(overrides, list):
            raise PolicyError(f"{source}: `agents` must be an array of tables ([[agents]])")
        self.overrides: list[tuple[str, Policy]] = []
        for index, override in enumerate(overrides):
            where = f"agents[{index}]"
            if not isinstance(override, dict):
                raise PolicyError(f"{source}: `{where}` must be a table")
            override = dict(override)
            pattern = override.pop("match", None)
            if not isinstance(pattern, str) or not pattern:
                raise PolicyError(f"{source}: `{where}.match` is required: a glob on the agent name")
            if "agents" in override:
                raise PolicyError(f"{source}: `{where}.agents`: overrides cannot nest")
            if "fleet" in override:
                raise PolicyError(
                    f"{source}: `{where}.fleet`: fleet rules are fleet-wide; give them a `match` "
                    "glob in a top-level [[fleet]] table"
                )
            merged = _deep_merge(raw, override)
            self.overrides.append((pattern, _convert(merged, source, where + ".")))

    def matching(self, agent: str | None) -> int:
        """Index of the override that applies to ``agent`` (-1: the base). First match wins."""
        if agent is None:
            return -1
        for index, (pattern, _) in enumerate(self.overrides):
            if fnmatch.fnmatchcase(agent, pattern):
                return index
        return -1

    def for_index(self, index: int) -> Policy:
        return self.base if index < 0 else self.overrides[index][1]

    def for_agent(self, agent: str | None) -> Policy:
        return self.for_index(self.matching(agent))


def _deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _format_path(path: str) -> str:
    # msgspec reports "$.signals.repeated-tool-call.threshold"; operators write TOML keys.
    return path.removeprefix("$").lstrip(".") or "(top level)"


def _convert_fleet(raw: Any, source: str) -> list[FleetRule]:
    """The ``[[fleet]]`` tables, validated; errors name ``fleet[N].<field>``."""
    if not isinstance(raw, list) or not all(isinstance(item, dict) for item in raw):
        raise PolicyError(f"{source}: `fleet` must be an array of tables ([[fleet]])")
    rules: list[FleetRule] = []
    for index, item in enumerate(raw):
        where = f"fleet[{index}]"
        if "name" not in item:
            raise PolicyError(f"{source}: `{where}.name` is required: the rule's name, used in its scopes")
        if "limits" not in item:
            raise PolicyError(
                f"{source}: `{where}.limits` is required: at least one [[fleet.limits]] table "
                f"(metric: {', '.join(FLEET_METRICS)})"
            )
        try:
            rule = msgspec.convert(item, FleetRule)
        except msgspec.ValidationError as exc:
            message = str(exc)
            what, _, at = message.rpartition(" - at `")
            path = _format_path(at.rstrip("`")) if at else "(table)"
            raise PolicyError(f"{source}: `{where}.{path}`: {what or message}") from None
        try:
            rule.validate()
        except ValueError as exc:
            raise PolicyError(f"{source}: `{where}`: {exc}") from None
        rules.append(rule)
    try:
        validate_rules(rules)
    except ValueError as exc:
        raise PolicyError(f"{source}: {exc}") from None
    return rules


def _convert(raw: dict[str, Any], source: str, prefix: str) -> Policy:
    try:
        policy = msgspec.convert(raw, Policy)
    except msgspec.ValidationError as exc:
        message = str(exc)
        if " - at `" in message:
            what, _, at = message.rpartition(" - at `")
            path = _format_path(at.rstrip("`"))
            raise PolicyError(f"{source}: `{prefix}{path}`: {what}") from None
        raise PolicyError(f"{source}: {prefix or ''}{message}") from None
    unknown = [s for s in policy.disabled_signals if s not in SIGNAL_IDS]
    if unknown:
        raise PolicyError(
            f"{source}: `{prefix}disabled_signals`: unknown signal id {unknown[0]!r}; "
            f"known: {', '.join(SIGNAL_IDS)}"
        )
    for cls in signal_classes():
        try:
            policy.config_for(cls).validate()
        except ValueError as exc:
            table = cls.policy_table or f"signals.{cls.id}"
            raise PolicyError(f"{source}: `{prefix}{table}`: {exc}") from None
    return policy


def load_policy_set(path: str | Path | None) -> PolicySet:
    """Load and validate a policy file (``None``: the defaults)."""
    if path is None:
        return PolicySet()
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyError(f"{source}: cannot read policy file: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise PolicyError(
            f"{source}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start}); "
            "TOML files are UTF-8"
        ) from None
    return parse_policy_set(text, source)


def parse_policy_set(text: str, source: str = "<policy>") -> PolicySet:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"{source}: not valid TOML: {exc}") from None
    return PolicySet(raw, source)


def load_policy(path: str | Path | None) -> Policy:
    """The base policy of a file (overrides ignored). Use :func:`load_policy_set` for fleets."""
    return load_policy_set(path).base


# ------------------------------------------------------------------ printing


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return msgspec.json.encode(value).decode()  # JSON strings are valid TOML basic strings
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot render {type(value).__name__} as TOML")


def _toml_key(key: str) -> str:
    bare = key.replace("-", "").replace("_", "").isalnum()
    return key if bare else msgspec.json.encode(key).decode()


def _is_subtable(value: Any) -> bool:
    return isinstance(value, dict) and bool(value)


def _is_table_array(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _emit_table(lines: list[str], path: list[str], table: dict[str, Any]) -> None:
    simple = [(k, v) for k, v in table.items() if not _is_subtable(v) and not _is_table_array(v)]
    if path:
        lines.append("")
        lines.append("[" + ".".join(_toml_key(p) for p in path) + "]")
    for key, value in simple:
        if value is None:
            lines.append(f"# {_toml_key(key)} = (unset)")
        else:
            lines.append(f"{_toml_key(key)} = {_toml_value(value)}")
    for key, value in table.items():
        if _is_subtable(value):
            _emit_table(lines, [*path, key], value)
        elif _is_table_array(value):
            for item in value:
                lines.append("")
                lines.append("[[" + ".".join(_toml_key(p) for p in [*path, key]) + "]]")
                for k, v in item.items():
                    lines.append(f"{_toml_key(k)} = {_toml_value(v)}")


def render_policy(policy: Policy | None = None) -> str:
    """The policy as TOML: with no argument, every default, ready to copy and edit."""
    data = msgspec.to_builtins(policy if policy is not None else Policy())
    lines: list[str] = []
    _emit_table(lines, [], data)
    return "\n".join(lines).lstrip("\n") + "\n"
