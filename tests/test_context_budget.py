"""The in-turn context estimate: pressure warning and the 95 % cut."""

from __future__ import annotations

from streamguard.events import Alert, GuardrailTrip
from streamguard.policy import Policy
from streamguard.signals.context_budget import ContextBudget, ContextBudgetConfig, ModelWindow
from streamguard.watchdog import Watchdog
from tests.harness import Driver


def driver(**config) -> Driver:
    return Driver(ContextBudget(ContextBudgetConfig(**config)))


def test_result_bytes_add_pending_and_text_adds_nothing():
    d = driver()
    d.usage(model="m", input_tokens=1000, context_window=100_000)
    d.result("read", result="x" * 9000)
    assert d.state.pending_bytes >= 9000
    d.text("y" * 20000)
    assert d.state.pending_bytes >= 9000 and d.state.pending_bytes < 10000


def test_result_bytes_field_is_used_without_payload():
    d = driver()
    d.usage(input_tokens=0, context_window=1000)
    assert d.result("read", result=None, result_bytes=3 * 960).signal == "context-budget"


def test_pressure_without_cut():
    d = driver()
    d.usage(model="claude-opus-4-1", input_tokens=80_000, context_window=100_000)
    f = d.result("read", result_bytes=3 * 7_000)  # 0.80 + 0.07
    assert f.signal == "context-pressure" and f.severity == "warn"
    assert f.detail["threshold"] == 0.85


def test_no_tail_no_action():
    d = driver()
    d.usage(input_tokens=90_000, context_window=100_000)
    assert d.findings == []


def test_cut_at_95_percent_mentions_compaction_and_unmeasured():
    d = driver()
    d.usage(input_tokens=90_000, context_window=100_000)
    f = d.result("read", result_bytes=3 * 10_000)
    assert f.signal == "context-budget" and f.scope == "turn" and f.enforced
    assert "compaction" in f.reason and "unmeasured" in f.reason
    assert f.escalates is False


def test_cut_latched_once_per_turn():
    d = driver()
    d.usage(input_tokens=90_000, context_window=100_000)
    for _ in range(4):
        d.result("read", result_bytes=3 * 10_000)
    assert d.ids().count("context-budget") == 1
    d.turn_start()
    d.result("read", result_bytes=3 * 10_000)
    assert d.ids().count("context-budget") == 2


def test_measured_usage_replaces_estimate():
    d = driver()
    d.usage(input_tokens=1000, context_window=100_000)
    d.result("read", result_bytes=30_000)
    d.usage(input_tokens=2000)
    assert d.state.pending_bytes == 0 and d.state.measured == 2000


def test_unknown_window_assumes_128k_and_says_so():
    d = driver()
    d.usage(model="some-proxy-model", input_tokens=120_000)
    f = d.result("read", result_bytes=3 * 2_000)
    assert f.detail["window"] == 128_000 and f.detail["window_assumed"] is True
    assert "assumed" in f.reason


def test_gpt5_is_cut_by_what_a_request_may_send():
    # 121,500 tokens: 95 % of an assumed 128,000 would cut the turn; GPT-5 requests may
    # carry 272,000 (its 400,000-token window less 128,000 of output).
    d = driver()
    d.usage(model="gpt-5-2025-08-07", input_tokens=121_500)
    assert d.result("shell", result_bytes=3_000) is None
    assert d.state.window == 272_000
    d.usage(model="gpt-5-2025-08-07", input_tokens=255_000)
    assert d.result("shell", result_bytes=30_000).signal == "context-budget"
    d = driver()
    d.usage(model="gpt-5-chat-latest", input_tokens=1_000)
    d.result("shell", result_bytes=3)
    assert d.state.window == 128_000  # the chat variant's window is smaller


