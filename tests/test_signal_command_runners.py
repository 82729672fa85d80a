"""Command-runner tools: name-based rules key on what the call does, or stand down."""

from __future__ import annotations

import json
from typing import Any

import pytest

from streamguard.events import Alert, Text, ToolCall, ToolResult
from streamguard.policy import PolicyError, parse_policy_set
from streamguard.signals.facts import CommandRunners, runner_facts, shell_facts
from tests.harness import engine_alerts

WARN = 'mode = "warn"\ndisabled_signals = ["tools-without-text", "near-duplicate-calls"]\n'


def alerts(trace: list[Any], policy: str = WARN) -> list[Alert]:
    return engine_alerts(trace, policy, "r")


def signals(trace: list[Any], policy: str = WARN) -> list[str]:
    return [a.signal for a in alerts(trace, policy)]


def word(i: int) -> str:
    """A distinct word per number (result-stall masks digits, so fixtures must differ
    in more than their numbers to be different answers)."""
    return "".join("abcdefghij"[int(d)] for d in str(i)) + "x"


def sh(command: str, tool: str = "bash") -> ToolCall:
    return ToolCall(session="r", tool=tool, args={"command": command})


def out(text: str, tool: str = "bash") -> ToolResult:
    return ToolResult(session="r", tool=tool, result=text)


def err(text: str, tool: str = "bash") -> ToolResult:
    return ToolResult(session="r", tool=tool, error=text)


# --------------------------------------------------------------------------- facts


@pytest.mark.parametrize(
    ("command", "action", "write", "search"),
    [
        ("git diff", "git diff", False, False),
        ("git -C /repo status", "git status", False, False),
        ("kubectl -n prod get pods", "kubectl get", False, False),
        # xargs runs the program after it: a search whose hits are rewritten writes
        ("grep -rl \"user_card'\" src | xargs -r sed -i \"s#user_card#UserCard#g\"", "grep", True, True),
        ("find . -name '*.pyc' | xargs rm -f", "find", True, True),
        ("kubectl --context staging -n prod rollout undo deploy/api", "kubectl rollout", True, False),
        ("docker -H tcp://build:2375 ps", "docker ps", False, False),
        ("cd /repo && python -m pytest tests/test_x.py -x", "pytest", False, False),
        ("pytest -q tests", "pytest", False, False),
        ("python reproduce.py 2>&1", "python reproduce.py", False, False),
        ("grep -rn parse_config src/", "grep", False, True),
        ("cd src && rg Foo", "rg", False, True),
        # a search through what a lister prints is the line's search
        ("cat a.py | grep foo", "cat", False, True),
        ("sed -n 10,40p a.py", "sed", False, False),
        ("sed -i 's/a/b/' a.py", "sed", True, False),
        ("echo hi > notes.txt", "echo", True, False),
        ("ls -la > /dev/null 2>&1", "ls", False, False),
        # a ">" in a quoted word of a one-line command is text
        ("grep -n '->' src/parser.c", "grep", False, True),
        ("grep '===>' /tmp/playtests.log | tail -1", "grep", False, True),
        ('python -c "print(1 > 0)"', "python -c", False, False),
        ('echo "done" > status.txt', "echo", True, False),
        # ... unless the line runs a quoted line of its own, or the quotes may not be what
        # they seem (an escape, a command substitution, a script of several lines)
        ('bash -c "echo done > status.txt"', "echo", True, False),
        ('docker exec web /bin/sh -ec "printf x > /etc/nginx/conf.d/a.conf"', "docker exec", True, False),
        ('ssh web-1 "printf x > /etc/app.conf"', "ssh", True, False),
        ("awk '{print $1 > \"out_\" $2}' data.txt", "awk", True, False),
        ("awk '{printf \"%s\\n\", $1 > \"ids.txt\"}' data.txt", "awk", True, False),
        # an awk program's other ">" compares: the line reads
        ("airflow dags list-runs -d etl -o plain | awk -F'|' 'NR>2{print $3}' | sort | uniq -c",
         "airflow", False, False),
        ("gawk '$3 > 100 {n++} END {print n}' sales.tsv", "gawk", False, False),
        # an option that begins with --command names a file, and runs no line of its own
        ("kafka-consumer-groups --command-config admin.properties --describe --group g"
         " | awk 'NR>1{s+=$6} END{print \"lag\", s}'", "kafka-consumer-groups", False, False),
        ('nix-shell --command "make > build.log"', "nix-shell", True, False),
        ("awk 'NR>1' a.csv | sh -c 'cat > b.csv'", "awk", True, False),  # sh runs its own line
        ("# don't rebuild\npython gen.py > data.json\n# it's fresh", "python gen.py", True, False),
        ("cat > fix.py <<'EOF'\nprint(1)\nEOF", "cat", True, False),
        # a here-document feeds a script (a guess of a write); a here-string is read by its
        # words: a look at a program's prompt reads (Connect:Direct's process status),
        # anything else is the same guess of a write
        ("python - <<EOF\nimport os\nEOF", "python <<EOF", True, False),
        ('direct -n CDPRD1 <<< "select process pnumber=48812 detail=yes;" | grep Status', "direct", False, False),
        ("redis-cli <<< 'GET session:42'", "redis-cli", False, False),
        ('direct -n CDPRD1 <<< "submit file=/cdunix/proc/SND1.cdp;"', "direct", True, False),
        ('bc <<< "2+2"', "bc", True, False),
        ("psql <<< 'DELETE FROM t'", "psql", True, False),
        # ...a look followed by a change, or given to a shell or an interpreter, writes; a
        # `<<<` inside quotes is text
        ('psql <<< "SELECT 1; DELETE FROM orders WHERE id = 4"', "psql", True, False),
        ('bash <<< "find /var/tmp -name x.tmp -delete"', "bash", True, False),
        ("psql <<< 'select * into backup_t from t'", "psql", True, False),
        ("grep -rn '<<<' scripts/", "grep", False, True),
        ("git apply fix.patch", "git apply", True, False),
        ("git bisect good", "git bisect", True, False),  # checks out the next commit
        ("patch -p1 < fix.diff", "patch", True, False),
        ("pip install -e .", "pip install", True, False),
        ("timeout 60 mvn -q test", "mvn test", False, False),
        # a build tool's options that take a value before its goal (`-pl` the modules)
        ("mvn -o -pl gson test -Dtest=EnumTest", "mvn test", False, False),
        ("./mvnw -pl core -am install", "mvnw install", True, False),
        ("./gradlew -p lib test", "gradlew test", False, False),
        ("pnpm --filter web test", "pnpm test", False, False),
        ("FOO=1 sudo python3.11 -c 'print(1)'", "python -c", False, False),
        ("make build && ./run_tests.sh", "make build", True, False),
        ("open src/Main.java 120", "open", False, False),
        ("search_dir parseConfig", "search_dir", False, True),
        # wrappers and stage-setters around the program that does the work
        ("source /opt/conda/bin/activate && conda activate testbed && python reproduce.py",
         "python reproduce.py", False, False),
        # a line that only changes the shell the next call runs in is a write of it
        ("conda activate testbed", "conda activate", True, False),
        ("export JAVA_HOME=/usr/lib/jvm/java-17", "export", True, False),
        ("cd build", "cd", True, False),
        ("source .venv/bin/activate", "source", True, False),
        ("unset PYTHONPATH", "unset", True, False),
        ("export", "export", False, False),  # prints the environment
        ("echo $JAVA_HOME", "echo", False, False),
        ("true", "true", False, False),
        ("export JAVA_HOME=/opt/jdk && ./mvnw test", "mvnw test", False, False),
        ("conda run -n testbed --no-capture-output python -m pytest -x", "pytest", False, False),
        ('bash -lc "grep -rn Foo src/"', "grep", False, True),
        ("sh -c 'make test'", "make test", True, False),
        ("sudo -u postgres psql -c 'select 1'", "psql", False, False),
        ("timeout -s KILL 30 pytest -q", "pytest", False, False),
        # comments and shebangs run nothing
        ("# try again with the mirror\napt-get install -y maven", "apt-get install", True, False),
        ("#!/bin/bash\nset -e\ngit status", "git status", False, False),
        ("# only a note", "", False, False),
        # a linter or formatter told to fix what it finds rewrites files; a check does not
        ("ruff check src --select B,UP --fix", "ruff", True, False),
        ("npx eslint --fix src/", "npx", True, False),
        ("prettier --write src", "prettier", True, False),
        ("ruff check src --output-format concise", "ruff", False, False),
        # ... unless also told only to show the fixes
        ("ruff check --fix --diff src", "ruff", False, False),
        ("prettier --write --check src", "prettier", False, False),
        ("git commit -m 'do not --fixup'", "git commit", True, False),
        ("pytest --fixtures", "pytest", False, False),
        # a search that picks a file's line of a sums list for a check: the check's answer
        ("grep ' a_R1.fastq.gz$' md5sums.txt | md5sum -c -", "grep", False, False),
        ("grep a.iso SHA256SUMS | sha256sum --check", "grep", False, False),
        ("rg x src | sha256sum", "rg", False, True),
        # a scratch file under /tmp the line writes and reads back holds its own answer
        ("cx-api get '/v1/t?cursor=ab' > /tmp/p2.json && jq '.n' /tmp/p2.json", "cx-api", False, False),
        ("python repro.py > /tmp/out.txt 2>&1; tail -5 /tmp/out.txt", "python repro.py", False, False),
        # ...not one kept for later, nor one that goes on somewhere else, nor a file elsewhere
        ("curl -s https://x.example/a > /tmp/a.json", "curl", True, False),
        ("sort a.txt > /tmp/s.txt && mv /tmp/s.txt a.txt", "sort", True, False),
        ("jq . in.json > out.json && cat out.json", "jq", True, False),
        # ...nor one a later program consumes, one read back as another name, one beside a
        # redirection of another stream, or one that climbs out of /tmp
        ("echo 'ALTER TABLE users ADD COLUMN x int;' > /tmp/m.sql && psql -d app -f /tmp/m.sql", "psql", True, False),
        ("echo '{}' > /tmp/b.json && curl -s -d @/tmp/b.json http://x.example", "curl", True, False),
        ("echo 'q' > /tmp/q.sql && mysql app < /tmp/q.sql", "mysql", True, False),
        ("python gen.py > /tmp/x.py; python /tmp/x.py", "python gen.py", True, False),
        ("ls > /tmp/a && cat /tmp/ab", "ls", True, False),
        ("python repro.py > /tmp/out.txt 2> /work/errors.log; tail -5 /tmp/out.txt", "python repro.py", True, False),
        ("cat x > /tmp/../work/app/c.py && cat /tmp/../work/app/c.py", "cat", True, False),
    ],
)
def test_shell_facts(command: str, action: str, write: bool, search: bool) -> None:
    facts = shell_facts(command)
    assert (facts.action, facts.write, facts.search) == (action, write, search)


