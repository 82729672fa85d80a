"""``streamguard demo``: every planted shape caught, no false alarms, clean stops.

The end-to-end tests start the demo's own broker (not the suite's shared one),
so they also check that the broker process is gone afterwards.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from collections import Counter
from itertools import islice
from pathlib import Path

import pytest

from streamguard.cli import main as cli_main
from streamguard.demo import (
    ALL_FAILURES,
    ALL_HEALTHY,
    ALL_PLANTED,
    DEMO_FAILURES,
    DEMO_HEALTHY,
    DEMO_POLICY,
    Demo,
    DemoOptions,
    demo_session_events,
    format_summary,
    session_plans,
    shape_deck,
    shape_of,
)
from streamguard.engine import Engine
from streamguard.events import Alert, ToolCall, ToolResult
from streamguard.fleet import PLANTED_POLICY
from streamguard.policy import parse_policy_set

REPO_ROOT = Path(__file__).resolve().parents[2]


def broker_alive(pid: int) -> bool:
    """Whether ``pid`` is still a running broker (a reaped pid may be reused by anything)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return b"broker" in cmdline


def check_summary_shape(summary: dict) -> None:
    """The JSON summary: well-formed, complete, self-consistent."""
    assert json.loads(json.dumps(summary)) == summary
    for key in ("ok", "exit_code", "interrupted", "events", "sessions", "planted", "healthy",
                "missed", "unconfirmed", "signals", "agents", "broker", "metrics_url"):
        assert key in summary, key
    assert set(summary["planted"]) == {str(kind) for kind in ALL_FAILURES}
    for name, row in summary["planted"].items():
        assert row["signals"] == sorted(ALL_PLANTED[shape_of(name)])
        assert row["sessions"] == row["caught"] + row["missed"] + row["open"], name
        assert row["verdict"] in ("caught", "missed", "pending", "absent")
    assert summary["metrics_url"].startswith("http://127.0.0.1:")


# --------------------------------------------------------------------------- no broker needed


def test_demo_policy_enables_what_every_planted_shape_needs():
    policy = parse_policy_set(DEMO_POLICY).base
    raw = tomllib.loads(DEMO_POLICY)
    for kind, fragment in PLANTED_POLICY.items():
        for table, values in fragment.items():
            for key, value in values.items():
                assert raw[table][key] == value, (kind, table, key)
    assert policy.mode == "enforce"
    assert policy.verification.enabled is True


def test_every_deck_holds_every_failure_shape_once():
    import random

    for share in (0.05, 0.1, 0.5, 1.0):
        deck = shape_deck(random.Random(1), share)
        counts = Counter(deck)
        assert all(counts[kind] == 1 for kind in ALL_FAILURES)
        healthy = sum(counts[kind] for kind in ALL_HEALTHY)
        assert healthy == round(len(ALL_FAILURES) * (1 - share) / share)
    plans = list(islice(session_plans(seed=4, failure_share=0.1), 600))
    assert plans == list(islice(session_plans(seed=4, failure_share=0.1), 600))
    assert len({p.session for p in plans}) == 600
    deck = len(shape_deck(random.Random(1), 0.1))
    assert set(ALL_FAILURES) <= {p.kind for p in plans[:deck]}


def _fired(plan) -> set[str]:
    engine = Engine(parse_policy_set(DEMO_POLICY))
    return {o.signal for e in demo_session_events(plan) for o in engine.process(e)
            if isinstance(o, Alert)}


def test_demo_shapes_raise_what_they_plant_and_healthy_ones_nothing():
    plans = list(islice(session_plans(seed=7, failure_share=0.3), 400))
    seen = set()
    for plan in plans:
        if plan.kind not in DEMO_HEALTHY and plan.kind not in DEMO_FAILURES:
            continue
        seen.add(plan.kind)
        fired = _fired(plan)
        if plan.kind in DEMO_HEALTHY:
            assert fired == set(), (plan.kind, fired)
        else:
            assert ALL_PLANTED[plan.kind] <= fired, (plan.kind, fired)
    assert seen == set(DEMO_HEALTHY) | set(DEMO_FAILURES)


def test_demo_coding_shapes_use_command_runners():
    plans = [p for p in islice(session_plans(seed=2, failure_share=0.3), 300)
             if p.kind in DEMO_HEALTHY]
    tools = {e.tool for p in plans for e in demo_session_events(p) if isinstance(e, ToolCall)}
    assert tools == {"bash", "str_replace_editor"}
    results = [e for p in plans for e in demo_session_events(p) if isinstance(e, ToolResult)]
    assert any(r.error for r in results), "the edit-test cycles fail before they pass"


def test_show_policy_and_bad_options(capsys):
    assert cli_main(["demo", "--show-policy"]) == 0
    assert capsys.readouterr().out == DEMO_POLICY
    assert cli_main(["demo", "--agents", "0"]) == 2
    assert "--agents" in capsys.readouterr().err
    assert cli_main(["demo", "--failure-share", "1.5"]) == 2
    assert "--failure-share" in capsys.readouterr().err


# --------------------------------------------------------------------------- end to end


@pytest.mark.kafka
async def test_demo_catches_every_planted_shape_without_false_alarms():
    demo = Demo(
        DemoOptions(agents=24, rate=3000, duration=5, seed=3, failure_share=0.5, metrics_port=0)
    )
    summary = await asyncio.wait_for(demo.run(), 90)
    check_summary_shape(summary)
    assert summary["error"] is None
    assert summary["drained"], "the processor and the controller caught up"
    for name, row in summary["planted"].items():
        assert row["verdict"] == "caught", (name, row)
        assert row["missed"] == 0 and row["caught"] >= 1, (name, row)
    healthy = summary["healthy"]
    assert healthy["sessions"] > 20
    assert healthy["false_alarms"] == 0, healthy
    assert summary["ok"] is True and summary["exit_code"] == 0
    events = summary["events"]
    assert events["published"] == events["processed"] > 5000
    assert events["dropped"] == events["failed"] == 0
    # Every planted signal shows in the per-signal table, and trips halted sessions.
    planted = set().union(*ALL_PLANTED.values())
    assert planted <= set(summary["signals"])
    assert summary["sessions"]["halted"] >= 1
    assert "PASS" in format_summary(summary)
    assert summary["broker"]["pid"] == demo.broker_pid is not None
    assert not broker_alive(demo.broker_pid), "the demo's broker outlived it"


@pytest.mark.kafka
def test_sigint_stops_the_demo_cleanly_with_a_summary(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMGUARD_")}
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    err_path = tmp_path / "stderr.txt"
    args = [
        sys.executable, "-m", "streamguard.cli", "demo", "--duration", "120", "--agents", "20",
        "--metrics-port", "0", "--plain", "--refresh", "0.5", "--json",
    ]
    with open(err_path, "wb") as err:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, env=env)
        try:
            deadline = time.monotonic() + 40
            while b"events " not in err_path.read_bytes():  # the first live status line
                assert proc.poll() is None, err_path.read_text()
                assert time.monotonic() < deadline, "the demo did not start publishing"
                time.sleep(0.1)
            proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=40)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    stderr = err_path.read_text()
    assert proc.returncode == 130, stderr
    summary = json.loads(out)
    check_summary_shape(summary)
    assert summary["interrupted"] == "SIGINT"
    assert summary["exit_code"] == 130
    assert summary["events"]["published"] > 0
    assert summary["healthy"]["false_alarms"] == 0
    assert "interrupted by SIGINT" in stderr and "planted shape" in stderr
    assert "Traceback" not in stderr
    assert not broker_alive(summary["broker"]["pid"]), "the demo's broker outlived it"
