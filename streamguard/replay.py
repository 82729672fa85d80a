"""Offline replay: contract-v1 JSONL in, output events as JSONL out.

A replay file is operator-supplied, so ``reset`` control events may appear
inline. Many sessions may be interleaved. A malformed line is reported with its
line number and skipped; the run goes on. Output is deterministic: the same
file and policy always give the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import IO

import msgspec

from .engine import Engine
from .events import Reset, UnknownEventType, decode_operator_event, encode


class ReplayReport(msgspec.Struct, kw_only=True):
    lines: int = 0
    events: int = 0
    controls: int = 0
    outputs: int = 0
    malformed: int = 0
    unknown_types: int = 0
    replays_skipped: int = 0


def replay_lines(
    lines: Iterable[bytes | str],
    engine: Engine,
    errors: IO[str] | None = None,
    report: ReplayReport | None = None,
) -> Iterator[bytes]:
    """Yield one encoded output event per item; report bad lines to ``errors``."""
    report = report if report is not None else ReplayReport()
    for number, line in enumerate(lines, start=1):
        report.lines += 1
        if not line.strip():
            continue
        try:
            event = decode_operator_event(line)
        except UnknownEventType as exc:
            report.unknown_types += 1
            if errors is not None:
                errors.write(f"line {number}: skipped: {exc}\n")
            continue
        except (msgspec.DecodeError, ValueError) as exc:
            report.malformed += 1
            if errors is not None:
                errors.write(f"line {number}: malformed event skipped: {exc}\n")
            continue
        if isinstance(event, Reset):
            report.controls += 1
            outputs = engine.control(event)
        else:
            report.events += 1
            before = engine.stats.replays_skipped
            outputs = engine.process(event)
            report.replays_skipped += engine.stats.replays_skipped - before
        for output in outputs:
            report.outputs += 1
            yield encode(output)
