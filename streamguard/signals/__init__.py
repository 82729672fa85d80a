"""The signal registry.

``SIGNAL_CLASSES`` is the fan-out order. A signal listed in another's
``defers_to`` must come before it, so its latch is current when the deferring
signal decides whether to speak.
"""

from __future__ import annotations

from importlib import import_module

from .base import CallView, Finding, ResultView, Signal, SignalConfig

# (module, class) in fan-out order; resolved lazily so a registry import stays cheap.
_REGISTRY: tuple[tuple[str, str], ...] = (
    ("repeat", "RepeatedToolCall"),
    ("cycle", "AlternatingToolCycle"),
    ("dominant", "DominantToolCall"),
    ("failure_loop", "FailureLoop"),
    ("long_loop", "LongLoop"),
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


def check_registry(classes: list[type[Signal]]) -> None:
    """Every id is unique, and every ``defers_to`` id names a signal that comes
    earlier (so its latch is current when the deferring signal decides)."""
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
    "signal_classes",
]
