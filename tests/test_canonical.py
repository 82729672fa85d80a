"""Argument canonicalization: cleaning, the suffix relation and the hashed key."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamguard.canonical import (
    EMPTY_ARGS,
    UNENCODABLE_ARGS,
    UNFINGERPRINTABLE,
    CanonicalArgs,
    args_equivalent,
    canonicalize,
    clean_path,
    fingerprint_payload,
    is_path_key,
    path_suffix_equivalent,
    payload_size,
    restore_canonical,
    stable_hash,
    truncate_middle,
)


def equivalent(a: Any, b: Any) -> bool:
    """The repeat detector's relation, asserted symmetric on every use."""
    ab = args_equivalent(canonicalize(a), canonicalize(b))
    ba = args_equivalent(canonicalize(b), canonicalize(a))
    assert ab == ba, f"asymmetric: {a!r} / {b!r}"
    return ab


def same_key(a: Any, b: Any, tool: str = "t") -> bool:
    """The cycle/dominant/name detectors' relation: equal hashed cleaned form."""
    return stable_hash(tool, canonicalize(a).text) == stable_hash(tool, canonicalize(b).text)


# --------------------------------------------------------------------------- pairs

EQUIVALENT_PAIRS = [
    pytest.param({"path": "./a.go"}, {"path": "a.go"}, id="dot-slash"),
    pytest.param({"path": "dir/../a.go"}, {"path": "a.go"}, id="dot-dot"),
    pytest.param({"dir": "pkg/agent/"}, {"dir": "pkg/agent"}, id="trailing-slash-dir-key"),
    pytest.param({"path": "a//b.go"}, {"path": "a/b.go"}, id="double-slash"),
    pytest.param({"path": "/workspace/main.go"}, {"path": "main.go"}, id="abs-suffix"),
    pytest.param({"path": "/workspace/pkg/x.go"}, {"path": "pkg/x.go"}, id="abs-multi-suffix"),
    pytest.param({"file_path": "/w/a.go"}, {"file_path": "a.go"}, id="file_path-key"),
    pytest.param({}, {}, id="empty-objects"),
    pytest.param(None, {}, id="none-is-empty-object"),
    pytest.param("not json at all", "not json at all", id="same-non-json-blob"),
    pytest.param([1, 2], [1, 2], id="same-array"),
    pytest.param({"path": "./a.go", "limit": 5}, {"limit": 5, "path": "a.go"}, id="key-order"),
    pytest.param({"path": "/w/a.go", "limit": 5}, {"path": "a.go", "limit": 5}, id="suffix-plus-equal-rest"),
    pytest.param({"path": "/w/a.go", "limit": 5}, {"path": "a.go", "limit": 5.0}, id="number-round-trip"),
    pytest.param({"src": "/w/a", "dst": "b/c"}, {"src": "a", "dst": "/x/b/c"}, id="two-path-keys"),
    pytest.param({"Path": "./x"}, {"Path": "x"}, id="key-case-insensitive"),
    pytest.param('{"path":"./a.go"}', {"path": "a.go"}, id="json-string-args"),
    pytest.param(' \n{"path":"./a.go"}', {"path": "a.go"}, id="json-string-leading-space"),
    # Quirk kept from the reference: path-shaped by substring, so free text is cleaned too.
    pytest.param({"file_text": "x/y/z"}, {"file_text": "z"}, id="quirk-file_text"),
    pytest.param({"file_content": "a/./b"}, {"file_content": "a/b"}, id="quirk-file_content"),
    pytest.param({"profile": "x//y"}, {"profile": "x/y"}, id="quirk-profile"),
    pytest.param({"direction": "up/"}, {"direction": "up"}, id="quirk-direction"),
    pytest.param({"redirect": "/a/b"}, {"redirect": "b"}, id="quirk-redirect"),
]

