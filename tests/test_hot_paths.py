"""Hot-path shortcuts give the same answers as the plain code they bypass."""

from __future__ import annotations

import posixpath
import random
from hashlib import blake2b
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from streamguard.canonical import (
    CanonicalArgs,
    call_key,
    canonicalize,
    clean_path,
    fingerprint_payload,
    fingerprint_size_encoding,
    payload_size,
    stable_hash,
)
from streamguard.engine import Engine
from streamguard.events import ToolCall, ToolResult
from streamguard.fleet import generate_session
from streamguard.policy import PolicySet
from streamguard.signals import near_duplicate, result_stall
from streamguard.signals.base import CallView, ResultView, Signal
from streamguard.signals.facts import FLAG_READ, FLAG_RUNNER
from streamguard.watchdog import Watchdog


class RecorderState(msgspec.Struct, tag="recorder"):
    """State of the recording signal of test_refilled_views_match_freshly_built_ones."""


def reference_clean(path: str) -> str:
    cleaned = posixpath.normpath(path)
    if cleaned.startswith("//"):
        cleaned = "/" + cleaned.lstrip("/")
    return cleaned


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="/.ab~", max_size=14) | st.text(max_size=30))
def test_clean_path_fast_path_matches_normpath(path: str):
    assert clean_path(path) == reference_clean(path)


def test_clean_path_edges():
    for path in ["", ".", "..", "/", "//", "///a", "a/", ".env", "a/.git/b", "a/..b", "...",
                 "/w/main.go", "pkg//x.go", "./main.go", "dir/../main.go"]:
        assert clean_path(path) == reference_clean(path), path


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(json_values, st.none() | st.text(max_size=10))
def test_fingerprint_and_size_matches_the_two_functions(result: Any, digest: str | None):
    assert fingerprint_size_encoding(result, digest)[:2] == (
        fingerprint_payload(result, digest),
        payload_size(result),
    )


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40, alphabet=st.characters(blacklist_categories=["Cs"])))
def test_string_payload_size_is_its_utf8_length(text: str):
    # ASCII strings skip the encode: the size must still be the UTF-8 length.
    assert payload_size(text) == len(text.encode()) == fingerprint_size_encoding(text)[1]


def test_fingerprint_and_size_unencodable_and_empty():
    for result in [{"x": object()}, {}, [], "", None, 0, False, "é"]:
        assert fingerprint_size_encoding(result)[:2] == (fingerprint_payload(result), payload_size(result))


def test_policy_memo_follows_overrides_and_late_agent_names():
    policies = PolicySet({"mode": "enforce", "agents": [{"match": "ops-*", "mode": "warn"}]})
    engine = Engine(policies)
    assert engine.watchdog_for("ops-1").mode == 1  # warn
    assert engine.watchdog_for("ops-1") is engine.watchdog_for("ops-2")
    assert engine.watchdog_for("coder") is engine.watchdog_for(None)
    # A session whose first event names no agent adopts a later name only when
    # that name selects the policy already applied (the memo must not change this).
    for agent, adopted in [("coder-9", "coder-9"), ("ops-9", None)]:
        engine.process(ToolCall(session=agent, tool="t", seq=0))
        engine.process(ToolCall(session=agent, agent=agent, tool="t", seq=1))
        state = engine.state(agent)
        assert state is not None and state.agent == adopted


def test_engine_is_deterministic_over_a_fleet_session():
    events = generate_session("read_loop", "s", "coder-1", random.Random(5))
    runs = []
    for _ in range(2):
        engine = Engine()
        runs.append([o for e in events for o in engine.process(e)])
    assert runs[0] == runs[1] and runs[0], "same events, fresh engine: same outputs, ids included"


def reference_blake8(data: bytes) -> int:
    """The keys' definition: BLAKE2b with an 8-byte digest, read little-endian."""
    return int.from_bytes(blake2b(data, digest_size=8).digest(), "little")


# Tool names and argument strings with what UTF-8 treats specially: non-ASCII, astral
# characters, NUL, and lone surrogates (library callers can pass them).
odd_text = st.text(max_size=12) | st.sampled_from(["", "é", "\U0001f600", "a\0b", "\ud800", "x\udfff"])