def test_known_model_families_have_their_published_window():
    # 112,000 measured tokens and a 36 KB result: 95 % of an assumed 128,000, not of 200,000.
    d = driver()
    d.usage(model="claude-sonnet-4-5-20250929", input_tokens=112_000)
    assert d.result("read", result_bytes=36_000) is None  # 62 %: below even the mid tier
    assert d.state.window == 200_000
    d = driver()
    d.usage(model="gpt-4o-2024-08-06", input_tokens=112_000)
    assert d.result("read", result_bytes=36_000).signal == "context-budget"
    d = driver()
    d.usage(model="claude-sonnet-4-5", input_tokens=1000, context_window=1_000_000)
    assert d.state.window == 1_000_000  # the event's own window wins


def test_small_tier_threshold():
    d = driver()
    d.usage(model="claude-haiku-4-5", input_tokens=30_000, context_window=100_000)
    f = d.result("read", result_bytes=3 * 6_000)
    assert f.signal == "context-pressure" and f.detail["threshold"] == 0.35


def test_flash_lite_is_small_but_newer_flash_is_frontier():
    cb = ContextBudget()
    assert cb._model_facts("gemini-3.5-flash-lite")[0] == 0.35
    assert cb._model_facts("gemini-3.5-flash")[0] == 0.65
    assert cb._model_facts("gemini-3.7-flash")[0] == 0.85


def test_model_window_patterns_supply_the_window():
    d = driver(model_windows=[ModelWindow(match="tiny-*", tokens=1000)])
    d.usage(model="tiny-1", input_tokens=900)
    f = d.result("read", result_bytes=3 * 60)
    assert f.signal == "context-budget" and f.detail["window"] == 1000
    assert f.detail["window_assumed"] is False


def test_policy_rejects_unknown_tier_and_tier_above_ceiling():
    import pytest

    from streamguard.policy import PolicyError, parse_policy_set

    with pytest.raises(PolicyError, match=r"context_budget.*huge"):
        parse_policy_set('[[context_budget.model_tiers]]\nmatch = "x*"\ntier = "huge"\n')
    with pytest.raises(PolicyError, match="above hard_ceiling"):
        parse_policy_set("[context_budget]\nhard_ceiling = 0.5\n")


def test_cut_through_watchdog_is_a_context_budget_trip_in_warn_mode():
    w = Watchdog(Policy(mode="warn"))
    from streamguard.events import ToolResult, TurnStart, Usage
    st = w.new_state("x")
    w.process(st, TurnStart(session="x"))
    w.process(st, Usage(session="x", input_tokens=95_000, context_window=100_000))
    out = w.process(st, ToolResult(session="x", tool="read", result_bytes=3_000))
    assert [type(o) for o in out] == [Alert, GuardrailTrip]
    assert out[1].guardrail == "context_budget" and out[1].scope == "turn"
    assert not out[1].session_halted
    assert st.cut_streak == 0  # not part of the escalation


def test_a_model_switch_to_an_unlisted_model_forgets_the_previous_window():
    d = driver()
    d.usage(model="claude-sonnet-4-5", input_tokens=1000)
    d.usage(model="deepseek-chat", input_tokens=125_000)
    f = d.result("read", result_bytes=3 * 2_000)
    assert f.detail["window"] == 128_000 and f.detail["window_assumed"] is True


COUNTED_WHOLE = ("context-budget", "context-pressure")
"""Either alert: a result counted by its bytes, against a window it is many times larger
than (cut, or, past twice the window, a warning until the next measure: no model could
have been sent it whole)."""


def test_a_screenshot_is_counted_as_an_image_not_as_its_base64():
    """A full-page screenshot of 600 KB of base64 is about 1,600 tokens to the model:
    counted by its bytes it cut a browser agent's turn at its first screenshot."""
    from streamguard.signals.context_budget import IMAGE_TOKENS

    screenshot = [{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                               "data": "A" * 600_000}},
                  {"type": "text", "text": "Screenshot of https://example.test/"}]
    d = driver()
    d.usage(model="claude-sonnet-4-5", input_tokens=20_000, context_window=200_000)
    assert d.result("browser_take_screenshot", result=screenshot) is None
    # the text beside the image as text (its strings), the image as IMAGE_TOKENS
    assert d.state.pending_bytes == len("text") + len("Screenshot of https://example.test/") \
        + IMAGE_TOKENS * 3
    # the same bytes as text are text
    d2 = driver()
    d2.usage(model="claude-sonnet-4-5", input_tokens=20_000, context_window=200_000)
    assert d2.result("read_file", result=[{"type": "text", "text": "A" * 600_000}]).signal == "context-budget"


