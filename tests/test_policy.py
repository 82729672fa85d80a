"""Policy loading: defaults, validation messages, overrides, the rendered reference."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamguard.policy import (
    Policy,
    PolicyError,
    load_policy_set,
    parse_policy_set,
    render_policy,
)
from streamguard.watchdog import Watchdog

DOCS = Path(__file__).resolve().parent.parent / "docs" / "policy.md"


def test_empty_file_is_the_default_policy():
    assert parse_policy_set("").base == Policy()


def test_default_signal_set():
    ids = [s.id for s in Watchdog(Policy()).signals]
    assert ids[:6] == ["repeated-tool-call", "alternating-tool-cycle", "dominant-tool-call",
                       "setup-detour", "failure-loop", "long-loop"]
    for expected in ("repeated-tool-name", "tool-failure-streak", "no-op-streak", "no-new-state",
                     "tools-without-text", "tool-failure-guidance", "context-budget"):
        assert expected in ids
    for opt_in in ("window-repeat", "verification", "cost-ceiling"):
        assert opt_in not in ids


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('mode = "loud"', "`mode`"),
        ("[signals.repeated-tool-call]\nthreshold = 1", "`signals.repeated-tool-call.threshold`: Expected `int` >= 2"),
        ("[signals.no-new-state]\nthreshold = 2", "`signals.no-new-state.threshold`"),
        ("[signals.repeated-tool-call]\nthreshhold = 6", "unknown field `threshhold`"),
        ('disabled_signals = ["nope"]', "unknown signal id 'nope'"),
        ("[cost_ceiling]\nmax_session_usd = -1", "`cost_ceiling.max_session_usd`"),
        ("feedback_queue_size = 0", "`feedback_queue_size`"),
        ("halt_after_cut_turns = 1", "`halt_after_cut_turns`"),
        ("[signals.window-repeat]\nwindow = 4\nthreshold = 5", "signals.window-repeat"),
        ("[signals.setup-detour]\nthreshold = 4\nmin_failures = 5", "signals.setup-detour"),
        ("[signals.setup-detour]\nthreshold = 2", "`signals.setup-detour.threshold`"),
        ("[[agents]]\nmode = \"warn\"", "`agents[0].match` is required"),
        ('[[agents]]\nmatch = "a*"\nmode = "sometimes"', "`agents[0].mode`"),
        ("mode = ", "not valid TOML"),
    ],
)
def test_errors_name_the_field(text: str, fragment: str):
    with pytest.raises(PolicyError) as info:
        parse_policy_set(text, "p.toml")
    assert fragment in str(info.value)
    assert str(info.value).startswith("p.toml")


def test_unreadable_file(tmp_path: Path):
    with pytest.raises(PolicyError, match="cannot read"):
        load_policy_set(tmp_path / "missing.toml")


def test_override_merges_deeply_and_first_match_wins():
    policies = parse_policy_set(
        """