@settings(max_examples=200, deadline=None)
@given(odd_text, odd_text)
def test_hashes_are_the_blake2b_definition(tool: str, text: str):
    # The hashes reuse one copied hash state instead of constructing one per call;
    # snapshots hold these values, so they must not move.
    assert stable_hash(tool, text) == reference_blake8(
        f"{tool}\0{text}".encode("utf-8", "surrogatepass"))
    try:
        payload = msgspec.json.Encoder(order="sorted").encode(text)
    except ValueError:  # a lone surrogate: the payload cannot be fingerprinted
        expected = 0
    else:
        expected = (reference_blake8(payload) or 1) if text else 0
    assert fingerprint_payload(text) == expected
    if text.isascii() and text:  # an agent's digest is hashed as given
        assert fingerprint_payload(None, text) == (reference_blake8(text.encode()) or 1)


@settings(max_examples=200, deadline=None)
@given(json_values | st.dictionaries(st.sampled_from(["path", "file", "q", "x"]), odd_text),
       odd_text)
def test_call_key_is_stable_hash_of_the_canonical_text(args: Any, tool: str):
    # call_key hashes the encoder's bytes after a per-tool prefix state; the value is
    # the stable hash of the canonical text, whatever the arguments hold.
    try:
        canonical = canonicalize(args)
    except UnicodeError:  # a lone surrogate the encoder passes through: no canonical text
        return
    assert call_key(tool, canonical) == stable_hash(tool, canonical.text)
    rebuilt = CanonicalArgs(canonical.text, canonical.paths)  # no encoder bytes: fallback
    assert call_key(tool, rebuilt) == stable_hash(tool, canonical.text)


def test_call_key_prefix_cache_is_bounded_and_keeps_values():
    canonical = canonicalize({"path": "a/b"})
    expected = {f"tool-{i}": stable_hash(f"tool-{i}", canonical.text) for i in range(1300)}
    for _ in range(2):
        for tool, key in expected.items():
            assert call_key(tool, canonical) == key


@settings(max_examples=300, deadline=None)
@given(json_values | st.dictionaries(st.sampled_from(["path", "cmd", "q"]), odd_text))
def test_near_duplicate_shape_from_the_encoder_bytes(args: Any):
    # near-duplicate-calls shapes the canonical encoder's bytes instead of encoding the
    # canonical text again; the shape must be the one of the text.
    try:
        canonical = canonicalize(args)
    except UnicodeError:
        return
    if canonical.raw is not None and len(canonical.text) <= near_duplicate.TEXT_LIMIT:
        assert near_duplicate.shape_bytes(canonical.text, canonical.raw) == (
            near_duplicate.shape_bytes(canonical.text))


def test_refilled_views_match_freshly_built_ones():
    # The watchdog refills one CallView and one ResultView per event; what a hook sees
    # must equal what the constructors would have built for the same event.
    seen: list[tuple[str, dict[str, Any]]] = []

    class Recorder(Signal):
        id = "recorder"
        severity = "warn"
        State = RecorderState
        needs_pairing = True

        def on_call(self, state: Any, call: CallView) -> None:
            seen.append(("call", {name: getattr(call, name) for name in CallView.__slots__}))

        def on_result(self, state: Any, result: ResultView) -> None:
            seen.append(("result", {name: getattr(result, name) for name in ResultView.__slots__}))

    watchdog = Watchdog(classes=[Recorder])
    state = watchdog.new_state("s")
    events = [
        ToolCall(session="s", tool="read_file", args={"path": "./a.py"}, call_id="c1"),
        ToolCall(session="s", tool="bash", args={"command": "git diff"}, call_id="c2"),
        ToolResult(session="s", tool="bash", call_id="c2", result="diff"),
        ToolResult(session="s", tool="read_file", call_id="c1", error="no such file"),
        ToolResult(session="s", tool="other", result={"a": 1}),
    ]
    for event in events:
        watchdog.process(state, event)
    calls = [fields for kind, fields in seen if kind == "call"]
    results = [fields for kind, fields in seen if kind == "result"]
    assert len(calls) == 2 and len(results) == 3
    for fields, event in zip(calls, events[:2], strict=True):
        canonical = fields["canonical"]
        assert canonical == canonicalize(event.args)
        expected = CallView(event, canonical, fields["key"], fields["history"], event.kind)
        assert fields == {name: getattr(expected, name) for name in CallView.__slots__}
    # (git diff through a runner, and read_file by the default classification, only read)
    paired = {"c2": (calls[1]["key"], FLAG_RUNNER | FLAG_READ, "git diff"), "c1": (calls[0]["key"], FLAG_READ, "read_file")}
    for fields, event in zip(results, events[2:], strict=True):
        key, flags, action = paired.get(event.call_id or "", (0, 0, None))
        expected_result = ResultView(event, bool(event.error), fields["fingerprint"], fields["size"],
                                     key, flags, action)
        assert fields == {name: getattr(expected_result, name) for name in ResultView.__slots__}
    assert results[0]["fingerprint"] == fingerprint_payload("diff")
    assert results[1]["outcome"] == stable_hash("\0error", "no such file")