def test_a_quoted_redirection_that_may_be_one_is_a_write() -> None:
    """Quotes are read as quotes only on a one-line command with no escape and no command
    substitution: past that, a ``>`` is a redirection as before (a missed write would make
    a check failing after each silent write a failure loop)."""
    for line in ("echo don\\'t > notes.txt && grep 'x' notes.txt",
                 'RC="$(pytest -q > /tmp/pytest.log 2>&1; echo $?)"',
                 "grep 'a' f; echo `date` > stamp.txt 'x'",
                 "find . -name '*.py' -exec sh -c 'cat {} > {}.bak' \\;"):
        assert shell_facts(line).write, line
    assert not shell_facts("grep -rn '=>' src | sort").write


def test_editor_commands_are_actions_with_their_path() -> None:
    view = runner_facts({"command": "view", "path": "/w/a.py", "view_range": [1, 40]})
    assert (view.action, view.write) == ("view /w/a.py", False)
    edit = runner_facts({"command": "str_replace", "path": "/w/a.py", "old_str": "x", "new_str": "y"})
    assert (edit.action, edit.write) == ("str_replace /w/a.py", True)
    for command in ("create", "insert", "undo_edit"):
        assert runner_facts({"command": command, "path": "a.py"}).write


def test_free_code_has_no_readable_action() -> None:
    assert runner_facts({"code": "   "}).action == ""
    assert runner_facts({"unrelated": 1}).action == ""
    assert runner_facts("import os; print(os.getcwd())", code_tool=True).action == ""


@pytest.mark.parametrize(
    ("code", "write"),
    [
        ('print(open("a.txt").read())', False),
        ("import json; print(json.load(open('cfg.json')))", False),
        ('open("a.txt", "w").write(text)', True),
        ("with open(path, mode='a') as f: f.write(x)", True),
        ("import subprocess; subprocess.run(['make'])", True),
        ("p.unlink()", True),
    ],
)
def test_code_writes_err_towards_write(code: str, write: bool) -> None:
    assert runner_facts({"code": code}).write is write


@pytest.mark.parametrize(
    ("code", "wait", "waits_first", "write"),
    [
        # only a sleep: a wait
        ("import time; time.sleep(20)", True, False, False),
        # a sleep, then a read: a read asked after a deliberate wait, as `sleep 120; status`
        ("import time; time.sleep(180)\nst = emr.describe_step(ClusterId='j-1', StepId='s-1')['Step']\nprint(st)",
         False, True, False),
        ("await asyncio.sleep(30); print(client.get_job('j-7').status)", False, True, False),
        # a sleep, then a write or a loop: judged as any other code
        ("import time; time.sleep(5)\nopen('out.txt', 'w').write(x)", False, False, True),
        ("import time; time.sleep(5)\nwhile True:\n    print(poll())", False, False, False),
        # a sleep later in the code is no wait first
        ("st = get_status()\nimport time; time.sleep(60)\nprint(st)", False, False, False),
        # a pause of a second or two is no check scheduled; a call that acts after the
        # sleep is no read (the write pattern does not know every client's verbs)
        ("import time; time.sleep(2)\nprint(client.get_job('j-7').status)", False, False, False),
        ("import time; time.sleep(30)\nr = requests.post(URL + '/jobs/7/retry')\nprint(r.json())",
         False, False, False),
        ("import time; time.sleep(30)\ncur.execute(\"UPDATE jobs SET state='x'\")", False, False, False),
    ],
)
def test_code_that_sleeps_first_and_then_only_reads_is_a_read_after_a_wait(
    code: str, wait: bool, waits_first: bool, write: bool
) -> None:
    facts = runner_facts({"code": code}, code_tool=True)
    assert (facts.wait, facts.waits_first, facts.write) == (wait, waits_first, write)


def test_runner_globs_are_case_insensitive_and_namespaced() -> None:
    runners = CommandRunners()
    for name in ("bash", "Bash", "execute_bash", "run_command", "str_replace_editor", "mcp__shell",
                 "exec_command", "str_replace_based_edit_tool"):
        assert runners(name), name
    for name in ("read_file", "bash_history_lookup", "search", "run"):
        assert not runners(name), name
    assert not CommandRunners([])("bash")


def test_policy_runner_list_is_validated_and_replaceable() -> None:
    with pytest.raises(PolicyError, match=r"command_runners\.tools"):
        parse_policy_set("[command_runners]\ntools = 3\n")
    with pytest.raises(PolicyError, match="command_runners"):
        parse_policy_set("[command_runners]\nnope = []\n")
    policy = parse_policy_set('[command_runners]\ntools = ["sandbox_exec"]\n').base
    assert policy.command_runners.tools == ["sandbox_exec"]


# --------------------------------------------------------------------------- repeated-tool-name


def test_healthy_bash_session_with_distinct_commands_is_silent() -> None:
    commands = [
        "ls", "git status", "cat setup.py", "grep -rn Config src", "python -m pytest -q",
        "sed -n 1,80p src/app.py", "git diff", "python reproduce.py", "find . -name '*.cfg'",
        "pip list", "head -50 README.md", "wc -l src/app.py", "git log --oneline -5",
        "python -c 'import app'", "cat src/cfg.py", "ls tests", "pytest tests/test_app.py",
        "tail -20 log.txt", "git show HEAD --stat", "echo done",
    ]
    trace: list[Any] = []
    for i, command in enumerate(commands):
        trace += [sh(command), out(f"output {word(i)}")]
    assert signals(trace) == []


def test_same_action_fifteen_times_is_the_name_signal_by_action() -> None:
    trace: list[Any] = []
    for i in range(15):
        trace += [sh(f"grep -rn symbol_{i} src"), out(f"hit in {word(i)}.py")]
    got = alerts(trace)
    assert [a.signal for a in got] == ["repeated-tool-name"]
    assert got[0].detail["tool"] == "bash: grep"


def test_reference_behaviour_keys_runners_by_name() -> None:
    commands = [f"cmd{i % 5} arg{i}" for i in range(15)]
    trace = [sh(c) for c in commands]
    assert signals(trace) == []
    policy = WARN + "[signals.repeated-tool-name]\nby_action = false\n"
    assert signals(trace, policy) == ["repeated-tool-name"]


def test_unreadable_action_stands_down_and_breaks_the_run() -> None:
    code = [ToolCall(session="r", tool="python", args={"code": f"x = {i}"}) for i in range(20)]
    assert signals(code) == []
    # 10 greps, one unreadable call, 10 greps: two runs of 10, no alert.
    greps = [sh(f"grep s{i} .") for i in range(10)]
    mixed = [*greps, ToolCall(session="r", tool="bash", args={}), *greps]
    assert signals(mixed) == []


def test_non_runner_tools_keep_the_reference_name_rule() -> None:
    trace = [ToolCall(session="r", tool="mark_task_done", args={"summary": f"done {i}"})
             for i in range(15)]
    assert signals(trace) == ["repeated-tool-name"]


# --------------------------------------------------------------------------- failure guidance


def test_edit_rerun_fail_is_debugging_not_a_failure_loop() -> None:
    trace: list[Any] = []
    for i in range(6):
        trace += [sh("python -m pytest tests/test_app.py -x"), err(f"1 failed: assert {i} == 7")]
        trace += [sh(f"sed -i 's/x = {i}/x = {i + 1}/' src/app.py"), out("")]
    assert signals(trace) == []


def test_a_linter_run_with_fix_between_two_failing_checks_is_a_write() -> None:
    """`ruff check` failing with findings, `ruff check --fix`, `ruff check` failing with
    what is left: the fixing run rewrote files, so the second check is a check after a
    write, not the same failing call retried."""
    check = {"cmd": "ruff check src --output-format concise"}

    def lint(findings: str) -> list[Any]:
        return [ToolCall(session="r", tool="run_command", args=check),
                ToolResult(session="r", tool="run_command", error=f"exit code 1\n{findings}")]

    fixed = [ToolCall(session="r", tool="run_command", args={"cmd": "ruff check src --fix"}),
             ToolResult(session="r", tool="run_command", error="exit code 1\nFound 10 errors (5 fixed, 5 remaining).")]
    assert signals([*lint("src/a.py:1:1: UP035 ..."), *fixed, *lint("src/a.py:9:5: B006 ...")]) == []
    # Without the fixing run, the same failing check twice is the advice's case.
    assert "tool-failure-guidance" in signals([*lint("src/a.py:1:1: UP035 ..."), *lint("src/a.py:1:1: UP035 ...")])


