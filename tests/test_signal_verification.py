from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamguard.canonical import canonicalize, stable_hash
from streamguard.events import ToolCall, ToolResult
from streamguard.signals.base import CallView, Finding, ResultView, SignalConfig
from streamguard.signals.facts import ToolGlobs, tool_glob_matcher
from streamguard.signals.verification import (
    FINDING_IDS,
    MAX_INFLIGHT,
    Phase,
    Verification,
)
from tests.harness import Driver

Config = Verification.Config
State = Verification.State


class IdDriver(Driver):
    """The harness driver, plus call ids on calls and results."""

    def call_id(
        self, tool: str, call_id: str | None, kind: str | None = None, args: Any = None
    ) -> Finding | None:
        event = ToolCall(session="s", tool=tool, args=args, call_id=call_id)
        canonical = canonicalize(args)
        view = CallView(event, canonical, stable_hash(tool, canonical.text), [], kind)
        return self._keep(self.signal.on_call(self.state, view))

    def result_id(self, tool: str, call_id: str | None, error: str | None = None) -> Finding | None:
        event = ToolResult(session="s", tool=tool, call_id=call_id, error=error)
        return self._keep(self.signal.on_result(self.state, ResultView(event, bool(error), 0, 0)))

    def op(self, tool: str, error: str | None = None, kind: str | None = None) -> Finding | None:
        """A call and its result, back to back; returns the call's finding."""
        finding = self.call(tool, kind=kind)
        self.result(tool, error=error)
        return finding

    @property
    def phase(self) -> Phase:
        return Phase(self.state.phase)


def driver(**config: Any) -> IdDriver:
    return IdDriver(Verification(Config(**config)))


def targeted() -> IdDriver:
    d = driver()
    d.op("read_file")
    assert d.phase == Phase.READING
    return d


# ---------------------------------------------------------------- identity


def test_identity_and_defaults() -> None:
    sig = Verification()
    assert sig.id == "verification"
    assert sig.severity == "warn"
    assert sig.default_enabled is False
    assert FINDING_IDS == ("write-without-target", "unverified-write", "unverified-final-answer")
    state = sig.new_state()
    assert isinstance(state, State) and state.phase == Phase.RESOLVING


# ---------------------------------------------------------------- classification


@pytest.mark.parametrize(
    ("tool", "kind"),
    [
        ("list_pods", "resolve"),
        ("find_resource", "resolve"),
        ("search", "resolve"),
        ("read_file", "read"),
        ("get_logs", "read"),
        ("status", "read"),
        ("metrics_query", "read"),
        ("run_tests", "verify"),
        ("wait_and_verify", "verify"),
        ("check_health", "verify"),
        ("write_file", "write"),
        ("restart_service", "write"),
        ("delete_vm", "write"),
        ("set_replicas", "write"),
        ("ask_user", "user_input"),
        ("request_user_input", "user_input"),
        ("web_search", "resolve"),
        ("WebSearch", "resolve"),
        ("code_search", "resolve"),
        ("dns_lookup", "resolve"),
        ("research", None),  # ends in "search", is no search
        # a verb at the start wins over a search named by its end: these write
        ("create_search", "write"),
        ("save_search", "write"),
        ("update_search", "write"),
        ("delete_saved_search", "write"),
        ("set_lookup", "write"),
        ("remove_lookup", "write"),
        ("search_files", "resolve"),
        # an editor named by the search that finds what it replaces writes
        ("search_replace", "write"),
        ("search_and_replace", "write"),
        ("find_and_replace", "write"),
        ("vibe__search_replace", "write"),
        ("find_file", "resolve"),
        ("bash", None),
        ("checkout", None),
        ("ReadFile", "read"),
        ("fs.read_file", "read"),
        ("srv__write_file", "write"),
        ("mcp/server:restart_pod", "write"),
        # a name no list matches is unknown, whatever word follows its first: a
        # monitor or a check is no write because a write verb comes second
        ("jira_edit_issue", None),
        ("monitor_deploy_status", None),
        ("post_deploy_check", None),
        ("str_replace_editor", None),
        # messages and comments sent
        ("bitbucket_post_comment", "write"),
        ("slack.chat_postMessage", "write"),
        ("github__add_issue_comment", "write"),
        ("send_email", "write"),
        ("postgres_query", None),
        # tools that read, whatever verb they open with
        ("send_request", None),
        ("submit_query", None),
        ("sender_info", None),
        ("reply_count", None),
        ("sendgrid__get_stats", "read"),
        ("submit_and_wait", None),
    ],
)
def test_default_classification(tool: str, kind: str | None) -> None:
    assert Config().classify(tool) == kind