def test_a_computer_use_answer_sent_by_its_size_is_a_screenshot():
    """OpenAI's computer_use_preview answers every action with a screenshot; a runtime
    that sends it as a digest and its 400 KB had the turn cut at the second call."""
    from streamguard.signals.context_budget import IMAGE_TOKENS

    for tool in ("computer_use_preview", "computer", "computer_20250124"):
        d = driver()
        d.usage(model="computer-use-preview", input_tokens=4_500)
        assert d.result(tool, result_bytes=399_004) is None
        assert d.state.pending_bytes == IMAGE_TOKENS * 3
    # another tool's 400 KB, sent the same way to a model that reads text, is counted by
    # its bytes (a `computer_*` tool of another kind may answer with text: a UI tree, a log)
    for tool in ("fetch_page", "computer_ui_tree", "computer_logs"):
        d = driver()
        d.usage(model="gpt-4o", input_tokens=4_500, context_window=8_192)
        assert d.result(tool, result_bytes=399_004).signal in COUNTED_WHOLE, tool
    # a model that sees only screens (computer-use-preview, UI-TARS) is sent screenshots
    d = driver()
    d.usage(model="computer-use-preview", input_tokens=4_500)
    assert d.result("fetch_page", result_bytes=399_004) is None
    # and a computer tool's payload is read as it is (a text answer is text)
    d = driver()
    d.usage(model="computer-use-preview", input_tokens=4_500)
    assert d.result("computer", result="A" * 399_004).signal == "context-budget"


def test_a_window_its_own_usage_exceeds_stands_the_estimate_down():
    """A computer-use run on a long-context variant reports 230,000 input tokens under a
    declared 200,000-token window: the figure is wrong, and cutting every turn from then
    on against it would stop a session the provider is serving."""
    d = driver()
    d.usage(model="claude-sonnet-4-5", input_tokens=150_000, context_window=200_000)
    assert d.result("read_page", result_bytes=3 * 60_000).signal == "context-budget"
    d.turn_start()
    d.usage(model="claude-sonnet-4-5", input_tokens=230_000, context_window=200_000)
    for _ in range(5):
        assert d.result("read_page", result_bytes=3 * 60_000) is None
    # a window that holds what was measured is believed again
    d.turn_start()
    d.usage(model="claude-sonnet-4-5", input_tokens=230_000, context_window=1_000_000)
    assert d.result("read", result_bytes=3 * 740_000).signal == "context-budget"


def test_an_assumed_window_exceeded_by_usage_stands_down_too():
    d = driver()
    d.usage(model="acme-long-1", input_tokens=300_000)
    assert d.result("read", result_bytes=3 * 100_000) is None
    assert d.state.window == -1


def test_a_contradicted_window_named_again_without_a_measure_stays_contradicted():
    """A usage event with only output tokens that repeats the declared window (streaming
    runtimes do) does not bring back a window the last measure exceeded; a model switch
    to one whose window holds the measure does."""
    d = driver()
    d.usage(model="claude-sonnet-4-5", input_tokens=230_000, context_window=200_000)
    d.usage(model="claude-sonnet-4-5", output_tokens=800, context_window=200_000)
    assert d.result("read", result="x" * 30) is None
    d.usage(model="acme-long-2")  # an unlisted model: the assumed window, still exceeded
    assert d.result("read", result="x" * 30) is None
    d.usage(model="gpt-4.1")  # a window of 1,047,576 tokens holds 230,000
    assert d.result("read", result_bytes=3 * 800_000).signal == "context-budget"