# Answers built from what the two templates treat specially: "line " and digits (ASCII
# and not), quotes, a structured start, non-ASCII text and a lone surrogate.
stall_text = st.lists(
    st.sampled_from(["line ", "Line", " ", "\n", "\"", "'", "`", "{", "[", "a", "7", "42",
                     "\u0663", "\u00e9", "\ud800", "#"]),
    max_size=40,
).map("".join) | st.text(max_size=60)


@settings(max_examples=500, deadline=None)
@given(stall_text, st.booleans(), st.integers(min_value=0, max_value=300))
def test_result_stall_templates_from_one_encode(text: str, digits: bool, pad: int):
    # The pad moves quotes and "line " across the start span the quote masking reads.
    for variant in (text, "x" * pad + text):
        masked, light = result_stall.templates(variant, digits)
        assert masked == result_stall.template(variant, digits)
        assert light == result_stall.light_template(variant).encode("utf-8", "surrogatepass")


class HookLogState(msgspec.Struct, tag="hook-log"):
    """State of the signals of test_per_tool_dispatch_skips_exactly_the_exempting_readers."""


@settings(max_examples=50, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), min_size=1, max_size=30),
       st.lists(st.frozensets(st.sampled_from(["a", "b", "c"])), min_size=1, max_size=4))
def test_per_tool_dispatch_skips_exactly_the_exempting_readers(tools: list[str],
                                                                exemptions: list[frozenset[str]]):
    # With an exempting reader, the watchdog keeps one hook list per tool: every reader
    # that does not exempt the tool, in policy order, as testing each exemption would.
    log: list[tuple[str, int, str]] = []

    def reader(n: int) -> type[Signal]:
        class Reader(Signal):
            id = f"reader-{n}"
            severity = "warn"
            State = HookLogState

            def __init__(self, config: Any = None) -> None:
                super().__init__(config)
                self.exempt = exemptions[n]

            def on_call(self, state: Any, call: CallView) -> None:
                log.append(("call", n, call.tool))

            def on_result(self, state: Any, result: ResultView) -> None:
                log.append(("result", n, result.tool))

        return Reader

    classes = [reader(n) for n in range(len(exemptions))]
    watchdog = Watchdog(classes=classes)
    expected = []
    state = watchdog.new_state("s")
    for tool in tools:
        watchdog.process(state, ToolCall(session="s", tool=tool, args={}))
        watchdog.process(state, ToolResult(session="s", tool=tool, result="x"))
        for kind in ("call", "result"):
            expected += [(kind, n, tool) for n, e in enumerate(exemptions) if tool not in e]
    assert log == expected


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from([4, 8]),
    st.lists(st.binary(min_size=8, max_size=8), max_size=12),
    st.binary(min_size=4, max_size=4),
)
def test_find_entry_finds_only_whole_aligned_entries(width: int, entries: list[bytes], needle: bytes) -> None:
    """The memories of fixed-width codes are searched in C and then aligned: the offset
    is that of the first entry that starts with ``needle``, never of a hit straddling two
    entries or inside one (entries of 4 bytes are the first half of each drawn 8)."""
    from streamguard.signals.base import find_entry

    entries = [entry[:width] for entry in entries]
    memory = bytearray(b"".join(entries))
    # A needle drawn from the middle of the memory is often a straddling non-entry.
    if len(memory) > 6:
        needle = bytes(memory[2:6]) if needle[0] % 2 else needle
    expected = next((i * width for i, e in enumerate(entries) if e[:4] == needle), -1)
    assert find_entry(memory, needle, width) == expected
