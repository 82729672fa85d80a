"""The detection bench runs on a small corpus written here, and says so when there is none."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

from streamguard.events import Alert, ToolCall, TurnStart
from streamguard.importers import ImportedSession

ROOT = Path(__file__).resolve().parent.parent


def traj(path: Path, actions: list[str], exit_status: str | None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    steps = [{"action": a, "observation": f"output of {a}", "thought": f"Next: {a}."} for a in actions]
    info = {} if exit_status is None else {"exit_status": exit_status}
    path.write_text(json.dumps({"trajectory": steps, "info": info}))


def write_corpus(root: Path) -> None:
    runs = root / "swe-runs" / "run-1" / "trajs"
    # A budget stop that loops: the same command eight times (its observation identical).
    loop = [f"ls -l dir{i}" for i in range(3)] + ["open src/A.java"] * 8 + ["exit_cost"]
    traj(runs / "loop-1.traj", loop, "submitted (exit_cost)")
    # A budget stop that never repeats itself.
    traj(runs / "slow-2.traj", [f"open src/F{i}.java" for i in range(6)] + ["exit_cost"], "exit_cost")
    # Two normal endings and one without a label.
    traj(runs / "fine-3.traj", ["find_file A.java", "open src/A.java", "edit 1:1\nx\nend_of_edit", "submit"], "submitted")
    traj(runs / "fine-4.traj", ["ls", "submit"], "submitted")
    traj(runs / "odd-5.traj", ["ls"], None)
    (root / "swe-runs" / "results.json").write_text(json.dumps({"resolved": []}))  # not a session: skipped
    chats = root / "chat-logs"
    chats.mkdir()
    (chats / "api.traj.json").write_text(json.dumps({
        "info": {"exit_status": "RateLimitError"},
        "messages": [{"role": "user", "content": "task"}],
    }))


def run_bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "bench/detection.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_bench_reports_labels_alerts_and_judged_loops(tmp_path: Path):
    corpus = tmp_path / "corpus"
    write_corpus(corpus)
    judged = tmp_path / "judged.toml"
    judged.write_text(
        '[[session]]\nsource = "swe-runs"\nfile = "run-1/trajs/loop-1.traj"\nsession = "loop-1"\nloop = true\n'
        '[[session]]\nsource = "swe-runs"\nfile = "run-1/trajs/slow-2.traj"\nsession = "slow-2"\nloop = false\n'
        '[[session]]\nsource = "swe-runs"\nfile = "run-1/trajs/gone.traj"\nsession = "gone"\nloop = true\n'
    )
    done = run_bench(str(corpus), "--json", "--judged", str(judged))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["files_skipped"] == 1 and report["files_failed"] == 0
    assert set(report["by_source"]) == {"swe-runs", "chat-logs"}
    overall = report["overall"]
    assert overall["sessions"] == 6
    assert overall["labels"] == {"normal": 2, "budget": 2, "api_failure": 1, "unknown": 1}
    assert overall["ended_normally"]["any_critical"] == 0
    budget = overall["budget_stop"]
    assert budget["any_critical"] == 1 and budget["any_critical_share"] == 0.5
    assert "repeated-tool-call" in budget["critical_by_signal"]
    # Eight identical calls: the critical comes on one of the first few (the exact
    # one is the signals' business), and the rest would have been saved.
    assert 3.0 <= budget["median_calls_after_first_critical"] <= 5.0
    assert report["by_source"]["chat-logs"]["labels"]["api_failure"] == 1
    loops = report["judged_loops"]
    assert (loops["entries"], loops["matched"], loops["unmatched"]) == (3, 2, ["swe-runs/run-1/trajs/gone.traj"])
    assert (loops["genuine_loops"], loops["genuine_with_critical"], loops["target_met"]) == (1, 1, True)
    assert loops["judged_not_loops"] == 1 and loops["not_loops_with_critical"] == 0
    assert report["engine_events"] == overall["events"] > 0

    text = run_bench(str(corpus), "--judged", str(tmp_path / "absent.toml"))
    assert text.returncode == 0, text.stderr
    assert "budget stop 2: critical 1 (50.0 %)" in text.stdout
    assert "absent.toml absent, section skipped" in text.stdout


def load_bench():
    spec = importlib.util.spec_from_file_location("detection_bench", ROOT / "bench" / "detection.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_calls_after_the_first_critical_are_counted_from_the_causing_event():
    bench = load_bench()
    events = [TurnStart(session="s", seq=1)] + [
        ToolCall(session="s", seq=n, tool="t", args={"n": n}) for n in range(2, 12)
    ]
    sessions = [ImportedSession(session="s", agent=None, source="f", events=events, ended="exit_cost")]

    def alert(seq: int, severity: str) -> Alert:
        return Alert(id=str(seq), session="s", agent=None, ts=None, seq=seq, signal=f"sig-{seq}",
                     severity=severity, scope="session", reason="", guidance="")

    outcomes = bench.outcomes_of(sessions, [alert(3, "warn"), alert(7, "critical"), alert(5, "critical")])
    outcome = outcomes["s"]
    assert (outcome.first_critical_seq, outcome.calls, outcome.calls_after_first_critical) == (5, 10, 6)
    assert outcome.alert_signals == {"sig-3", "sig-5", "sig-7"} and outcome.critical_signals == {"sig-5", "sig-7"}
    summary = bench.summarise(sessions, outcomes)
    assert summary["budget_stop"]["median_calls_after_first_critical"] == 6.0
    assert bench.label_of("Submitted (EXIT_COST)") == bench.BUDGET
    assert [bench.label_of(x) for x in ("submitted", "user_stop", "RateLimitError", None, "odd")] == [
        bench.NORMAL, bench.NORMAL, bench.API_FAILURE, bench.UNKNOWN, bench.UNKNOWN
    ]


def test_bench_says_when_the_corpus_is_absent(tmp_path: Path):
    done = run_bench(str(tmp_path / "no-such-corpus"))
    assert done.returncode == 2
    assert "no-such-corpus is absent" in done.stderr and done.stdout == ""


def test_bench_exits_non_zero_when_a_file_fails(tmp_path: Path):
    corpus = tmp_path / "corpus"
    write_corpus(corpus)
    (corpus / "swe-runs" / "run-1" / "trajs" / "broken.traj").write_text("{")
    done = run_bench(str(corpus), "--json", "--judged", str(tmp_path / "absent.toml"))
    assert done.returncode == 1
    assert "broken.traj: not a JSON document" in done.stderr
    assert json.loads(done.stdout)["overall"]["sessions"] == 6  # the rest was measured


def test_session_lines_and_what_a_change_moved(tmp_path: Path):
    corpus = tmp_path / "corpus"
    write_corpus(corpus)
    judged = tmp_path / "judged.toml"
    judged.write_text('[[session]]\nsource = "swe-runs"\nfile = "run-1/trajs/loop-1.traj"\nsession = "loop-1"\nloop = true\n')
    now = tmp_path / "now.jsonl"
    done = run_bench(str(corpus), "--json", "--judged", str(judged), "--sessions", str(now))
    assert done.returncode == 0, done.stderr
    lines = [json.loads(text) for text in now.read_text().splitlines()]
    assert len(lines) == 6
    by_file = {line["file"]: line for line in lines}
    loop = by_file["run-1/trajs/loop-1.traj"]
    assert (loop["source"], loop["label"], loop["judged"]) == ("swe-runs", "budget", True)
    assert any(signal == "repeated-tool-call" and severity == "critical" for _, signal, severity in loop["alerts"])
    assert loop["calls_after_first_critical"] == json.loads(done.stdout)["overall"]["budget_stop"][
        "median_calls_after_first_critical"]
    assert by_file["run-1/trajs/fine-4.traj"]["alerts"] == [] and by_file["run-1/trajs/fine-4.traj"]["judged"] is None
    assert "changed_sessions" not in json.loads(done.stdout)

    # The same run against itself moves nothing; against an earlier file whose loop
    # raised nothing and which lacked a session, both are listed.
    same = run_bench(str(corpus), "--json", "--judged", str(judged), "--against", str(now))
    assert json.loads(same.stdout)["changed_sessions"] == []
    before = tmp_path / "before.jsonl"
    earlier = [dict(line, alerts=[]) if line is loop else line for line in lines if "fine-3" not in line["file"]]
    before.write_text("".join(json.dumps(line) + "\n" for line in earlier))
    moved = run_bench(str(corpus), "--json", "--judged", str(judged), "--against", str(before))
    changed = {c["file"]: c for c in json.loads(moved.stdout)["changed_sessions"]}
    assert set(changed) == {"run-1/trajs/loop-1.traj", "run-1/trajs/fine-3.traj"}
    assert changed["run-1/trajs/loop-1.traj"]["before"] == [] and changed["run-1/trajs/loop-1.traj"]["now"] == loop["alerts"]
    assert changed["run-1/trajs/fine-3.traj"]["before"] is None
    text = run_bench(str(corpus), "--judged", str(judged), "--against", str(before))
    assert "sessions whose alerts changed: 2" in text.stdout
    assert "first critical none -> repeated-tool-call@" in text.stdout

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"no": "alerts"}\n')
    refused = run_bench(str(corpus), "--against", str(bad))
    assert refused.returncode == 2 and "not a session line" in refused.stderr
    absent = run_bench(str(corpus), "--against", str(tmp_path / "gone.jsonl"))
    assert absent.returncode == 2 and "gone.jsonl is absent" in absent.stderr