def test_editor_edits_between_failing_runs_are_writes() -> None:
    editor = "str_replace_editor"
    trace: list[Any] = []
    for i in range(5):
        trace += [sh("python reproduce.py"), err(f"Traceback: ValueError: {word(i)}")]
        trace += [
            ToolCall(session="r", tool=editor, args={"command": "str_replace", "path": "a.py",
                                                      "old_str": f"v{i}", "new_str": f"v{i + 1}"}),
            ToolResult(session="r", tool=editor, result=f"edited {i}"),
        ]
    assert signals(trace) == []


def test_rerun_after_changing_the_shell_is_a_retry_not_a_loop() -> None:
    # ./mvnw fails, the agent sets JAVA_HOME, ./mvnw fails the same way: the shell changed
    # in between, so the second failure is a retry in a new environment.
    fixed = [sh("./mvnw test"), err("Error: JAVA_HOME is not defined correctly.")]
    fixed += [sh("export JAVA_HOME=/usr/lib/jvm/java-11"), out("")]
    fixed += [sh("./mvnw test"), err("Error: JAVA_HOME is not defined correctly.")]
    assert signals(fixed) == []
    # the same rerun with nothing changed in between is the warning
    unchanged = [sh("./mvnw test"), err("Error: JAVA_HOME is not defined correctly.")]
    unchanged += [sh("echo $JAVA_HOME"), out("")]
    unchanged += [sh("./mvnw test"), err("Error: JAVA_HOME is not defined correctly.")]
    assert signals(unchanged) == ["tool-failure-guidance"]


def test_shell_changes_that_change_nothing_are_still_a_stall() -> None:
    # Each `export` answers nothing; its silence is not news, so the futile hunt (the same
    # "not found" after every change) still reaches result-stall.
    trace: list[Any] = []
    for i in range(9):
        trace += [sh(f"export PATH=$PATH:/opt/{word(i)}/bin"), out("")]
        trace += [sh("javac Main.java"), err("bash: line 7: javac: command not found")]
    assert "result-stall" in signals(trace)
    # by the stale rule itself, not only the futile-write one
    stale = WARN + "[signals.result-stall]\nfutile_writes = 0\n"
    got = [a for a in alerts(trace, stale) if a.signal == "result-stall"]
    assert got and got[0].detail["rule"] == "stale"
    # `set -e` first changes nothing about that
    prefixed = [sh("set -e; " + e.args["command"]) if isinstance(e, ToolCall) and "export" in e.args["command"]
                else e for e in trace]
    assert "result-stall" in signals(prefixed, stale)


def test_a_file_written_behind_a_cd_is_news() -> None:
    # `cd /repo && echo ... > file` has the action `cd` but writes a file: its silence
    # is a write that took, and the test failing with new values after it is work.
    trace: list[Any] = []
    for i in range(12):
        trace += [sh(f"cd /repo && echo 'LIMIT = {i}' > /repo/src/limits.py"), out("")]
        trace += [sh("python -m pytest -q tests/test_limits.py"),
                  err(f"FAILED tests/test_limits.py::test_cap - assert {40 + i} == 7")]
    assert "result-stall" not in signals(trace)


def test_reference_guidance_still_fires_without_the_write_reset() -> None:
    trace: list[Any] = []
    for i in range(3):
        trace += [sh("python -m pytest -x"), err(f"failed {i}")]
        trace += [sh(f"sed -i 's/{i}/{i + 1}/' a.py"), out("")]
    policy = WARN + "[signals.tool-failure-guidance]\nreset_on_write = false\n"
    got = signals(trace, policy)
    assert "tool-failure-guidance" in got
    assert signals(trace) == []


def test_grep_finding_nothing_is_an_answer() -> None:
    trace: list[Any] = []
    for i in range(4):
        trace += [sh(f"grep -rn helper_{i} src"), err("exit status 1")]
        trace += [Text(session="r", text="Not there; trying another name.")]
    assert signals(trace) == []
    policy = WARN + "[signals.tool-failure-guidance]\nsearch_failures_are_answers = false\n"
    assert "tool-failure-guidance" in signals(trace, policy)


def test_one_action_failing_three_times_with_drift_is_named_by_action() -> None:
    trace: list[Any] = []
    for i in range(3):
        trace += [sh(f"curl -s http://svc:{8000 + i}/health"), err("connection refused")]
    got = alerts(trace)
    guidance = [a for a in got if a.signal == "tool-failure-guidance"]
    assert len(guidance) == 1
    assert guidance[0].detail["tool"] == "bash: curl"
    assert guidance[0].detail["rule"] == "argument_drift"


def test_different_actions_failing_are_separate_streaks_for_guidance() -> None:
    trace: list[Any] = []
    for command in ("cat missing.txt", "ls /nope", "python nope.py"):
        trace += [sh(command), err("No such file or directory")]
    assert signals(trace) == []  # three runner failures are a debugging rhythm
    trace += [sh("head nope.cfg"), err("No such file or directory")]
    got = signals(trace)
    assert "tool-failure-guidance" not in got
    assert got == ["tool-failure-streak"]


def as_json_text(trace: list[Any]) -> list[Any]:
    """The same trace with every call's arguments sent as JSON text (OpenTelemetry's form)."""
    return [
        ToolCall(session=e.session, tool=e.tool, args=json.dumps(e.args)) if isinstance(e, ToolCall) else e
        for e in trace
    ]


def test_arguments_sent_as_json_text_are_read_as_the_object() -> None:
    # Edit, test, fail with new values: work, whichever form the arguments come in.
    work: list[Any] = []
    for i in range(8):
        work += [sh(f"sed -i 's/LIMIT = {i}/LIMIT = {i + 1}/' src/limits.py"), out("")]
        work += [sh("python -m pytest -q tests/test_limits.py"), err(f"FAILED test_cap - assert {40 + i} == 7")]
    assert signals(work) == signals(as_json_text(work)) == []
    assert runner_facts(json.dumps({"command": "sed -i s/a/b/ f.py"})).write
    assert runner_facts(' {"command": "grep -rn helper src"}').search
    assert runner_facts(json.dumps({"code": "open('f', 'w').write('x')"})).write
    # and a loop is one in both forms, with the same alerts
    loop: list[Any] = []
    for i in range(9):
        loop += [sh(f"export PATH=$PATH:/opt/{word(i)}/bin"), out("")]
        loop += [sh("javac Main.java"), err("bash: line 7: javac: command not found")]
    dict_form = [(a.signal, a.severity, a.detail) for a in alerts(loop)]
    assert dict_form and dict_form == [(a.signal, a.severity, a.detail) for a in alerts(as_json_text(loop))]


@pytest.mark.parametrize(
    ("command", "wait"),
    [
        # a read after a wait of its own is a read asked after a wait (waits_first)
        ("sleep 30 && curl -s localhost:8080/health", False),
        ("until curl -sf localhost:8080/health; do sleep 2; done", True),
        ("sleep 60", True),
        ("kubectl -n prod rollout status deploy/api --timeout=60s", True),
        ("kubectl wait --for=condition=ready pod -l app=api --timeout=120s", True),
        ("gh run watch 8812", True),
        ("gh pr checks 12 --watch", True),
        ("docker wait migrate-job", True),
        # BigQuery's job wait and the AWS CLI's waiters
        ("bq wait --fail_on_error=false bqjob_r4c1f0e9a2b7d3_1 60", True),
        ("aws ec2 wait instance-running --instance-ids i-0abc", True),
        ("aws --region eu-west-1 cloudformation wait stack-create-complete --stack-name api", True),
        ("aws ec2 describe-instances --instance-ids i-0abc", False), ("bq query --nosync 'SELECT 1'", False),
        ("aws s3 cp wait.txt s3://b/wait.txt", False),
        ("kubectl get pods -n prod", False),
        ("kubectl rollout restart deploy/api", False),
        ("echo status; kubectl get deploy", False),
        ("gh run view 8812", False),
        ("kubectl logs wait-for-db-0", False),  # a pod's name is no sub-command
        ("kubectl delete pod wait-for-db-0", False),
        # a deploy and its check in one line: the write's check, not a poll
        ("kubectl apply -f api.yaml && kubectl rollout status deploy/api", False),
    ],
)
def test_commands_that_block_until_ready_are_waits(command: str, wait: bool) -> None:
    """A command that blocks until something is ready, and fails when it is not yet, is a
    wait like `sleep`: run again, it polls (a rollout's status timing out at 2/6, 3/6...)."""
    assert shell_facts(command).wait is wait


def test_tools_named_as_waits_are_waits_and_the_list_is_policy() -> None:
    """`wait(seconds=120)` between reads of a deployment is the pause of a poll: the loop
    detectors read the status reads, whose answers move, and halt nothing; with the list
    emptied it is a step again and the two calls make a cycle."""
    def poll(policy: str) -> list[str]:
        trace: list[Any] = []
        for percent in (0, 5, 5, 5, 25, 25, 25, 50, 50, 50, 100):
            trace += [ToolCall(session="r", tool="wait", args={"seconds": 120}),
                      ToolResult(session="r", tool="wait", result='{"waited": 120}'),
                      ToolCall(session="r", tool="get_deployment", args={"id": "dep_8812"}),
                      ToolResult(session="r", tool="get_deployment",
                                 result={"status": "in_progress", "traffic_percent": percent})]
        return signals(trace, policy)
    assert poll(WARN) == []
    assert "alternating-tool-cycle" in poll(WARN + "[waits]\ntools = []\n")