def test_ambiguous_names_never_classify_as_write() -> None:
    cfg = Config(read_tools=["*status*"], write_tools=["set_*"], verify_tools=[], resolve_tools=[])
    assert cfg.classify("set_status") == "read"
    assert cfg.classify("set_replicas") == "write"
    cfg = Config(user_input_tools=["x*"], verify_tools=["x*"], read_tools=["x*"], write_tools=["x*"])
    assert cfg.classify("x_y") == "user_input"


@pytest.mark.parametrize(
    ("tool", "kind"),
    [
        # a verb's glob names the tools that open with the verb, in any style
        ("show_unit", "read"), ("showUnit", "read"), ("ShowUnit", "read"), ("show", "read"),
        ("show-unit", "read"), ("show2", "read"), ("list_units", "resolve"),
        ("inspect_pod", "read"), ("mcp__crm__listContacts", "resolve"),
        # not those whose first word is a longer one, the noun the verb begins
        ("showings_create", None), ("listing_update", None), ("inspections_get", None),
        ("statuspage_update_incident", None), ("testbook_add_entry", None),
        ("LIST_UNITS", "resolve"), ("LISTING_UPDATE", None), ("healthcheck", "verify"),
        # a namespaced name is then tried by its own part
        ("inspections.create", "write"), ("reader.start_run", "write"),
    ],
)
def test_a_word_glob_names_tools_opening_with_that_word(tool: str, kind: str | None) -> None:
    assert Config().classify(tool) == kind


_WORD = st.text("abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=8)


@given(word=_WORD, rest=_WORD, separator=st.sampled_from(["_", "-", ".", "2", ""]))
def test_a_word_glob_matches_the_word_and_not_a_longer_one(word: str, rest: str, separator: str) -> None:
    match = tool_glob_matcher([word + "*"])
    assert match is not None
    assert match(word) and match(word.upper())
    assert match(word.upper() + "_" + rest.upper())  # in capitals, a separator ends the word
    assert not match(word.upper() + rest.upper())  # and glued, it is one word
    # a capital that grows when lowered ("İ") begins a word as any capital does
    assert match(word + "İ" + rest) and not match("İ" + word)
    assert match(word + rest.capitalize())  # camelCase: a new word begins
    assert match(word + separator + rest) is (separator != "")  # glued in lower case: one word
    # the same, whatever case the name is written in where the word is
    assert match(word.capitalize() + separator + rest) is (separator != "")


def test_waits_and_polls_named_by_a_word_are_not_its_nouns() -> None:
    waits = ToolGlobs(["wait*", "poll*"])
    assert waits("wait_for_job") and waits("waitForJob") and waits("mcp__ci__poll")
    assert not waits("waitlist_add") and not waits("polling_station_find")


def test_other_globs_keep_fnmatch_prefixes() -> None:
    cfg = Config(read_tools=["show?*", "*status*"], resolve_tools=[], verify_tools=[], write_tools=[])
    assert cfg.classify("showings_create") == "read"  # the plain prefix, written as one
    assert cfg.classify("statuspage") == "read"


def test_write_globs_that_name_a_replacement_come_first() -> None:
    cfg = Config(resolve_tools=["search*"], write_tools=["search_replace*", "set_*"], read_tools=["set_status"])
    assert cfg.classify("search_replace") == "write"
    assert cfg.classify("search_code") == "resolve"
    assert cfg.classify("set_status") == "read"  # other write globs keep their place
    # a policy that removes the replacement glob keeps the name a search
    assert Config(write_tools=["write*"]).classify("search_replace") == "resolve"


def test_empty_lists_classify_nothing() -> None:
    cfg = Config(resolve_tools=[], read_tools=[], verify_tools=[], write_tools=[], user_input_tools=[])
    assert cfg.classify("read_file") is None


def test_classification_cache_is_bounded() -> None:
    cfg = Config()
    for i in range(2000):
        assert cfg.classify(f"tool_{i}") is None
    assert len(cfg._cache) <= 512
    assert cfg.classify("read_file") == "read"


def test_config_decodes_from_a_policy_table() -> None:
    cfg = msgspec.convert({"write_tools": ["kubectl_apply"]}, Config)
    assert cfg.classify("kubectl_apply") == "write"
    assert cfg.classify("write_file") is None
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"writes": []}, Config)


