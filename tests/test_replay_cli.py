"""`streamguard replay`, `check-config` and `schema` as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from streamguard.cli import main


def events(*objs) -> str:
    return "".join(json.dumps(o) + "\n" for o in objs)


LOOP = [{"type": "turn_start", "session": "s1", "seq": 0}] + [
    {"type": "tool_call", "session": "s1", "seq": i, "tool": "read_file", "args": {"path": p}}
    for i, p in enumerate(["main.go", "./main.go", "/workspace/main.go", "main.go", "dir/../main.go"], 1)
]


def run_cli(args: list[str], stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "streamguard.cli", *args],
        input=stdin, capture_output=True, text=True, timeout=60,
    )


def test_replay_catches_the_path_spelling_loop(tmp_path: Path):
    trace = tmp_path / "t.jsonl"
    trace.write_text(events(*LOOP))
    proc = run_cli(["replay", str(trace)])
    assert proc.returncode == 0, proc.stderr
    outs = [json.loads(line) for line in proc.stdout.splitlines()]
    alerts = [o for o in outs if o["type"] == "alert"]
    assert [a["signal"] for a in alerts] == ["repeated-tool-call"]
    assert alerts[0]["seq"] == 5
    trips = [o for o in outs if o["type"] == "guardrail_trip"]
    assert trips and trips[0]["session_halted"] is True  # default mode is enforce


def test_replay_is_deterministic_from_stdin():
    a = run_cli(["replay", "-"], events(*LOOP))
    b = run_cli(["replay"], events(*LOOP))
    assert a.stdout == b.stdout and a.stdout


def test_malformed_lines_are_reported_and_skipped(tmp_path: Path):
    text = events(LOOP[0], LOOP[1]) + "{not json\n" + events(
        {"type": "tool_call", "session": ""}, {"type": "from_the_future", "session": "s1"}, *LOOP[2:]
    )
    proc = run_cli(["replay", "--summary"], text)
    assert proc.returncode == 0
    assert "line 3: malformed" in proc.stderr
    assert "line 4: malformed" in proc.stderr and "session" in proc.stderr
    assert "line 5: skipped: unknown event type 'from_the_future'" in proc.stderr
    summary = json.loads(proc.stderr.strip().splitlines()[-1])
    assert summary["malformed"] == 2 and summary["unknown_types"] == 1
    assert "repeated-tool-call" in proc.stdout


def test_inline_reset_in_replay_clears_the_halt():
    reset = {"type": "reset", "session": "s1", "guardrail": "watchdog", "by": "ops"}
    proc = run_cli(["replay", "--summary"], events(*LOOP, reset))
    outs = [json.loads(line) for line in proc.stdout.splitlines()]
    ack = outs[-1]
    assert ack["type"] == "guardrail_reset" and ack["accepted"] is True and ack["by"] == "ops"
    assert json.loads(proc.stderr.strip().splitlines()[-1])["halted_sessions"] == []


def test_replay_with_policy_file(tmp_path: Path):
    policy = tmp_path / "p.toml"
    policy.write_text('mode = "warn"\n')
    proc = run_cli(["replay", "--policy", str(policy)], events(*LOOP))
    types = [json.loads(line)["type"] for line in proc.stdout.splitlines()]
    assert types == ["alert"]


def test_bad_policy_is_a_config_error_naming_the_field(tmp_path: Path):
    policy = tmp_path / "p.toml"
    policy.write_text("[signals.repeated-tool-call]\nthreshold = 1\n")
    proc = run_cli(["replay", "--policy", str(policy)], events(*LOOP))
    assert proc.returncode == 2
    assert "signals.repeated-tool-call.threshold" in proc.stderr and ">= 2" in proc.stderr


def test_missing_file_is_a_runtime_failure(tmp_path: Path):
    assert main(["replay", str(tmp_path / "absent.jsonl")]) == 1


def test_check_config(tmp_path: Path, capsys):
    policy = tmp_path / "p.toml"
    policy.write_text('mode = "feedback"\n[[agents]]\nmatch = "ci-*"\nmode = "warn"\n')
    assert main(["check-config", str(policy), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["mode"] == "feedback" and info["agent_overrides"] == ["ci-*"]
    assert "repeated-tool-call" in info["signals"]
    policy.write_text('mode = "loud"\n')
    assert main(["check-config", str(policy)]) == 2
    assert "`mode`" in capsys.readouterr().err


def test_schema_prints_all_families(capsys):
    assert main(["schema"]) == 0
    schemas = json.loads(capsys.readouterr().out)
    assert set(schemas) == {"contract_version", "agent_event", "control_event", "output_event"}
    assert "tool_call" in json.dumps(schemas["agent_event"])


def test_committed_schema_is_current(capsys):
    committed = Path(__file__).resolve().parent.parent / "docs" / "schema" / "contract-v1.json"
    assert main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(committed.read_text()), (
        "docs/schema/contract-v1.json is stale: regenerate it with `streamguard schema`"
    )
