"""`streamguard replay`, `check-config` and `schema` as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamguard.cli import main
from tests.harness import interruptible


def events(*objs) -> str:
    return "".join(json.dumps(o) + "\n" for o in objs)


LOOP = [{"type": "turn_start", "session": "s1", "seq": 0}] + [
    {"type": "tool_call", "session": "s1", "seq": i, "tool": "read_file", "args": {"path": p}}
    for i, p in enumerate(["main.go", "./main.go", "/workspace/main.go", "main.go", "dir/../main.go"], 1)
]


def run_cli(args: list[str], stdin: str = "", env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("STREAMGUARD_")}
    return subprocess.run(
        [sys.executable, "-m", "streamguard.cli", *args],
        input=stdin, capture_output=True, text=True, timeout=60, env={**base, **(env or {})},
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
    assert proc.returncode == 3  # as `emit`: the valid lines were replayed, the input was not clean
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


# --------------------------------------------------------------------------- replay, second pass


def loop_of(session: str, agent: str | None = None) -> list[dict]:
    return [
        {**event, "session": session, **({"agent": agent} if agent else {})}
        for event in LOOP
    ]


def test_replay_reads_several_files_and_globs_as_one_stream(tmp_path: Path):
    (tmp_path / "a.jsonl").write_text(events(*loop_of("s-a")))
    (tmp_path / "b.jsonl").write_text(events(*loop_of("s-b")))
    resets = tmp_path / "resets.txt"
    resets.write_text(events({"type": "reset", "session": "s-a", "guardrail": "watchdog", "by": "ops"}))
    proc = run_cli(["replay", str(tmp_path / "*.jsonl"), str(resets), "--summary"])
    assert proc.returncode == 0, proc.stderr
    outs = [json.loads(line) for line in proc.stdout.splitlines()]
    trips = [o["session"] for o in outs if o["type"] == "guardrail_trip"]
    assert trips == ["s-a", "s-b"]  # files in sorted order, the glob expanded by replay itself
    assert outs[-1]["type"] == "guardrail_reset" and outs[-1]["session"] == "s-a"  # the session went on
    summary = json.loads(proc.stderr.strip().splitlines()[-1])
    assert summary["halted_sessions"] == ["s-b"] and summary["halted_total"] == 1


def test_replay_names_the_file_of_a_bad_line_and_a_glob_matching_nothing(tmp_path: Path):
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    good.write_text(events(*LOOP))
    bad.write_text(events(LOOP[0]) + "{oops\n")
    proc = run_cli(["replay", str(good), str(bad)])
    assert proc.returncode == 3
    assert f"{bad}: line 2: malformed event skipped" in proc.stderr
    proc = run_cli(["replay", str(tmp_path / "nothing-*.jsonl")])
    assert proc.returncode == 1 and "no file matches" in proc.stderr


def test_replay_line_format_reads_like_tail(tmp_path: Path):
    proc = run_cli(["replay", "--format", "line"], events(*loop_of("s1", "bot")))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split()[1] for line in lines] == ["ALERT", "TRIP"]
    assert "s1 (bot) repeated-tool-call critical/session seq=5:" in lines[0]
    assert "s1 (bot) watchdog/repeated-tool-call -> halt session seq=5:" in lines[1]


def test_summary_counts_per_signal_and_bounds_the_halted_list(tmp_path: Path):
    many = [e for i in range(130) for e in loop_of(f"s-{i:03d}")]
    proc = run_cli(["replay", "--summary"], events(*many))
    summary = json.loads(proc.stderr.strip().splitlines()[-1])
    assert summary["alerts_by_signal"] == {"repeated-tool-call": 130}
    assert summary["trips_by_signal"] == {"watchdog/repeated-tool-call": 130}
    assert summary["halted_total"] == 130
    assert summary["halted_sessions"] == [f"s-{i:03d}" for i in range(100)]

    proc = run_cli(["replay", "--summary", "--summary-format", "text"], events(*many))
    assert proc.stdout  # outputs still go to stdout
    text = proc.stderr
    assert "alerts by signal:" in text and "130  repeated-tool-call" in text
    assert "halted at the end: 130 session(s) (first 100 listed)" in text
    assert "  s-099" in text and "s-100" not in text


def test_replay_honours_streamguard_policy(tmp_path: Path):
    policy = tmp_path / "p.toml"
    policy.write_text('mode = "warn"\n')
    proc = run_cli(["replay"], events(*LOOP), env={"STREAMGUARD_POLICY": str(policy)})
    assert [json.loads(line)["type"] for line in proc.stdout.splitlines()] == ["alert"]
    assert f"policy {policy} (from STREAMGUARD_POLICY)" in proc.stderr
    # the flag wins over the environment
    proc = run_cli(["replay", "--policy", str(tmp_path / "absent.toml")], events(*LOOP),
                   env={"STREAMGUARD_POLICY": str(policy)})
    assert proc.returncode == 2 and "absent.toml" in proc.stderr


def test_replay_ctrl_c_exits_130_without_a_traceback():
    import signal

    proc = subprocess.Popen(
        [sys.executable, "-m", "streamguard.cli", "replay", "--summary"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        preexec_fn=interruptible,
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(events(*LOOP).encode())
        proc.stdin.flush()
        proc.stdout.readline()  # the alert: replay is running and waits for more input
        proc.send_signal(signal.SIGINT)
        code = proc.wait(30)
        err = proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 130, err
    assert "Traceback" not in err and "interrupted after" in err
    assert json.loads(err.strip().splitlines()[-2])["interrupted"] is True


def test_replay_on_a_terminal_says_it_reads_the_terminal():
    import pty

    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamguard.cli", "replay"],
            stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        os.write(master, b"\x04")  # Ctrl-D: end of input
        _, err = proc.communicate(timeout=30)
    finally:
        os.close(master)
        os.close(slave)
    assert proc.returncode == 0, err
    assert b"reading events from the terminal" in err and b"Ctrl-D" in err


# --------------------------------------------------------------------------- check-config, second pass


def test_defaults_of_a_file_include_its_agent_overrides(tmp_path: Path, capsys):
    from streamguard.policy import parse_policy_set

    policy = tmp_path / "p.toml"
    policy.write_text(
        'mode = "feedback"\n[cost_ceiling]\nmax_session_usd = 4.0\n'
        '[[agents]]\nmatch = "ci-*"\nmode = "warn"\n'
        '[agents.signals.repeated-tool-call]\nthreshold = 7\n'
        '[[agents]]\nmatch = "billing-*"\ndisabled_signals = ["repeated-tool-name"]\n'
    )
    assert main(["check-config", "--defaults", str(policy)]) == 0
    rendered = capsys.readouterr().out
    assert "[[agents]]" in rendered and 'match = "ci-*"' in rendered
    again = parse_policy_set(rendered, "rendered")
    original = parse_policy_set(policy.read_text(), "original")
    assert again.base == original.base
    assert [p for p, _ in again.overrides] == ["ci-*", "billing-*"]
    assert [o for _, o in again.overrides] == [o for _, o in original.overrides]
    assert again.for_agent("ci-7").signals.repeated_tool_call.threshold == 7


def test_a_turn_bound_above_the_session_bound_is_warned_about(tmp_path: Path, capsys):
    policy = tmp_path / "p.toml"
    policy.write_text(
        "[cost_ceiling]\nmax_turn_usd = 5.0\nmax_session_usd = 2.0\n"
        '[[agents]]\nmatch = "big-*"\ncost_ceiling = {max_turn_usd = 1.0}\n'
    )
    assert main(["check-config", str(policy)]) == 0  # still valid
    out = capsys.readouterr().out
    assert "1 warning(s)" in out
    assert "`cost_ceiling.max_turn_usd` (5) is above `cost_ceiling.max_session_usd` (2)" in out
    assert "agents[0]" not in out  # the override's own bounds are consistent
    proc = run_cli(["replay", "--policy", str(policy)], events(*LOOP))
    assert proc.returncode == 0
    assert "warning:" in proc.stderr and "max_turn_usd" in proc.stderr


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("[signals.repeated-tool-cal]\nthreshold = 3\n", "did you mean `repeated-tool-call`?"),
        ("[signals.repeated-tool-call]\nthreshhold = 3\n", "did you mean `threshold`?"),
        ('mdoe = "warn"\n', "did you mean `mode`?"),
        ('[[agents]]\nmatch = "x"\nmdoe = "warn"\n', "did you mean `mode`?"),
        ('mode = "loud"\n', "expected one of off, warn, feedback, enforce"),
    ],
)
def test_policy_errors_suggest_the_nearest_key_or_the_allowed_values(tmp_path: Path, capsys, text, hint):
    policy = tmp_path / "p.toml"
    policy.write_text(text)
    assert main(["check-config", str(policy)]) == 2
    assert hint in capsys.readouterr().err


def test_schemas_name_their_dialect(capsys):
    assert main(["schema", "--family", "agent"]) == 0
    assert json.loads(capsys.readouterr().out)["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_every_subcommand_has_a_description():
    from streamguard.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, command in sub.choices.items():
        if command.add_help:  # `run` and `bridge` hand their arguments to their own parsers
            assert command.description, f"`streamguard {name}` has no description"


@pytest.mark.kafka
def test_the_demo_warns_about_the_same_policy(tmp_path: Path):
    policy = tmp_path / "p.toml"
    policy.write_text("[cost_ceiling]\nmax_turn_usd = 5.0\nmax_session_usd = 2.0\n")
    proc = run_cli(
        ["demo", "--policy", str(policy), "--duration", "0.1", "--quiet", "--metrics-port", "0"]
    )
    assert "streamguard demo: warning:" in proc.stderr and "max_turn_usd" in proc.stderr


def test_tail_shows_a_record_written_after_it_started_even_below_its_first_fetchs_end() -> None:
    """The first fetch's high watermark stands for the end (a broker that lists the end
    of a batch wrongly); a record written after tail started, before that first answer,
    is above where tail started and is shown."""
    from types import SimpleNamespace

    from streamguard.cli import written_before_tail

    started = 1_000_000.0
    old = SimpleNamespace(offset=11, timestamp=started - 5_000)  # the last batch's tail
    new = SimpleNamespace(offset=12, timestamp=started + 300)  # written as tail started
    assert written_before_tail(old, listed=10, floor=13, started_ms=started)
    assert not written_before_tail(new, listed=10, floor=13, started_ms=started)
    assert written_before_tail(SimpleNamespace(offset=9, timestamp=started + 300), 10, 13, started)


def test_emit_paces_at_its_rate_and_earns_no_credit_while_the_input_is_quiet() -> None:
    """One line, four seconds of nothing on the pipe, then five lines at once, at
    --rate 1: one a second, not three in the same millisecond."""
    from streamguard.cli import Pacer

    pacer = Pacer(1.0)
    sends = []
    for wanted in (0.0, 4.0, 4.0, 4.0, 4.0, 4.0):
        now = max(wanted, sends[-1] if sends else 0.0)
        sends.append(now + pacer.delay(now))
    assert sends == [0.0, 4.0, 5.0, 6.0, 7.0, 8.0]


def test_the_commands_that_clear_a_halt_name_a_fleet_halts_scope() -> None:
    """A fleet halt is lifted by its circuit closing, never by a session reset (and
    `--guardrail fleet` is no choice): the scope's close is what to run."""
    from streamguard.cli import clearing_commands

    assert clearing_commands("s", ["watchdog"], None) == ["streamguard reset s --guardrail watchdog"]
    assert clearing_commands("s", ["watchdog", "cost_ceiling"], None) == ["streamguard reset s --guardrail all"]
    assert clearing_commands("s", ["watchdog", "fleet"], "spend:tenant=acme") == [
        "streamguard reset s --guardrail watchdog", "streamguard reset --scope spend:tenant=acme"]
    [fleet] = clearing_commands("s", ["fleet"], None)
    assert "--guardrail" not in fleet and "streamguard fleet --open" in fleet
