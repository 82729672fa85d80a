from __future__ import annotations

import sys

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamguard.canonical import fingerprint_payload
from streamguard.events import ToolResult
from streamguard.signals.base import ResultView, SignalConfig, overrides
from streamguard.signals.no_new_state import NoNewState, remembered
from tests.harness import Driver

Config = NoNewState.Config
State = NoNewState.State

OPERATOR_WORDS = ("threshold", "policy", "operator", "/interrupt", "reset", "exempt", "--")


def driver(threshold: int | None = None, memory: int | None = None, **config: object) -> Driver:
    if threshold is not None:
        config["threshold"] = threshold
    if memory is not None:
        config["memory"] = memory
    return Driver(NoNewState(Config(**config)))


def read(d: Driver, payload: object = "aaa", tool: str = "read_file") -> object:
    return d.result(tool, result=payload)


def reads(d: Driver, count: int, payload: object = "aaa", tool: str = "read_file") -> list[int]:
    """Feed ``count`` results; return the 1-based positions that tripped."""
    hits = []
    for i in range(count):
        if read(d, payload, tool) is not None:
            hits.append(i + 1)
    return hits


# --------------------------------------------------------------------- identity


def test_identity_and_defaults() -> None:
    signal = NoNewState()
    assert signal.id == "no-new-state"
    assert signal.severity == "warn"
    assert signal.scope == "session"
    assert (signal.threshold, signal.memory) == (6, 64)
    assert signal.defers_to == (
        "failure-loop",
        "repeated-tool-call",
        "alternating-tool-cycle",
        "dominant-tool-call",
        "long-loop",
        "result-stall",
    )
    assert not signal.withdrawn_by_text
    assert isinstance(signal.new_state(), State)
    assert State.__struct_config__.tag == "no-new-state"
    assert overrides(signal, "on_result") and overrides(signal, "on_turn_start")
    for hook in ("on_call", "on_text", "on_turn_end"):
        assert not overrides(signal, hook)


# --------------------------------------------------------------------- counts


def test_one_fresh_plus_five_seen_is_silent() -> None:
    d = driver()
    assert reads(d, 6) == []


def test_one_fresh_plus_six_seen_trips_on_the_seventh_result() -> None:
    d = driver()
    assert reads(d, 7) == [7]
    finding = d.findings[0]
    assert finding.signal == "no-new-state"
    assert finding.severity == "warn"
    assert finding.detail == {
        "count": 6,
        "threshold": 6,
        "memory": 64,
        "remembered": 1,
        "tool": "read_file",
    }


def test_one_alert_per_run() -> None:
    d = driver()
    assert reads(d, 40) == [7]


def test_keyed_on_payload_not_tool() -> None:
    d = driver()
    tools = ["read_file", "grep", "get_pod", "describe_pod", "read_file", "grep", "get_pod"]
    for tool in tools:
        read(d, {"status": "Pending"}, tool)
    assert len(d.findings) == 1


def test_calls_and_text_do_not_matter() -> None:
    d = driver()
    for i in range(7):
        d.call("read_file", {"path": f"spelling-{i}"})
        d.text("looking again")
        read(d)
    assert len(d.findings) == 1


# --------------------------------------------------------------------- resets


def test_new_payload_resets_the_run() -> None:
    d = driver()
    reads(d, 4, "aaa")
    read(d, "bbb")
    reads(d, 3, "aaa")
    assert d.findings == []


def test_unfingerprintable_result_resets_the_run() -> None:
    d = driver()
    reads(d, 3, "aaa")
    read(d, None)
    reads(d, 3, "aaa")
    assert d.findings == []


def test_unfingerprintable_result_keeps_memory() -> None:
    d = driver()
    reads(d, 3, "aaa")
    read(d, "")
    # "aaa" is still remembered, so six more re-reads trip without a fresh one
    assert reads(d, 6, "aaa") == [6]


def test_failures_and_no_ops_are_skipped_without_resetting() -> None:
    d = driver()
    reads(d, 3, "aaa")
    d.result("read_file", error="timeout")
    d.result("mark_task_done", result="aaa", no_op=True)
    assert reads(d, 4, "aaa") == [4]
    assert len(d.findings) == 1


def test_wait_and_verify_is_exempt() -> None:
    d = driver()
    assert reads(d, 13, "not ready", "wait_and_verify") == []
    assert remembered(d.state) == []


def test_wait_and_verify_does_not_reset_a_run() -> None:
    d = driver()
    reads(d, 4, "aaa")
    read(d, "something else", "wait_and_verify")
    assert reads(d, 3, "aaa") == [3]


def test_configured_exempt_tools() -> None:
    d = driver(exempt_tools=["poll_rollout"])
    assert reads(d, 13, "aaa", "poll_rollout") == []
    assert d.signal.exempt == frozenset({"poll_rollout", "wait_and_verify"})


def test_threshold_three() -> None:
    d = driver(3)
    assert reads(d, 11, "aaa") == [4]
    read(d, "bbb")
    assert reads(d, 5, "aaa") == [3]
    assert len(d.findings) == 2