def test_a_wait_that_never_ends_still_gets_the_polling_warning() -> None:
    """A wait is read by neither the loop nor the failure signals: a `wait_for_approval`
    denied again and again, the same answer every time, gets the polling warning,
    although `wait*` is also in `polling_tools` (which spares status reads, and waits
    whose answer moves, the warning); and at the twenty-fifth identical failure in a row
    (`polling_halt_after`) it trips: what it waits for has not moved in all that time."""
    trace: list[Any] = []
    for _ in range(24):
        trace += [ToolCall(session="r", tool="wait_for_approval", args={"request_id": "r1"}),
                  ToolResult(session="r", tool="wait_for_approval", error="approval request r1 was rejected")]
    got = alerts(trace, WARN)
    assert [(a.signal, a.severity) for a in got] == [("repeated-tool-call", "warn")]
    trace += [ToolCall(session="r", tool="wait_for_approval", args={"request_id": "r1"}),
              ToolResult(session="r", tool="wait_for_approval", error="approval request r1 was rejected")]
    got = alerts(trace, WARN)
    assert [(a.signal, a.severity, a.detail.get("rule")) for a in got] == [
        ("repeated-tool-call", "warn", "polling"), ("repeated-tool-call", "critical", "stuck_poll")]



@pytest.mark.parametrize(("args", "action", "write", "wait"), [
    ({"action": "left_click", "coordinate": [268, 402]}, "left_click", True, False),
    ({"action": "type", "text": "Floor3-Color"}, "type", True, False),
    ({"action": "scroll", "scroll_direction": "down"}, "scroll", False, False),  # moves the view: no write
    ({"action": "key", "text": "Return"}, "key", True, False),
    ({"action": "screenshot"}, "screenshot", False, False),
    ({"action": "zoom", "region": [0, 0, 10, 10]}, "zoom", False, False),
    ({"action": "wait", "duration": 3}, "wait", False, True),
])
def test_a_computer_use_tool_is_read_by_its_action(args: dict[str, Any], action: str,
                                                    write: bool, wait: bool) -> None:
    facts = runner_facts(args)
    assert (facts.action, facts.write, facts.wait) == (action, write, wait)
    assert CommandRunners(["computer", "computer_*"])("computer")


def test_a_computer_use_session_clicking_through_a_wizard_is_work() -> None:
    """Clicks and typing answer "clicked", "typed": a write's acknowledgement each, news;
    the screenshots between them show a new page each time. The same click on a screen
    that never changes is still a loop."""
    trace: list[Any] = []
    for page in range(6):
        for n, args in enumerate(({"action": "left_click", "coordinate": [200, 300 + 40 * page]},
                                  {"action": "type", "text": f"field {page}"},
                                  {"action": "left_click", "coordinate": [240, 760]},
                                  {"action": "wait", "duration": 3})):
            cid = f"c{page}{n}"
            answer = {"left_click": "clicked", "type": "typed", "wait": "waited"}[args["action"]]
            trace += [ToolCall(session="r", tool="computer", args=args, call_id=cid),
                      ToolResult(session="r", tool="computer", call_id=cid, result=answer)]
        cid = f"s{page}"
        trace += [ToolCall(session="r", tool="computer", args={"action": "screenshot"}, call_id=cid),
                  ToolResult(session="r", tool="computer", call_id=cid,
                             result=[{"type": "image", "sha256": f"{page:064d}"}])]
    assert signals(trace) == []
    stuck: list[Any] = []
    for n in range(6):
        stuck += [ToolCall(session="r", tool="computer",
                           args={"action": "left_click", "coordinate": [240, 760]}, call_id=f"k{n}"),
                  ToolResult(session="r", tool="computer", call_id=f"k{n}", result="clicked"),
                  ToolCall(session="r", tool="computer", args={"action": "screenshot"}, call_id=f"t{n}"),
                  ToolResult(session="r", tool="computer", call_id=f"t{n}",
                             result=[{"type": "image", "sha256": "same"}])]
    assert "alternating-tool-cycle" in signals(stuck)


def test_a_command_line_under_a_windows_style_key_is_read() -> None:
    facts = runner_facts({"CommandLine": "sleep 30 && az vmss list-instances -g rg -n vmss", "Blocking": True})
    assert facts.waits_first and facts.read and facts.action == "az"


@pytest.mark.parametrize(
    ("command", "waits_first", "wait"),
    [
        ("sleep 120; RAY_ADDRESS=http://ray-head:8265 ray job status raysubmit_Xq4f", True, False),
        ("sleep 60 && gh run view 42 --json status,conclusion", True, False),
        ("sleep 60", False, True),
        ("until curl -sf localhost:8080; do sleep 2; done", False, True),
        ("while true; do kubectl get pods; sleep 5; done", False, True),
        ("sleep 5; kubectl rollout status deploy/api", False, True),  # a blocking read
        ("sleep 30 && kubectl apply -f api.yaml", False, True),  # a write after the wait
        # a sleep after a job sent to the background waits for it: the launch with its check
        ("nohup python train.py --bs 32 > f0.log 2>&1 &\nsleep 45; tail -n 12 f0.log", False, False),
        ("nohup ./server > s.log 2>&1 & sleep 5; curl -s localhost:8080", False, False),
        ("(python serve.py > s.log 2>&1 &) ; sleep 3; curl localhost:5000", False, False),
        # a "&" inside quotes (a URL's query) and `nohup.out` send nothing to the background
        ("curl -sf 'http://localhost:8080/health?deep=1&verbose=1' > h.json; sleep 5; cat h.json", False, True),
        ("cat nohup.out > /tmp/c.txt && sleep 10 && cat /tmp/c.txt", False, True),
        # after a write that starts something else, the sleep waits for it to come up
        ("kubectl apply -f api.yaml && sleep 20 && kubectl get pods", False, True),
        ("docker compose up -d && sleep 10 && curl -sf localhost:9200", False, True),
        ("mkdir -p out && sleep 30 && test -s out/report.json", False, True),
        ("cd build && sleep 5 && ls", False, True),  # a change of the shell is no write
        # a shell loop waits, whatever its body writes
        ("for i in 1 2 3; do kubectl get pods > /tmp/pods.txt & sleep 10; done", False, True),
        ("while ! curl -sf localhost:8080 > /tmp/out.html; do sleep 2; done", False, True),
        ("echo waiting; sleep 3", False, True),
        ("kubectl get pods; sleep 10", False, True),  # the read came first
        # a shell loop after the read: the line waits as a whole
        ("sleep 5; cat status.txt; until curl -sf localhost:8080; do sleep 2; done", False, True),
        ("sleep 5 && gh run view 42; while true; do date; sleep 9; done", False, True),
        # the line a shell is handed: the same as the line itself
        ("bash -lc 'sleep 45'", False, True),
        ('bash -c "sleep 60 && gh run view 42 --json status"', True, False),
        ("zsh -c 'sleep 5; kubectl rollout status deploy/api'", False, True),
        # not a sleep: a word of a search, an option's value
        ("grep -c sleep /var/log/syslog", False, False),
        ("bash -lc 'grep -rn sleep src/'", False, False),
        # a shell that is not the line's own: the sleep is the container's, or quoted text
        ("docker run -d --name keep alpine sh -c 'sleep 3600'", False, False),
        ("kubectl exec db-0 -- sh -c 'sleep 2; psql -Atc \"select count(*) from jobs\"'", False, False),
        ("ps aux | grep 'bash -c sleep 45'", False, False),
        ("git commit -m 'fix: bash -c sleep handling'", False, False),
        ("echo 'sh -c \"sleep 5\"' >> notes.md", False, False),
        ("./deploy.sh -c sleep 10", False, False),
        # a shell behind a wrapper, with options before -c or -- after it
        ("/usr/bin/env bash -c 'sleep 5'", False, True),
        ("sudo bash -c 'sleep 5'", False, True),
        ("timeout 60 bash -c 'sleep 5'", False, True),
        ("bash --login -c -- 'sleep 5'", False, True),
        ("ksh -c 'sleep 5; cat status.txt'", True, False),
        # sent to the background: no wait of the line's own
        ("nohup bash -c 'sleep 5' &", False, False),
    ],
)
def test_a_read_after_a_wait_of_its_own(command: str, waits_first: bool, wait: bool) -> None:
    """`sleep 120; ray job status ...` waits, then reads: its answer is a read's, asked
    after a deliberate wait (CallFacts.waits_first), not a wait's."""
    facts = shell_facts(command)
    assert (facts.waits_first, facts.wait) == (waits_first, wait)


def test_a_sleep_handed_to_a_shell_as_an_argument_list_is_a_wait() -> None:
    """Codex-style runners send ``["bash", "-lc", "sleep 45"]``: the sleep is the line the
    shell runs, a wait as ``sleep 45`` is. Read as a program named ``sleep`` instead, it made
    a migration's progress read between sleeps an alternating cycle (four healthy watches
    of one blind batch halted)."""
    assert runner_facts({"command": ["bash", "-lc", "sleep 45"], "workdir": "/w"}).wait
    then = runner_facts({"command": ["bash", "-lc", "sleep 30 && aws rds describe-db-instances"]})
    assert then.waits_first and then.read
    watch: list[Any] = []
    for n in range(8):
        watch += [
            ToolCall(session="r", tool="shell", args={"command": ["bash", "-lc", "psql -Atc 'select phase'"]},
                     call_id=f"p{n}"),
            ToolResult(session="r", tool="shell", call_id=f"p{n}",
                       result={"output": f"building index: scanning table|{n * 388120}|2841733|0",
                               "metadata": {"exit_code": 0}}),
            ToolCall(session="r", tool="shell", args={"command": ["bash", "-lc", "sleep 45"]}, call_id=f"s{n}"),
            ToolResult(session="r", tool="shell", call_id=f"s{n}", result={"output": "", "metadata": {"exit_code": 0}}),
        ]
    assert "alternating-tool-cycle" not in signals(watch)


