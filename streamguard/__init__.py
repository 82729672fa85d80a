"""streamguard: a fleet-wide behavioural watchdog for LLM agents."""

__version__ = "0.1.0"
