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


def signal_classes() -> list[type[Signal]]:
    """Every registered signal class, in fan-out order."""
    classes = []
    for module, name in _REGISTRY:
        classes.append(getattr(import_module(f"{__name__}.{module}"), name))
    return classes


__all__ = ["CallView", "Finding", "ResultView", "Signal", "SignalConfig", "signal_classes"]