def test_a_launch_that_waits_for_its_log_is_read_as_the_launch() -> None:
    """`nohup python train.py ... & sleep 45; tail f0.log`: the sleep made the whole line a
    wait, which the loop detectors do not read, so a training job relaunched unchanged
    thirty times into the same CUDA out-of-memory traceback was never halted. The line is
    the launch with its check: the same launch answered alike again is a loop, and a launch
    after each change of its configuration is work."""
    launch = "cd /home/code && nohup python train.py --img 512 --fold 0 > f0.log 2>&1 &\nsleep 45; tail -n 12 f0.log"
    facts = shell_facts(launch)
    assert facts.write and not facts.wait
    oom = "train 26478 / val 6648\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.20 GiB"
    relaunched = [e for _ in range(12) for e in (sh(launch), out(oom))]
    assert [a.signal for a in alerts(relaunched) if a.severity == "critical"] != []
    tuned: list[Any] = []
    for n, batch in enumerate((32, 24, 16, 12, 8, 6)):
        tuned += [sh(f"sed -i 's/^bs: .*/bs: {batch}/' conf.yaml"), out(""),
                  sh(launch), out(f"train 26478 / val 6648\nepoch 1 step {word(n)} loss {word(n + 7)}")]
    assert [a.signal for a in alerts(tuned) if a.severity == "critical"] == []


def test_a_read_after_a_wait_the_runtime_calls_a_write_is_a_write_and_a_wait() -> None:
    facts = runner_facts({"command": "sleep 5 && gh run view 42"}, False, "write")
    assert facts.write and facts.wait and not facts.waits_first


@pytest.mark.parametrize(
    ("args", "line"),
    [
        ({"program": "sleep", "arguments": ["90"]}, "sleep 90"),
        ({"command": "git", "args": ["status", "-s"]}, "git status -s"),
        ({"executable": "kubectl", "argv": ["get", "pods"]}, "kubectl get pods"),
        ({"command": "ls -la"}, "ls -la"),  # a whole line, as before
        ({"cmd": "make", "args": "all"}, "make"),  # an argument string is no argument list
        ({"program": "bundle", "arguments": ["exec", 3]}, "bundle exec 3"),  # numbers are arguments
        ({"command": "make", "args": ["-j", {"n": 8}]}, "make"),  # not a command line: the command
        ({"program": "x", "arguments": [None]}, None),
    ],
)
def test_the_exec_shape_is_read_as_its_command_line(args: dict[str, Any], line: str | None) -> None:
    from streamguard.signals.facts import command_text

    assert command_text(args) == line


def test_a_wait_sent_in_the_exec_shape_is_a_wait() -> None:
    """A merge request's pipeline polled with `sleep 90` between reads, the sleep sent as
    `{"program": "sleep", "arguments": ["90"]}`: a poll between waits, no cycle."""
    trace: list[Any] = []
    for n in range(8):
        trace += [ToolCall(session="s", tool="get_merge_request", args={"iid": 287}, call_id=f"g{n}"),
                  ToolResult(session="s", tool="get_merge_request", call_id=f"g{n}",
                             result={"iid": 287, "pipeline": {"id": 90211, "status": "running"}}),
                  ToolCall(session="s", tool="run_command", call_id=f"s{n}",
                           args={"program": "sleep", "arguments": ["90"]}),
                  ToolResult(session="s", tool="run_command", call_id=f"s{n}", result="")]
    assert [a for a in alerts(trace) if a.severity == "critical"] == []


@pytest.mark.parametrize(
    ("code", "wait"),
    [
        ("import time; time.sleep(20)", True),
        ("import time\ntime.sleep(20)\n", True),
        ("await asyncio.sleep(5)", True),
        ("from time import sleep; sleep(30)", True),
        ("time.sleep(20); print(open('log.txt').read())", False),  # a read after it
        ("time.sleep(delay)", False),  # no number: code, not a wait
        ("import time; time.sleep(20)" + " " * 200, False),  # longer than a bare sleep
    ],
)
def test_code_that_only_sleeps_is_a_wait(code: str, wait: bool) -> None:
    from streamguard.signals.facts import code_facts

    assert code_facts(code).wait is wait


def test_jobs_polled_with_code_that_sleeps_between_are_a_poll() -> None:
    """A 3D-generation job polled through an MCP tool, with `time.sleep(20)` run through
    the application's code tool between polls: waits, so no two-call cycle."""
    trace: list[Any] = []
    for n in range(6):
        trace += [ToolCall(session="s", tool="poll_job_status", args={"key": "c99a"}, call_id=f"p{n}"),
                  ToolResult(session="s", tool="poll_job_status", call_id=f"p{n}",
                             result={"jobs": [{"uuid": "3c65", "status": "Generating"}]}),
                  ToolCall(session="s", tool="execute_blender_code", call_id=f"w{n}",
                           args={"code": "import time; time.sleep(20)"}),
                  ToolResult(session="s", tool="execute_blender_code", call_id=f"w{n}",
                             result="Code executed successfully: ")]
    assert [a for a in alerts(trace) if a.severity == "critical"] == []


@pytest.mark.parametrize(("statement", "write"), [
    ("create index concurrently if not exists t_a_idx on public.t (a);", True),
    ("  INSERT INTO t VALUES (1)", True),
    ("-- add the policy\nALTER POLICY p ON t USING (true);", True),
    ("/* tidy */ drop index if exists t_a_idx", True),
    ("BEGIN; DROP TABLE staging;", True),
    ("update orders set status = 'x' where id = 1", True),
    ("explain analyze delete from t where a < 0", True),
    ("WITH d AS (DELETE FROM t RETURNING *) SELECT count(*) FROM d", True),
    ("select count(*) from t", False),
    ("WITH x AS (SELECT 1) SELECT * FROM x", False),
    ("explain analyze select * from t", False),
    ("SHOW TABLES", False),
    ("UPDATE orders o SET status = 'shipped' WHERE o.id = 7", True),
    ("INSERT orders VALUES (1, 'x')", True), ("REPLACE INTO settings (k, v) VALUES ('a', 'b')", True),
    ("UPSERT INTO accounts (id, balance) VALUES (1, 100)", True),
    ("DELETE o FROM orders o JOIN t ON t.id = o.id", True), ("COMMENT ON TABLE t IS 'x'", True),
    ("ANALYZE orders", True), ("RENAME TABLE a TO b", True),
    # a write stacked after a read; a transaction or a setting opened first
    ("SELECT 1; DROP TABLE users", True), ("select * from t ; truncate table t", True),
    ("BEGIN TRANSACTION; DELETE FROM t WHERE id = 1", True), ("BEGIN WORK; UPDATE t SET a = 1", True),
    ("SET search_path = app; DROP TABLE t", True), (" " * 5000 + "DELETE FROM t", True),
    # a literal's words are data; two reads are a read
    ("select * from notes where body = 'please update x set y'", False),
    ("select 'insert into t values (1)'", False), ("select a from t; select b from u", False),
    # nor are a comment's (even one with an apostrophe) or an escaped quote's
    ("SELECT a FROM t /* ; drop table t */", False), ("select * from t -- ; drop table t", False),
    ("-- customer's orders\nSELECT * FROM t WHERE note = 'x; update a set b = 1'", False),
    ("select * from t where a = 'it\\'s; delete from t'", False),
    # MERGE with its INTO left out (BigQuery, SQL Server), alone or after a WITH
    ("MERGE `acme-prod.marts.daily` T USING (SELECT 1 AS a) S ON T.a = S.a "
     "WHEN MATCHED THEN UPDATE SET T.n = 1", True),
    ("MERGE dbo.Target AS T USING dbo.Src AS S ON T.id = S.id WHEN NOT MATCHED THEN INSERT (id) "
     "VALUES (S.id);", True),
    ("WITH s AS (SELECT 1 AS a) MERGE t USING s ON t.a = s.a WHEN MATCHED THEN DELETE", True),
    ("MERGE dbo.Target WITH (HOLDLOCK) AS T USING dbo.Src AS S ON T.id = S.id WHEN MATCHED THEN "
     "UPDATE SET T.a = S.a;", True),
    ("MERGE TOP (100) dbo.T AS T USING S ON T.id = S.id WHEN MATCHED THEN DELETE;", True),
])
def test_an_sql_statement_sent_to_a_runner_is_read_by_its_shape(statement: str, write: bool) -> None:
    facts = runner_facts({"query": statement})
    assert (facts.action, facts.write, facts.read) == (
        "sql:write" if write else "sql:read", write, not write)


@pytest.mark.parametrize("words", [
    "orders that failed yesterday", "update me on the outage", "Create React App docs",
    "call mom", "show me failing orders", "select the best option", "drop it",
    "insert a coin", "replace the battery", "analyze sales by region",
    "merge sort using recursion", "merge two pdfs using python",
])
def test_words_are_no_sql_statement(words: str) -> None:
    # A runner's "query" in words (a search, a request) is read as before: no action.
    facts = runner_facts({"query": words})
    assert facts.action == "" and not facts.write


def test_a_command_line_beside_a_statement_is_the_call() -> None:
    assert runner_facts({"cmd": "rm -rf /data", "query": "select 1"}).action == "rm"


@pytest.mark.parametrize("hostile", [
    "/**/" * 40 + ";", "/*" + "*" * 20000, "--x\n" * 5000, "/**/" * 40 + "BEGIN;" * 40 + "x",
])
def test_a_statement_of_comments_alone_is_no_statement(hostile: str) -> None:
    """Back-to-back comments with no keyword after them: each comment is matched one way
    only, so the read is linear (a body that could also span `*/` made forty comments take
    hours, each one doubling the work)."""
    assert runner_facts({"query": hostile}).action == ""