def test_reset_forgets_the_seen_set() -> None:
    d = driver()
    reads(d, 5, "aaa")
    d.reset()
    assert reads(d, 6, "aaa") == []
    assert remembered(d.state) == [fingerprint_payload("aaa")]


# --------------------------------------------------------------------- memory


def test_memory_eviction_at_64_delays_the_alert_by_one() -> None:
    d = driver()
    read(d, "first")
    for i in range(64):
        read(d, f"other-{i}")
    assert len(remembered(d.state)) == 64
    # "first" was pushed out: its next sighting is news again
    assert reads(d, 7, "first") == [7]


def test_memory_63_in_between_evicts_nothing() -> None:
    d = driver()
    read(d, "first")
    for i in range(63):
        read(d, f"other-{i}")
    assert reads(d, 6, "first") == [6]


def test_re_seeing_does_not_refresh() -> None:
    d = driver(memory=8)
    read(d, "first")
    for i in range(7):
        read(d, f"other-{i}")  # memory now full: first, other-0 .. other-6
    read(d, "first")  # seen again; a refreshing memory would move it to the back
    assert d.state.run == 1
    read(d, "other-7")  # evicts the oldest insertion, which is still "first"
    assert fingerprint_payload("first") not in remembered(d.state)
    assert fingerprint_payload("other-0") in remembered(d.state)
    read(d, "first")
    assert d.state.run == 0  # news again


def test_memory_eight_first_plus_ten_then_first_twice() -> None:
    d = driver(memory=8)
    read(d, "first")
    for i in range(10):
        read(d, f"other-{i}")
    read(d, "first")
    read(d, "first")
    assert d.findings == []
    assert d.state.run == 1  # the first re-read was news again
    assert len(remembered(d.state)) == 8


def _direct(signal: NoNewState, state: State, fingerprint: int) -> object:
    event = ToolResult(session="s", tool="read_file", result="opaque")
    return signal.on_result(state, ResultView(event, False, fingerprint, 6))


def test_a_match_straddling_two_entries_is_not_a_hit() -> None:
    signal = NoNewState(Config(threshold=3))
    state = signal.new_state()
    first = int.from_bytes(bytes(range(1, 9)), "little")
    second = int.from_bytes(bytes(range(9, 17)), "little")
    straddling = int.from_bytes(bytes(range(5, 13)), "little")  # tail of one, head of next
    _direct(signal, state, first)
    _direct(signal, state, second)
    _direct(signal, state, straddling)
    assert state.run == 0
    assert remembered(state) == [first, second, straddling]
    # a genuine, aligned re-sighting after a straddling false match still counts
    _direct(signal, state, second)
    assert state.run == 1


def test_memory_keeps_insertion_order_and_fits_in_a_few_hundred_bytes() -> None:
    d = driver()
    payloads = [f"payload-{i}" for i in range(70)]
    for payload in payloads:
        read(d, payload)
    assert remembered(d.state) == [fingerprint_payload(p) for p in payloads[-64:]]
    assert sys.getsizeof(d.state.seen) < 1024


def test_out_of_range_fingerprints_from_direct_callers_do_not_raise() -> None:
    signal = NoNewState()
    state = signal.new_state()
    for fingerprint in (-1, 1 << 70, (1 << 64) - 1):
        assert _direct(signal, state, fingerprint) is None
    assert len(remembered(state)) <= 3


# --------------------------------------------------------------------- turn boundaries


def test_turn_start_clears_memory_and_run() -> None:
    d = driver()
    reads(d, 3, "aaa")
    d.turn_start()
    assert d.state.run == 0 and remembered(d.state) == []
    assert reads(d, 6, "aaa") == []


def test_daemon_wakes_rereading_unchanged_resources_never_trip() -> None:
    d = driver()
    resources = [{"name": f"deploy-{i}", "ready": True} for i in range(6)]
    for _ in range(6):
        d.turn_start()
        for payload in resources:
            read(d, payload, "get_deployment")
    assert d.findings == []
    # a stall inside one turn still trips
    hits = [i for i in range(1, 7) if read(d, resources[0], "get_deployment") is not None]
    assert hits == [6]


def test_turn_end_is_not_a_boundary() -> None:
    d = driver()
    reads(d, 3, "aaa")
    d.turn_end()
    assert reads(d, 4, "aaa") == [4]


def test_reworded_calls_with_one_answer() -> None:
    d = driver()
    for i in range(13):
        d.call("search_logs", {"query": f"why is the pod pending, attempt {i}"})
        read(d, {"hits": 0}, "search_logs")
    assert len(d.findings) == 1


# --------------------------------------------------------------------- text


def test_texts_name_the_tool_and_wait_and_verify() -> None:
    d = driver()
    read(d, "aaa", "read_file")
    for _ in range(6):
        finding = read(d, "aaa", "get_pod")
    assert finding is not None
    assert "wait_and_verify" in finding.guidance
    assert "get_pod" in finding.guidance
    assert "6 tool results" in finding.reason
    assert "wait_and_verify" in finding.reason
    lowered = finding.guidance.lower()
    for word in OPERATOR_WORDS:
        assert word not in lowered


