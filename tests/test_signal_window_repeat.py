from __future__ import annotations

from collections import deque

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamguard.canonical import canonicalize, stable_hash
from streamguard.events import ToolCall
from streamguard.signals.base import CallView, Signal, SignalConfig
from streamguard.signals.window_repeat import WindowRepeat, validate
from tests.harness import Driver

Config = WindowRepeat.Config
State = WindowRepeat.State


def driver(**config: object) -> Driver:
    return Driver(WindowRepeat(Config(**config)))  # type: ignore[arg-type]


def view(tool: str, args: object = None) -> CallView:
    canonical = canonicalize(args)
    return CallView(
        ToolCall(session="s", tool=tool, args=args), canonical,
        stable_hash(tool, canonical.text), [], None,
    )


def feed(d: Driver, tools: str) -> list[int]:
    """One call per character (same args); returns the 1-based positions that tripped."""
    hits = []
    for i, tool in enumerate(tools, 1):
        if d.call(tool, {"q": 1}) is not None:
            hits.append(i)
    return hits


# ---------------------------------------------------------------- identity, defaults


def test_identity_and_defaults() -> None:
    sig = WindowRepeat()
    assert sig.id == "window-repeat"
    assert sig.severity == "warn"
    assert sig.default_enabled is False
    assert sig.defers_to == ("repeated-tool-call", "alternating-tool-cycle", "dominant-tool-call")
    assert (sig.window, sig.threshold) == (8, 3)
    assert isinstance(sig.new_state(), State)
    assert issubclass(WindowRepeat, Signal)


# ---------------------------------------------------------------- threshold edges


def test_two_identical_calls_are_silent_the_third_trips() -> None:
    d = driver()
    assert d.call("search", {"q": "x"}) is None
    assert d.call("search", {"q": "x"}) is None
    finding = d.call("search", {"q": "x"})
    assert finding is not None
    assert finding.signal == "window-repeat"
    assert finding.severity == "warn"
    assert finding.detail == {
        "tool": "search", "count": 3, "window": 8, "threshold": 3, "args": '{"q":"x"}',
    }


def test_interleaved_repeats_trip() -> None:
    assert feed(driver(), "abaca") == [5]


def test_repeat_that_slid_out_of_the_window_is_silent() -> None:
    d = driver()
    # 'a' at 1 and 8; at 10 the first 'a' has been evicted (window 8).
    assert feed(d, "a123456" + "a" + "b" + "a") == []
    assert list(d.state.keys).count(d.state.keys[-1]) == 2
    assert d.call("a", {"q": 1}) is not None  # three inside the window again


def test_one_alert_while_latched() -> None:
    assert feed(driver(), "a" * 30) == [3]


def test_rearms_when_evictions_take_the_key_below_threshold() -> None:
    d = driver(window=4, threshold=2)
    assert feed(d, "aa") == [2]
    assert feed(d, "bc") == []  # window a a b c: still latched
    assert feed(d, "d") == []  # window a b c d: one 'a' left, re-armed
    assert feed(d, "a") == []  # window b c d a
    assert feed(d, "a") == [1]  # window c d a a: trips again


def test_full_window_of_one_key_does_not_rearm_itself() -> None:
    # The evicted key is the incoming key: its count never dips.
    assert feed(driver(window=3, threshold=3), "a" * 10) == [3]


def test_each_key_alerts_once_even_when_alternating() -> None:
    assert feed(driver(), "ab" * 20) == [5, 6]


def test_different_key_trips_separately() -> None:
    assert feed(driver(), "aaabbb") == [3, 6]


def test_threshold_equal_to_window() -> None:
    assert feed(driver(window=2, threshold=2), "abab") == []
    assert feed(driver(window=2, threshold=2), "abaa") == [4]


# ---------------------------------------------------------------- keys


def test_equivalent_argument_spellings_collide() -> None:
    d = driver()
    assert d.call("read", {"path": "./main.go", "n": 1}) is None
    assert d.call("read", {"n": 1, "path": "main.go"}) is None
    assert d.call("read", '{"path": "dir/../main.go", "n": 1}') is not None


def test_different_tool_or_args_do_not_collide() -> None:
    d = driver()
    assert d.call("read", {"path": "a.go"}) is None
    assert d.call("grep", {"path": "a.go"}) is None
    assert d.call("read", {"path": "b.go"}) is None
    assert d.call("read", {"path": "a.go", "limit": 5}) is None
    assert d.findings == []


