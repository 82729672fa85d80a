"""The signal registry.

``SIGNAL_CLASSES`` is the fan-out order. A signal listed in another's
``defers_to`` must come before it, so its latch is current when the deferring
signal decides whether to speak.
"""

from __future__ import annotations

import inspect
from importlib import import_module
from typing import get_args

from msgspec import Struct

from ..events import Scope, Severity
from .base import HALT_IGNORED, CallView, Finding, ResultView, Signal, SignalConfig, alert_ids

# (module, class) in fan-out order; resolved lazily so a registry import stays cheap.
_REGISTRY: tuple[tuple[str, str], ...] = (
    ("repeat", "RepeatedToolCall"),
    ("cycle", "AlternatingToolCycle"),
    ("dominant", "DominantToolCall"),
    ("setup_detour", "SetupDetour"),
    ("failure_loop", "FailureLoop"),
    ("long_loop", "LongLoop"),
    ("write_cycle", "WriteCycle"),
    ("result_stall", "ResultStall"),
    ("window_repeat", "WindowRepeat"),
    ("near_duplicate", "NearDuplicateCalls"),
    ("tool_name", "RepeatedToolName"),
    ("failure_guidance", "ToolFailureGuidance"),
    ("failure_streak", "ToolFailureStreak"),
    ("noop_streak", "NoOpStreak"),
    ("no_new_state", "NoNewState"),
    ("verification", "Verification"),
    ("silence", "ToolsWithoutText"),
    ("chat_stall", "ChatStall"),
    ("cost_ceiling", "CostCeiling"),
    ("context_budget", "ContextBudget"),
)


class RegistryError(RuntimeError):
    """The registry breaks a rule the watchdog's fan-out relies on."""


_FLAGS = ("default_enabled", "withdrawn_by_text", "resettable", "takes_budget", "active",
          "needs_fingerprint", "needs_result_size", "needs_pairing")
"""Members the watchdog reads as plain booleans (instance ones may be set in ``__init__``)."""
_HOOKS = ("on_call", "on_result", "on_text", "on_turn_start", "on_turn_end", "on_usage",
          "on_final_answer", "history_needed", "is_latched", "preview_state", "would_trip",
          "check_reset", "apply_reset", "describe")


def check_registry(classes: list[type[Signal]]) -> None:
    """Every id is unique; every ``defers_to`` id names a signal that comes earlier
    (so its latch is current when the deferring signal decides); every signal keeps
    the contract of :class:`~streamguard.signals.base.Signal` (see :func:`check_signal`);
    alert ids and policy tables belong to one signal each."""
    position: dict[str, int] = {}
    for index, cls in enumerate(classes):
        if cls.id in position:
            raise RegistryError(f"signal id {cls.id!r} is registered twice")
        position[cls.id] = index
    for index, cls in enumerate(classes):
        for target in cls.defers_to:
            if target not in position:
                raise RegistryError(f"{cls.id!r} defers to {target!r}, which is not a signal")
            if position[target] >= index:
                raise RegistryError(
                    f"{cls.id!r} defers to {target!r}, which comes after it in the fan-out order"
                )
    emitted: dict[str, str] = {}
    tables: dict[str, str] = {}
    for cls in classes:
        check_signal(cls)
        for alert in alert_ids(cls):
            if alert in emitted:
                raise RegistryError(
                    f"{cls.id!r} emits alert id {alert!r}, which {emitted[alert]!r} emits too"
                )
            emitted[alert] = cls.id
        if cls.policy_table is not None:
            if cls.policy_table in tables:
                raise RegistryError(
                    f"{cls.id!r} declares policy table {cls.policy_table!r}, which "
                    f"{tables[cls.policy_table]!r} declares too"
                )
            tables[cls.policy_table] = cls.id