mode = "enforce"
[signals.repeated-tool-call]
threshold = 7
exempt_tools = ["poll"]
[[agents]]
match = "lab-*"
mode = "warn"
[agents.signals.repeated-tool-call]
threshold = 9
[[agents]]
match = "lab-special"
mode = "off"
"""
    )
    lab = policies.for_agent("lab-special")
    assert lab.mode == "warn"  # first match wins
    assert lab.signals.repeated_tool_call.threshold == 9
    assert lab.signals.repeated_tool_call.exempt_tools == ["poll"]  # kept from the base
    assert policies.for_agent("prod").signals.repeated_tool_call.threshold == 7
    assert policies.for_agent(None) is policies.base


def test_arguments_ignore_fields_make_noisy_calls_one_loop():
    from streamguard.engine import Engine
    from streamguard.events import ToolCall

    engine = Engine(parse_policy_set(
        'mode = "warn"\n[arguments]\nignore_fields = ["request_id"]\n'
        '[arguments.tools.http_get]\nignore_fields = ["ts"]\n'
    ))
    out = []
    for i in range(5):
        out += engine.process(ToolCall(session="n", tool="http_get",
                                       args={"url": "/x", "request_id": i, "ts": i * 2}))
    assert [o.signal for o in out] == ["repeated-tool-call"]
    plain = Engine(parse_policy_set('mode = "warn"\n'))
    out = []
    for i in range(5):
        out += plain.process(ToolCall(session="n", tool="http_get", args={"url": "/x", "request_id": i}))
    assert out == []


def test_rendered_defaults_round_trip():
    assert parse_policy_set(render_policy()).base == Policy()


def test_rendered_custom_policy_round_trips():
    policy = parse_policy_set('mode = "warn"\n[cost_ceiling]\nmax_session_usd = 2.5\n').base
    assert parse_policy_set(render_policy(policy)).base == policy


def test_docs_carry_the_current_default_policy():
    text = DOCS.read_text()
    block = text.split("```toml\n")[-1].split("```")[0]
    assert block == render_policy(), "docs/policy.md is stale: regenerate its last block"


def test_exempt_tools_hide_calls_from_one_signal():
    from streamguard.engine import Engine
    from streamguard.events import ToolCall

    engine = Engine(parse_policy_set(
        'mode = "warn"\n[signals.repeated-tool-call]\nexempt_tools = ["poll"]\n'
    ))
    out = []
    for _ in range(6):
        out += engine.process(ToolCall(session="e", tool="poll", args={}))
    assert "repeated-tool-call" not in [o.signal for o in out]


def test_the_default_ignore_fields_are_the_runtimes_narration():
    """Cursor's ``explanation``, OpenHands' ``security_risk`` and ``is_input`` (its default
    sent now and then), and the ``description`` Claude Code's ``Bash`` and Gemini CLI's
    ``run_shell_command`` carry beside the command: reworded, they made one command many
    calls. Only those runtimes' tools drop them; a table set in the policy replaces the
    defaults."""
    from streamguard.engine import Engine
    from streamguard.events import ToolCall

    def repeats(policy: str, tool: str, args: list[dict[str, object]]) -> list[str]:
        engine = Engine(parse_policy_set(policy))
        out = []
        for n, a in enumerate(args):
            out += engine.process(ToolCall(session="n", tool=tool, args=a, call_id=f"c{n}"))
        return [o.signal for o in out if getattr(o, "signal", None) == "repeated-tool-call"]

    warn = 'mode = "warn"\n'
    bash = [{"command": "npm test", "description": d} for d in
            ("Run tests", "Re-run the tests", "Run the tests again", "Check tests", "Tests once more")]
    assert repeats(warn, "Bash", bash) == ["repeated-tool-call"]
    cursor = [{"command": "npm test", "explanation": f"attempt {w}"} for w in "abcde"]
    assert repeats(warn, "run_terminal_cmd", cursor) == ["repeated-tool-call"]
    openhands = [{"command": "pytest", **({"is_input": "false"} if n % 2 else {})} for n in range(5)]
    assert repeats(warn, "execute_bash", openhands) == ["repeated-tool-call"]
    # a description or an explanation is no narration for another tool: five issues,
    # five labels are five calls
    issues = [{"title": "Flaky test", "description": f"seen in run {w}"} for w in "abcde"]
    assert repeats(warn, "create_issue", issues) == []
    labels = [{"label": "customer_service", "explanation": f"reason {w}"} for w in "abcde"]
    assert repeats(warn, "submit_label", labels) == []
    # the policy's own list replaces the defaults
    own = warn + '[arguments]\nignore_fields = ["request_id"]\n[arguments.tools.http_get]\nignore_fields = ["ts"]\n'
    assert repeats(own, "run_terminal_cmd", cursor) == []
    assert repeats(own, "Bash", bash) == []
    assert parse_policy_set(warn).base.arguments.fields_for("Bash") == ("description",)
    assert parse_policy_set(warn).base.arguments.fields_for("submit_label") == ()


def test_a_policy_file_that_is_not_utf8_is_a_policy_error(tmp_path: Path) -> None:
    """A Latin-1 accent in a comment: a message naming the file and the byte (exit 2
    from every command), never a traceback."""
    path = tmp_path / "latin1.toml"
    path.write_bytes(b'# caf\xe9 policy\nmode = "warn"\n')
    with pytest.raises(PolicyError, match=r"latin1\.toml: not UTF-8 text \(byte 0xe9 at offset 5\)"):
        load_policy_set(path)


def test_the_shipped_example_policy_checks_clean() -> None:
    """What users copy first must not carry a bound that can never fire."""
    from streamguard.cli import policy_warnings

    path = Path(__file__).resolve().parent.parent / "examples" / "policy.toml"
    assert policy_warnings(load_policy_set(path)) == []