NOT_EQUIVALENT_PAIRS = [
    pytest.param({"path": "a/doc.go"}, {"path": "b/doc.go"}, id="same-basename"),
    pytest.param({"path": "/w/xmain.go"}, {"path": "main.go"}, id="not-on-boundary"),
    pytest.param({"path": "a.go"}, {"path": "b.go"}, id="different-file"),
    pytest.param({"path": "/a/main.go"}, {"path": "/main.go"}, id="two-absolute"),
    pytest.param({"path": "a.go"}, {"path": "a.go", "limit": 5}, id="extra-key"),
    pytest.param({"path": "/w/a.go"}, {"path": "a.go", "limit": 5}, id="extra-key-with-suffix"),
    pytest.param({"path": "a.go", "limit": 5}, {"path": "a.go", "limit": 6}, id="number-differs"),
    pytest.param({"path": "/w/a.go", "limit": 5}, {"path": "a.go", "limit": 6}, id="suffix-but-number-differs"),
    pytest.param({"pattern": "a/b"}, {"pattern": "b"}, id="pattern-never-path"),
    pytest.param({"pattern": "./a.go"}, {"pattern": "a.go"}, id="pattern-never-cleaned"),
    pytest.param({"command": "ls /tmp"}, {"command": "/tmp"}, id="command-never-path"),
    pytest.param({"q": "a/b"}, {"q": "b"}, id="query-never-path"),
    pytest.param({"detail": "x/y"}, {"detail": "y"}, id="detail-never-path"),
    pytest.param("blob one", "blob two", id="different-non-json-blobs"),
    pytest.param("[1,2]", [1, 2], id="blob-vs-array"),
    pytest.param({"path": "Main.go"}, {"path": "main.go"}, id="case-not-folded"),
    pytest.param({"path": "a .go"}, {"path": "a.go"}, id="whitespace-not-folded"),
    pytest.param({"path": ""}, {"path": "main.go"}, id="empty-path"),
    pytest.param({"path": "."}, {"path": "main.go"}, id="dot-path"),
    pytest.param({"path": "/w/a.go", "r": True}, {"path": "a.go", "r": 1}, id="bool-is-not-int"),
    pytest.param({"path": "/w/a.go", "r": False}, {"path": "a.go", "r": 0}, id="false-is-not-zero"),
    pytest.param({"path": "/w/a.go", "o": {"x": True}}, {"path": "a.go", "o": {"x": 1}}, id="nested-bool"),
    pytest.param({"path": "/w/a.go", "o": [1]}, {"path": "a.go", "o": {"0": 1}}, id="list-vs-dict"),
    pytest.param({"path": "/w/a.go", "o": "1"}, {"path": "a.go", "o": 1}, id="string-vs-number"),
    pytest.param({"path": "/w/a.go"}, {"file": "a.go"}, id="different-path-keys"),
    pytest.param({"path": "a.go"}, {"path": 5}, id="path-key-non-string"),
    pytest.param({"opts": {"path": "/w/a.go"}}, {"opts": {"path": "a.go"}}, id="nested-not-path"),
    pytest.param({}, {"path": "a.go"}, id="empty-vs-path"),
    pytest.param({"path": "/w/a.go", "x": 1}, {"path": "a.go", "y": 1}, id="different-other-keys"),
]


@pytest.mark.parametrize(("a", "b"), EQUIVALENT_PAIRS)
def test_equivalent_pairs(a: Any, b: Any) -> None:
    assert equivalent(a, b)


@pytest.mark.parametrize(("a", "b"), NOT_EQUIVALENT_PAIRS)
def test_not_equivalent_pairs(a: Any, b: Any) -> None:
    assert not equivalent(a, b)


def test_relation_is_not_transitive() -> None:
    a, b, c = {"path": "/w/pkg/main.go"}, {"path": "main.go"}, {"path": "/v/pkg/main.go"}
    assert equivalent(a, b)
    assert equivalent(b, c)
    assert not equivalent(a, c)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ({"path": "./main.go"}, {"path": "main.go"}, True),
        ({"path": "dir/../main.go"}, {"path": "main.go"}, True),
        ({"dir": "pkg/agent/"}, {"dir": "pkg/agent"}, True),
        ({"b": 1, "a": 2}, {"a": 2, "b": 1}, True),
        ('{"path":"./a"}', {"path": "a"}, True),
        # The suffix relation is the repeat detector's only: a hashed key cannot hold it.
        ({"path": "/workspace/main.go"}, {"path": "main.go"}, False),
        ({"pattern": "./a"}, {"pattern": "a"}, False),
    ],
)
def test_hashed_key_uses_cleaned_form_only(a: Any, b: Any, expected: bool) -> None:
    assert same_key(a, b) is expected


def test_key_includes_tool_name() -> None:
    text = canonicalize({"path": "a"}).text
    assert stable_hash("read_file", text) != stable_hash("write_file", text)
    # The NUL separator keeps the tool/argument boundary unambiguous.
    assert stable_hash("a", "b{}") != stable_hash("ab", "{}")