def test_indexes_created_one_by_one_through_an_sql_tool_are_writes() -> None:
    """Seventeen indexes created through a database server's `execute_sql`, each answered
    "Success. No rows returned": writes, each acknowledged, not one answer seventeen
    times. The same statement sent again and again is still stale."""
    trace: list[Any] = []
    for n in range(17):
        statement = f"create index concurrently if not exists t{word(n)}_idx on public.t{word(n)} (a);"
        trace += [sh(statement, "execute_sql"), out('{"rows": [], "message": "Success. No rows returned"}',
                                                    "execute_sql")]
    trace = [ToolCall(session="r", tool="execute_sql", args={"query": e.args["command"]})
             if isinstance(e, ToolCall) else e for e in trace]
    assert "result-stall" not in signals(trace)
    again = [e for _ in range(12) for e in trace[:2]]
    assert "result-stall" in signals(again, WARN.replace('"]\n', '", "repeated-tool-call", '
                                                           '"dominant-tool-call"]\n'))


@pytest.mark.parametrize(("action", "write"), [
    ({"type": "keypress", "keys": ["CMD", "R"]}, True), ({"type": "click", "x": 1, "y": 2}, True),
    ({"type": "screenshot"}, False), ({"type": "wait"}, False),
])
def test_an_openai_computer_action_object_is_read_by_its_type(action: dict[str, Any], write: bool) -> None:
    facts = runner_facts({"action": action})
    assert (facts.action, facts.write) == (action["type"], write)


def test_a_tenant_named_as_a_setting_is_the_place_a_command_acts_on() -> None:
    """A migration run per tenant (`alembic -x tenant=acme upgrade head`, `--tenant acme`,
    or a shard built through make, `SHARD=07`), each printing the same lines: each tenant's
    answer, not the same answer again. The same tenant migrated again and again is."""
    log = ("INFO  [alembic.runtime.migration] Context impl PostgresqlImpl.\n"
           "INFO  [alembic.runtime.migration] Running upgrade 7c1e2f0a9b34 -> 3f9d21c4e8a0, add tax_region")
    tenants = [f"tenant_{word(n)}" for n in range(14)]
    for form in ("alembic -x tenant={} upgrade head", "tenantctl migrate --tenant {}",
                 # a make variable in capitals (`make -C data tokens SHARD=07`)
                 "make -C data tokens SHARD={}"):
        sweep = [e for t in tenants for e in (sh(form.format(t)), out(log))]
        assert "result-stall" not in signals(sweep)
        again = [e for n in range(14) for e in (sh(form.format(tenants[0]) + " " * n), out(log))]
        assert "result-stall" in signals(again)


def gemini_shell(command: str, stdout: str, code: int = 0, stderr: str = "(empty)") -> list[Any]:
    """Gemini CLI's `run_shell_command` and its answer: the run's transcript."""
    transcript = (f"Command: {command}\nDirectory: (root)\nStdout: {stdout}\nStderr: {stderr}\n"
                  f"Error: (none)\nExit Code: {code}\nSignal: (none)\nBackground PIDs: (none)\n"
                  f"Process Group PGID: {40000 + len(command)}")
    return [sh(command, tool="run_shell_command"), out(transcript, tool="run_shell_command")]


def test_a_shell_transcript_is_read_as_its_output_and_exit_code() -> None:
    """Gemini CLI answers a command with a transcript that repeats it: thirty days
    compacted one statement each, every transcript the same but for the quoted date (which
    templates mask), were one answer thirty times and halted at the tenth. Read as its
    output ("ALTER TABLE EXECUTE", a statement's command tag: a write's acknowledgement),
    they are thirty writes; an exit code other than 0 is a failure."""
    from streamguard.signals.facts import shell_transcript

    days = [e for n in range(1, 31) for e in gemini_shell(
        f"trino --execute \"ALTER TABLE page_views EXECUTE optimize WHERE event_date = DATE '2025-10-{n:02d}'\"",
        "ALTER TABLE EXECUTE")]
    assert [a.signal for a in alerts(days) if a.severity == "critical"] == []
    assert shell_transcript(days[1].result) == ("ALTER TABLE EXECUTE", None)
    failing = gemini_shell("pytest -x tests/test_a.py", "1 failed", code=1, stderr="E   AssertionError")[1]
    assert shell_transcript(failing.result) == ("1 failed\nE   AssertionError", "E   AssertionError")
    assert shell_transcript("Command: this is text a model wrote") is None
    killed = gemini_shell("npm run dev", "ready", code=0)[1].result.replace("Signal: (none)", "Signal: 15")
    assert shell_transcript(killed) == ("ready", "signal 15")
    # a file that holds a saved transcript, read by a tool that runs no command, is a file
    saved = [ToolCall(session="r", tool="read_file", args={"path": "logs/run.txt"}),
             ToolResult(session="r", tool="read_file", result=failing.result)]
    assert [a.signal for a in alerts(saved * 6) if a.signal == "failure-loop"] == []
    # the same failing command re-sent with nothing changed is still a failure loop
    rerun = [e for _ in range(8) for e in gemini_shell("pytest -x tests/test_a.py", "1 failed", code=1)]
    assert "failure-loop" in signals(rerun)


def codex_shell(command: str, output: str, code: int = 0, seconds: float = 0.4,
                as_text: bool = False) -> list[Any]:
    """Codex CLI's `shell` call (an argv) and its answer: the output in an envelope that
    says how the run ended and how long it took."""
    envelope = {"output": output, "metadata": {"exit_code": code, "duration_seconds": seconds}}
    call = ToolCall(session="r", tool="shell", args={"command": ["bash", "-lc", command], "workdir": "/src/app"})
    return [call, ToolResult(session="r", tool="shell",
                             result=json.dumps(envelope, separators=(",", ":")) if as_text else envelope)]


def test_a_runner_envelope_is_read_as_its_output_and_exit_code() -> None:
    """Codex CLI wraps each run's output with its exit code and duration. An agent that
    announced a patch and only re-read the same function, re-grepped the same sleep and
    checked `git diff --stat` lap after lap, for thirty calls, was never halted: each
    answer took another tenth of a second, so compared as the object it was, each was
    new. Read as its output, the laps are the same answers again."""
    from streamguard.signals.facts import runner_envelope

    lap = [("sed -n '86,100p' client.py", "    def _send_with_retry(self, batch):\n        time.sleep(1.0)"),
           ("rg -n 'time\\.sleep' client", "client.py:98:            time.sleep(1.0)"),
           ("git diff --stat", ""), ("rg -n 'import (time|random)' client.py", "3:import time")]
    for as_text in (False, True):
        trace = [e for n in range(8) for i, (command, output) in enumerate(lap)
                 for e in codex_shell(command, output, seconds=0.1 * ((n * 4 + i) % 9 + 1), as_text=as_text)]
        # the four-call lap, its answers unchanged lap after lap: a cycle
        assert [a.signal for a in alerts(trace) if a.severity == "critical"][:1] == ["alternating-tool-cycle"]
    first = codex_shell("pytest -q", "1 failed", code=1, seconds=2.5)[1].result
    assert runner_envelope(first) == ("1 failed", "exit code 1")
    assert runner_envelope(json.dumps(first)) == ("1 failed", "exit code 1")
    assert runner_envelope({"output": "ok", "metadata": {"exit_code": 0}}) == ("ok", None)
    # anything else in it makes it an answer of its own
    for other in ({"output": "x", "metadata": {"exit_code": 0}, "files": []},
                  {"output": "x", "metadata": {"exit_code": "0"}}, {"output": 3, "metadata": {}},
                  {"metadata": {"exit_code": 1}}, '{"output": "not json', '{"output": [1]}'):
        assert runner_envelope(other) is None, other
    # a sweep of different reads answering alike through the envelope is no stall
    headers = "HTTP/2 200\ncontent-type: application/json\ncache-control: no-store\nserver: envoy"
    sweep = [e for n in range(20) for e in codex_shell(
        f"curl -sI https://api.example.com/v1/{word(n)}", headers, seconds=0.1 * n)]
    assert [a.signal for a in alerts(sweep) if a.severity == "critical"] == []
    # Codex's own edits (`apply_patch` as a program, its argv) are writes: patch, run the
    # tests, a different failure each time, is debugging
    debugging: list[Any] = []
    for n in range(8):
        patch = f"*** Begin Patch\n*** Update File: client.py\n@@\n-    v{n}\n+    v{n + 1}\n*** End Patch"
        debugging += [ToolCall(session="r", tool="shell", args={"command": ["apply_patch", patch]}),
                      ToolResult(session="r", tool="shell", result={"output": "Done!", "metadata": {"exit_code": 0}})]
        debugging += codex_shell("pytest -q tests/test_client.py", f"1 failed: assert {word(n)} == 3", code=1)
    assert [a.signal for a in alerts(debugging) if a.severity == "critical"] == []
    # the same failing command re-sent with nothing changed is a failure loop
    rerun = [e for n in range(8) for e in codex_shell("pytest -x tests/test_a.py", "1 failed", code=1, seconds=1 + n)]
    assert "failure-loop" in signals(rerun)
    # a named tool's answer shaped the same is its own data (a long answer: a bare one
    # would be no evidence either way)
    log = "step 1: fetched 2,000 rows\nstep 2: wrote parquet to s3://lake/orders/\nstep 3: vacuum skipped"
    named = [e for n in range(12) for e in (
        ToolCall(session="r", tool="get_job", args={"job": "j1", "note": word(n)}),
        ToolResult(session="r", tool="get_job", result={"output": log, "metadata": {"exit_code": 0, "duration_seconds": n}}))]
    assert "result-stall" not in signals(named)
    unwrapped = [e for n in range(12) for e in (
        ToolCall(session="r", tool="get_job", args={"job": "j1", "note": word(n)}),
        ToolResult(session="r", tool="get_job", result={"output": log, "metadata": {"exit_code": 0, "duration_seconds": 1}}))]
    assert "result-stall" in signals(unwrapped)  # the same object each time: stale