def test_ignore_fields_drop_noise_before_keying() -> None:
    plain = driver()
    noisy = driver(ignore_fields=["request_id"])
    for i in range(3):
        plain.call("search", {"q": "x", "request_id": i})
        noisy.call("search", {"q": "x", "request_id": i})
    assert plain.findings == []
    assert len(noisy.findings) == 1


def test_ignore_fields_are_top_level_only_and_reuse_the_shared_key_otherwise() -> None:
    sig = WindowRepeat(Config(ignore_fields=["ts"]))
    plain = view("t", {"q": 1})
    assert sig.key_of(plain) == plain.key  # the field is absent: shared key reused
    assert sig.key_of(view("t", {"q": 1, "ts": 5})) == plain.key
    nested_a, nested_b = view("t", {"o": {"ts": 1}}), view("t", {"o": {"ts": 2}})
    assert sig.key_of(nested_a) != sig.key_of(nested_b)
    assert sig.key_of(view("t", [1, 2])) == view("t", [1, 2]).key
    # Without ignore_fields the shared key is always used.
    assert WindowRepeat().key_of(view("t", {"q": 1, "ts": 5})) == view("t", {"q": 1, "ts": 5}).key


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("window", "threshold", "field", "text"),
    [
        (1, 3, "window", "got 1"),
        (0, 0, "window", "got 0"),  # the crate checks window first
        (8, 1, "threshold", "got 1"),
        (8, 9, "threshold", "threshold=9, window=8"),
        (2, 3, "threshold", "threshold=3, window=2"),
    ],
)
def test_invalid_configuration_is_rejected_naming_the_field(
    window: int, threshold: int, field: str, text: str
) -> None:
    for check in (
        lambda: validate(window, threshold),
        lambda: Config(window=window, threshold=threshold).validate(),
        lambda: WindowRepeat(Config(window=window, threshold=threshold)),
    ):
        with pytest.raises(ValueError) as info:
            check()
        assert str(info.value).startswith(f"{field}:")
        assert text in str(info.value)


@pytest.mark.parametrize(("window", "threshold"), [("8", 3), (8, 2.5), (True, 2), (8, None)])
def test_non_integers_are_rejected(window: object, threshold: object) -> None:
    with pytest.raises(ValueError, match="must be an integer"):
        validate(window, threshold)  # type: ignore[arg-type]


def test_a_bare_signal_config_gets_the_defaults() -> None:
    sig = WindowRepeat(SignalConfig(exempt_tools=["poll"]))
    assert (sig.window, sig.threshold, sig.exempt) == (8, 3, frozenset({"poll"}))


def test_valid_edges_are_accepted() -> None:
    validate(2, 2)
    validate(8, 8)
    Config(window=100, threshold=3)  # the crate has no upper bound; only the policy caps it


def test_policy_decoding_applies_meta_bounds_and_the_crate_rules() -> None:
    with pytest.raises(msgspec.ValidationError, match="window"):
        msgspec.convert({"window": 1}, Config)
    with pytest.raises(msgspec.ValidationError, match="window"):
        msgspec.convert({"window": 65}, Config)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"windw": 4}, Config)
    crossed = msgspec.convert({"window": 4, "threshold": 5}, Config)  # no Meta for a pair
    with pytest.raises(ValueError, match="threshold"):
        crossed.validate()
    cfg = msgspec.convert({"window": 12, "threshold": 4, "ignore_fields": ["ts"]}, Config)
    assert (cfg.window, cfg.threshold, cfg.ignore_fields) == (12, 4, ["ts"])


def test_policy_loader_reports_the_crossed_pair() -> None:
    from streamguard import policy
    from streamguard.signals import signal_classes

    if WindowRepeat not in signal_classes():
        pytest.skip("window-repeat is not registered yet")
    with pytest.raises(policy.PolicyError, match=r"signals\.window-repeat.*threshold"):
        policy.parse_policy_set("[signals.window-repeat]\nwindow = 4\nthreshold = 5\n")


def test_signal_revalidates_a_mutated_config() -> None:
    cfg = Config()
    cfg.threshold = 20
    with pytest.raises(ValueError, match="threshold"):
        WindowRepeat(cfg)


# ---------------------------------------------------------------- preview