# --------------------------------------------------------------------------- cleaned form


@pytest.mark.parametrize(
    ("args", "text"),
    [
        ({"path": "./a.go"}, '{"path":"a.go"}'),
        ({"path": "a.go"}, '{"path":"a.go"}'),
        ({"pattern": "./a.go"}, '{"pattern":"./a.go"}'),
        ({"path": ""}, '{"path":"."}'),
        ({"dir": "pkg/agent/"}, '{"dir":"pkg/agent"}'),
        ({"b": 1, "a": {"d": 1, "c": 2}}, '{"a":{"c":2,"d":1},"b":1}'),
        ({"opts": {"path": "./x"}}, '{"opts":{"path":"./x"}}'),
        ({"q": "  Mixed  Case  "}, '{"q":"  Mixed  Case  "}'),
        (None, EMPTY_ARGS),
        ({}, EMPTY_ARGS),
        ('{"b":1,"a":"./x"}', '{"a":"./x","b":1}'),
        ('{"file":"./x"}', '{"file":"x"}'),
        ([1, 2], "[1,2]"),
        # A blob that is not a JSON object stays a blob: it is kept as a JSON
        # string, so it can never collide with an object or an array.
        ("not json", '"not json"'),
        ("[1,2]", '"[1,2]"'),
        ("null", '"null"'),
        ("", '""'),
        ("{not json", '"{not json"'),
        (5, "5"),
    ],
)
def test_cleaned_form(args: Any, text: str) -> None:
    assert canonicalize(args).text == text


def test_cleaned_form_is_stable() -> None:
    args = {"path": "./pkg/../main.go", "limit": 10, "pattern": "x/./y"}
    texts = {canonicalize(args).text for _ in range(20)}
    assert texts == {'{"limit":10,"path":"main.go","pattern":"x/./y"}'}
    keys = {stable_hash("read_file", canonicalize(args).text) for _ in range(20)}
    assert len(keys) == 1


def test_clean_input_is_not_copied_or_changed() -> None:
    args = {"path": "a/b.go", "limit": 3}
    canonical = canonicalize(args)
    assert args == {"path": "a/b.go", "limit": 3}
    assert canonical.paths == {"path": "a/b.go"}


def test_dirty_input_is_not_mutated() -> None:
    args = {"path": "./a/b.go"}
    assert canonicalize(args).text == '{"path":"a/b.go"}'
    assert args == {"path": "./a/b.go"}


def test_paths_map_holds_cleaned_top_level_strings_only() -> None:
    canonical = canonicalize({"path": "./a", "file": 3, "dir": "b/", "pattern": "c", "o": {"path": "x"}})
    assert canonical.paths == {"path": "a", "dir": "b"}
    assert canonicalize({"pattern": "a"}).paths is None
    assert canonicalize("blob").paths is None


def test_ignore_fields_are_dropped() -> None:
    a = canonicalize({"path": "a", "request_id": "r1"}, ignore_fields=["request_id"])
    b = canonicalize({"path": "a", "request_id": "r2"}, ignore_fields=["request_id"])
    assert a.text == b.text == '{"path":"a"}'
    original = {"path": "a", "request_id": "r1"}
    canonicalize(original, ignore_fields=["request_id"])
    assert "request_id" in original


def test_unencodable_args_do_not_raise() -> None:
    weird = canonicalize({"path": "./a", "x": object()})
    assert weird.text == UNENCODABLE_ARGS
    assert weird.paths is None
    assert not args_equivalent(weird, canonicalize({"path": "a"}))
    assert not args_equivalent(canonicalize({"path": "a"}), weird)
    assert canonicalize({1: "a"}).text == UNENCODABLE_ARGS  # non-string key, library use


def test_lone_surrogate_does_not_raise() -> None:
    assert isinstance(stable_hash("tool\ud800", "{}"), int)
    assert canonicalize({"q": "\ud800"}).text == UNENCODABLE_ARGS


# --------------------------------------------------------------------------- pieces


@pytest.mark.parametrize(
    "key",
    ["target", "source", "destination", "src", "dst", "cwd", "TARGET", "Cwd", "path",
     "file_path", "FilePath", "filename", "dir", "workdir", "folder", "root_folder",
     "profile", "direction", "redirect", "file_text", "file_content"],
)
def test_path_keys(key: str) -> None:
    assert is_path_key(key)


