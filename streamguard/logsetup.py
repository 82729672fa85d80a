"""Logging of ``streamguard run``: level, format, and a bound on the Kafka client's noise.

* ``--log-format json`` writes one JSON object per line (``ts``, ``level``,
  ``logger``, ``message``, plus any ``session``, ``partition``, ``topic`` or
  other fields a log call passes in ``extra``), for log pipelines that parse
  lines; ``text`` (the default) is for people.
* During a broker outage aiokafka logs every failed connection attempt, thousands
  of ERROR lines a minute. :class:`RepeatFilter` lets the first line of each kind
  through, drops the repeats for ``window_s``, then says in one line how many
  were dropped and why that usually happens.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable
from typing import Any

LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("text", "json")

# Attributes every LogRecord has; anything else came from `extra=` and is a field.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}
_DIGITS = re.compile(r"\d+")


class JsonFormatter(logging.Formatter):
    """One JSON object per record."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                doc[key] = value if isinstance(value, str | int | float | bool | type(None)) else repr(value)
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc, ensure_ascii=False)


class RepeatFilter(logging.Filter):
    """Drops repeats of a message (same logger, level and text up to its numbers)
    within ``window_s``, then reports how many were dropped.

    Installed on a handler, so it sees aiokafka's records whichever of its
    loggers they come from.
    """

    def __init__(
        self,
        prefix: str = "aiokafka",
        window_s: float = 30.0,
        hint: str = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.prefix = prefix
        self.window = window_s
        self.hint = hint
        self.clock = clock
        self._seen: dict[tuple[str, int, str], list[float | int]] = {}  # key -> [window start, dropped]

    def filter(self, record: logging.LogRecord) -> bool:
        if not (record.name == self.prefix or record.name.startswith(self.prefix + ".")):
            return True
        if record.levelno < logging.WARNING:
            return True
        key = (record.name, record.levelno, _DIGITS.sub("N", str(record.msg)))
        now = self.clock()
        entry = self._seen.get(key)
        if entry is None or now - entry[0] >= self.window:
            dropped = int(entry[1]) if entry is not None else 0
            self._seen[key] = [now, 0]
            if len(self._seen) > 1000:  # bounded: message texts come from the network
                self._seen = {key: self._seen[key]}
            if dropped:
                record.msg = (
                    f"{record.getMessage()} [{dropped} similar message(s) suppressed in the last "
                    f"{self.window:g} s{'; ' + self.hint if self.hint else ''}]"
                )
                record.args = None
            return True
        entry[1] = int(entry[1]) + 1
        return False


def configure(
    level: str = "info",
    fmt: str = "text",
    *,
    kafka_hint: str = "",
    stream: Any = None,
    window_s: float = 30.0,
) -> logging.Handler:
    """Install the root handler of a command (replacing any). Returns it."""
    handler = logging.StreamHandler(stream)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RepeatFilter(window_s=window_s, hint=kafka_hint))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper()))
    return handler