def test_long_tool_name_truncated_in_text() -> None:
    d = driver()
    for _ in range(7):
        finding = read(d, "aaa", "t" * 5000)
    assert finding is not None
    assert len(finding.detail["tool"].encode()) <= 200


def test_unnamed_tool() -> None:
    d = driver()
    for _ in range(7):
        finding = read(d, "aaa", "")
    assert finding is not None
    assert "unnamed tool" in finding.guidance


# --------------------------------------------------------------------- latch


def test_is_latched_follows_the_run() -> None:
    d = driver()
    reads(d, 6)
    assert not d.signal.is_latched(d.state)
    read(d)
    assert d.signal.is_latched(d.state)
    d.result("read_file", error="boom")  # skipped: latch holds
    assert d.signal.is_latched(d.state)
    read(d, "fresh")
    assert not d.signal.is_latched(d.state)
    reads(d, 7)
    assert d.signal.is_latched(d.state)
    d.turn_start()
    assert not d.signal.is_latched(d.state)


# --------------------------------------------------------------------- config


@pytest.mark.parametrize(
    ("raw", "effective"),
    [
        ((1, 0), (3, 3)),
        ((-5, -5), (3, 3)),
        ((3, 3), (3, 3)),
        ((6, 64), (6, 64)),
        ((10, 4), (10, 10)),
        ((4, 100), (4, 100)),
    ],
)
def test_clamps(raw: tuple[int, int], effective: tuple[int, int]) -> None:
    signal = NoNewState(Config(threshold=raw[0], memory=raw[1]))
    assert (signal.threshold, signal.memory) == effective
    assert (signal.config.threshold, signal.config.memory) == effective


def test_clamped_threshold_three_trips_on_fourth() -> None:
    d = driver(1, 0)
    assert reads(d, 4) == [4]


@pytest.mark.parametrize(("raw", "effective"), [("abc", 6), (None, 6), ("4", 4), (4.9, 4), (True, 3)])
def test_raw_config_values_from_direct_construction(raw: object, effective: int) -> None:
    # msgspec does not validate on direct construction; the signal must cope
    assert NoNewState(Config(threshold=raw)).threshold == effective  # type: ignore[arg-type]


def test_policy_validation_rejects_out_of_range() -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"threshold": 2}, Config)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"memory": 0}, Config)
    assert msgspec.convert({"threshold": 3, "memory": 3}, Config).memory == 3


def test_plain_signal_config_is_accepted() -> None:
    signal = NoNewState(SignalConfig(exempt_tools=["poll"]))
    assert (signal.threshold, signal.memory) == (6, 64)
    assert signal.exempt == frozenset({"poll", "wait_and_verify"})


def test_state_stays_small() -> None:
    d = driver()
    for i in range(1000):
        read(d, f"payload-{i}" * 100)
    assert len(remembered(d.state)) == 64
    assert len(msgspec.msgpack.encode(d.state)) <= 2048
    assert len(msgspec.json.encode(d.state)) <= 2048


def test_state_round_trips() -> None:
    d = driver()
    reads(d, 6)
    d.state = msgspec.json.decode(msgspec.json.encode(d.state), type=State)
    assert read(d) is not None


# --------------------------------------------------------------------- invariant

step = st.one_of(
    st.tuples(st.just("read"), st.integers(min_value=0, max_value=12)),
    st.tuples(st.sampled_from(["empty", "fail", "noop", "wait", "turn", "call"]), st.just(0)),
)


@given(
    st.lists(step, max_size=120),
    st.integers(min_value=1, max_value=6),
    st.integers(min_value=0, max_value=10),
)
def test_matches_a_plain_model(steps: list[tuple[str, int]], raw_t: int, raw_m: int) -> None:
    d = driver(raw_t, raw_m)
    threshold = max(3, raw_t)
    memory = max(threshold, raw_m)
    seen: list[str] = []
    run = 0
    expected = 0
    for kind, value in steps:
        if kind == "read":
            payload = f"p{value}"
            read(d, payload)
            if payload in seen:
                run += 1
                if run == threshold:
                    expected += 1
            else:
                seen.append(payload)
                if len(seen) > memory:
                    seen.pop(0)
                run = 0
        elif kind == "empty":
            read(d, None)
            run = 0
        elif kind == "fail":
            d.result("read_file", error="boom")
        elif kind == "noop":
            d.result("mark_task_done", result="p0", no_op=True)
        elif kind == "wait":
            read(d, "p0", "wait_and_verify")
        elif kind == "turn":
            d.turn_start()
            seen.clear()
            run = 0
        else:
            d.call("read_file")
        assert remembered(d.state) == [fingerprint_payload(p) for p in seen]
        assert len(seen) <= memory
        assert d.state.run == run
        assert d.signal.is_latched(d.state) == (run >= threshold)
    assert len(d.findings) == expected