@pytest.mark.parametrize(
    "key",
    ["pattern", "command", "q", "query", "detail", "limit", "targets", "sources", "srcs",
     "url", "name", "content", ""],
)
def test_non_path_keys(key: str) -> None:
    assert not is_path_key(key)


@pytest.mark.parametrize(
    ("raw", "cleaned"),
    [
        ("./a", "a"),
        ("a/", "a"),
        ("a//b", "a/b"),
        ("dir/../a", "a"),
        ("", "."),
        (".", "."),
        ("./", "."),
        ("a/..", "."),
        ("/", "/"),
        ("//", "/"),
        ("//a//b/", "/a/b"),
        ("///a", "/a"),
        ("/../a", "/a"),
        ("../a", "../a"),
        ("a/../../b", "../b"),
        ("a/./b/.", "a/b"),
    ],
)
def test_clean_path_go_semantics(raw: str, cleaned: str) -> None:
    assert clean_path(raw) == cleaned


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("main.go", "/w/main.go", True),
        ("/w/main.go", "main.go", True),
        ("main.go", "main.go", True),
        (".", ".", True),
        ("pkg/x.go", "/w/pkg/x.go", True),
        ("", "main.go", False),
        (".", "main.go", False),
        ("main.go", ".", False),
        ("xmain.go", "main.go", False),
        ("/w/xmain.go", "main.go", False),
        ("a/doc.go", "b/doc.go", False),
        ("/", "/a", False),
    ],
)
def test_path_suffix_relation(a: str, b: str, expected: bool) -> None:
    assert path_suffix_equivalent(a, b) is expected
    assert path_suffix_equivalent(b, a) is expected


def test_restore_canonical_round_trip() -> None:
    original = canonicalize({"path": "./w/a.go", "limit": 2, "pattern": "p"})
    restored = restore_canonical(original.text)
    assert restored.text == original.text
    assert restored.paths == original.paths
    assert args_equivalent(restored, canonicalize({"path": "a.go", "limit": 2, "pattern": "p"}))
    assert restore_canonical('"blob"').paths is None
    assert restore_canonical(UNENCODABLE_ARGS).paths is None
    assert restore_canonical("{broken").paths is None
    assert restore_canonical(EMPTY_ARGS).paths is None


@pytest.mark.parametrize("limit", [0, 1, 2, 3, 4, 5, 10, 200])
@pytest.mark.parametrize("text", ["x" * 500, "é" * 300, "ab€" * 100, "a" * 201])
def test_truncate_middle_respects_cap(text: str, limit: int) -> None:
    cut = truncate_middle(text, limit)
    assert len(cut.encode()) <= limit
    if limit >= 3:
        assert "…" in cut


def test_truncate_middle_keeps_both_ends() -> None:
    text = "HEAD" + "x" * 400 + "TAIL"
    cut = truncate_middle(text, 200)
    assert cut.startswith("HEAD") and cut.endswith("TAIL")
    assert len(cut.encode()) <= 200
    assert truncate_middle("short", 200) == "short"
    assert truncate_middle("x" * 200, 200) == "x" * 200


def test_fingerprint_payload() -> None:
    assert fingerprint_payload(None) == UNFINGERPRINTABLE
    assert fingerprint_payload("") == UNFINGERPRINTABLE
    assert fingerprint_payload({}) == UNFINGERPRINTABLE
    assert fingerprint_payload([]) == UNFINGERPRINTABLE
    assert fingerprint_payload({"b": 1, "a": 2}) == fingerprint_payload({"a": 2, "b": 1})
    assert fingerprint_payload({"a": 1}) != fingerprint_payload({"a": 2})
    assert fingerprint_payload(0) != UNFINGERPRINTABLE
    assert fingerprint_payload(None, digest="abc") == fingerprint_payload({"x": 1}, digest="abc")
    assert fingerprint_payload({"x": object()}) == UNFINGERPRINTABLE


def test_payload_size() -> None:
    assert payload_size(None) == 0
    assert payload_size("é") == 2
    assert payload_size({"a": 1}) == len(b'{"a":1}')


# --------------------------------------------------------------------------- invariants