def test_event_kind_wins_over_the_name() -> None:
    d = driver()
    assert d.call("deploy", kind="read") is None
    d.result("deploy")  # no matching name pattern: the in-flight kind is used
    assert d.phase == Phase.READING
    d = driver()
    assert d.call("read_config", kind="write") is not None
    assert d.ids() == ["write-without-target"]


def test_unknown_and_user_input_tools_change_nothing() -> None:
    d = driver()
    d.op("bash")
    d.op("ask_user")
    assert d.phase == Phase.RESOLVING
    assert d.state.inflight_ids == [] == d.state.inflight_kinds
    assert d.call("write_file") is not None


# ---------------------------------------------------------------- write-without-target


def test_write_before_any_resolution_is_flagged_once() -> None:
    d = driver()
    finding = d.call("write_file")
    assert finding is not None
    assert (finding.signal, finding.severity) == ("write-without-target", "warn")
    assert finding.detail == {"tool": "write_file"}
    assert d.call("restart_service") is None  # latched for the episode
    assert d.ids() == ["write-without-target"]


@pytest.mark.parametrize("tool", ["list_pods", "read_file"])
def test_successful_resolve_or_read_establishes_a_target(tool: str) -> None:
    d = driver()
    d.op(tool)
    assert d.phase == Phase.READING
    assert d.call("write_file") is None


@pytest.mark.parametrize(
    "setup",
    [
        lambda d: d.call("read_file"),  # no result yet
        lambda d: d.op("read_file", error="ENOENT"),  # failed
        lambda d: d.op("run_tests"),  # verify kind: checks, does not resolve
        lambda d: d.op("ask_user"),  # asking is not discovery
    ],
)
def test_these_do_not_establish_a_target(setup: Any) -> None:
    d = driver()
    setup(d)
    assert d.phase == Phase.RESOLVING
    assert d.call("write_file") is not None


def test_flagged_write_is_not_a_resolution() -> None:
    d = driver()
    d.call("write_file")
    d.result("write_file", error="denied")
    assert d.phase == Phase.RESOLVING
    d.turn_start()
    assert d.call("write_file") is not None


def test_writes_after_a_blind_write_are_the_same_behaviour() -> None:
    d = driver()
    d.op("write_file")  # blind, and it succeeded: a change to verify
    assert d.phase == Phase.VERIFYING
    assert d.op("edit_file") is None  # still no target: latched, not a second rule
    d.turn_start()
    finding = d.op("edit_file")
    assert finding is not None and finding.signal == "write-without-target"
    d.op("run_tests")  # verifies the change, but running tests is not discovery
    assert d.phase == Phase.READING
    d.turn_start()
    assert d.call("write_file") is not None
    assert d.ids() == ["write-without-target"] * 3