def check_signal(cls: type[Signal]) -> None:
    """Refuse a signal class whose declarations break what the watchdog, the policy
    loader or the snapshot format rely on (:class:`RegistryError`, naming the member)."""
    name = getattr(cls, "id", None)
    if not isinstance(name, str) or not name:
        raise RegistryError(f"{cls.__name__}: `id` must be a non-empty string")
    where = f"signal {name!r}"
    if getattr(cls, "severity", None) not in get_args(Severity):
        raise RegistryError(f"{where}: `severity` must be one of {get_args(Severity)}")
    if cls.scope not in get_args(Scope):
        raise RegistryError(f"{where}: `scope` must be one of {get_args(Scope)}")
    if not isinstance(cls.guardrail, str) or not cls.guardrail:
        raise RegistryError(f"{where}: `guardrail` must be a non-empty string")
    for flag in _FLAGS:
        value = inspect.getattr_static(cls, flag)
        if not isinstance(value, bool):
            raise RegistryError(
                f"{where}: `{flag}` must be a bool (got {type(value).__name__}); set it in "
                "__init__ when it depends on the config"
            )
    declared = set(_FLAGS)
    for member in dir(cls):
        if member.startswith("needs_") and member not in declared:
            raise RegistryError(
                f"{where}: `{member}` is not a member the watchdog reads (it reads "
                f"{', '.join(f for f in _FLAGS if f.startswith('needs_'))})"
            )
    for hook in _HOOKS:
        if not inspect.isfunction(inspect.getattr_static(cls, hook)):
            raise RegistryError(f"{where}: `{hook}` must be a method")
    if not isinstance(cls.defers_to, tuple) or not all(isinstance(d, str) for d in cls.defers_to):
        raise RegistryError(f"{where}: `defers_to` must be a tuple of signal ids")
    if cls.policy_table is not None and (not isinstance(cls.policy_table, str)
                                         or not cls.policy_table):
        raise RegistryError(f"{where}: `policy_table` must be None or a table name")
    if not isinstance(cls.alert_ids, tuple) or not all(
        isinstance(a, str) and a for a in cls.alert_ids
    ):
        raise RegistryError(f"{where}: `alert_ids` must be a tuple of non-empty strings")
    if HALT_IGNORED in alert_ids(cls):
        raise RegistryError(f"{where}: alert id {HALT_IGNORED!r} is the watchdog's own")
    if (cls.resettable or cls.takes_budget) and cls.guardrail == "watchdog":
        raise RegistryError(
            f"{where}: only a guardrail (guardrail other than 'watchdog') is `resettable` "
            "or `takes_budget`; watchdog signals are reset with the watchdog"
        )
    if cls.takes_budget and not cls.resettable:
        raise RegistryError(f"{where}: `takes_budget` needs `resettable`")
    config = getattr(cls, "Config", None)
    if not (isinstance(config, type) and issubclass(config, SignalConfig)):
        raise RegistryError(f"{where}: `Config` must be a subclass of SignalConfig")
    state = getattr(cls, "State", None)
    if not (isinstance(state, type) and issubclass(state, Struct)):
        raise RegistryError(f"{where}: `State` must be a msgspec Struct")
    tag = state.__struct_config__.tag
    if tag != name:
        raise RegistryError(
            f"{where}: `State` must be tagged with the signal id (tag={name!r}; it has "
            f"{tag!r}): snapshots carry the tag"
        )
    missing = state.__struct_fields__[: len(state.__struct_fields__)
                                      - len(state.__struct_defaults__)]
    if missing:
        raise RegistryError(
            f"{where}: every `State` field needs a default (a fresh session and an older "
            f"snapshot start from it); {', '.join(missing)} has none"
        )


_classes: list[type[Signal]] | None = None


def signal_classes() -> list[type[Signal]]:
    """Every registered signal class, in fan-out order (checked once, at first use)."""
    global _classes
    if _classes is None:
        classes = [getattr(import_module(f"{__name__}.{module}"), name) for module, name in _REGISTRY]
        check_registry(classes)
        _classes = classes
    return list(_classes)


__all__ = [
    "CallView",
    "Finding",
    "RegistryError",
    "ResultView",
    "Signal",
    "SignalConfig",
    "check_registry",
    "check_signal",
    "signal_classes",
]