def test_a_mini_swe_agent_observation_is_read_as_its_output_and_exit_code() -> None:
    """mini-SWE-agent shows the model `<returncode>N</returncode>\n<output>...</output>`;
    a runtime that publishes it as the result: every silent `sed -i` of a twenty-file
    migration answered the same markup (halted at the 27th call), a failing build no
    failure."""
    from streamguard.signals.facts import returncode_report

    def observed(code: int, output: str) -> str:
        return f"<returncode>{code}</returncode>\n<output>\n{output}</output>"

    assert returncode_report(observed(0, "")) == ("", None)
    assert returncode_report(observed(2, "build failed\n")) == ("build failed\n", "exit code 2")
    for other in ("<returncode>x</returncode><output>a</output>", "<returncode>1</returncode> no output",
                  "<returncode>" + "1" * 30 + "</returncode><output>a</output>",
                  # digits str.isdigit takes and int() does not: no exception, no report
                  "<returncode>\u00b2</returncode><output>a</output>", "<returncode>--1</returncode><output>a</output>",
                  "<returncode>-\u00b2</returncode><output>a</output>", "<returncode>\u0663</returncode><output>a</output>"):
        assert returncode_report(other) is None, other
    sweep: list[Any] = []
    for n in range(20):
        path = f"core/{word(n)}/{word(n + 7)}.go"
        sweep += [sh(f"grep -n 'ioutil\\.' {path}"), out(observed(0, f"{10 + n}:\t\tdata, err := ioutil.ReadFile(...\n"))]
        sweep += [sh(f"sed -i -e 's/ioutil\\.ReadFile/os.ReadFile/g' {path} && go build ./core/..."), out(observed(0, "\n"))]
    assert [a.signal for a in alerts(sweep) if a.severity == "critical"] == []
    rerun = [e for _ in range(8) for e in (sh("go build ./..."), out(observed(1, "undefined: ioutil\n")))]
    assert "failure-loop" in signals(rerun)


def test_an_ide_agents_run_report_is_read_as_its_output_and_exit_code() -> None:
    """Cline and Roo Code answer `execute_command` with a report of the run before its
    output; read with it, every silent `git add` was the same answer, and a failing test
    run no failure at all."""
    from streamguard.signals.facts import run_report

    roo = "Command executed in terminal  within working directory '/src/app'. Exit code: 0\nOutput:\n"
    failed = "Command executed in terminal  within working directory '/src/app'. Command failed with exit code 1.\nOutput:\n1 failed"
    assert run_report(roo) == ("", None)
    assert run_report(failed) == ("1 failed", "exit code 1")
    assert run_report("Command executed.\nOutput:\n43") == ("43", None)
    assert run_report("Command completed.\nExit code: 2\nOutput:\nerr") == ("err", "exit code 2")
    for other in ("Command executed", "Command is still running.\nOutput:\nx", "Commands executed.\nOutput:\nx",
                  "Command executed.\n" + "x\n" * 5 + "Output:\nx"):
        assert run_report(other) is None, other
    rerun = [e for _ in range(8) for e in (sh("npm test", "execute_command"), out(failed, "execute_command"))]
    assert "failure-loop" in signals(rerun)


def test_a_roo_code_file_write_report_without_problems_acknowledges_the_write() -> None:
    from streamguard.signals.base import ResultView, is_write_acknowledgement
    from streamguard.signals.facts import FLAG_WRITE

    def report(path: str, problems: bool = False) -> str:
        return (f"<file_write_result>\n<path>{path}</path>\n<operation>modified</operation>\n"
                + ("<problems>\nsrc/a.ts:3 - error TS2322\n</problems>\n" if problems else "")
                + "<notice>\n<i>You do not need to re-read the file, as you have seen all changes</i>\n"
                "<i>Proceed with the task using these changes as the new baseline.</i>\n</notice>\n</file_write_result>")

    def view(payload: str, flags: int = FLAG_WRITE) -> ResultView:
        return ResultView(ToolResult(session="r", tool="apply_diff", result=payload), False, 1, len(payload),
                          call_key=7, call_flags=flags, action="apply_diff")

    assert is_write_acknowledgement(view(report("src/a.ts")))
    assert not is_write_acknowledgement(view(report("src/a.ts", problems=True)))
    assert not is_write_acknowledgement(view(report("src/a.ts"), flags=0))  # not a write
    assert not is_write_acknowledgement(view(report("x" * 2000)))


def test_a_run_record_is_read_as_its_output_and_exit_code() -> None:
    """A runner's answer recorded as `{"stdout", "stderr", "exit_code"}` (and its duration)
    is its output; an exit code other than 0 is a failure whose text is what the run
    printed. A named tool's answer of that shape is its own data."""
    from streamguard.signals.facts import run_record

    assert run_record({"stdout": "1 failed", "stderr": "E  boom", "exit_code": 1}) == (
        "1 failed\nE  boom", "1 failed\nE  boom")
    assert run_record({"stdout": "", "stderr": "", "returncode": 2, "duration_ms": 4}) == ("", "exit code 2")
    assert run_record({"stdout": "ok", "exit_code": 0, "elapsed": 1.5}) == ("ok", None)
    for other in ({"stdout": "ok"}, {"stdout": "ok", "exit_code": "0"}, {"stdout": 1, "exit_code": 0},
                  {"stdout": "ok", "exit_code": 0, "files": ["a"]}, {"stderr": "x", "exit_code": 1}):
        assert run_record(other) is None, other

    def run(tool: str, n: int) -> list[Any]:
        return [ToolCall(session="r", tool=tool, args={"command": "pytest -x tests/test_a.py"}),
                ToolResult(session="r", tool=tool, result={
                    "stdout": "1 failed", "stderr": "", "exit_code": 1, "duration_seconds": 1 + n / 10})]

    assert "failure-loop" in signals([e for n in range(8) for e in run("execute_bash", n)])
    assert "failure-loop" not in signals([e for n in range(8) for e in run("run_tests_tool", n)])


@pytest.mark.parametrize(("answer", "ack"), [
    ("ALTER TABLE", True), ("INSERT 0 1", True), ("BEGIN\nUPDATE 3\nCOMMIT", True),
    ("CREATE INDEX", True), ("ALTER TABLE EXECUTE", True),
    ("ERROR:  relation does not exist", False), ("3 rows updated in table orders", False),
    # no row matched: nothing changed
    ("UPDATE 0", False), ("BEGIN\nDELETE 0\nCOMMIT", False),
    # keywords that are no tag, however many (read one line at a time: no backtracking)
    ("SET " * 49 + "x", False),
])
def test_a_database_clients_command_tag_acknowledges_a_write(answer: str, ack: bool) -> None:
    from streamguard.signals.base import _command_tags

    assert _command_tags(answer) is ack


@pytest.mark.parametrize(("command", "write"), [
    ('psql "$URL" -c "ALTER TABLE t ADD COLUMN a int"', True),
    ('trino --execute "INSERT INTO t SELECT * FROM s"', True),
    ('bq query --use_legacy_sql=false "DELETE FROM d.t WHERE x = 1"', True),
    ("mysql -e 'UPDATE t SET a = 1'", True),
    ('psql -c "BEGIN; UPDATE t SET a = 1; COMMIT"', True),
    # a quoted statement that is no client's argument is words
    ('psql -c "SELECT 1" && echo "DELETE FROM jobs is next"', False),
    ('grep "DELETE FROM" migrations/*.sql | psql -c "SELECT 1"', False),
    ('psql -Atc "select count(*) from t" | wc -l', False),
    ('clickhouse-client --query "SELECT 1"', False),
    ('echo "update t set a = 1"', False),  # no database client: words
])
def test_a_database_client_given_a_write_statement_writes(command: str, write: bool) -> None:
    assert runner_facts({"command": command}).write is write


def openhands_observed(output: str, code: int) -> str:
    """OpenHands' observation of a command: its output, then the lines it writes after."""
    return (f"{output}\n[The command completed with exit code {code}.]\n"
            "[Current working directory: /workspace/sphinx-doc__sphinx__3.5]\n"
            "[Python interpreter: /opt/miniconda3/envs/testbed/bin/python]\n"
            f"[Command finished with exit code {code}]")