def test_a_computer_use_answer_sent_as_a_summary_of_its_screenshot_is_a_screenshot():
    """A runtime that sends each screenshot as a summary (its type, URL and digest) beside
    its declared 220 KB: against computer-use-preview's 8,192-token window the turn was cut
    at the first call. OpenAI's ``computer_screenshot`` block is an image in any tool's
    answer, and any answer of a computer-use tool that is no text is one image."""
    from streamguard.signals.context_budget import IMAGE_TOKENS

    summary = {"type": "computer_screenshot", "current_url": "https://mail.example.test/inbox",
               "screenshot_sha256": "b4f04a9e6480542e1dcdd397daff83ff"}
    for tool in ("computer", "browser_screenshot"):
        d = driver()
        d.usage(model="computer-use-preview", input_tokens=2_179, context_window=8_192)
        assert d.result(tool, result=summary, result_bytes=231_124) is None, tool
        assert d.state.pending_bytes == IMAGE_TOKENS * 3
    # a computer-use tool's answer of another shape, sent with its bytes: one image
    d = driver()
    d.usage(model="computer-use-preview", input_tokens=2_179, context_window=8_192)
    assert d.result("computer_use_preview", result={"url": "https://x.test/", "sha": "e0"},
                    result_bytes=219_911) is None
    assert d.state.pending_bytes == IMAGE_TOKENS * 3 + len("https://x.test/") + len("e0")
    # the same summary from another tool, without the screenshot's type, is its bytes
    d = driver()
    d.usage(model="computer-use-preview", input_tokens=2_179, context_window=8_192)
    assert d.result("fetch_page", result={"url": "https://x.test/", "sha": "e0"},
                    result_bytes=219_911).signal in COUNTED_WHOLE


def test_text_beside_a_computer_use_screenshot_is_counted():
    """An observation of a screenshot and its accessibility tree (150 KB of text) from a
    computer-use tool: the tree is text the model reads, counted by its characters;
    only the screenshot is one image."""
    from streamguard.signals.context_budget import IMAGE_TOKENS

    tree = "\n".join(f'[{i}] button "Item {i}" enabled focusable' for i in range(4000))
    shot = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "A" * 300_000}}
    for payload in ([shot, {"type": "text", "text": tree}],
                    {"screenshot_sha256": "e0f1", "accessibility_tree": tree}):
        d = driver()
        d.usage(model="claude-sonnet-4-5", input_tokens=20_000, context_window=200_000)
        for _ in range(4):
            d.result("computer_20250124", result=payload)
        assert d.state.pending_bytes >= 4 * len(tree)
        assert d.state.pending_bytes <= 4 * (len(tree) + 64 + IMAGE_TOKENS * 3)


def test_a_gui_agents_action_answered_by_its_size_alone_is_a_screenshot():
    """UI-TARS sends its actions as tools (`click`, `hotkey`, `left_double`) and each
    screenshot as a perceptual hash beside its 1.7 MB: every session was cut at its first
    action against a 32,768-token window."""
    from streamguard.signals.context_budget import IMAGE_TOKENS

    for tool, digest in (("click", "phash:5285df7e336b7424"), ("left_double", None),
                         ("agent.hotkey", None), ("fetch_page", "dhash:00ff00ff00ff00ff")):
        d = driver()
        d.usage(model="claude-3-7-sonnet-20250219", input_tokens=4_130, context_window=32_768)
        assert d.result(tool, result_bytes=1_750_353, result_digest=digest) is None, tool
        assert d.state.pending_bytes == IMAGE_TOKENS * 3
    # UI-TARS sees only screens: whatever the tool, an answer sent by its size is one
    d = driver()
    d.usage(model="ui-tars-1.5-7b", input_tokens=4_130, context_window=32_768)
    assert d.result("click", result_bytes=394_347, result_digest="8dbd193f48c21ab4") is None
    # a tool of no GUI action, its bytes sent with a digest of no image, is counted by them
    d = driver()
    d.usage(model="claude-3-7-sonnet-20250219", input_tokens=4_130, context_window=32_768)
    assert d.result("read_logs", result_bytes=1_750_353, result_digest="sha256:ab12").signal in COUNTED_WHOLE
    # pyautogui's own API names, as tools, are GUI actions too
    d = driver()
    d.usage(model="claude-3-7-sonnet-20250219", input_tokens=4_130, context_window=32_768)
    assert d.result("pyautogui.moveTo", result_bytes=1_750_353) is None
    # a model's name that merely holds the words is no model of screens
    from streamguard.signals.context_budget import _gui_model

    assert _gui_model("computer-use-preview") and _gui_model("ui-tars-1.5-7b")
    assert not _gui_model("ft:gpt-4o:acme:computer-use-router:abc")
    assert not _gui_model("my-org/mycomputer_user-llm")


