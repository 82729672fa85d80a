"""Argument canonicalization and payload fingerprints.

A looping agent rarely repeats itself byte for byte: it re-reads ``main.go`` as
``./main.go``, then as ``/workspace/main.go``. The args-keyed detectors therefore
compare a *canonical* form of the arguments:

* objects are serialised as compact JSON with sorted keys; no arguments is ``{}``;
* an argument string that itself holds a JSON object (the way several model APIs
  ship tool arguments) is treated as that object;
* top-level string values under **path-shaped keys** are lexically cleaned
  (``./a``, ``a/``, ``a//b`` and ``dir/../a`` collapse; ``""`` becomes ``.``).
  A key is path-shaped by its *name*: exactly ``target``, ``source``,
  ``destination``, ``src``, ``dst`` or ``cwd``, or containing ``path``, ``file``,
  ``dir`` or ``folder`` (case-insensitive). Values under any other key — a grep
  pattern, a shell command, a query — are never touched, and nothing is case- or
  whitespace-folded: a detector that generalises too eagerly halts real work;
* fields a policy marks as noise (``request_id``, ``timestamp``) are dropped,
  globally or per tool, before any args-keyed detector sees the call.

On top of the canonical form, the repeat detector alone uses a pairwise **path
suffix relation**: two cleaned paths are equivalent when equal or when the longer
ends with ``/`` plus the shorter (``/workspace/main.go`` ≡ ``main.go``, while
``a/doc.go`` ≢ ``b/doc.go`` and ``/w/xmain.go`` ≢ ``main.go``). The relation is
symmetric but not transitive, so it cannot key a history buffer; the cycle,
dominant and name detectors use the hashed canonical form only.

Hashes are stable across processes (BLAKE2b), so they can be snapshotted and
restored on another instance.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping
from hashlib import blake2b
from typing import Any

import msgspec

_sorted_encoder = msgspec.json.Encoder(order="sorted")
# A fresh 8-byte BLAKE2b state, copied for every hash: ``copy()`` and ``update()`` cost
# half of what the constructor does (it parses its keyword arguments each time), and
# the digest is the same.
_blake8 = blake2b(digest_size=8).copy
_json_decoder = msgspec.json.Decoder()

_EXACT_PATH_KEYS = frozenset({"target", "source", "destination", "src", "dst", "cwd"})
_PATH_KEY_PARTS = ("path", "file", "dir", "folder")
_path_key_cache: dict[str, bool] = {}
_PATH_KEY_CACHE_MAX = 4096
MAX_PATH_KEYS_SCANNED = 64
"""Keys of an argument object examined for paths (the rest compare exactly)."""

EMPTY_ARGS = "{}"
UNENCODABLE_ARGS = "<unencodable-args>"
UNFINGERPRINTABLE = 0
"""Fingerprint of an empty or unencodable payload: absence of evidence, not a stall."""


def is_path_key(key: str) -> bool:
    """Whether values under ``key`` are treated as filesystem paths (by name only)."""
    cached = _path_key_cache.get(key)
    if cached is not None:
        return cached
    lowered = key.lower()
    result = lowered in _EXACT_PATH_KEYS or any(part in lowered for part in _PATH_KEY_PARTS)
    if len(key) <= 64:  # bounded, like its size: keys come from untrusted input
        if len(_path_key_cache) >= _PATH_KEY_CACHE_MAX:
            _path_key_cache.clear()
        _path_key_cache[key] = result
    return result


def clean_path(path: str) -> str:
    """Lexical path clean with Go ``path.Clean`` semantics (no filesystem access)."""
    if path and "//" not in path and "/." not in path and path[0] != "." and path[-1] != "/":
        # Already clean: no empty component, no "." or ".." component (either
        # would start the path with "." or contain "/."), no trailing slash.
        return path
    cleaned = posixpath.normpath(path)  # "" -> "."
    # POSIX normpath keeps exactly two leading slashes; Go collapses them.
    if cleaned.startswith("//"):
        cleaned = "/" + cleaned.lstrip("/")
    return cleaned


def path_suffix_equivalent(a: str, b: str) -> bool:
    """The pairwise suffix relation on two *cleaned* paths."""
    if a == b:
        return True
    if len(a) < len(b):
        a, b = b, a
    if b in ("", ".") or not a.endswith(b):
        return False
    return a[len(a) - len(b) - 1] == "/"


_JSON_SPACE = frozenset(" \t\n\r")


def as_object(args: Any) -> Any:
    """An argument string holding a JSON object is that object; anything else is itself."""
    if isinstance(args, str):
        first = args[:1]
        if first and first in _JSON_SPACE:
            # JSON allows insignificant whitespace before the object.
            first = args.lstrip(" \t\n\r")[:1]
        if first != "{":
            return args
        try:
            decoded = _json_decoder.decode(args)
        except (msgspec.DecodeError, RecursionError, UnicodeEncodeError):
            # RecursionError: nested past what the decoder accepts. The contract
            # refuses such events; a library caller's still gets an opaque string.
            return args
        if isinstance(decoded, dict):
            return decoded
    return args


class CanonicalArgs(msgspec.Struct, gc=False):
    """The canonical form of one call's arguments.

    ``text`` is the canonical JSON; ``paths`` maps each path-shaped key to its
    cleaned value (``None`` when the call has none), which is what the suffix
    relation needs. ``raw`` is ``text`` as UTF-8 when the encoder produced it (what
    the call key hashes, so it is not encoded a second time); ``None`` for the fixed
    texts and rebuilt forms.

    A Struct: built once per call, and msgspec's constructor costs a third of a
    Python ``__init__``. ``gc=False``: it holds only strings, bytes and a flat dict.
    """

    text: str
    paths: dict[str, str] | None
    raw: bytes | None = None


def canonicalize(args: Any, ignore_fields: Iterable[str] | None = None) -> CanonicalArgs:
    """Canonical form of ``args`` (see the module docstring)."""
    obj = as_object(args) if isinstance(args, str) else args
    if obj is None:
        return CanonicalArgs(EMPTY_ARGS, None)
    if not isinstance(obj, dict):
        try:
            raw = _sorted_encoder.encode(obj)
        except (TypeError, ValueError, OverflowError, RecursionError):
            return CanonicalArgs(UNENCODABLE_ARGS, None)
        return CanonicalArgs(raw.decode(), None, raw)
    paths: dict[str, str] | None = None
    copied = False
    if ignore_fields:
        for field in ignore_fields:
            if field in obj:
                if not copied:
                    obj = dict(obj)
                    copied = True
                del obj[field]
    changed = False
    known = _path_key_cache.get
    # Path keys are looked for only in an object of at most MAX_PATH_KEYS_SCANNED keys
    # (argument objects have a handful; a crafted one with 70,000 would cost Python work
    # per key). Not in the first keys of a bigger one: the stored text is sorted, and a
    # state restored from it must find the same paths (restore_canonical).
    scanned = obj.items() if len(obj) <= MAX_PATH_KEYS_SCANNED else ()
    for key, value in scanned:
        if not isinstance(value, str) or not isinstance(key, str):
            continue
        path_key = known(key)
        if path_key is None:
            path_key = is_path_key(key)
        if path_key:
            # clean_path's own fast test, inline: most paths are already clean.
            if value and "//" not in value and "/." not in value and value[0] != "." and (
                value[-1] != "/"
            ):
                cleaned = value
            else:
                cleaned = clean_path(value)
            if paths is None:
                paths = {}
            paths[key] = cleaned
            if cleaned != value:
                changed = True
    if changed and paths is not None:  # changed implies paths
        if not copied:
            obj = dict(obj)
        obj.update(paths)
    try:
        raw = _sorted_encoder.encode(obj)
    except (TypeError, ValueError, OverflowError, RecursionError):
        # No JSON text to compare the other keys against: exact match only.
        return CanonicalArgs(UNENCODABLE_ARGS, None)
    return CanonicalArgs(raw.decode(), paths, raw)


def args_equivalent(a: CanonicalArgs, b: CanonicalArgs) -> bool:
    """Repeat-detector equivalence: same key set, path keys by suffix, the rest exact."""
    if a.text == b.text:
        return True
    if not a.paths or not b.paths or a.paths.keys() != b.paths.keys():
        return False
    for key, value in a.paths.items():
        if not path_suffix_equivalent(value, b.paths[key]):
            return False
    # Every path key is suffix-equivalent; the remaining keys must match exactly.
    try:
        return _same_json(_without(a, a.paths), _without(b, b.paths))
    except RecursionError:  # absurdly deep nesting: refuse to call it a repeat
        return False


def _same_json(a: Any, b: Any) -> bool:
    """Exact equality of two decoded JSON values.

    Plain ``==`` is not enough in Python: ``True == 1`` and ``False == 0``,
    so ``{"recursive": true}`` would equal ``{"recursive": 1}``. Booleans
    therefore only equal booleans; numbers compare by value (``5`` equals
    ``5.0``, as after any JSON round trip through a float).
    """
    if type(a) is bool or type(b) is bool:
        return a is b
    if isinstance(a, dict):
        if not isinstance(b, dict) or a.keys() != b.keys():
            return False
        return all(_same_json(value, b[key]) for key, value in a.items())
    if isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            return False
        return all(map(_same_json, a, b))
    if isinstance(b, (dict, list)):
        return False
    return bool(a == b)


def _without(args: CanonicalArgs, keys: Mapping[str, str]) -> Any:
    decoded = _json_decoder.decode(args.text)
    for key in keys:
        decoded.pop(key, None)
    return decoded


def restore_canonical(text: str) -> CanonicalArgs:
    """Rebuild a :class:`CanonicalArgs` from its stored ``text`` (after a state restore)."""
    if text[:1] != "{":
        return CanonicalArgs(text, None)
    try:
        decoded = _json_decoder.decode(text)
    except msgspec.DecodeError:
        return CanonicalArgs(text, None)
    if not isinstance(decoded, dict) or len(decoded) > MAX_PATH_KEYS_SCANNED:
        return CanonicalArgs(text, None)  # as canonicalize: no paths in a bigger object
    paths = {k: v for k, v in decoded.items() if isinstance(v, str) and is_path_key(k)}
    return CanonicalArgs(text, paths or None)


def stable_hash(tool: str, canonical_text: str) -> int:
    """64-bit call key, stable across processes: ``tool NUL canonical-args``."""
    # surrogatepass: a lone surrogate (possible from library callers) must not raise.
    state = _blake8()
    state.update(f"{tool}\0{canonical_text}".encode("utf-8", "surrogatepass"))
    return int.from_bytes(state.digest(), "little")


_tool_states: dict[str, Any] = {}
_TOOL_STATES_MAX = 512


def call_key(tool: str, canonical: CanonicalArgs) -> int:
    """``stable_hash(tool, canonical.text)``, computed from what canonicalisation already has.

    The hash state after ``tool NUL`` is kept per tool (a fleet calls few tools), and the
    canonical bytes are the encoder's own output: ``raw.decode()`` is ``text``, so
    ``raw`` is exactly the UTF-8 that :func:`stable_hash` would hash after the prefix
    (UTF-8 encodes a string piece by piece). Same value, no f-string and no re-encode.
    """
    raw = canonical.raw
    if raw is None:
        return stable_hash(tool, canonical.text)
    prefix = _tool_states.get(tool)
    if prefix is None:
        prefix = _blake8()
        prefix.update(f"{tool}\0".encode("utf-8", "surrogatepass"))
        if len(_tool_states) >= _TOOL_STATES_MAX:  # bounded: tool names are untrusted input
            _tool_states.clear()
        _tool_states[tool] = prefix
    state = prefix.copy()
    state.update(raw)
    return int.from_bytes(state.digest(), "little")


def fingerprint_payload(result: Any, digest: str | None = None) -> int:
    """64-bit fingerprint of a tool result payload; :data:`UNFINGERPRINTABLE` when empty.

    The tool name is deliberately not part of it: two tools returning the same
    bytes are the same evidence. An agent-supplied ``digest`` (for payloads that
    must not leave the agent) is used as is.
    """
    if digest:
        data = digest.encode()
    else:
        if result is None or result == "" or result == {} or result == []:
            return UNFINGERPRINTABLE
        try:
            data = _sorted_encoder.encode(result)
        except (TypeError, ValueError, OverflowError, RecursionError):
            return UNFINGERPRINTABLE
    state = _blake8()
    state.update(data)
    return int.from_bytes(state.digest(), "little") or 1


def fingerprint_size_encoding(
    result: Any, digest: str | None = None
) -> tuple[int, int, bytes | None]:
    """``(fingerprint_payload(result, digest), payload_size(result), encoding)`` with one
    encode: the sorted JSON made of a structured payload (``None`` for a string, a digest
    or an unencodable payload), so a reader of the same answer's JSON (its gist) need not
    encode it again."""
    if type(result) is str and not digest:
        # The common payload, both halves inline (the same steps as the two functions).
        fingerprint = UNFINGERPRINTABLE
        if result:
            try:
                data = _sorted_encoder.encode(result)
            except (TypeError, ValueError, OverflowError, RecursionError):
                pass
            else:
                state = _blake8()
                state.update(data)
                fingerprint = int.from_bytes(state.digest(), "little") or 1
        # An ASCII string's UTF-8 is its characters (isascii reads a flag): no encode.
        return fingerprint, len(result) if result.isascii() else len(result.encode("utf-8", "surrogatepass")), None
    if digest or result is None or isinstance(result, str):
        return fingerprint_payload(result, digest), payload_size(result), None
    try:
        data = _sorted_encoder.encode(result)
    except (TypeError, ValueError, OverflowError, RecursionError):
        return UNFINGERPRINTABLE, 0, None
    if result == {} or result == []:
        return UNFINGERPRINTABLE, len(data), data
    state = _blake8()
    state.update(data)
    return int.from_bytes(state.digest(), "little") or 1, len(data), data


def payload_size(result: Any) -> int:
    """Approximate payload size in bytes (strings by UTF-8 length, the rest as JSON)."""
    if result is None:
        return 0
    if isinstance(result, str):
        # An ASCII string's UTF-8 is its characters (isascii reads a flag): no encode.
        return len(result) if result.isascii() else len(result.encode("utf-8", "surrogatepass"))
    try:
        return len(_sorted_encoder.encode(result))
    except (TypeError, ValueError, OverflowError, RecursionError):
        return 0


def truncate_middle(text: str, limit: int = 200) -> str:
    """Cut ``text`` to at most ``limit`` UTF-8 bytes, keeping both ends around ``…``."""
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= limit:
        return text
    if limit < 3:  # no room for the marker: a plain cut still honours the cap
        return raw[: max(limit, 0)].decode(errors="ignore")
    keep = limit - 3  # "…" is three bytes
    head = raw[: (keep + 1) // 2].decode(errors="ignore")
    tail = raw[len(raw) - keep // 2 :].decode(errors="ignore") if keep // 2 else ""
    return f"{head}…{tail}"
