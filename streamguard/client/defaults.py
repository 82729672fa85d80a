"""Topic names the client uses unless told otherwise (the processor's defaults)."""

from __future__ import annotations

DEFAULT_EVENTS_TOPIC = "agent.events"
DEFAULT_CONTROL_TOPIC = "streamguard.control"
DEFAULT_ALERTS_TOPIC = "streamguard.alerts"