# ---------------------------------------------------------------- unverified-write


def test_second_write_before_verification_is_flagged_once() -> None:
    d = targeted()
    assert d.op("write_file") is None
    assert d.phase == Phase.VERIFYING
    finding = d.op("edit_file")
    assert finding is not None and finding.signal == "unverified-write"
    assert finding.detail == {"tool": "edit_file"}
    assert d.op("restart_service") is None
    assert d.ids() == ["unverified-write"]


def test_parallel_writes_are_a_second_write_before_verification() -> None:
    d = targeted()
    assert d.call("write_file") is None
    assert d.phase == Phase.WRITING
    assert d.call("edit_file") is not None
    assert d.ids() == ["unverified-write"]


def test_successful_read_after_the_write_verifies() -> None:
    d = targeted()
    d.op("write_file")
    d.op("read_file")
    assert d.phase == Phase.READING
    assert d.final_answer() is None
    assert d.op("write_file") is None
    assert d.findings == []


@pytest.mark.parametrize("tool", ["read_file", "list_pods", "run_tests"])
def test_read_resolve_and_verify_kinds_all_verify(tool: str) -> None:
    d = targeted()
    d.op("write_file")
    d.op(tool)
    assert d.phase == Phase.READING
    assert d.final_answer() is None


def test_failed_read_does_not_verify() -> None:
    d = targeted()
    d.op("write_file")
    d.op("read_file", error="timeout")
    assert d.phase == Phase.VERIFYING
    assert d.final_answer() is not None


def test_verification_rearms_the_write_rule() -> None:
    d = targeted()
    d.op("write_file")
    d.op("write_file")
    d.op("read_file")
    d.op("write_file")
    d.op("write_file")
    assert d.ids() == ["unverified-write", "unverified-write"]


def test_failed_write_needs_no_verification() -> None:
    d = targeted()
    d.call("write_file")
    d.result("write_file", error="conflict")
    assert d.phase == Phase.READING
    assert d.final_answer() is None
    assert d.op("write_file") is None


def test_failed_write_with_another_write_in_flight_keeps_writing() -> None:
    d = targeted()
    d.call_id("write_file", "w1")
    d.call_id("edit_file", "w2")
    d.result_id("write_file", "w1", error="conflict")
    assert d.phase == Phase.WRITING
    d.result_id("edit_file", "w2")
    assert d.phase == Phase.VERIFYING


# ---------------------------------------------------------------- what counts as "after the write"


def test_read_issued_before_the_write_does_not_verify() -> None:
    d = targeted()
    d.call_id("read_file", "r1")
    d.call_id("write_file", "w1")
    d.result_id("write_file", "w1")
    d.result_id("read_file", "r1")
    assert d.phase == Phase.VERIFYING
    assert d.final_answer() is not None


def test_read_issued_before_the_write_without_ids_does_not_verify() -> None:
    d = targeted()
    d.call("read_file")
    d.call("write_file")
    d.result("write_file")
    d.result("read_file")
    assert d.phase == Phase.VERIFYING


def test_read_whose_result_precedes_the_writes_result_does_not_verify() -> None:
    d = targeted()
    d.call_id("write_file", "w1")
    d.call_id("read_file", "r1")
    d.result_id("read_file", "r1")
    d.result_id("write_file", "w1")
    assert d.phase == Phase.VERIFYING


def test_read_during_a_flagged_write_still_resolves_the_target() -> None:
    d = driver()
    d.call_id("write_file", "w1")  # flagged: no target
    d.call_id("read_file", "r1")
    d.result_id("read_file", "r1")
    d.result_id("write_file", "w1", error="denied")
    assert d.phase == Phase.READING


