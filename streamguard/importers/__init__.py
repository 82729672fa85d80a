"""Importers: recorded agent sessions in other formats, as contract-v1 events.

Each format is one module with the same four names: ``NAME``, ``SUFFIXES``,
``sniff(path, data) -> bool`` and ``parse(path, data) -> list[ImportedSession]``
(``data`` is the decoded JSON document, or the raw bytes for the line-oriented
Claude Code logs). Mapping is pure and deterministic: the same file always gives
the same events, ``seq`` 1, 2, 3... per session. ``docs/import.md`` documents
every mapping, what it loses and how it recognises errors.

    >>> for session in iter_sessions(None, ["runs/"]):    # doctest: +SKIP
    ...     print(session.session, session.ended, len(session.events))
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from types import ModuleType
from typing import Any

import msgspec

from ..events import encode
from . import claude_code, mini_swe_agent, openai_chat, swe_agent, who_and_when
from ._common import MAX_PAYLOAD_BYTES, ImportedSession, ImportFailure, RecordError, conform

__all__ = [
    "FORMATS",
    "MAX_PAYLOAD_BYTES",
    "ImportFailure",
    "ImportedSession",
    "detect_format",
    "discover",
    "encode_session",
    "iter_sessions",
    "read_sessions",
]

#: Format name -> the module that maps it.
FORMATS: dict[str, ModuleType] = {
    module.NAME: module
    for module in (swe_agent, mini_swe_agent, claude_code, openai_chat, who_and_when)
}

# JSON formats are tried in this order: the most specific shapes first.
_JSON_SNIFF_ORDER = (mini_swe_agent, swe_agent, who_and_when, openai_chat)
_KNOWN_SUFFIXES = (".traj", ".traj.json", ".json", ".jsonl")
_json_decoder = msgspec.json.Decoder()


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise ImportFailure(path, f"cannot read: {exc.strerror or exc}") from None


def _decode_json(path: str, raw: bytes) -> Any:
    try:
        return _json_decoder.decode(raw)
    except msgspec.DecodeError as exc:
        raise ImportFailure(path, f"not a JSON document: {exc}") from None


def _sniff(path: str, raw: bytes) -> tuple[str | None, Any]:
    """``(format, decoded data)``; format None when no importer recognises the file."""
    if path.endswith(".jsonl"):
        # Newer Claude Code versions open a log with bookkeeping records (file
        # snapshots, queue operations) that carry no session fields: look past them.
        looked = 0
        for line in raw.splitlines():
            if not line.strip():
                continue
            try:
                record = _json_decoder.decode(line)
            except msgspec.DecodeError:
                return None, raw
            if claude_code.sniff_record(record):
                return claude_code.NAME, raw
            looked += 1
            if not claude_code.is_bookkeeping(record) or looked >= claude_code.SNIFF_RECORDS:
                return None, raw
        return None, raw
    if not path.endswith((".traj", ".json")):
        return None, None
    data = _decode_json(path, raw)
    for module in _JSON_SNIFF_ORDER:
        if module.sniff(path, data):
            return module.NAME, data
    return None, data


def detect_format(path: str | os.PathLike[str]) -> str | None:
    """The name of the format of the file at ``path`` (a key of :data:`FORMATS`), or None.

    Raises :class:`ImportFailure` when the file cannot be read or is not JSON.
    """
    path = os.fspath(path)
    return _sniff(path, _read(path))[0]


def read_sessions(format: str | None, path: str | os.PathLike[str]) -> list[ImportedSession]:
    """Every session of one file (``format`` None: detect it).

    Raises :class:`ImportFailure` naming the file, and the record when one is at fault.
    """
    sessions = _parse_file(os.fspath(path), format, skip_unrecognised=False)
    assert sessions is not None
    return sessions


def _parse_file(path: str, format: str | None, skip_unrecognised: bool) -> list[ImportedSession] | None:
    if format is not None and format not in FORMATS:
        raise ValueError(f"unknown format {format!r} (known: {', '.join(sorted(FORMATS))})")
    if format is None and skip_unrecognised and not path.endswith(_KNOWN_SUFFIXES):
        return None
    raw = _read(path)
    try:
        if format is None:
            format, data = _sniff(path, raw)
            if format is None:
                if skip_unrecognised:
                    return None
                raise ImportFailure(
                    path, f"not a recognised session file (formats: {', '.join(sorted(FORMATS))})"
                )
        elif format == claude_code.NAME:
            data = raw
        else:
            data = _decode_json(path, raw)
            if skip_unrecognised and not FORMATS[format].sniff(path, data):
                return None  # in a folder, a file not of the format (a run's summary) is skipped
        return [conform(session) for session in FORMATS[format].parse(path, data)]
    except RecordError as exc:
        raise ImportFailure(path, exc.message, exc.record, exc.where) from None
    except (TypeError, ValueError, KeyError, AttributeError, IndexError, ArithmeticError,
            RecursionError) as exc:
        # The file decoded but has a shape the format does not allow (a number too
        # large for the field included).
        raise ImportFailure(
            path, f"unexpected shape for {format or 'detection'}: {type(exc).__name__}: {exc}"
        ) from None


def discover(
    paths: Iterable[str | os.PathLike[str]],
    format: str | None = None,
    on_unreadable: Callable[[OSError], None] | None = None,
) -> Iterator[str]:
    """Files to import: each file path as given, and, under each directory, every
    regular file whose name ends like a session file of ``format`` (any format when
    None), in sorted order. A folder that cannot be listed goes to ``on_unreadable``."""
    suffixes = FORMATS[format].SUFFIXES if format is not None else _KNOWN_SUFFIXES
    for given in paths:
        path = os.fspath(given)
        if not os.path.isdir(path):
            yield path
            continue
        found: list[str] = []
        unreadable: list[OSError] = []
        for root, dirs, files in os.walk(path, onerror=unreadable.append):
            dirs.sort()
            found.extend(
                os.path.join(root, name) for name in files
                # regular files only: a named pipe would block the read for good
                if name.endswith(suffixes) and os.path.isfile(os.path.join(root, name))
            )
        yield from sorted(found)
        if unreadable and on_unreadable is not None:
            for error in unreadable:
                on_unreadable(error)


def iter_sessions(
    format: str | None,
    paths: Iterable[str | os.PathLike[str]],
    on_error: Callable[[ImportFailure], None] | None = None,
    on_skip: Callable[[str], None] | None = None,
) -> Iterator[ImportedSession]:
    """Every session in ``paths`` (files, or directories searched recursively).

    ``format`` None detects each file's format. A file that fails is passed to
    ``on_error`` and the others go on (without ``on_error`` the failure is
    raised). Inside a directory, with detection on, a file no importer
    recognises (a results summary, a licence) is passed to ``on_skip``, not
    treated as a failure; a file named explicitly must be recognised.
    """
    for path, explicit in _discover_marked(paths, format):
        if isinstance(path, OSError):
            # a folder that cannot be listed: a failure to report, not a silent gap
            failure = ImportFailure(path.filename or "?", f"cannot list folder: {path.strerror or path}")
            if on_error is None:
                raise failure
            on_error(failure)
            continue
        try:
            sessions = _parse_file(path, format, skip_unrecognised=not explicit)
        except ImportFailure as failure:
            if on_error is None:
                raise
            on_error(failure)
            continue
        if sessions is None:
            if on_skip is not None:
                on_skip(path)
            continue
        yield from sessions


def _discover_marked(
    paths: Iterable[str | os.PathLike[str]], format: str | None
) -> Iterator[tuple[str | OSError, bool]]:
    """``(path, named explicitly)`` for every file :func:`discover` finds, and
    ``(error, False)`` for every folder it cannot list."""
    for given in paths:
        path = os.fspath(given)
        if os.path.isdir(path):
            unreadable: list[OSError] = []
            for found in discover([path], format, unreadable.append):
                yield found, False
            for error in unreadable:
                yield error, False
        else:
            yield path, True


def encode_session(session: ImportedSession) -> Iterator[bytes]:
    """The session's events as contract-v1 JSON lines (no trailing newline)."""
    for event in session.events:
        yield encode(event)
