"""``setup-detour``: a stretch of machine work (installs, network probes, toolchain
lookups) with failing repairs, and nothing done on the task."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamguard.engine import Engine
from streamguard.events import Alert, ToolCall, ToolResult, TurnStart
from streamguard.policy import PolicyError, parse_policy_set
from streamguard.signals.facts import shell_facts
from streamguard.signals.setup_detour import (
    DEFAULT_PROGRAMS,
    MACHINE,
    NEUTRAL,
    TASK,
    SetupDetour,
    SetupDetourState,
    classify,
    classify_tool,
)
from tests.harness import engine_alerts

# Warn mode keeps every detector running after an alert; the other signals that read
# these traces are switched off so each test sees this signal's alerts alone.
ONLY = (
    'mode = "warn"\ndisabled_signals = ["tools-without-text", "near-duplicate-calls", '
    '"tool-failure-streak", "tool-failure-guidance", "repeated-tool-name", "result-stall", '
    '"failure-loop", "long-loop", "repeated-tool-call", "dominant-tool-call"]\n'
)
NO_CYCLE = ONLY.replace('"dominant-tool-call"]', '"dominant-tool-call", "alternating-tool-cycle"]')
PROGRAMS = frozenset(DEFAULT_PROGRAMS)


def sh(command: str, call_id: str | None = None) -> ToolCall:
    return ToolCall(session="d", tool="bash", args={"command": command}, call_id=call_id)


def ok(text: str = "done", call_id: str | None = None) -> ToolResult:
    return ToolResult(session="d", tool="bash", result=text, call_id=call_id)


def fail(error: str = "EXECUTION TIMED OUT", call_id: str | None = None) -> ToolResult:
    return ToolResult(session="d", tool="bash", error=error, call_id=call_id)


# What the agent was doing when the tool went missing: a detour turns from task work.
TASK_START: list[Any] = [sh("python -m pytest tests/test_parser.py"),
                         fail("/bin/sh: 1: java: not found")]


def run(trace: list[Any], policy: str = ONLY, task_first: bool = True) -> list[Alert]:
    return engine_alerts((TASK_START if task_first else []) + trace, policy, "d")


def detours(trace: list[Any], policy: str = ONLY, task_first: bool = True) -> list[Alert]:
    return [a for a in run(trace, policy, task_first) if a.signal == "setup-detour"]


# A repair going nowhere: eight different machine-work commands, three of them failing.
REPAIR: list[tuple[str, str | None]] = [
    ("sudo apt-get update", None),
    ("sudo apt-get install -y default-jdk", "E: Unable to locate package default-jdk"),
    ("ping -c 1 8.8.8.8", "EXECUTION TIMED OUT"),
    ("sudo sed -i 's/archive/old-releases/' /etc/apt/sources.list", None),
    ("sudo apt-get update", None),
    ("which java", None),
    ("sudo apt-get install -y openjdk-17-jdk", "EXECUTION TIMED OUT"),
    ("export JAVA_HOME=/usr/lib/jvm/default", None),
]


def repair_trace(steps: list[tuple[str, str | None]] = REPAIR) -> list[Any]:
    trace: list[Any] = []
    for command, error in steps:
        trace += [sh(command), fail(error) if error else ok("Reading package lists... Done")]
    return trace


# ----------------------------------------------------------------------- classification


@pytest.mark.parametrize(
    ("command", "kind"),
    [
        ("sudo apt-get install -y maven", MACHINE),
        ("pip install pytest", MACHINE),
        ("ping -c 1 example.org", MACHINE),
        ("systemctl restart networking", MACHINE),
        ("which javac", MACHINE),
        ("export PATH=$PATH:/opt/jdk/bin", MACHINE),
        ("java -version", MACHINE),
        ("mvn --version", MACHINE),
        ("find / -name javac 2>/dev/null", MACHINE),
        ("ls /usr/lib/jvm", MACHINE),
        ("cat /etc/resolv.conf", MACHINE),
        ("sudo nano /etc/apt/sources.list", MACHINE),
        ("sudo rm -rf /var/cache/apt/archives/lock", MACHINE),
        ("echo nameserver 8.8.8.8 > /etc/resolv.conf", MACHINE),
        ("echo $JAVA_HOME", NEUTRAL),
        ("pwd", NEUTRAL),
        ("# install the JDK here", NEUTRAL),
        ("", NEUTRAL),
        ("python -m pytest tests/", TASK),
        ("grep -rn parse_config src/", TASK),
        ("find . -name '*.java'", TASK),
        ("ls src/main/java", TASK),
        ("cat README.md", TASK),
        ("java Reproduce.java", TASK),
        ("git diff", TASK),
        ("ls /home/dev/project", TASK),
        # task work dressed as machine work
        ("source /opt/miniconda3/bin/activate && conda activate testbed && python reproduce.py", TASK),
        ("conda run -n testbed python -m pytest tests/test_io.py", TASK),
        ("pytest -v tests/test_io.py", TASK),
        ("sudo docker compose exec api pytest", TASK),
        ("ls /usr/src/app/src", TASK),
        ("find /opt/app -name '*.test.js'", TASK),
        ("cat > deploy/app.service <<EOF\n[Service]\nEnvironmentFile=/etc/app/env\nEOF", TASK),
        # machine work in other spellings
        ('bash -lc "apt-get install -y maven"', MACHINE),
        ("# attempt 3: another mirror\napt-get install -y maven", MACHINE),
        ("java -version 2>&1 | head -1", MACHINE),
        ("node -v", MACHINE),
        ("command -v javac", MACHINE),
        ("type java", MACHINE),
        ("curl -sI http://archive.ubuntu.com/ubuntu/", MACHINE),
        ("wget --spider http://deb.example/", MACHINE),
        ("npm install --registry http://registry.example/", MACHINE),
        ("pip3.11 install requests", MACHINE),
        ("sudo rm -rf /var/lib/apt/lists/lock", MACHINE),
    ],
)
def test_classification(command: str, kind: int) -> None:
    """Each command line as the watchdog hands it over: its action from the shared facts."""
    assert classify(shell_facts(command).action, command, PROGRAMS) == kind


def test_programs_come_from_the_policy() -> None:
    assert classify("kubectl apply", "kubectl apply -f x.yaml", PROGRAMS) == TASK
    assert classify("kubectl apply", "kubectl apply -f x.yaml", frozenset({"kubectl"})) == MACHINE


# ----------------------------------------------------------------------- the rule


def test_eight_machine_calls_three_failing_trip_once_as_critical() -> None:
    trace = repair_trace()
    assert detours(trace[:-2]) == []  # seven calls: not yet
    got = detours(trace + repair_trace())  # and the stretch goes on: still one alert
    assert len(got) == 1
    alert = got[0]
    assert alert.severity == "critical"
    assert alert.scope == "session"
    assert alert.detail["count"] == 8
    assert alert.detail["failures"] == 3
    assert "export" in alert.reason and "3 of them failed" in alert.reason
    assert len(alert.detail["actions"]) <= 3


def test_a_trip_halts_under_enforce() -> None:
    outputs: list[Any] = []
    engine = Engine(parse_policy_set('disabled_signals = ["tool-failure-streak"]\n'))
    engine.process(TurnStart(session="d"))
    for event in TASK_START + repair_trace():
        outputs += engine.process(event)
    assert any(getattr(o, "signal", None) == "setup-detour" for o in outputs)
    assert engine.sessions["d"].halted_by == ("watchdog",)


def test_successful_provisioning_is_not_a_detour() -> None:
    steps = [(command, None) for command, _ in REPAIR] * 3
    assert detours(repair_trace(steps)) == []


def test_the_failure_may_come_last() -> None:
    steps = [(c, None) for c, _ in REPAIR[:5]] + [(c, "timed out") for c, _ in REPAIR[5:]]
    got = run(repair_trace(steps))
    assert [a.signal for a in got] == ["setup-detour"]
    assert got[0].detail["failures"] == 3


def test_task_work_ends_the_stretch_and_rearms() -> None:
    trace = [*repair_trace(REPAIR[:6]), sh("python -m pytest -x"), fail("1 failed")]
    trace += repair_trace(REPAIR[:6])
    assert detours(trace) == []  # two stretches of six
    assert len(detours([*repair_trace(), sh("git status"), ok("clean"), *repair_trace()])) == 2


def test_a_call_to_another_tool_ends_the_stretch() -> None:
    edit = ToolCall(session="d", tool="edit_file", args={"path": "a.py", "text": "x"})
    trace = [*repair_trace(REPAIR[:5]), edit, ToolResult(session="d", tool="edit_file", result="ok")]
    assert detours(trace + repair_trace(REPAIR[5:])) == []


def test_neutral_commands_neither_extend_nor_end_the_stretch() -> None:
    trace: list[Any] = []
    for command, error in REPAIR[:7]:
        trace += [sh(command), fail(error) if error else ok("ok"), sh("echo $PATH"), ok("/usr/bin")]
    assert detours(trace) == []  # seven machine calls among seven echoes
    got = detours([*trace, sh("# try the next mirror"), ok(""), sh("dpkg -l"), ok("ii ...")])
    assert len(got) == 1 and got[0].detail["count"] == 8


def test_a_search_of_the_system_that_finds_nothing_counts_as_a_failure() -> None:
    roots = ["/usr", "/opt", "/usr/local", "/usr/lib", "/opt/java", "/", "/lib", "/usr/share"]
    trace: list[Any] = []
    for root in roots:
        trace += [sh(f"find {root} -name javac 2>/dev/null"), ok("")]
    got = detours(trace)
    # it trips at the eighth call, before that call's own answer
    assert len(got) == 1 and got[0].detail["failures"] == 7


def test_a_result_is_credited_to_its_own_call() -> None:
    # Three rounds of parallel calls; each round's results come back by call id in
    # reverse order: each failure is still its own call's.
    trace: list[Any] = []
    for batch in (range(0, 3), range(3, 6), range(6, 8)):
        trace += [sh(REPAIR[i][0], call_id=f"c{i}") for i in batch]
        for i in reversed(batch):
            error = REPAIR[i][1]
            trace.append(fail(error, call_id=f"c{i}") if error else ok("ok", call_id=f"c{i}"))
    got = detours(trace)
    assert len(got) == 1 and got[0].detail["failures"] == 3


def test_one_parallel_batch_of_lookups_is_a_survey_not_a_detour() -> None:
    tools = ["node", "npm", "pnpm", "yarn", "docker", "psql", "redis-server", "javac"]
    trace: list[Any] = [sh(f"which {tool}", call_id=f"w{i}") for i, tool in enumerate(tools)]
    trace += [fail("exit status 1", call_id=f"w{i}") for i in range(len(tools))]
    assert detours(trace) == []
    # the same lookups one at a time, each answer read before the next: a hunt
    sequential: list[Any] = []
    for tool in tools:
        sequential += [sh(f"which {tool}"), fail("exit status 1")]
    assert len(detours(sequential)) == 1


def test_a_repair_whose_last_step_worked_is_given_its_chance() -> None:
    steps = [
        ("pip install -r requirements.txt", "Error: pg_config executable not found"),
        ("sudo apt-get update", None),
        ("sudo apt-get install -y libpq", "E: Unable to locate package libpq"),
        ("apt-cache search libpq", None),
        ("sudo apt-get install -y libpq-dev", None),
        ("which pg_config", "exit status 1"),
        ("export PATH=$PATH:/usr/lib/postgresql/bin", None),
        ("pip install -r requirements.txt", None),
    ]
    trace = [*repair_trace(steps), sh("python -m pytest -q"), ok("12 passed")]
    assert detours(trace) == []


def test_an_argument_list_command_is_read_as_its_command_line() -> None:
    call = ToolCall(session="d", tool="exec_command",
                    args={"command": ["bash", "-lc", "apt-get install -y maven"]})
    timed_out = ToolResult(session="d", tool="exec_command", error="EXECUTION TIMED OUT")
    trace: list[Any] = []
    for _ in range(8):
        trace += [call, timed_out]
    assert len(detours(trace)) == 1


def test_code_for_an_interpreter_ends_the_stretch() -> None:
    cell = ToolCall(session="d", tool="python", args={"code": "df = load('sales.csv')"})
    trace: list[Any] = []
    for command, error in REPAIR:
        trace += [sh(command), fail(error) if error else ok("ok"),
                  cell, ToolResult(session="d", tool="python", result="ok")]
    assert detours(trace) == []


def test_file_tools_on_the_system_configuration_are_machine_work() -> None:
    edit = ToolCall(session="d", tool="Edit",
                    args={"file_path": "/etc/apt/sources.list", "old_string": "a", "new_string": "b"})
    todo = ToolCall(session="d", tool="TodoWrite", args={"todos": []})
    assert classify_tool("Edit", edit.args) == MACHINE
    assert classify_tool("Edit", {"file_path": "/home/dev/app/main.py"}) == TASK
    assert classify_tool("TodoWrite", todo.args) == NEUTRAL
    trace: list[Any] = []
    for i, (command, error) in enumerate(REPAIR[:4]):
        edited = (ToolResult(session="d", tool="Edit", error="String to replace not found")
                  if i == 3 else ToolResult(session="d", tool="Edit", result="ok"))
        trace += [sh(command), fail(error) if error else ok("ok"), todo,
                  ToolResult(session="d", tool="TodoWrite", result="ok"), edit, edited]
    got = detours(trace)
    assert len(got) == 1 and got[0].detail["count"] == 8


def test_min_failures_zero_needs_no_failure() -> None:
    steps = [(command, None) for command, _ in REPAIR]
    policy = ONLY + "[signals.setup-detour]\nmin_failures = 0\nthreshold = 5\n"
    got = detours(repair_trace(steps), policy)
    assert len(got) == 1 and got[0].detail["count"] == 5


def test_exempt_tools_are_invisible() -> None:
    policy = ONLY + '[signals.setup-detour]\nexempt_tools = ["bash"]\n'
    assert detours(repair_trace(), policy) == []


def test_config_errors_name_the_field() -> None:
    with pytest.raises(PolicyError, match=r"signals\.setup-detour"):
        parse_policy_set("[signals.setup-detour]\nthreshold = 4\nmin_failures = 6\n")
    with pytest.raises(PolicyError, match=r"signals\.setup-detour\.threshold"):
        parse_policy_set("[signals.setup-detour]\nthreshold = 1\n")


def test_hand_built_config_is_clamped() -> None:
    signal = SetupDetour(SetupDetour.Config(threshold=4, min_failures=9))
    assert signal.min_failures == 4


# ----------------------------------------------------------------------- state


def test_state_round_trips_through_a_snapshot() -> None:
    engine = Engine(parse_policy_set(ONLY))
    engine.process(TurnStart(session="d"))
    for event in TASK_START + repair_trace(REPAIR[:6]):
        engine.process(event)
    data = engine.snapshot("d")
    assert data is not None
    restored = Engine(parse_policy_set(ONLY))
    restored.restore("d", data)
    tail = repair_trace(REPAIR[6:])
    first = [o for e in tail for o in engine.process(e) if isinstance(o, Alert)]
    second = [o for e in tail for o in restored.process(e) if isinstance(o, Alert)]
    assert [a.signal for a in first] == [a.signal for a in second] == ["setup-detour"]


def test_a_session_doing_only_machine_work_is_doing_a_machine_task() -> None:
    # Asked to install a package, the agent works on the machine from its first call:
    # failing installs are the job's own trouble, not a detour from it.
    trace = repair_trace() + repair_trace()
    assert detours(trace, task_first=False) == []
    # off, any session trips
    policy = ONLY + "[signals.setup-detour]\nneeds_task_work = false\n"
    assert len(detours(trace, policy, task_first=False)) == 1
    # one call of task work, and the next stretch is a detour from it
    later = [*trace, sh("git diff"), ok("diff --git a/x b/x"), *repair_trace()]
    assert len(detours(later, task_first=False)) == 1
    # a machine task whose install loops is still halted, by the repetition detectors
    loop: list[Any] = []
    for i in range(10):
        loop += [sh("sudo apt-get install -y maven"), fail("EXECUTION TIMED OUT"),
                 sh(f"sudo sed -i 's/m{i}/m{i + 1}/' /etc/apt/sources.list"), ok("")]
    everything = 'mode = "warn"\n'
    got = {(a.signal, a.severity) for a in run(loop, everything, task_first=False)}
    assert ("setup-detour", "critical") not in got
    assert {("result-stall", "critical"), ("failure-loop", "critical")} <= got
    # neutral calls are no task work
    neutral = [sh("pwd"), ok("/repo"), sh("echo starting"), ok("starting"), *trace]
    assert detours(neutral, task_first=False) == []


def test_fresh_state_encodes_to_its_tag_alone() -> None:
    assert msgspec.json.encode(SetupDetourState()) == b'{"type":"setup-detour"}'


COMMANDS = st.sampled_from([c for c, _ in REPAIR] + ["echo hi", "pwd", "python -m pytest",
                                                      "git diff", "cat src/app.py"])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(COMMANDS, st.booleans()), max_size=60))
def test_alerts_match_a_reference_count(steps: list[tuple[str, bool]]) -> None:
    """The signal agrees with a direct count over the classified stretch, whatever the mix."""
    expected = 0
    run_length = failures = 0
    reported = last_failed = False
    trace: list[Any] = []
    for command, failed in steps:
        trace += [sh(command), fail("boom") if failed else ok("fine")]
        kind = classify(shell_facts(command).action, command, PROGRAMS)
        if kind == TASK:
            run_length = failures = 0
            reported = last_failed = False
        elif kind == MACHINE:
            run_length += 1  # each call here follows an answer: a round of its own
            for trip_on_result in (False, True):
                if trip_on_result:
                    failures += failed
                    last_failed = failed
                if (not reported and run_length >= 8 and failures >= 3 and last_failed
                        and (failed or not trip_on_result)):
                    reported = True
                    expected += 1
    # Without the cycle detector, which the signal defers to and the count does not
    # model: an update and an install taking turns, some failing, are its cycle.
    assert len(detours(trace, NO_CYCLE)) == expected