def test_would_trip_previews_without_mutating() -> None:
    sig = WindowRepeat()
    state = sig.new_state()
    call = view("search", {"q": "x"})
    assert sig.would_trip(state, call) is False
    sig.on_call(state, call)
    assert sig.would_trip(state, call) is False
    sig.on_call(state, call)
    before = msgspec.json.encode(state)
    assert sig.would_trip(state, call) is True
    assert sig.would_trip(state, call) is True
    assert msgspec.json.encode(state) == before
    assert sig.on_call(state, call) is not None
    # Counting semantics: a latched key still meets the threshold.
    assert sig.would_trip(state, call) is True


def test_would_trip_accounts_for_eviction_of_the_oldest() -> None:
    sig = WindowRepeat(Config(window=3, threshold=2))
    state = sig.new_state()
    a, b, c = view("a"), view("b"), view("c")
    for call in (a, b, c):
        sig.on_call(state, call)
    assert sig.would_trip(state, a) is False  # the only 'a' is about to be evicted
    assert sig.on_call(state, a) is None
    assert sig.would_trip(state, b) is False
    assert sig.would_trip(state, a) is True


def test_exempt_tools_are_invisible() -> None:
    plain = driver(window=2, threshold=2)
    exempt = driver(window=2, threshold=2, exempt_tools=["poll"])
    for d in (plain, exempt):
        d.call("a", {"q": 1})
        d.call("poll", {"q": 1})
        d.call("a", {"q": 1})
    assert plain.findings == []
    assert len(exempt.findings) == 1
    sig = exempt.signal
    assert isinstance(sig, WindowRepeat)
    assert sig.would_trip(exempt.state, view("poll", {"q": 1})) is False
    assert feed(driver(exempt_tools=["a"]), "aaaa") == []


# ---------------------------------------------------------------- text


def test_reason_and_guidance() -> None:
    d = driver()
    finding = None
    for _ in range(3):
        finding = d.call("search", {"q": "x" * 1000})
    assert finding is not None
    assert "'search'" in finding.reason and "3 times" in finding.reason
    assert "threshold 3" in finding.reason and "last 8 calls" in finding.reason
    assert len(finding.detail["args"].encode()) <= 200 and "…" in finding.detail["args"]
    assert "search" in finding.guidance
    for word in ("threshold", "policy", "operator", "/interrupt", "exempt", "watchdog"):
        assert word not in finding.guidance.lower()


# ---------------------------------------------------------------- state


def test_state_round_trips_through_a_snapshot() -> None:
    d = driver()
    feed(d, "ab")
    d.state = msgspec.json.decode(msgspec.json.encode(d.state), type=State)
    assert feed(d, "a") == []
    assert feed(d, "a") == [1]
    assert len(msgspec.json.encode(d.state)) < 400


def test_latch_query() -> None:
    d = driver()
    sig = d.signal
    feed(d, "aa")
    assert not sig.is_latched(d.state)
    feed(d, "a")
    assert sig.is_latched(d.state)


def test_reset_forgets_everything() -> None:
    d = driver()
    feed(d, "aa")
    d.reset()
    assert feed(d, "a") == []


# ---------------------------------------------------------------- model check


class Model:
    """The crate's guard, plus "alert once while the key still meets the threshold"."""

    def __init__(self, window: int, threshold: int) -> None:
        self.window, self.threshold = window, threshold
        self.buf: deque[str] = deque()
        self.latched: set[str] = set()

    def would_raise(self, key: str) -> bool:
        skip = 1 if len(self.buf) == self.window and self.buf[0] == key else 0
        return list(self.buf).count(key) - skip + 1 >= self.threshold

    def record(self, key: str) -> bool:
        if len(self.buf) == self.window:
            self.buf.popleft()
        self.buf.append(key)
        self.latched = {k for k in self.latched if self.buf.count(k) >= self.threshold}
        raised = self.buf.count(key) >= self.threshold
        if raised and key not in self.latched:
            self.latched.add(key)
            return True
        return False


@settings(max_examples=200, deadline=None)
@given(
    st.integers(min_value=2, max_value=10).flatmap(
        lambda w: st.tuples(st.just(w), st.integers(min_value=2, max_value=w))
    ),
    st.lists(st.sampled_from("abcd"), max_size=60),
)
def test_matches_the_reference_window_rule(sizes: tuple[int, int], calls: list[str]) -> None:
    window, threshold = sizes
    sig = WindowRepeat(Config(window=window, threshold=threshold))
    state = sig.new_state()
    model = Model(window, threshold)
    for tool in calls:
        call = view(tool)
        assert sig.would_trip(state, call) == model.would_raise(tool)
        assert (sig.on_call(state, call) is not None) == model.record(tool)
        assert len(state.keys) <= window
        assert len(state.latched) <= window // threshold