def test_an_openhands_observation_is_read_as_its_output_and_exit_code() -> None:
    """OpenHands closes its observation of a command with its metadata lines and ``[Command
    finished with exit code N]``. Read as sent, a failing test was no failure, and pytest's
    temporary folder in its header (``pytest-4``, ``pytest-6``) made every re-run a new
    answer: an agent re-running its own failing test unchanged was never halted."""
    from streamguard.signals.facts import command_observation

    assert command_observation(openhands_observed("1 failed in 0.81s", 1)) == ("1 failed in 0.81s", "exit code 1")
    assert command_observation(openhands_observed("ok", 0)) == ("ok", None)
    assert command_observation("\n[Command finished with exit code 0]") == ("", None)
    assert command_observation("[Command finished with exit code 2]") == ("", "exit code 2")
    for other in ("x\n[Command finished with exit code x]", "x[Command finished with exit code 0]",
                  "x\n[Command finished with exit code 0] and more", "[Command finished with exit code \u00b2]",
                  "x\n[Command finished with exit code " + "1" * 30 + "]"):
        assert command_observation(other) is None, other
    # the lines before the closing one are taken off only when they are its notes
    assert command_observation("a\n[Python interpreter: /py]\n[Command finished with exit code 0]") == ("a", None)
    assert command_observation("[note] a\n[Command finished with exit code 0]") == ("[note] a", None)

    def run(n: int, output: str, code: int, is_input: bool) -> list[Any]:
        args: dict[str, Any] = {"command": "cd /workspace && python -m pytest tests/test_epub.py"}
        if is_input:
            args["is_input"] = "false"
        header = f"base tempdir: /tmp/pytest-of-root/pytest-{n % 7}\n"
        return [ToolCall(session="r", tool="execute_bash", args=args),
                ToolResult(session="r", tool="execute_bash", result=openhands_observed(header + output, code))]

    rerun = [e for n in range(10) for e in run(n, "FAILED tests/test_epub.py - assert False\n1 failed", 1, n % 2 == 1)]
    assert "failure-loop" in signals(rerun)
    # edit, run, fail, edit...: debugging, not a loop
    debugging: list[Any] = []
    for n in range(10):
        debugging += [ToolCall(session="r", tool="str_replace_editor",
                               args={"command": "str_replace", "path": "/workspace/sphinx/ext/viewcode.py",
                                     "old_str": f"v{n}", "new_str": f"v{n + 1}"}),
                      ToolResult(session="r", tool="str_replace_editor", result="The file has been edited.")]
        debugging += run(n, f"FAILED tests/test_epub.py - assert {word(n)} == 'toc'\n1 failed", 1, False)
    assert [a.signal for a in alerts(debugging) if a.severity == "critical"] == []
    # only OpenHands' own runner's answers are read so: another shell's tail of an
    # OpenHands log is that log, and no failure
    from streamguard.signals.facts import runner_answer

    log = openhands_observed("FAILED tests/test_epub.py", 1)
    assert runner_answer(log) is None
    assert runner_answer(log, exit_tail=True) == ("FAILED tests/test_epub.py", "exit code 1")
    tails = [e for n in range(10) for e in (sh("tail -n 4 /var/log/openhands/run.log", "Bash"),
                                              out(log, "Bash"))]
    assert "failure-loop" not in signals(tails)
    # an output that opens like another runtime's report is still read by how it closes
    missing = openhands_observed("Command 'pytest' not found, did you mean:", 127)
    assert runner_answer(missing, exit_tail=True) == ("Command 'pytest' not found, did you mean:",
                                                     "exit code 127")
    # a named tool whose answer closes so is read as sent (its data)
    named = [e for n in range(10) for e in (
        ToolCall(session="r", tool="read_log", args={"name": "build"}),
        ToolResult(session="r", tool="read_log", result=openhands_observed(f"build {n}", 1)))]
    assert "failure-loop" not in signals(named)


def sdk_observed(output: str, code: int, notes: bool = False) -> str:
    """OpenHands' observation closed by ``[The command completed with exit code N.]``: alone
    (its software-agent SDK's terminal), or followed by the directory and interpreter."""
    text = f"{output}\n[The command completed with exit code {code}.]"
    if notes:
        text += "\n[Current working directory: /workspace]\n[Python interpreter: /opt/conda/bin/python]"
    return text


@pytest.mark.parametrize(("tool", "notes"), [("terminal", False), ("execute_bash", True), ("execute_bash", False)])
def test_an_openhands_observation_closed_by_its_completed_line_is_read_as_its_output(tool: str, notes: bool) -> None:
    """Without the closing ``[Command finished ...]`` line, OpenHands' observation was read as
    sent: every answer said "completed", so a training log tailed between sleeps of two
    lengths was a job said to be over, its polls a cycle (a healthy fine-tuning run was
    halted), and a failing test was no failure."""
    from streamguard.signals.facts import command_observation

    assert command_observation(sdk_observed("ok", 0, notes)) == ("ok", None)
    assert command_observation(sdk_observed("1 failed", 1, notes)) == ("1 failed", "exit code 1")
    for other in ("x\n[The command completed with exit code 0.] and more]",
                  "x\n[The command completed with exit code 0.]\n[other note]",
                  "x\n[The command completed with exit code 0.]\n[Current working directory: /w] more",
                  "x[The command completed with exit code 0.]",
                  "x\n[The command completed with exit code zero.]"):
        assert command_observation(other) is None, other

    poll: list[Any] = []
    for n in range(8):
        step = 200 * (n + 1)
        poll += [sh(f"sleep {900 if n % 2 else 600}; tail -n 2 /workspace/train.log", tool),
                 out(sdk_observed(f"epoch 1/2 | step {step}/4488 | loss 0.0{90 - n} | 58.{n} samples/s", 0,
                                  notes), tool)]
    assert [a.signal for a in alerts(poll) if a.severity == "critical"] == []
    rerun = [e for n in range(10) for e in (
        sh("cd /workspace && python -m pytest tests/test_epub.py -x", tool),
        out(sdk_observed("FAILED tests/test_epub.py::test_toc - assert False\n1 failed", 1, notes), tool))]
    assert "failure-loop" in signals(rerun)


def test_a_codex_exec_command_report_is_read_as_its_output_and_exit_code() -> None:
    """Codex CLI's ``exec_command`` answers open with a chunk id new for every call. Read as
    sent, no two answers were alike: ``git commit`` answered "nothing to commit, working tree
    clean" lap after lap (add and commit, status, add and commit) was never halted."""
    from streamguard.signals.facts import unified_exec_report

    def report(chunk: str, code: str, output: str) -> str:
        return (f"Chunk ID: {chunk}\nWall time: 0.1500 seconds\nProcess exited with code {code}\n"
                f"Original token count: 16\nOutput:\n{output}")

    assert unified_exec_report(report("cc6926", "1", "nothing to commit")) == ("nothing to commit", "exit code 1")
    assert unified_exec_report(report("007296", "0", "a4d91c0 feat")) == ("a4d91c0 feat", None)
    running = "Chunk ID: 9f3a1c\nWall time: 10.0021 seconds\nProcess running with session ID 3\nOutput:\nListening"
    assert unified_exec_report(running) == ("Listening", None)
    recorded = "Command: /bin/zsh -lc 'ls'\n" + report("36c2f2", "0", "a\nb")
    assert unified_exec_report(recorded) == ("a\nb", None)
    for other in ("Chunk ID: 1\nOutput:\nx", "Chunk ID: a b\nWall time: 1 seconds\nOutput:\nx",
                  "Chunk ID: " + "f" * 40 + "\nWall time: 1 seconds\nOutput:\nx"):
        assert unified_exec_report(other) is None, other

    clean = "On branch feat/read-timeout\nnothing to commit, working tree clean"
    laps: list[Any] = []
    for n in range(8):
        laps += [sh("git add -A && git commit -m 'feat: read timeout'", "exec_command"),
                 out(report(f"{n:06x}", "1", clean), "exec_command"),
                 sh("git status", "exec_command"),
                 out(report(f"{n + 100:06x}", "0", clean), "exec_command")]
    assert "alternating-tool-cycle" in [a.signal for a in alerts(laps) if a.severity == "critical"]
    # a log followed while it grows is news at every read, whatever the chunk ids
    follow: list[Any] = []
    for n in range(8):
        follow += [sh("sleep 30; tail -n 1 build.log", "exec_command"),
                   out(report(f"{n:06x}", "0", f"[{n + 1}/40] compiling crate {n}"), "exec_command")]
    assert [a.signal for a in alerts(follow) if a.severity == "critical"] == []


def test_a_codex_text_report_is_read_as_its_output_and_exit_code() -> None:
    """Codex CLI shows the model `Exit code: N / Wall time: T seconds / Output:` before a
    command's output. Read as sent, the wall time made every answer new and hid the figures
    after it: a canary's error rate read between waits (`0.0026`, then `0.0031`) was one
    answer with its digits out, and a healthy watch was halted as a cycle."""
    from streamguard.signals.facts import exit_report

    assert exit_report("Exit code: 0\nWall time: 0.9 seconds\nOutput:\n0.0026\n") == ("0.0026\n", None)
    assert exit_report("Exit code: 1\nWall time: 12 seconds\nTotal output lines: 812\nOutput:\nFAIL x") == (
        "FAIL x", "exit code 1")
    for other in ("Exit code: 0\nOutput:\nx", "Exit code: one\nWall time: 1 seconds\nOutput:\nx",
                  "Exit code: 0\nWall time: 1 minutes\nOutput:\nx", "Exit code: " + "9" * 30):
        assert exit_report(other) is None, other

    def watch(rates: list[str]) -> list[Any]:
        trace: list[Any] = []
        for n, rate in enumerate(rates):
            trace += [sh("sleep 240; gh run view 1809 --json status --jq .status", "shell"),
                      out(f"Exit code: 0\nWall time: 241.{n} seconds\nOutput:\nin_progress\n", "shell"),
                      sh("curl -s \"$PROM_URL/api/v1/query\" --data-urlencode 'query=rate5xx'", "shell"),
                      out(f"Exit code: 0\nWall time: 0.{n + 1} seconds\nOutput:\n{rate}\n", "shell")]
        return trace

    assert [a.signal for a in alerts(watch([f"0.00{21 + 3 * n}" for n in range(8)]))
            if a.severity == "critical"] == []
    # the same failing test re-run as reported: a failure, and the same one again
    rerun = [e for n in range(8) for e in (
        sh("go test ./ledger -run TestRound", "shell"),
        out(f"Exit code: 1\nWall time: 0.{n + 2} seconds\nOutput:\n--- FAIL: TestRound\nFAIL\n", "shell"))]
    assert "failure-loop" in signals(rerun)


def test_reading_code_that_sleeps_first_takes_no_time_however_it_is_shaped() -> None:
    """Blank lines and imports before the sleep are read once each (a pattern that could
    split them two ways took minutes on 100 KB)."""
    import time

    started = time.process_time()
    runner_facts({"code": "import time" + " \n" * 50_000 + "sleep"}, code_tool=True)
    runner_facts({"code": "import time\n\n\n" * 18 + "# sleep"}, code_tool=True)
    assert time.process_time() - started < 0.5