_path_values = st.sampled_from(
    ["a.go", "./a.go", "/w/a.go", "w/a.go", "b/a.go", "a.go/", "", ".", "/", "x//a.go",
     "dir/../a.go", "/w/xa.go", "A.go"]
)
_keys = st.sampled_from(["path", "file", "dir", "pattern", "limit", "q"])
_values = st.one_of(_path_values, st.integers(-2, 2), st.booleans(), st.none(),
                    st.lists(st.integers(0, 2), max_size=2))
_args = st.one_of(
    st.dictionaries(_keys, _values, max_size=3),
    st.sampled_from(["blob", "other blob", "[1,2]", "", None]),
)


@given(_args, _args)
def test_relation_is_symmetric(a: Any, b: Any) -> None:
    ca, cb = canonicalize(a), canonicalize(b)
    assert args_equivalent(ca, cb) == args_equivalent(cb, ca)


@given(_args)
def test_relation_is_reflexive_and_implied_by_equal_keys(a: Any) -> None:
    ca = canonicalize(a)
    assert args_equivalent(ca, canonicalize(a))
    assert args_equivalent(ca, restore_canonical(ca.text))


@given(_args, _args)
def test_equal_text_implies_equivalent(a: Any, b: Any) -> None:
    ca, cb = canonicalize(a), canonicalize(b)
    if ca.text == cb.text:
        assert args_equivalent(ca, cb)


@given(_args, _args)
def test_restored_anchor_behaves_like_the_original(a: Any, b: Any) -> None:
    ca, cb = canonicalize(a), canonicalize(b)
    assert args_equivalent(restore_canonical(ca.text), cb) == args_equivalent(ca, cb)


@given(st.dictionaries(_keys, _values, max_size=3))
def test_canonicalize_is_idempotent(a: dict[str, Any]) -> None:
    text = canonicalize(a).text
    assert canonicalize(msgspec.json.decode(text)).text == text
    assert canonicalize(text).text == text  # the same object shipped as a JSON string


@given(st.text(alphabet="ab./", max_size=12))
def test_clean_path_is_idempotent(raw: str) -> None:
    once = clean_path(raw)
    assert clean_path(once) == once
    assert once == "/" or not once.endswith("/")
    assert "//" not in once


@given(st.text(max_size=300), st.integers(0, 250))
def test_truncate_middle_never_exceeds_cap(text: str, limit: int) -> None:
    cut = truncate_middle(text, limit)
    if len(text.encode()) <= limit:
        assert cut == text
    else:
        assert len(cut.encode()) <= limit


def test_canonical_args_slots() -> None:
    canonical = CanonicalArgs("{}", None)
    with pytest.raises(AttributeError):
        canonical.other = 1  # type: ignore[attr-defined]


def test_the_fingerprints_encoding_is_the_payloads_sorted_json() -> None:
    import msgspec

    from streamguard.canonical import fingerprint_payload, fingerprint_size_encoding, payload_size

    payload = {"b": [1, 2], "a": "2025-12-09T06:00:21Z"}
    fingerprint, size, encoded = fingerprint_size_encoding(payload)
    assert encoded == msgspec.json.Encoder(order="sorted").encode(payload)
    assert (fingerprint, size) == (fingerprint_payload(payload), payload_size(payload))
    assert size == len(encoded)
    # a string, a digest or nothing: no encoding handed on
    assert fingerprint_size_encoding("text")[2] is None
    assert fingerprint_size_encoding(payload, "sha256:ab")[2] is None
    assert fingerprint_size_encoding(None)[2] is None


_PATH_VALUES = st.sampled_from(["src/main.go", "/w/src/main.go", "./a.py", "x", "", "a//b/"])


@settings(max_examples=200, deadline=None)
@given(
    fillers=st.integers(0, 80),
    first=st.dictionaries(st.sampled_from(["path", "dir"]), _PATH_VALUES, max_size=2),
    last=st.dictionaries(st.sampled_from(["file", "file_path"]), _PATH_VALUES, max_size=2),
)
def test_a_restored_form_finds_the_paths_the_live_one_found(
    fillers: int, first: dict[str, str], last: dict[str, str]
) -> None:
    """A repeat anchored before a restart is compared after it by the form rebuilt from
    its text (sorted keys): both must see the same path keys, however many keys the
    object has and wherever its path keys come."""
    from streamguard.canonical import canonicalize, restore_canonical

    args: dict[str, object] = {**first, **{f"k{i}": 0 for i in range(fillers)}, **last}
    live = canonicalize(args)
    assert restore_canonical(live.text).paths == live.paths