def test_an_answer_that_names_its_screenshot_is_its_strings_and_one_image():
    from streamguard.signals.context_budget import IMAGE_TOKENS

    observation = {"exec_code": "pyautogui.hotkey('win')", "returncode": 0,
                   "next_obs": "screenshot 1920x1080 sha1:e6111721062a2fbc"}
    d = driver()
    d.usage(model="claude-3-7-sonnet-20250219", input_tokens=8_287)
    assert d.result("agent.open", result=observation, result_bytes=1_366_845) is None
    assert d.state.pending_bytes < IMAGE_TOKENS * 3 + 200
    # the same keys with no word of a screenshot are counted by the declared bytes
    d = driver()
    d.usage(model="claude-3-7-sonnet-20250219", input_tokens=8_287)
    plain = {"exec_code": "x", "returncode": 0, "next_obs": "done"}
    assert d.result("agent.open", result=plain, result_bytes=1_366_845).signal in COUNTED_WHOLE


def test_a_computer_use_screen_described_in_words_is_the_words_and_one_image():
    from streamguard.signals.context_budget import IMAGE_TOKENS

    described = "Chrome Settings, section 'You and Google': Sync and Google services."
    d = driver()
    d.usage(model="claude-sonnet-4-5", input_tokens=20_000)
    assert d.result("computer", result=described, result_bytes=1_200_000) is None
    assert d.state.pending_bytes == len(described) + IMAGE_TOKENS * 3


def test_a_text_agents_actions_and_answers_that_only_name_a_screenshot_are_counted_whole():
    """A web agent's `click`, `type` and `scroll` answer with accessibility trees: sent by
    their size alone they are text. An answer that names a screenshot but declares no more
    than its own bytes is its own bytes, every value counted."""
    for tool in ("click", "type", "scroll"):
        d = driver()
        d.usage(model="gpt-4o", input_tokens=20_000)
        d.result(tool, result_bytes=60_000)
        d.result(tool, result_bytes=60_000)
        assert d.state.pending_bytes == 120_000, tool
    d = driver()
    d.usage(model="gpt-4o", input_tokens=20_000)
    values = {"screenshot": False, "values": [0.123456789] * 40_000}
    assert d.result("read_series", result=values).signal == "context-budget"
    d = driver()
    d.usage(model="gpt-4o", input_tokens=20_000)
    run = {"screenshot_dir": "/tmp/shots", "results": {f"test_{i}": "passed" for i in range(20_000)}}
    assert d.result("run_suite", result=run).signal == "context-budget"


def test_a_runtime_that_keeps_results_out_of_the_context_is_measured_so():
    """Pages of 296 KB declared, each followed by a measure that grew by a few hundred
    tokens: the runtime sends the model a cut of each, and counting the whole of the next
    pages cut a healthy paging turn at its fourth page."""
    d = driver()
    d.usage(model="gpt-4.1-mini", input_tokens=6_000, context_window=200_000)
    d.result("esummary", result_bytes=296_000)
    d.usage(input_tokens=6_700)
    assert 20 <= d.state.kept < 1000
    for _ in range(8):
        assert d.result("esummary", result_bytes=296_000) is None
    # the reason names the share it counted when it does cut
    for _ in range(200):
        finding = d.result("esummary", result_bytes=296_000)
        if finding is not None and finding.signal == "context-budget":
            break
    assert finding is not None and finding.signal == "context-budget"
    assert "counted at" in finding.reason and finding.detail["kept_share"] < 1


