"""`[[fleet]]` in the policy: validated like the rest, errors naming the field; check-config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamguard.cli import main
from streamguard.policy import PolicyError, parse_policy_set

RULE = """
[[fleet]]
name = "spend"
by = "tenant"
match = "triage-*"
window_s = 600
cooldown_s = 300
[[fleet.limits]]
metric = "spend_usd"
above = 50
action = "halt"
[[fleet.limits]]
metric = "tripped_share"
above = 0.25
min_sessions = 4
"""


def test_a_rule_loads_with_its_limits() -> None:
    (rule,) = parse_policy_set(RULE).fleet
    assert (rule.name, rule.by, rule.match, rule.window_s, rule.cooldown_s) == ("spend", "tenant", "triage-*", 600, 300)
    assert [(limit.metric, limit.above, limit.action) for limit in rule.limits] == [
        ("spend_usd", 50, "halt"),
        ("tripped_share", 0.25, "alert"),
    ]
    assert parse_policy_set("").fleet == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[fleet]]\n[[fleet.limits]]\nmetric='tokens'\nabove=1\n", "`fleet[0].name` is required"),
        ("[[fleet]]\nname='a'\n", "`fleet[0].limits` is required"),
        ("[[fleet]]\nname='a'\nlimits=[]\n", "`fleet[0]`: `limits` must name at least one limit"),
        ("[[fleet]]\nname='a b'\n[[fleet.limits]]\nmetric='tokens'\nabove=1\n", "`fleet[0].name`"),
        ("[[fleet]]\nname='a'\nby='user'\n[[fleet.limits]]\nmetric='tokens'\nabove=1\n", "`fleet[0].by`: Invalid enum value 'user'"),
        ("[[fleet]]\nname='a'\nwindow_s=30\n[[fleet.limits]]\nmetric='tokens'\nabove=1\n", "`fleet[0].window_s`: Expected `float` >= 60"),
        ("[[fleet]]\nname='a'\n[[fleet.limits]]\nmetric='tokens'\nabove=-1\n", "`fleet[0].limits[0].above`"),
        ("[[fleet]]\nname='a'\n[[fleet.limits]]\nmetric='tokens'\nabove=1\nwhen='now'\n", "`fleet[0].limits[0]`: Object contains unknown field `when`"),
        ("[[fleet]]\nname='a'\n[[fleet.limits]]\nmetric='tripped_share'\nabove=1.5\n", "a share is below 1"),
        ("[[fleet]]\nname='a'\n[[fleet.limits]]\nmetric='tokens'\nabove=1\n[[fleet.limits]]\nmetric='tokens'\nabove=1\n", "the same limit twice"),
        ("[[fleet]]\nname='a'\n[[fleet.limits]]\nmetric='tokens'\nabove=1\n[[fleet]]\nname='a'\n[[fleet.limits]]\nmetric='tokens'\nabove=2\n", "`fleet[1].name`: 'a' is used by an earlier rule"),
        ("fleet = 3\n", "`fleet` must be an array of tables"),
        ("[[agents]]\nmatch='x'\n[[agents.fleet]]\nname='a'\n", "`agents[0].fleet`: fleet rules are fleet-wide"),
    ],
)
def test_mistakes_name_the_field(text: str, message: str) -> None:
    with pytest.raises(PolicyError) as caught:
        parse_policy_set(text, "p.toml")
    assert message in str(caught.value), str(caught.value)


def test_check_config_lists_the_rules_and_defaults_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(RULE)
    assert main(["check-config", "--json", str(path)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["fleet_rules"][0]["limits"] == ["spend_usd > 50 -> halt", "tripped_share > 0.25 -> alert"]
    assert main(["check-config", "--defaults", str(path)]) == 0
    rendered = capsys.readouterr().out
    again = tmp_path / "again.toml"
    again.write_text(rendered)
    assert parse_policy_set(rendered).fleet == parse_policy_set(RULE).fleet
    assert main(["check-config", str(again)]) == 0
    bad = tmp_path / "bad.toml"
    bad.write_text("[[fleet]]\nname='a'\n[[fleet.limits]]\nmetric='spend'\nabove=1\n")
    assert main(["check-config", str(bad)]) == 2
    assert "fleet[0].limits[0].metric" in capsys.readouterr().err