def test_long_call_ids_keep_their_distinct_tails() -> None:
    d = targeted()
    prefix = "p" * 100
    d.call_id("read_file", prefix + "r")
    d.call_id("write_file", prefix + "w")
    assert all(len(i) <= 64 for i in d.state.inflight_ids)
    d.result_id("write_file", prefix + "w")
    assert d.phase == Phase.VERIFYING
    d.result_id("read_file", prefix + "r")
    assert d.phase == Phase.VERIFYING  # stale: issued before the write


def test_results_match_calls_by_id() -> None:
    d = targeted()
    d.call_id("write_file", "w1")
    d.result_id("write_file", "w1")
    d.call_id("op", "r1", kind="read")  # declared kind, unknown name
    d.result_id("op", "r1")
    assert d.phase == Phase.READING
    assert d.state.inflight_ids == [] == d.state.inflight_kinds


# ---------------------------------------------------------------- final answers


def test_final_answer_after_an_unverified_write() -> None:
    d = targeted()
    d.op("write_file")
    finding = d.final_answer("Restarted it, all good.")
    assert finding is not None
    assert (finding.signal, finding.severity) == ("unverified-final-answer", "warn")
    assert finding.detail == {"state": "VERIFYING"}
    assert d.final_answer() is None  # once per episode
    d.turn_start()
    assert d.final_answer() is not None  # a new turn, a new claim


def test_final_answer_while_the_write_is_in_flight() -> None:
    d = targeted()
    d.call("write_file")
    finding = d.final_answer()
    assert finding is not None and finding.detail == {"state": "WRITING"}
    assert "not even arrived" in finding.reason


@pytest.mark.parametrize(
    "setup",
    [
        lambda d: None,
        lambda d: d.op("read_file"),
        lambda d: (d.op("read_file"), d.op("write_file"), d.op("read_file")),
        lambda d: (d.op("read_file"), d.op("write_file", error="denied")),
    ],
)
def test_final_answer_with_nothing_unverified_is_silent(setup: Any) -> None:
    d = driver()
    setup(d)
    assert d.final_answer() is None


def test_blind_write_that_succeeded_still_needs_verification() -> None:
    d = driver()
    d.op("write_file")
    assert d.phase == Phase.VERIFYING
    assert d.final_answer() is not None
    d.op("read_file")
    assert d.phase == Phase.READING


def test_repeated_writes_never_wear_the_rule_down() -> None:
    d = targeted()
    d.op("write_file")
    for _ in range(50):
        d.op("write_file")
        d.op("ask_user")
        d.op("read_file", error="still failing")
    assert d.phase == Phase.VERIFYING
    assert d.final_answer() is not None
    assert d.ids() == ["unverified-write", "unverified-final-answer"]


# ---------------------------------------------------------------- turns, reset, exemptions


def test_turn_start_keeps_the_target_and_the_unverified_change() -> None:
    d = targeted()
    d.turn_start()
    assert d.op("write_file") is None
    d.turn_start()
    assert d.phase == Phase.VERIFYING
    assert d.op("write_file") is not None


def test_turn_start_rearms_write_without_target() -> None:
    d = driver()
    d.call("write_file")
    d.turn_start()
    assert d.call("write_file") is not None


def test_reset_returns_to_resolving() -> None:
    d = targeted()
    d.reset()
    assert d.phase == Phase.RESOLVING
    assert d.call("write_file") is not None


def test_exempt_tools_are_invisible() -> None:
    d = driver(exempt_tools=["write_file"])
    assert d.op("write_file") is None
    assert d.phase == Phase.RESOLVING
    assert d.state.inflight_ids == [] == d.state.inflight_kinds


def test_a_bare_signal_config_gets_the_default_patterns() -> None:
    d = IdDriver(Verification(SignalConfig(exempt_tools=["write_file"])))
    assert d.op("write_file") is None
    assert d.op("edit_file") is not None