def test_a_measure_that_shows_the_results_whole_counts_them_whole_again():
    d = driver()
    d.usage(input_tokens=6_000, context_window=200_000)
    d.result("read", result_bytes=300_000)
    d.usage(input_tokens=6_500)
    assert d.state.kept < 1000
    d.result("read", result_bytes=60_000)
    d.usage(input_tokens=6_500 + 20_000)  # the 60 KB arrived whole
    assert d.state.kept == 1000
    d.turn_start()
    assert d.result("read", result_bytes=3 * 180_000).signal == "context-budget"


def test_a_small_tail_or_a_measure_that_did_not_grow_teaches_nothing():
    d = driver()
    d.usage(input_tokens=6_000, context_window=200_000)
    d.result("read", result_bytes=20_000)  # too small to tell the results from the rest
    d.usage(input_tokens=6_100)
    assert d.state.kept == 1000
    d.result("read", result_bytes=300_000)
    d.usage(input_tokens=6_100)  # the same figure again, or a compaction
    assert d.state.kept == 1000
    d.result("read", result_bytes=300_000)
    d.usage(input_tokens=3_000)
    assert d.state.kept == 1000


def test_the_share_survives_a_snapshot():
    import msgspec

    from streamguard.signals.context_budget import ContextBudgetState

    d = driver()
    d.usage(input_tokens=6_000, context_window=200_000)
    d.result("read", result_bytes=300_000)
    d.usage(input_tokens=6_500)
    encoded = msgspec.msgpack.encode(d.state)
    assert msgspec.msgpack.decode(encoded, type=ContextBudgetState).kept == d.state.kept
    assert b"kept" not in msgspec.msgpack.encode(ContextBudgetState())


def test_no_cut_on_an_assumed_window_before_any_measure():
    """Pages of 180 KB declared, no usage event yet and no model named: the results' bytes
    against a guessed window warn, and cut only once a measure or a window says so (or
    when `cut_unmeasured` asks for it)."""
    d = driver()
    outs = [d.result("alma_api_get", result_bytes=180_000) for _ in range(4)]
    ids = [o.signal for o in outs if o is not None]
    assert ids == ["context-pressure"]
    d.usage(input_tokens=125_000)
    assert d.result("alma_api_get", result_bytes=3_000).signal == "context-budget"
    d = driver()
    d.usage(model="gpt-4o", context_window=128_000)
    assert [o.signal for o in (d.result("alma_api_get", result_bytes=180_000) for _ in range(4)) if o] == [
        "context-pressure", "context-budget"]
    cut = driver(cut_unmeasured=True)
    assert [o.signal for o in (cut.result("alma_api_get", result_bytes=180_000) for _ in range(4)) if o] == [
        "context-pressure", "context-budget"]


def test_a_result_larger_than_twice_the_window_waits_for_the_next_measure():
    """A page declared at 2.5 MB against a 200,000-token window: no model could be sent it,
    so its runtime cut it. It warns, and the cut waits for the next measure, which shows
    what the model was sent."""
    d = driver()
    d.usage(model="claude-sonnet-4-5", input_tokens=8_674, context_window=200_000)
    assert d.result("fetch_page", result_bytes=2_489_113).signal == "context-pressure"
    assert d.result("fetch_page", result_bytes=1_000) is None
    d.usage(model="claude-sonnet-4-5", input_tokens=9_824, context_window=200_000)
    assert not d.state.oversized
    d = driver()
    d.usage(model="claude-sonnet-4-5", input_tokens=8_674, context_window=200_000)
    assert d.result("fetch_page", result_bytes=580_000).signal == "context-budget"
    d = driver(cut_unmeasured=True)
    d.usage(model="claude-sonnet-4-5", input_tokens=8_674, context_window=200_000)
    assert d.result("fetch_page", result_bytes=2_489_113).signal == "context-budget"
