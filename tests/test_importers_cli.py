"""`streamguard import`, `replay --from` and `emit --check --from` as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from streamguard.events import decode_agent_event

FIXTURES = Path(__file__).parent / "fixtures" / "import"


def run_cli(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "streamguard.cli", *args], capture_output=True, text=True, timeout=120
    )


def looping_traj(path: Path, repeats: int = 6) -> Path:
    step = {"action": "open src/Widget.java\n", "observation": "[File: src/Widget.java (3 lines total)]\n1:class W {}", "thought": "Look again."}
    path.write_text(json.dumps({"trajectory": [step] * repeats, "info": {"exit_status": "exit_cost"}}))
    return path


def test_import_writes_contract_v1_lines_for_every_fixture(tmp_path: Path):
    out = tmp_path / "events.jsonl"
    proc = run_cli(["import", str(FIXTURES), "-o", str(out)])
    assert proc.returncode == 0, proc.stderr
    lines = out.read_text().splitlines()
    events = [decode_agent_event(line) for line in lines]
    sessions = {e.session for e in events}
    assert len(sessions) == 23  # every fixture session; the tau2 and tau-bench result files hold two each
    assert f"23 session(s), {len(lines)} event(s)" in proc.stderr


def test_import_with_an_explicit_format_to_stdout():
    path = FIXTURES / "swe-agent" / "run-1x" / "acme__widgets-8.traj"
    proc = run_cli(["import", "--from", "swe-agent", str(path)])
    assert proc.returncode == 0, proc.stderr
    first = json.loads(proc.stdout.splitlines()[0])
    assert first == {"type": "turn_start", "session": "run-1x/acme__widgets-8", "agent": "swe-agent", "seq": 1}


def test_import_reports_a_bad_file_and_goes_on(tmp_path: Path):
    bad = tmp_path / "bad.traj.json"
    bad.write_text(json.dumps({"info": {}, "messages": [{"role": "user", "content": "task"}, {"role": "robot"}]}))
    good = FIXTURES / "openai-chat" / "plain.json"
    proc = run_cli(["import", str(bad), str(good)])
    assert proc.returncode == 1
    assert f"streamguard import: {bad}: record 2 (messages): unknown role 'robot'" in proc.stderr
    assert {json.loads(line)["session"] for line in proc.stdout.splitlines()} == {"plain"}


def test_import_rejects_an_unknown_format():
    proc = run_cli(["import", "--from", "nope", str(FIXTURES)])
    assert proc.returncode == 2 and "--from" in proc.stderr


def test_replay_from_a_recorded_session_catches_the_loop(tmp_path: Path):
    (tmp_path / "run-7").mkdir()
    path = looping_traj(tmp_path / "run-7" / "loop.traj")
    proc = run_cli(["replay", "--from", "swe-agent", str(path), "--summary"])
    assert proc.returncode == 0, proc.stderr
    alerts = [json.loads(line) for line in proc.stdout.splitlines() if json.loads(line)["type"] == "alert"]
    assert alerts and alerts[0]["signal"] == "repeated-tool-call" and alerts[0]["severity"] == "critical"
    assert alerts[0]["session"] == "run-7/loop"  # the run folder and the file's instance
    summary = json.loads(proc.stderr.strip().splitlines()[-1])
    assert summary["malformed"] == 0 and summary["halted_sessions"] == ["run-7/loop"]


def test_replay_from_auto_detects_and_fails_on_a_bad_file(tmp_path: Path):
    looping_traj(tmp_path / "loop.traj")
    (tmp_path / "broken.traj").write_text("{")
    proc = run_cli(["replay", "--from", "auto", str(tmp_path)])
    assert proc.returncode == 1
    assert "broken.traj: not a JSON document" in proc.stderr
    assert "repeated-tool-call" in proc.stdout  # the good file was still replayed


def test_replay_from_needs_a_file():
    proc = run_cli(["replay", "--from", "swe-agent"])
    assert proc.returncode == 2 and "not stdin" in proc.stderr


def test_emit_check_from_validates_the_imported_events_without_a_broker():
    proc = run_cli(["emit", "--check", "--from", "claude-code", str(FIXTURES / "claude-code" / "session.jsonl")])
    assert proc.returncode == 0, proc.stderr
    assert "(imported from claude-code): 19 valid event(s), 0 bad line(s)" in proc.stderr