def test_inflight_is_bounded() -> None:
    d = targeted()
    for i in range(100):
        d.call_id("read_file", f"r{i}")
    assert len(d.state.inflight_ids) == MAX_INFLIGHT
    for i in range(100):
        d.call(f"read_{i}")
    assert len(d.state.inflight_ids) == MAX_INFLIGHT
    assert len(msgspec.json.encode(d.state)) < 400


def test_state_is_tiny_and_round_trips() -> None:
    d = targeted()
    d.call("write_file")
    d.state = msgspec.json.decode(msgspec.json.encode(d.state), type=State)
    d.result("write_file")
    assert d.phase == Phase.VERIFYING
    assert len(msgspec.json.encode(State())) < 120


# ---------------------------------------------------------------- text


def test_texts_keep_operator_controls_out_of_guidance() -> None:
    d = driver()
    d.op("write_file")
    d.op("read_file")
    d.op("write_file")
    d.op("edit_file")
    d.final_answer()
    assert d.ids() == list(FINDING_IDS)
    for finding in d.findings:
        assert finding.reason and finding.guidance
        lowered = finding.guidance.lower()
        for word in ("policy", "threshold", "operator", "exempt", "verify_tools", "watchdog"):
            assert word not in lowered
    assert "write_file" in d.findings[0].guidance
    assert "'write_file'" in d.findings[0].reason
    assert "edit_file" in d.findings[1].guidance
    assert "unverified" in d.findings[2].guidance


def test_latch_query() -> None:
    d = targeted()
    assert not d.signal.is_latched(d.state)
    d.op("write_file")
    d.op("write_file")
    assert d.signal.is_latched(d.state)
    d.op("read_file")
    assert not d.signal.is_latched(d.state)


# ---------------------------------------------------------------- invariants


TOOLS = {
    "resolve": "list_pods", "read": "read_file", "verify": "run_tests",
    "write": "write_file", "user_input": "ask_user", None: "bash",
}
actions = st.lists(
    st.one_of(
        st.tuples(st.just("call"), st.sampled_from(list(TOOLS))),
        st.tuples(st.just("ok"), st.sampled_from(list(TOOLS))),
        st.tuples(st.just("fail"), st.sampled_from(list(TOOLS))),
        st.tuples(st.just("turn"), st.none()),
        st.tuples(st.just("answer"), st.none()),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(actions)
def test_only_writes_and_answers_are_ever_flagged(seq: list[tuple[str, str | None]]) -> None:
    d = driver()
    for action, kind in seq:
        before = d.phase
        resolved = bool(d.state.flags & 8)
        if action == "call":
            finding = d.call(TOOLS[kind])
            if finding is not None:
                assert kind == "write"
                assert finding.signal in ("write-without-target", "unverified-write")
                assert (finding.signal == "write-without-target") == (not resolved)
                if resolved:
                    assert before in (Phase.WRITING, Phase.VERIFYING)
            if kind != "write":
                assert d.phase == before  # only a write call moves the machine on a call
        elif action in ("ok", "fail"):
            assert d.result(TOOLS[kind], error="e" if action == "fail" else None) is None
        elif action == "turn":
            assert d.turn_start() is None
        else:
            finding = d.final_answer()
            if finding is not None:
                assert before in (Phase.WRITING, Phase.VERIFYING)
        assert len(d.state.inflight_ids) <= MAX_INFLIGHT
        msgspec.msgpack.encode(d.state)


@settings(max_examples=200, deadline=None)
@given(actions)
def test_a_successful_write_always_leaves_the_change_to_verify(
    seq: list[tuple[str, str | None]],
) -> None:
    d = targeted()
    for action, kind in seq:
        if action == "call":
            d.call(TOOLS[kind])
        elif action in ("ok", "fail"):
            d.result(TOOLS[kind], error="e" if action == "fail" else None)
        elif action == "turn":
            d.turn_start()
    d.turn_start()
    d.op("write_file")
    # Whatever came before, a write that succeeded is unverified until checked.
    assert d.phase == Phase.VERIFYING
    assert d.final_answer() is not None
