"""Facts about a call that several signals share, computed once per call.

Most tools say what they do in their name: ``read_file``, ``list_agents``,
``update_reservation``. A *command runner* does not: ``bash``, ``python``,
``terminal``, ``execute_command`` or a ``str_replace_editor`` run whatever their
arguments say, so an agent whose only tool is ``bash`` makes every call under
one name. Name-based rules (``repeated-tool-name``, the one-tool-failing rule of
``tool-failure-guidance``) would then compare nothing but the fact that the
agent is working. For these tools the *action* stands in for the name: the
program and its sub-command (``git diff``, ``pytest``, ``grep``), or the editor
command and its path (``view src/app.py``). When no action can be read (free
code handed to a ``python`` tool), the action is empty and the name-based rules
stand down for that call rather than guess.

Which tools are command runners is policy (``[command_runners] tools``, globs,
case-insensitive); the defaults are the usual names.

Three more facts per call, all cheap and conservative in the same direction:

``write``
    The call changes something. The event's ``kind`` wins; otherwise the
    verification machine's name classification (``[verification] write_tools``);
    for command runners a heuristic over the command (below). Signals use it to
    tell "edit, re-run, fail" (work) from "re-run, fail, re-run" (a loop), so a
    doubtful command is counted as a write: a missed write can make a debugging
    session look like a loop, which is worse than missing a loop.
``search``
    The call looks something up (``grep``, ``rg``, ``find``, SWE-agent's
    ``search_dir``; or a tool the classification calls ``resolve``; or a read whose
    filter matches by a pattern, OData's ``substringof(`` or SQL's ``LIKE 'x%'``:
    :func:`argument_facts`). A search that finds nothing fails with an answer, not with
    an error.
``wait``
    The call waits on purpose: a command line with a ``sleep`` in it (``sleep 60``,
    ``until curl ...; do sleep 2; done``), unless the sleep follows a job the line
    sends to the background (``nohup python train.py ... & sleep 45; tail f0.log``:
    the launch with its check, and a training job relaunched unchanged into the same
    out-of-memory traceback is the same write answered alike), or an empty
    command sent to a runner, which is how OpenHands' agents wait for more output
    of a command still running. Identical answers to a wait are what waiting
    looks like, not a loop: the loop detectors do not read waits
    (``Signal.sees_waits``), and ``repeated-tool-call`` reads a run of them as a poll.
``waits_first``
    A line that opens with ``sleep`` and then reads (``sleep 120; ray job status
    ...``, ``sleep 60 && gh run view 42``; no write, no loop, no blocking command
    after it) is no wait but a read asked after a deliberate wait: its answer is
    evidence like any read's, judged by the polls' rules (``poll_answer``: a status
    under way, or a value watched, is a poll's answer; a job that says FAILED
    again and again is a loop, however long each sleep). ``repeated-tool-call``
    reads a run of them as a poll and ``no-new-state`` skips them, as for waits.
``action``
    As above; the tool name for tools that are not command runners. The
    program is found behind what only sets the stage or wraps it: environment
    assignments, ``cd``, ``source``, ``export``, ``conda activate``; ``sudo -u
    user``, ``timeout -s KILL 30``, ``env``, ``nohup``; ``bash -lc "..."`` and
    ``sh -c '...'`` (an argument list such as ``["bash", "-lc", "..."]`` is
    joined first); ``conda run -n env``. Comment lines and shebangs run
    nothing and are skipped. Compose as a plugin is the program it replaces:
    ``docker compose ps`` is ``docker-compose ps``, a look, and ``docker compose up`` a
    write (``docker compose`` was a write whatever followed it, so a health check
    polled after each ``sleep 5`` was no poll, and was halted at its fifth status); a
    command run in a container (``docker exec db psql -c ...``, ``docker compose exec -T
    db psql ...``) writes when the command it runs does (the action stays the exec).

The command line is read from the ``command``, ``cmd``, ``commands``, ``input`` or
``shell_command`` argument (``CommandLine``, ``commandLine`` or ``command_line`` as some
Windows and IDE runtimes send it), or a code executor's ``code`` when its ``language`` is a
shell (``{"language": "sh", "code": "sleep 90; squeue -j 4418027"}``, as AutoGen's code
executors send it; Python code is free code), or the program and its argument list of
the exec shape (``{"program": "sleep", "arguments": ["90"]}``). Free code that only
sleeps (``import time; time.sleep(20)``, ``await asyncio.sleep(5)``) is a wait: an agent
whose only tool runs code waits that way between polls. Free code that opens with a
sleep and then only reads, with no loop (``time.sleep(180)``, then ``describe_step(...)``),
is a read asked after a deliberate wait (``waits_first``), as a shell's ``sleep 120; ray
job status`` is: in a blind batch an EMR step polled so every three minutes, eleven times
"RUNNING", was halted at its fourth.

Shell heuristic for writes: any segment of the command line (split at ``&&``,
``||``, ``;``, ``|`` and newlines) that runs a program which changes files or
the environment (``sed -i``, ``perl -i``, ``tee``, ``patch``, ``git apply`` and
the other working-tree ``git`` sub-commands, ``cp``, ``mv``, ``rm``, ``touch``,
``mkdir``, package installs, builds such as ``make`` or ``mvn compile``), an
output redirection to a file (``>``, ``>>``; ``2>&1``, ``/dev/null`` and a ``>`` in a
quoted word of a one-line command, ``grep -n '->' src``, do not count, unless the line
runs a quoted line of its own, ``bash -c "make > log"``, ``ssh host "..."``, ``awk``,
or has an escape or a command substitution), or a here-document (a here-string, ``<<<``,
unless its text opens with a word of a look: ``direct <<< "select process ..."``); and a line that only changes the shell a later call runs
in (``export JAVA_HOME=...``, ``cd build``, ``source .venv/bin/activate``, ``conda
activate env``, ``unset``, ``pushd``): re-running a failed command after it is a retry in
a changed environment, not a loop. Editor commands ``create``, ``str_replace``,
``insert``, ``edit``, ``write``, ``undo_edit`` and ``append`` are writes; ``view``
is not.

A computer-use tool (``computer``, ``computer_*``: one tool whose ``action`` argument
says what it does, as in the computer-use tools of the model vendors) is read the same
way: the action stands in for the name (``left_click``); a click, a drag, a
key, typed text, a scroll or a mouse move changes what is on the screen and is a write
(its "clicked" is a write's acknowledgement); ``wait`` waits; ``screenshot``, ``zoom``
and ``cursor_position`` read.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from itertools import islice
from typing import Any

from ..canonical import as_object

DEFAULT_COMMAND_RUNNERS = (
    "bash", "sh", "zsh", "shell", "shell_*", "*_shell", "run_shell*", "powershell", "cmd",
    "python", "python3", "ipython", "terminal", "terminal_*", "*_terminal*", "*terminal",
    "execute*",
    "exec", "exec_command", "run_command", "run_cmd", "run_terminal_cmd", "str_replace_editor",
    "str_replace_based_edit_tool", "*_editor", "editor", "computer", "computer_*",
    "code_executor", "*_code_executor", "code_exec*", "run_code",
    # code interpreters and notebook kernels: OpenAI's hosted `code_interpreter`,
    # LangChain's `python_repl_ast` and `Python_REPL`, a kernel's `run_cell`, Jupyter MCP
    # servers' `append_execute_code_cell` (not their `edit_code_cell`, `insert_code_cell`:
    # edits of a notebook, named so)
    "code_interpreter", "*_code_interpreter", "python_repl*", "*_repl", "repl", "run_cell",
    "*execute_code_cell", "run_code_cell", "exec_code_cell", "run_python*",
    # Codex CLI's `write_stdin` to a running command (nothing: read its output); a call
    # of any tool with `keystrokes` for a terminal (Terminal-Bench's Terminus) is read as
    # a runner's too (the watchdog)
    "write_stdin",
)

DEFAULT_WAIT_TOOLS = (
    "wait", "wait_*", "*_wait", "sleep", "sleep_*", "*_sleep", "*wakeup*", "*wake_up*",
)
"""Tools whose name says they wait (``wait(seconds=120)``, ``wait_for_deployment``, an
agent's ``schedule_wakeup(minutes=20)``, answered when it wakes): a call
of one is a wait, like ``sleep 60`` through a shell (``CallFacts.wait``). A tool that
waits for a condition or a time by its arguments (the Playwright MCP server's
``browser_wait_for``) waits when it is given a time alone (:func:`argument_facts`)."""

FLAG_WRITE, FLAG_SEARCH, FLAG_RUNNER, FLAG_WAIT, FLAG_SHELL, FLAG_ASK = 1, 2, 4, 8, 16, 32
FLAG_LONG_POLL, FLAG_READ, FLAG_WAITS_FIRST, FLAG_RESTART, FLAG_AWAITS_OWN = 64, 128, 256, 512, 1024
FLAG_ASKED = 2048
"""Bits of a pending call's facts (these and the six above). ``FLAG_SHELL``: its only
write is a change of the shell (``export``, ``cd``, ``source``...), with no file written
(see :attr:`CallFacts.shell`). ``FLAG_ASK``: the call asks the user
(:attr:`CallFacts.ask`). ``FLAG_LONG_POLL``: an argument asks the tool to wait for news
before it answers (:func:`asks_to_wait`). ``FLAG_READ``: the call is known to only look
(:attr:`CallFacts.read`). ``FLAG_RESTART``: the call restarts something
(:func:`names_restart`, :func:`commands_restart`); its successful answer starts the
session's restart wait. ``FLAG_AWAITS_OWN``: a read that names an id one of the session's
acts (a call not known to only read, no command runner's) handed back in an object answer,
not one it was sent nor a date (``SessionState.submitted``: the job it submitted, the render it
queued), as a whole word, whose empty answer is nothing yet from that work
(:func:`says_in_progress`). ``FLAG_ASKED``: the call is one of the runs its user asked for,
within their count (``SessionState.asked_runs``)."""

LONG_POLL_KEYS = frozenset({
    "wait", "wait_seconds", "wait_secs", "wait_s", "wait_ms", "wait_time", "wait_time_seconds",
    "wait_timeout", "waitSeconds", "waitTime", "waitTimeSeconds", "WaitTimeSeconds",
    "waitTimeout", "max_wait", "max_wait_seconds", "maxWait", "maxWaitSeconds", "long_poll",
    "longPoll", "poll_timeout", "pollTimeout", "block_ms",
})
"""Argument names by which a call asks its tool to hold the answer until something changes
or the time is up (``oauth_status(flow_id=..., wait_seconds=30)``, SQS's ``WaitTimeSeconds``,
``XREAD BLOCK``). When such a call's answer comes back after ``[waits] pause_seconds``, the
tool waited on the agent's behalf: the watchdog counts it as a wait, like a ``sleep 30``
before an instant status check. Exact names: ``timeout`` is not among them (a command
runner's ``timeout=120`` bounds a command, it asks for no wait)."""


_BOUNDED_LISTEN = re.compile(
    # `timeout`, its options (a value after `-k`, `-s`, `--kill-after`, `--signal`; any
    # other option alone), a duration, then the program, its directory aside: possessive,
    # so no option list can be split two ways
    r"\A\s*+(?:sudo\s++)?timeout\s++"
    r"(?:(?:-[ks]|--kill-after|--signal)(?:=|\s++)\S++\s++|-[\w-]++\s++)*+"
    r"\d++(?:\.\d++)?+[smhd]?\s++(?:sudo\s++)?(?:[\w.-]*+/)*+(?P<program>[\w.-]++)(?P<rest>[^\n]{0,400})"
)
_LISTENERS = frozenset({
    "candump", "tcpdump", "tshark", "dumpcap", "mosquitto_sub", "kafka-console-consumer",
    "kafka-console-consumer.sh", "inotifywait", "btmon", "evtest", "websocat", "minicom", "picocom",
})
"""Programs that listen for what comes until they are stopped (but a capture read from a
file, ``tcpdump -r``, answers at once)."""
_FILE_READ = re.compile(r"(?:^|\s)-r(?:\s|$)")


def _flag(letters: str, long: str) -> re.Pattern[str]:
    """An option of one of ``letters``, alone or among short options (``-n5 -f``, ``-fu
    api``), or ``--long`` (``=false`` turns it off)."""
    return re.compile(
        # (not possessive: the letter sought may be the last of the run; the text read is
        # at most 400 characters, so a long run costs little)
        rf"(?:^|\s)(?:-[a-zA-Z]*[{letters}][a-zA-Z]*(?![\w=])|--{long}(?:=(?!false\b)\w++)?+(?![\w=-]))"
    )


_LISTENING_FORMS: dict[str, Any] = {
    # a program that listens only in one of its forms, and the form, read up to the first
    # pipe or list separator (`kubectl logs x --tail=50 | grep -f p` does not follow)
    "tail": _flag("fF", "follow"),
    "journalctl": _flag("f", "follow"),
    "dmesg": _flag("wW", "follow"),
    "cat": re.compile(r"\A\s++/dev/(?!null\b|zero\b|u?random\b)"),
    "udevadm": re.compile(r"\A\s++monitor\b"),
    "nc": re.compile(r"(?:^|\s)-[a-zA-Z]*l"),
    "ncat": re.compile(r"(?:^|\s)-[a-zA-Z]*l"),
    "kcat": re.compile(r"(?:^|\s)-C\b"),
    "kafkacat": re.compile(r"(?:^|\s)-C\b"),
}
"""Programs that listen in one form only (``tail -f``, ``journalctl -f``, ``dmesg -w``, ``cat
/dev/ttyUSB0``, ``nc -l``, ``kcat -C``; ``kubectl logs -f``, ``kubectl get -w`` and
``kubectl wait`` below): in any other form they answer at once, and a slow answer is no
wait."""
_KUBECTL_FOLLOW = _flag("f", "follow")
_KUBECTL_WATCH = _flag("w", "watch")
_SEGMENT_END = re.compile(r"[|;&]")


def _kubectl_listens(rest: str) -> bool:
    words = rest.split()
    verb = next((w for w in words if not w.startswith("-")), "")
    if verb == "wait":
        return True
    if verb == "logs":
        return _KUBECTL_FOLLOW.search(rest) is not None
    if verb == "get":
        return _KUBECTL_WATCH.search(rest) is not None
    return False


def listens_bounded(command: str) -> bool:
    """Whether a command line listens for what comes, for a bounded time (``timeout 120
    candump can0,3A1:7FF``, ``timeout 60 tail -f app.log``, ``timeout 300 mosquitto_sub -t
    alarms``): a long poll through a shell. When its answer comes back after ``[waits]
    pause_seconds``, it waited on the agent's behalf, as a call with ``wait_seconds=30``
    does (``FLAG_LONG_POLL``). A ``timeout`` before a program that answers at once (``timeout
    600 make``, ``timeout 5 tail -n 20 app.log``) bounds a command and asks for no wait."""
    if "timeout" not in command[:64]:
        return False
    found = _BOUNDED_LISTEN.match(command, 0, 512)
    if found is None:
        return False
    program, rest = found["program"], found["rest"]
    end = _SEGMENT_END.search(rest)
    if end is not None:
        rest = rest[: end.start()]
    if program in _LISTENERS:
        return _FILE_READ.search(rest) is None
    if program == "kubectl":
        return _kubectl_listens(rest)
    form = _LISTENING_FORMS.get(program)
    return form is not None and form.search(rest) is not None


def asks_to_wait(args: dict[Any, Any]) -> bool:
    """Whether a call's arguments ask its tool to wait (a long poll): one of
    :data:`LONG_POLL_KEYS` with a positive number of time (``wait_seconds=30``, ``"30"``),
    or ``long_poll=true``. ``wait=false``, ``wait_seconds=0`` or a runner's ``wait=true``
    (wait for the command to finish) ask for none."""
    for key in LONG_POLL_KEYS.intersection(args):
        value = args[key]
        kind = type(value)
        if kind is bool:
            if value and key in ("long_poll", "longPoll"):
                return True
        elif kind is int or kind is float:
            if value > 0:
                return True
        elif kind is str and 0 < len(value) <= 12:
            try:
                if float(value) > 0:
                    return True
            except ValueError:
                pass
    return False

# ------------------------------------------------------------------ ids handed back

HANDED_BACK = "<id handed back>"
"""What a call's argument reads as, in its key (with the id's place in the answer), when it
names an id a write made again handed back (:func:`handed_ids`), until the next write."""
HANDED_KEPT = 8
"""Ids kept from one write's answer, and values of one write's call it did not hand back."""
_HANDED_READ = 1024
"""Characters of a write's answer searched for the ids it hands back."""
_HANDED_VALUES = 32
"""Values of an object read for ids (of a write's arguments, of its answer and of each
object directly in it)."""
_ID_TOKEN = re.compile(r"[A-Za-z0-9]+(?:[_-][A-Za-z0-9]+)*")
_DIGITS = frozenset("0123456789")


def id_text(value: object) -> str | None:
    """``value`` as an id's text when it could be one: a string of 3 to 80 letters, digits,
    ``_`` and ``-`` with a digit in it (``drf_4471``, ``INV-1001``, a UUID), or an integer
    of three digits or more. Anything else (words, paths, sentences, small numbers) is
    named for what it says, never handed back."""
    if type(value) is int:
        # (bounded: a number of thousands of digits costs its conversion, and is no id)
        return str(value) if 100 <= value < 10**20 else None
    if type(value) is not str or not 3 <= len(value) <= 80:
        return None
    if _DIGITS.isdisjoint(value) or _ID_TOKEN.fullmatch(value) is None:
        return None
    return value


def sent_values(args: dict[Any, Any]) -> tuple[str, ...]:
    """The id-like values a write's call sent (at most :data:`HANDED_KEPT`): an answer
    that names them echoes them, it hands nothing new back."""
    out: list[str] = []
    for value in islice(args.values(), _HANDED_VALUES):
        text = id_text(value)
        if text is not None:
            out.append(text)
            if len(out) >= HANDED_KEPT:
                break
    return tuple(out)


ITEM_CHARS = 128
"""Longest value read as the item an act was about (:func:`act_items`)."""


_ITEM_TIME_WORDS = frozenset({
    "at", "ts", "time", "timestamp", "date", "datetime", "when", "nonce", "attempt", "retry",
    "idempotency", "trace", "correlation", "seq",
})
"""Words of an argument's name that say the value is the call's own (a time, a nonce, an
attempt, an idempotency key), not the item it is about (:func:`act_items`)."""
TIME_LIKE = re.compile(r"\d{4}-\d\d-\d\d|\d{8}T|\d\d:\d\d")
"""An id-like word that is a date or a time (``2025-06-01``, ``20250601T1022``, ``10:22``)."""


def act_items(args: dict[Any, Any]) -> tuple[str, ...]:
    """The values that name what an act was about (at most :data:`HANDED_KEPT`): its
    id-like values (:func:`id_text`), then any other short token with a digit in it and no
    space (a market ``61299001-total_goals_0.5``, an object key ``img/p123.jpg``). Words
    and sentences (a reworded summary) name nothing, and neither do the call's own values:
    times and dates, integers of ten digits or more (an epoch), and values under a name
    of time, attempt or idempotency (``done_at``, ``nonce``, ``idempotency_key``:
    :data:`_ITEM_TIME_WORDS`). The id-like ones first, so that it holds
    :func:`sent_values`' and an answer naming them echoes them."""
    ids: list[str] = []
    tokens: list[str] = []
    for name, value in islice(args.items(), _HANDED_VALUES):
        if type(name) is str and not _ITEM_TIME_WORDS.isdisjoint(name_words(name.lower())):
            continue
        if type(value) is int and value >= 10**9:
            continue
        text = id_text(value)
        if text is not None:
            if TIME_LIKE.search(text) is None:
                ids.append(text)
        elif (
            type(value) is str and 3 <= len(value) <= ITEM_CHARS
            and not _DIGITS.isdisjoint(value) and len(value.split(None, 1)) == 1
            and TIME_LIKE.search(value) is None
        ):
            tokens.append(value)
    return tuple((ids + tokens)[:HANDED_KEPT])


def handed_ids(result: object, sent: tuple[str, ...]) -> tuple[str, ...]:
    """The ids a write's answer hands back: id-like words of its first
    :data:`_HANDED_READ` characters (or the id-like values of an object answer and of the
    objects directly in it) that its call did not send, at most :data:`HANDED_KEPT`.

    ``draft_email(...)`` answered "Draft saved with id drf_4472" hands back
    ``drf_4472``; the ``discard_draft(draft_id="drf_4472")`` right after it names what the
    write made, not a thing of its own, and the watchdog keys it so (``HANDED_BACK``):
    the same draft made and discarded again and again is one lap repeated, whatever new
    id each lap's draft gets."""
    words: list[object]
    if isinstance(result, str):
        words = _ID_TOKEN.findall(result[:_HANDED_READ])
    elif isinstance(result, dict):
        words = []
        for value in islice(result.values(), _HANDED_VALUES):
            if type(value) is dict:
                words.extend(islice(value.values(), _HANDED_VALUES))
            else:
                words.append(value)
    else:
        return ()
    out: list[str] = []
    for word in words:
        text = id_text(word)
        if text is not None and text not in sent and text not in out:
            out.append(text)
            if len(out) >= HANDED_KEPT:
                break
    return tuple(out)


_CACHE_MAX = 512
MAX_SEGMENTS = 32
"""Segments of a command line whose programs are read (``a && b; c | d``: four)."""
COMMAND_TEXT_LIMIT = 4096
"""Characters of a command line read (the argument-list form is joined up to here)."""

EDITOR_COMMANDS = frozenset(
    {"view", "create", "str_replace", "insert", "edit", "write", "undo_edit", "append"}
)
EDITOR_WRITES = frozenset({"create", "str_replace", "insert", "edit", "write", "undo_edit", "append"})
COMPUTER_ACTIONS = frozenset({
    "screenshot", "zoom", "cursor_position", "wait", "key", "hold_key", "type", "mouse_move",
    "left_click", "right_click", "middle_click", "double_click", "triple_click",
    "left_click_drag", "left_mouse_down", "left_mouse_up", "scroll", "drag", "click",
    "keypress", "move",
})
"""The ``action`` values of a computer-use tool's calls (Anthropic's, and the ``type`` of
OpenAI's action object: ``keypress``, ``move``...)."""
COMPUTER_READS = frozenset({"screenshot", "zoom", "cursor_position"})
COMPUTER_ACTS = COMPUTER_ACTIONS - COMPUTER_READS - {"wait", "scroll"}
"""The computer-use actions that change what is on the screen (a click, a keystroke,
typed text): writes, answered by a screenshot or a "clicked". Not a scroll, which moves
the view over what is there, as SWE-agent's ``scroll_down`` pages through a file: the
same scroll answered by the next part of a page is paging, and answered by the same
screen, a loop."""
_COMMAND_KEYS = (
    "command", "cmd", "commands", "input", "shell_command", "CommandLine", "commandLine",
    "command_line", "keystrokes", "chars",
)
_ARGV_KEYS = ("args", "arguments", "argv")
_ARGV_KEY_SET = frozenset(_ARGV_KEYS)
_PROGRAM_KEYS = ("program", "executable", "command", "cmd", "file")
"""A runner's call in the exec shape: the program under one of these keys, its argument
list under one of :data:`_ARGV_KEYS`."""
SHELL_LANGUAGES = frozenset({"sh", "bash", "shell", "zsh", "console", "powershell", "pwsh"})
"""The ``language`` of a code block that is a command line (a code executor's ``code``)."""
_PATH_KEYS = ("path", "file_path", "file", "filename", "target")

# Programs whose first non-flag argument is part of what they do.
_SUBCOMMAND_PROGRAMS = frozenset({
    "git", "docker", "podman", "kubectl", "npm", "yarn", "pnpm", "cargo", "go", "pip", "pip3",
    "poetry", "mvn", "gradle", "./gradlew", "gradlew", "./mvnw", "mvnw", "helm", "apt",
    "apt-get", "conda", "mamba", "micromamba", "uv", "dotnet", "bundle", "systemctl", "gh",
    "terraform", "make", "docker-compose", "git-lfs", "bq",
    "rustup", "brew", "composer", "dnf", "yum", "django-admin", "manage.py", "tox", "nox",
})
# Segments that only set the stage; the action is the next segment.
_SHELL_LOOPS = frozenset({"until", "while", "for", "watch"})
"""Programs that repeat what follows them: a line of one that sleeps is a wait as a whole
(``until curl -sf ...; do sleep 2; done`` answers when the wait is over)."""
_PRELUDE = frozenset({"cd", "source", ".", "export", "set", "unset", "pushd", "popd", "true",
                      "echo", "printf", "sleep", "clear", ":"})
_WRAPPERS = frozenset({"sudo", "time", "env", "nohup", "timeout", "nice", "stdbuf", "exec",
                       "command", "builtin", "xargs"})
# Wrapper options that take a value (`sudo -u postgres psql`: the program is psql).
_WRAPPER_VALUE_FLAGS = {
    "sudo": frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"}),
    "env": frozenset({"-u", "-C", "-S"}),
    "timeout": frozenset({"-s", "-k"}),
    "nice": frozenset({"-n"}),
    # `grep -rl x src | xargs -r sed -i ...`: the program is sed (a write)
    "xargs": frozenset({"-I", "-n", "-P", "-d", "-E", "-L", "-s", "-a"}),
}
_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh"})
_POWERSHELLS = frozenset({"pwsh", "powershell", "pwsh.exe", "powershell.exe"})
_POWERSHELL_COMMAND_FLAGS = frozenset({"-c", "-command", "-cmd"})
_POWERSHELL_VALUE_FLAGS = frozenset({"-executionpolicy", "-ep", "-ex", "-workingdirectory", "-wd",
                                     "-outputformat", "-of", "-inputformat", "-if", "-configurationname"})
_LISTERS = frozenset({"ls", "dir", "get-childitem", "gci", "cat", "type", "get-content", "gc"})
"""Programs whose output a search after them in a pipe looks through (`Get-ChildItem -Recurse
| Select-String -Pattern x`, `cat app.log | grep ERROR`): the line is that search."""
# `conda run -n env CMD` runs CMD; these of its options take a value.
_ENV_RUNNERS = frozenset({"conda", "mamba", "micromamba"})
_ENV_RUN_VALUE_FLAGS = frozenset({"-n", "--name", "-p", "--prefix", "--cwd"})
# `conda activate env` only sets the stage, like `source venv/bin/activate`.
_ENV_PRELUDE_SUBCOMMANDS = frozenset({"activate", "deactivate"})
# Stage-setting programs that change the shell a later call runs in (its variables, its
# directory, its activated environment); `echo`, `true` and `sleep` change nothing.
_SHELL_CHANGES = frozenset({"cd", "source", ".", "export", "unset", "pushd", "popd"})
_WRITE_PROGRAMS = frozenset({
    "tee", "patch", "cp", "mv", "rm", "rmdir", "touch", "mkdir", "ln", "chmod", "chown",
    "install", "truncate", "dd", "unzip", "tar", "gunzip", "make", "cmake", "javac", "gcc",
    "g++", "clang", "tsc", "create", "edit", "insert", "append", "rename", "wget",
    "apply_patch", "applypatch",  # Codex CLI's patch tool, run as a program
})
_WRITE_SUBCOMMANDS = {
    "git": frozenset({"apply", "am", "checkout", "switch", "restore", "reset", "stash", "merge",
                      "rebase", "cherry-pick", "revert", "pull", "clone", "commit", "add", "rm",
                      "mv", "clean", "init", "fetch", "bisect"}),  # bisect checks out a commit
    "pip": frozenset({"install", "uninstall"}),
    "pip3": frozenset({"install", "uninstall"}),
    "npm": frozenset({"install", "i", "ci", "uninstall", "run", "update", "add"}),
    "yarn": frozenset({"install", "add", "remove", "build", "run"}),
    "pnpm": frozenset({"install", "add", "remove", "build", "run"}),
    "cargo": frozenset({"build", "add", "install", "update", "fix", "fmt", "new", "init"}),
    "go": frozenset({"build", "install", "get", "mod", "generate", "fmt"}),
    "mvn": frozenset({"compile", "install", "package", "clean", "process-resources",
                      "test-compile", "dependency:resolve"}),
    "gradle": frozenset({"build", "assemble", "compilejava", "clean", "install"}),
    "poetry": frozenset({"install", "add", "remove", "update", "lock"}),
    "uv": frozenset({"pip", "add", "remove", "sync", "lock"}),
    "conda": frozenset({"install", "remove", "update", "create"}),
    "apt": frozenset({"install", "remove"}),
    "apt-get": frozenset({"install", "remove"}),
    "docker": frozenset({"build", "run", "rm", "start", "stop", "restart", "cp"}),
    # `docker compose up` is `docker-compose up` (read as that program): `ps`, `logs` and
    # `config` only look
    "docker-compose": frozenset({"up", "down", "build", "run", "rm", "start", "stop", "restart",
                                 "create", "kill", "pull", "push", "cp", "pause", "unpause",
                                 "scale"}),
    "kubectl": frozenset({"apply", "create", "delete", "edit", "patch", "scale", "rollout",
                          "set", "replace", "annotate", "label"}),
    "helm": frozenset({"install", "upgrade", "uninstall", "rollback"}),
}
# Git LFS, as git's sub-command: its own sub-command is what the line does (`git lfs
# track '*.psd'` edits .gitattributes; `ls-files`, `status`, `env`, `fsck` only look).
_WRITE_SUBCOMMANDS["git-lfs"] = frozenset({
    "track", "untrack", "migrate", "install", "uninstall", "pull", "fetch", "checkout", "prune",
    "push", "lock", "unlock",
})
_WRITE_SUBCOMMANDS["mvnw"] = _WRITE_SUBCOMMANDS["mvn"]  # `./mvnw install` builds as `mvn` does
_WRITE_SUBCOMMANDS["gradlew"] = _WRITE_SUBCOMMANDS["gradle"]
_CHECKSUM_PROGRAMS = frozenset({"md5sum", "sha1sum", "sha256sum", "sha512sum", "sha224sum",
                                "sha384sum", "b2sum", "shasum", "cksum"})
"""Programs that check files against a list of sums (with ``-c``): after a search that picks
the line of the list, the line checks that file."""
_SEARCH_PROGRAMS = frozenset({
    "grep", "egrep", "fgrep", "rg", "ag", "ack", "find", "fd", "locate", "search_dir",
    "search_file", "find_file", "which", "whereis",
    # PowerShell's and Windows' own (`Get-ChildItem ... | Select-String -Pattern ...`)
    "select-string", "sls", "findstr",
})
_SEGMENT_SPLIT = re.compile(r"&&|\|\||[;|\n]")
_REDIRECT = re.compile(r"(?<![0-9&>])>>?(?!&)\s*(?!/dev/null)[^\s&|;]")
_HEREDOC = re.compile(r"(?<!<)<<-?(?!<)\s*['\"]?\w")
"""A here-document (``python - <<EOF``, ``cat <<'X' > f``): a guess that the script or
text it feeds changes something. Not a here-string (``<<<``), read by its words."""
_HERE_STRING = re.compile(r"<<<\s*(?:'([^']{0,256})|\"([^\"]{0,256})|(\S{1,256}))")
_HERE_STRING_READS = frozenset({
    "select", "show", "list", "get", "describe", "display", "status", "query", "info",
    "print", "stat", "count", "check", "view", "read", "fetch", "search", "find", "explain",
})
"""Opening words of a here-string that asks a program's prompt for a look (Connect:Direct's
``direct <<< "select process pnumber=48812"``, ``redis-cli <<< "GET k"``, ``psql <<<
"SELECT ..."``): the line reads, when that is all the here-string says (:func:`_here_string_writes`).
Any other here-string is a guess of a write, as a here-document is."""
_HERE_STRING_WRITE_WORDS = re.compile(
    r"(?i)\b(?:delete|drop|insert|update|into|kill|truncate|alter|create|set|del|remove|submit"
    r"|grant|revoke|flush|replace|merge|write|open|exec|system)\b|-delete\b|[;\n]\s*\S"
)
"""What makes a here-string more than one look: a word of a change anywhere in it, or a
second statement or line (``SELECT 1; DELETE FROM orders``, ``SHOW TABLES; DROP ...``)."""
_HERE_STRING_RUNNERS = frozenset({
    "sh", "bash", "zsh", "dash", "ksh", "fish", "python", "python3", "node", "perl", "ruby",
    "php", "rscript", "lua", "tclsh", "awk", "gawk", "xargs", "eval", "ssh",
})
"""Programs that run what a here-string gives them as code: their here-string is a script,
whatever word it opens with (``bash <<< "find /tmp -delete"``)."""
_LEADING_WORD = re.compile(r"\s*([A-Za-z]+)")


def _unquoted_marks(head: str) -> str:
    """``head`` with each quoted word's inside blanked, its length kept: ``<<<`` within
    quotes (``grep -rn '<<<' scripts/``) is text, not a here-string."""
    return QUOTED_WORD.sub(lambda m: m[0][0] + " " * (len(m[0]) - 2) + m[0][-1], head)


def _here_string_writes(head: str) -> bool:
    """Whether a here-string of ``head`` may feed a write: one that is not a single look
    (its text opens with a word of :data:`_HERE_STRING_READS`, holds no word of a change nor
    a second statement) given to a program that is no shell or interpreter. ``<<<`` inside
    a quoted word is text."""
    # (with an escape or a substitution, quotes may not pair as they seem: every `<<<` is read)
    escaped = "\\" in head or "$(" in head or "`" in head
    blanked = head if escaped else _unquoted_marks(head)
    at = blanked.find("<<<")
    while at >= 0:
        match = _HERE_STRING.match(head, at)
        if match is not None:
            text = match[1] if match[1] is not None else match[2] if match[2] is not None else match[3]
            word = _LEADING_WORD.match(text)
            if word is None or word[1].lower() not in _HERE_STRING_READS:
                return True
            if _HERE_STRING_WRITE_WORDS.search(text) is not None:
                return True
            segment = _SEGMENT_SPLIT.split(head[:at])[-1].split()
            tokens = _program_tokens(segment) if segment else []
            if tokens and _basename(tokens[0]).lower() in _HERE_STRING_RUNNERS:
                return True
        at = blanked.find("<<<", at + 3)
    return False


QUOTED_WORD = re.compile(r"'[^']*+'|\"[^\"]*+\"")
"""A quoted word of a one-line command with no escapes in it: a ``>`` inside it is text
(``grep -n '->' src``, ``python -c "print(a > b)"``), not a redirection. (Possessive, and
read only where no backslash is: linear on any line.)"""
_RUNS_QUOTED_LINE = re.compile(
    r"(?:^|[\s;&|(/'\"])(?:(?:ba|z|da|k|fi)?sh|ssh|su|runuser|eval|watch|[gmn]?awk|perl|ruby)(?![\w.-])"
    r"|--command(?![\w-])|\s-exec(?:dir)?\s"
)
"""A program on the line that runs a quoted line or program of its own, which may redirect
(``bash -c "make > log"``, ``/bin/sh -ec '...'``, ``ssh web-1 "printf ... > conf"``, ``find
... -exec sh -c ...``, ``awk '{print > "out_" $2}'``): its quoted ``>`` is read as one.
Not an option that only begins so (``kafka-consumer-groups --command-config FILE``)."""


_AWK_REDIRECT = re.compile(r"\bprintf?\b[^;{}]*>")
"""A redirection in an awk program: ``>`` after ``print`` or ``printf`` in one statement
(``{print > "out_" $2}``); any other ``>`` in it compares (``NR>2``, ``$3 > 100``)."""


def _redirects(head: str) -> bool:
    """Whether a command line redirects output to a file (``>``, ``>>``; not ``2>&1``, not
    ``/dev/null``). A ``>`` in a quoted word is text on a one-line command with no escape,
    command substitution or program that runs a quoted line (:data:`_RUNS_QUOTED_LINE`);
    anywhere else it is read as a redirection, as a missed write costs more than a false
    one (a check failing after each silent write would be a failure loop). Where the only
    such programs are awk's, a quoted ``>`` redirects only after a ``print``
    (:data:`_AWK_REDIRECT`): ``awk 'NR>2{print $3}'`` compares, and read as a write it made
    a backfill's run states, counted after each ``sleep 300``, a write re-sent, halted at
    its fifth reading."""
    if ">" not in head or _REDIRECT.search(head) is None:
        return False
    if (
        ("'" not in head and '"' not in head)
        or "\n" in head or "\\" in head or "$(" in head or "`" in head
    ):
        return True
    runners = _RUNS_QUOTED_LINE.findall(head)
    if runners:
        if not all(runner.endswith("awk") for runner in runners):
            return True
        return _REDIRECT.search(
            QUOTED_WORD.sub(lambda word: word[0] if _AWK_REDIRECT.search(word[0]) else "''", head)
        ) is not None
    return _REDIRECT.search(QUOTED_WORD.sub("''", head)) is not None


REDIRECT_TARGET = re.compile(r"(?<![0-9&>])>>?[ \t]*(?!/dev/null\b)(?!&)([\w./@+-]+)")
"""A file a command line redirects its output to (``> /tmp/p2.json``, ``>> run.log``; not
``2>&1``, not ``/dev/null``), as written on it: the group. Read outside quoted words."""


_SCRATCH_READERS = frozenset({
    "cat", "jq", "yq", "head", "tail", "wc", "grep", "egrep", "rg", "less", "more", "sort",
    "uniq", "cut", "column", "diff", "cmp", "md5sum", "sha256sum", "xxd", "od", "file", "stat",
})
"""Programs that only show a file they are given: the read-back of a scratch file."""
_OTHER_REDIRECT = re.compile(r"(?:\d|&)>[>|]?[ \t]*(?!&|/dev/null)\S|>\|")
"""A redirection :data:`REDIRECT_TARGET` does not read (``2> errors.log``, ``&> all.log``,
``>| f``)."""


def _writes_scratch_read_back(head: str) -> bool:
    """Whether every redirection of a one-line command writes a scratch file under
    ``/tmp`` that a later part of the same line only shows (``cx-api get ... > /tmp/p2.json
    && jq '...' /tmp/p2.json``: each later mention of the file is an argument of a program
    of :data:`_SCRATCH_READERS`, never an input redirection): the file holds the line's own
    answer on its way out, so the line reads. Read as a write, a page fetched with the same
    stuck cursor forty-five times, each into a new scratch file, was never the same answer
    twice after nothing changed. A file a later program consumes (``psql -f /tmp/m.sql``,
    ``curl -d @/tmp/b.json``, ``mysql < /tmp/q.sql``, ``python /tmp/x.py``) is a write as
    before."""
    if "/tmp/" not in head or "\n" in head or "\\" in head or "$(" in head or "`" in head:
        return False
    bare = QUOTED_WORD.sub("''", head) if ("'" in head or '"' in head) else head
    if _OTHER_REDIRECT.search(bare) is not None:
        return False
    found = False
    for target in REDIRECT_TARGET.finditer(bare):
        path = target[1]
        if not path.startswith("/tmp/") or len(path) <= 5 or ".." in path:
            return False
        mentions = 0
        for segment in _SEGMENT_SPLIT.split(bare[target.end():])[1:]:
            if path not in segment:
                continue
            # shown by a reader as one of its own words; any other mention (`-d @/tmp/b`,
            # `< /tmp/q.sql`, `/tmp/ab` for `/tmp/a`) may consume it: a write
            words = segment.split()
            if not words or words[0] not in _SCRATCH_READERS or "<" in segment or path not in words:
                return False
            mentions += 1
        if not mentions:
            return False
        found = True
    return found


_IN_PLACE = re.compile(r"(?:^|\s)-(?:i\w*|-in-place)\b")
# A linter or formatter told to fix what it finds (`ruff check --fix`, `eslint --fix`,
# `prettier --write`): the run rewrites files, so a check after it has something new to see.
# Not when it is also told only to show the fixes (`--diff`, `--check`, `--dry-run`).
_FIXING_FLAG = re.compile(r"(?:^|\s)--(?:fix|write)(?:=\S*)?(?=\s|$)")
_SHOW_ONLY_FLAG = re.compile(r"(?:^|\s)--(?:diff|check|dry-run)(?=\s|$)")


def _fixes(text: str) -> bool:
    """Whether a command line tells a linter or formatter to rewrite what it finds."""
    return bool(_FIXING_FLAG.search(text)) and not _SHOW_ONLY_FLAG.search(text)
_PYTHON = re.compile(r"python(?:\d+(?:\.\d+)*)?$")
# A writing program at a segment's start, for the part of a long command line past the
# segments parsed one by one. Anchored at separators, so most positions fail at once;
# ``[ \t]*``, not ``\s*``: a run of newlines must not be rescanned from each of them.
_LATE_WRITE = re.compile(
    r"(?:^|[;&|\n(])[ \t]*(?:sudo[ \t]+)?(?:"
    + "|".join(
        [re.escape(p) for p in sorted(_WRITE_PROGRAMS, key=len, reverse=True)]
        + [r"(?:sed|perl|ruby)[ \t]+-i"]
        + [
            rf"{re.escape(program)}[ \t]+(?:{'|'.join(re.escape(s) for s in sorted(subs))})"
            for program, subs in _WRITE_SUBCOMMANDS.items()
        ]
        + [rf"docker[ \t]+compose[ \t]+(?:{'|'.join(sorted(_WRITE_SUBCOMMANDS['docker-compose']))})"]
        + [rf"git[ \t]+lfs[ \t]+(?:{'|'.join(sorted(_WRITE_SUBCOMMANDS['git-lfs']))})"]
    )
    + r")\b"
)
# `sleep` run as a command: at the start of the line or of a segment, or after a shell
# keyword (`until curl ...; do sleep 2; done`).
_SLEEP = re.compile(
    # at the line's or a segment's start, or as the line a shell at a segment's start is
    # handed (`bash -lc "sleep 45"`, Codex's `["bash", "-lc", "sleep 45"]` joined; not
    # `docker run ... sh -c 'sleep 3600'`, `kubectl exec db -- sh -c 'sleep 2; psql ...'`,
    # whose sleep is the container's)
    r"(?:^|[;&|\n(]|\b(?:do|then|else))[ \t]*"
    # (behind `sudo`, `env`, `timeout 60`, with options before `-c` and `--` after it)
    r"(?:(?:(?:\S*/)?(?:sudo|env|command|exec|timeout[ \t]+\S+)(?:[ \t]+-\S+)*[ \t]+)*"
    r"(?:\S*/)?(?:ba|z|da|k)?sh(?:[ \t]+-[-\w]+)*?[ \t]+-[a-zA-Z]*c(?:[ \t]+--)?[ \t]+['\"]?[ \t]*)?sleep\s"
)
# Commands that block until something is ready and fail when it is not yet (a rollout's
# status, `kubectl wait`, a CI run watched, a container waited for): run again, they poll.
# Told by the parsed program and sub-command, then what follows the sub-command.
_BLOCKING_AFTER: dict[tuple[str, str], tuple[re.Pattern[str], str] | None] = {
    ("kubectl", "wait"): None,
    ("kubectl", "rollout"): (re.compile(r"\brollout[ \t]+status\b"), ""),
    ("gh", "run"): (re.compile(r"\brun[ \t]+watch\b"), ""),
    ("gh", "pr"): (re.compile(r"\bpr[ \t]+checks\b"), " --watch"),  # (and the flag)
    ("docker", "wait"): None,
    # BigQuery's `bq wait <job> 60` and the AWS CLI's waiters (`aws ec2 wait
    # instance-running ...`, `aws cloudformation wait stack-create-complete ...`)
    ("bq", "wait"): None,
    ("aws", ""): (re.compile(r"\baws(?:[ \t]+--?[\w-]+(?:[ \t=]+[^-\s]\S*)?)*[ \t]+[a-z0-9-]+[ \t]+wait[ \t]+[a-z]"), ""),
}


_NAMESPACE = re.compile(r"\.|/|:|__")
_WORD_GLOB = re.compile(r"[A-Za-z]+\*")


def tool_glob_matcher(patterns: list[str] | tuple[str, ...]) -> Callable[[str], bool] | None:
    """One tool name against a glob list (:mod:`fnmatch` syntax, case-insensitive), or
    ``None`` for an empty list. A glob that is a word and a star (``show*``, ``list*``,
    ``wait*``) names tools whose name *opens with that word*: ``show``, ``show_unit``,
    ``showUnit``, ``show-unit`` and ``show2``, not ``showings_create``, ``listing_update``,
    ``inspections.create``, ``reader.start_run`` or ``waitlist_add``, whose first word is
    another one (a noun the verb begins). Read by the letters of the name as given: after
    the word comes nothing, a character that is no letter, or a capital after a small
    letter (``SHOW_UNIT`` matches, ``SHOWINGS_CREATE`` does not). A name glued in one case
    (``getuser``, ``writefile``) is one word, no match for ``get*``; ``get?*`` is the plain
    prefix. Every other glob is :mod:`fnmatch`'s."""
    if not patterns:
        return None
    words = tuple(p[:-1].lower() for p in patterns if _WORD_GLOB.fullmatch(p))
    rest = [p for p in patterns if not _WORD_GLOB.fullmatch(p)]
    other = re.compile("|".join(fnmatch.translate(p.lower()) for p in rest)).match if rest else None

    def match(name: str) -> bool:
        if other is not None and other(name.lower()):
            return True
        for word in words:
            size = len(word)
            if name[:size].lower() == word:
                if len(name) == size:
                    return True
                # the word ends where a letter does not follow, or where a capital follows
                # a small letter (`showUnit`; not `SHOWINGS`, one word in capitals)
                after = name[size]
                if not after.isalpha() or (after.isupper() and name[size - 1].islower()):
                    return True
        return False

    return match


class ToolGlobs:
    """Decides whether a tool name is in a glob list (case-insensitive, cached; a
    namespaced name such as ``mcp__shell`` is also tried by its last part): the command
    runners, the waits. ``styled``: a name in another style is also tried by its words
    in snake case (``waitSeconds`` as ``wait_seconds``, ``WaitForJob`` as
    ``wait_for_job``), for the waits."""

    def __init__(self, patterns: list[str] | tuple[str, ...], styled: bool = False) -> None:
        self._match = tool_glob_matcher(patterns)
        self._cache: dict[str, bool] = {}
        self._styled = styled

    def __call__(self, tool: str) -> bool:
        cached = self._cache.get(tool)
        if cached is not None:
            return cached
        result = False
        match = self._match
        if match is not None:
            last = _NAMESPACE.split(tool)[-1]  # `mcp__shell`: also tried as `shell`
            names = (tool, last) if last and last != tool else (tool,)
            result = any(match(name) for name in names) or (
                # in another style, by its words in snake case: `mcp__ops__waitForJob`
                self._styled and any(match("_".join(name_words(name))) for name in names)
            )
        if len(self._cache) >= _CACHE_MAX:  # bounded: tool names come from untrusted input
            self._cache.clear()
        self._cache[tool] = result
        return result


class CommandRunners(ToolGlobs):
    """Decides which tools are command runners (``[command_runners] tools``)."""

    def __init__(self, patterns: list[str] | tuple[str, ...] = DEFAULT_COMMAND_RUNNERS) -> None:
        super().__init__(patterns)


_OBJECT_START = frozenset("{ \t\r\n")

MCP_WRAPPERS = frozenset({"use_mcp_tool", "call_mcp_tool", "mcp_call_tool", "invoke_mcp_tool"})
"""Tools that only carry a call of another tool, an MCP server's (Cline's, Roo Code's and
Kilo Code's ``use_mcp_tool`` with ``server_name``, ``tool_name`` and ``arguments``): a
call through one is read as a call of the tool it names (:func:`wrapped_call`)."""
WRAPPED_PREFIX = "mcp__"
"""How the name of a wrapped call's tool opens (:func:`wrapped_call`)."""
_WRAPPED_NAMES = ("tool_name", "toolName", "name", "tool")
_WRAPPED_SERVERS = ("server_name", "serverName", "server")
_WRAPPED_ARGS = ("arguments", "args", "input", "params", "parameters")
_SERVER_NAME = re.compile(r"[\w./@:-]{1,128}")


def wrapped_call(args: Any) -> tuple[str, Any] | None:
    """The tool and arguments a call of an MCP wrapper (:data:`MCP_WRAPPERS`) carries, or
    None when its arguments name no tool. ``use_mcp_tool(server_name="crm",
    tool_name="salesforce_dml_records", arguments="{...}")`` is a call of
    ``mcp__crm__salesforce_dml_records`` with those arguments (a JSON object in a string
    read as that object), named as Claude Code names an MCP server's tools: the server is
    part of the tool (one health check put to six clusters' servers is six questions),
    and every wrapped call under one name would make one tool of every server's tools, a
    sweep of updates a run of identical names and their acknowledgements answers to one
    tool that only reads. A server's name that is no plain name is left out."""
    args = call_args(args)
    if type(args) is not dict:
        return None
    for name_key in _WRAPPED_NAMES:
        name = args.get(name_key)
        if type(name) is str:
            if not 0 < len(name) <= 100:
                return None
            server = ""
            for server_key in _WRAPPED_SERVERS:
                value = args.get(server_key)
                if type(value) is str:
                    if _SERVER_NAME.fullmatch(value) is not None:
                        server = value.replace("/", "_")
                    break
            tool = f"{WRAPPED_PREFIX}{server}__{name}" if server else f"{WRAPPED_PREFIX}{name}"
            for args_key in _WRAPPED_ARGS:
                if args_key in args:
                    return tool, call_args(args[args_key])
            return tool, {}
    return None


def call_args(args: Any) -> Any:
    """A call's arguments as the contract reads them: a string holding a JSON object
    (``'{"command": "ls"}'``, how OpenTelemetry carries arguments) is that object; any
    other value is itself. Read once per call by the watchdog (``CallView.args``)."""
    if type(args) is str and args[:1] in _OBJECT_START:
        return as_object(args)
    return args


def command_text(args: object) -> str | None:
    """The command line a runner call carries (``None``: none found)."""
    args = call_args(args)
    if isinstance(args, str):
        return args
    if isinstance(args, dict):
        if len(args) > 1 and not _ARGV_KEY_SET.isdisjoint(args):
            # The exec shape: a program and its argument list apart (`{"program": "sleep",
            # "arguments": ["90"]}`, `{"command": "git", "args": ["status"]}`), as a
            # process is spawned; read as the line they make.
            argv = next((args[k] for k in _ARGV_KEYS if type(args.get(k)) is list), None)
            program = next((args[k] for k in _PROGRAM_KEYS if type(args.get(k)) is str), None)
            if argv is not None and program is not None:
                # (numbers in an argument list are arguments: `["-j", 8]`; anything else
                # makes it no command line, and the other keys are read as before)
                joined = _joined_prefix(
                    [program, *(str(a) if type(a) in (int, float) else a for a in argv[:64])]
                )
                if joined is not None:
                    return joined
        for key in _COMMAND_KEYS:
            value = args.get(key)
            if isinstance(value, str):
                return value
            if isinstance(value, list) and value:
                return _joined_prefix(value)
        # A code executor's block of shell (AutoGen's `{"language": "sh", "code": ...}`);
        # a block of Python is free code, with no command line to read.
        if _shell_block(args):
            for key in _CODE_KEYS:
                code = args.get(key)
                if isinstance(code, str):
                    return code
    return None


_RESTART_NAME = re.compile(
    r"(?:^|[^a-zA-Z])(?i:reboot|restart|reload|power[_ -]?cycle)(?![a-z])"
    r"|(?<=[a-z])(?:Reboot|Restart|Reload|Power_?[Cc]ycle)(?![a-z])"
)
"""A tool named for restarting what it names (``reboot_device``, ``restart_service``,
AWS' ``RebootInstances``, ``power_cycle_outlet``): the word whole, so not a listing of
restarts (``list_restarts``) or what was reloaded (``reloaded_items``). Read only for a
call not known to only look (``get_reload_status`` reads)."""
_RESTART_COMMAND = re.compile(
    # a command of its own at a line's or a segment's start (a device's `reload`, a
    # shell's `sudo reboot`), not an option (`--restart=always`) nor `reload cancel`
    r"(?im)(?:^\s*|[;&|(]\s*|\bsudo\s+(?:-u\s+\S+\s+|-\S+\s+)*)"
    r"(?:reboot|reload(?!\s+cancel)|restart|shutdown\s+-r)(?![\w=-])"
    r"|\bssh\b[^;&|\n]{0,120}?\s['\"]?(?:sudo\s+)?(?:reboot|shutdown\s+-r)\b"
    # a service manager's restart or reload, as its sub-command
    r"|\bsystemctl\s+(?:-\S+\s+)*(?:restart|try-restart|reload-or-restart|reload|reboot)(?![\w=-])"
    r"|\b(?:service|rc-service)\s+\S+\s+(?:restart|reload)\b"
    r"|\b(?:docker|podman|nerdctl)\s+(?:compose\s+(?:-\S+\s+)*)?restart\b"
    r"|\bkubectl\b[^;&|\n]{0,80}?\srollout\s+restart\b|\b(?:pm2|supervisorctl)\s+(?:restart|reload)\b"
    r"|\bnginx\s+-s\s+reload\b|\bapachectl\s+(?:-k\s+)?(?:restart|graceful)\b"
    r"|\blaunchctl\s+kickstart\b|\bbrew\s+services\s+restart\b"
    # network systems' own (Junos, FortiOS, RouterOS, PAN-OS) and the clouds' CLIs
    r"|\brequest\s+system\s+reboot\b|\bexecute\s+reboot\b|/system\s+reboot\b"
    r"|\brequest\s+restart\s+system\b|\baws\s+ec2\s+reboot-instances\b|\baz\s+vm\s+restart\b"
    r"|\bgcloud\s+compute\s+instances\s+reset\b"
    # a network OS upgrade that reloads the box: IOS-XE's install mode activating an image
    # (`install add file flash:x.bin activate commit`, `install activate`), NX-OS's
    # `install all`, Junos' software add with its reboot
    # (at a line's or a segment's start: not `npm install all-contributors`, `make install all`)
    r"|(?:^\s*|[;&|(]\s*|\bssh\b[^;&|\n]{0,120}?\s['\"]?)install\s+(?:(?:add\s+file\s+\S+\s+)?activate\b|all(?![\w-]))"
    r"|\brequest\s+system\s+software\s+add\b[^;&|\n]{0,200}?\sreboot\b"
)
"""A command line that restarts something: a device's own ``reload`` or ``reboot`` (an
ssh tool's command, a shell's, ``ssh host reboot``), ``shutdown -r``, a service manager's
restart or reload (``systemctl restart nginx``, ``docker compose restart``, ``kubectl
rollout restart``, ``nginx -s reload``), a network system's (``request system reboot``,
``execute reboot``), a network OS upgrade that reloads the box (IOS-XE's ``install add file
... activate``, NX-OS's ``install all``, Junos' ``request system software add ... reboot``)
or a cloud's (``aws ec2 reboot-instances``, ``az vm restart``). Not the
word as an option (``docker run --restart=always``, ``pm2 start --restart-delay=3000``),
a property read (``systemctl show -p Restart``) or ``reload cancel``."""
RESTART_COMMAND_READ = 256
"""Characters of a command line read for a restart: a restart is a short command."""


_CHECK_WORDS = (
    r"(?:(?:re-?)?check|watch|monitor|poll|refresh|re-?read|read|look|ping|query|sample|report"
    r"|update me|tell me|let me know|keep an eye)"
)
_PROBE_ASKED = (
    # a probe named by how it is sent, asked for: opening the message, a sentence or a line
    # (after a bullet or a number), or after a word that asks ("Hit /healthz every 15s",
    # "- curl it every minute", "please curl it every minute", "can you hit it every
    # 10s"; not "the health probe fails every 30 seconds", "we also hit 429s every 30
    # seconds", "- scan results arrive every 10 minutes")
    r"(?:(?:^|[.!?;\n])[ \t]*+(?:(?:[-*\u2022]|\d{1,3}[.)])[ \t]*+)?"
    r"|\b(?:please|then|can\s+you|could\s+you|would\s+you)\s+)"
    # and what it is sent to: an address, a path, a host or "it", "the ..." (not "probe
    # fails", "scan results arrive", "hit 429s")
    r"(?:hit|curl|probe|reload|fetch|scan)[ \t]++(?:-[^\s-]\S{0,40}[ \t]++){0,4}+"
    r"(?:https?://|/|(?:it|them|the|that|this)\b|[\w-]{1,63}(?:\.[\w-]{1,63}){1,8}\b)"
)
_INTERVAL = (
    # a number and its unit ("every 30 seconds", "every 2 min"), a few of them ("every few
    # minutes"), or the unit alone when nothing follows it that it could qualify ("every
    # minute until it is back"; not "every second row", "every minute detail")
    r"(?:(?:every|each)\s+(?:(?:(\d{1,4}(?:\.\d{1,3})?)\s*|(a couple of|couple of|a few|few|two)\s+)"
    r"(seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h)\b"
    r"|(?:(a|one)\s+)?(second|minute|hour)(?=\s*(?:[.,;:!?)]|$|(?:and|or|until|till|while|so|if"
    r"|please|from|to|for|during|through)\b)))"
    # or a frequency ("once a minute", "twice an hour", "once per minute"; not "charged twice
    # a minute ago", "once an hour has passed", "once a second deploy finishes")
    r"|(once|twice)\s+(?:a|an|per|each)\s+(minute|hour|second(?=\s*(?:[.,;:!?)]|$|(?:and|or|until"
    r"|till|while|so|if|please|for|during|is|will)\b)))(?![\w-])"
    r"(?!'s|\s+(?:ago|later|earlier|before|after|since|has|had|have|passed|passes|elapsed|elapses"
    r"|goes by|went by|is up|is over|from now)\b))"
)
_ASKED_INTERVAL = re.compile(
    # a word of checking, then the interval within the sentence, with no clause of its own
    # between them ("check why the pod restarts every 30 seconds" asks why, not a pace);
    # or the interval opening a sentence or a clause, then the word ("Every 2 min, read
    # the queue"; not "the cron job runs every minute to check the disk")
    # (a dot inside a word, an address's or a version's, ends no sentence)
    rf"(?ai)(?:\b{_CHECK_WORDS}|{_PROBE_ASKED})\b"
    rf"(?:(?!\b(?:why|how|what|whether|which|that|when|where|if)\b)"
    rf"(?:[^.!?;\n]|\.(?=\S))){{0,60}}?\b{_INTERVAL}"
    rf"|(?:^|[.!?;\n]\s*+|,\s*+)(?:and\s+)?{_INTERVAL}[^.!?;\n]{{0,30}}?\b{_CHECK_WORDS}\b"
)
"""A message that asks for a check at an interval, in one sentence: "Check about every 30
seconds", "poll the job every minute", "Every 2 min, read the queue", "watch it for ~10
min, once a minute is fine", "twice an hour, refresh the board". ASCII only: a
letter that merely folds to one (``ſ``) is none of these words."""
_INTERVAL_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}
_INTERVAL_COUNTS = {"a": 1.0, "one": 1.0, "two": 2.0, "couple of": 2.0, "a couple of": 2.0, "few": 3.0, "a few": 3.0}
ASKED_INTERVAL_READ = 1024
"""Characters of a user's message read for the interval it asks checks at."""


def asked_interval(text: str) -> float:
    """The interval, in seconds, that a user's message asks the agent to check something
    at (:data:`_ASKED_INTERVAL`: "Watch breaker 52-T2 ... Check about every 30 seconds",
    "ping it every minute until it is back"), or 0 when it asks none. Read in its first
    :data:`ASKED_INTERVAL_READ` characters; the first such request counts."""
    head = text[:ASKED_INTERVAL_READ].lower()
    if "every" not in head and "each" not in head and "once" not in head and "twice" not in head:
        return 0.0  # (most messages: one pass in C instead of the pattern's)
    match = _ASKED_INTERVAL.search(text, 0, ASKED_INTERVAL_READ)
    if match is None:
        return 0.0
    groups = match.groups()
    # each of the two orders has the interval's seven groups: a number, a few, its unit;
    # or "a"/"one" and a unit alone; or "once"/"twice" and a unit
    number, words, unit, _one, alone, times, per = groups[0:7] if any(groups[0:7]) else groups[7:14]
    if times:
        return _INTERVAL_UNITS[per[0].lower()] / (2.0 if times.lower() == "twice" else 1.0)
    if alone:
        count, unit = 1.0, alone
    else:
        count = float(number) if number else _INTERVAL_COUNTS.get(words.lower(), 1.0)
    return count * _INTERVAL_UNITS.get(unit[0].lower(), 0.0)


_REPORT_ME = (
    r"let\s+me\s+know|(?:tell|text|ping|notify|message|alert|page|email|dm|slack)\s+me"
    # (who "me" is, set off in brackets: "DM me (Dora) as soon as")
    r"(?:\s*\([^()\n]{1,40}\))?"
)
"""The words a report asked of the agent opens with ("let me know", "text me")."""
_ASKED_WATCH = re.compile(
    r"(?ai)\b(?:"
    # keep an eye on it (or out for it), keep watching (where it stands is read after the
    # match: _KEEP_ASKED)
    r"(?P<keep>keep)\s+(?:an\s+eye\s+(?:on|out)|watching|checking|polling|monitoring)\b"
    # watch or monitor something (not "watch out", "the monitor fails", "fix the monitor for
    # disk latency")
    r"|(?<!the\s)(?<!a\s)(?<!an\s)(?<!my\s)(?<!our\s)(?<!your\s)(?<!this\s)"
    r"(?:watch|monitor)(?:ing)?\s+(?:it|them|this|that|the|my|our|for|over|until|till)\b"
    # or anything watched for a span ("watch Crashlytics for the rc2 build for the next 30
    # minutes")
    # ("monitor" is left out of this form: "write a script to monitor CPU for the next 10
    # minutes" asks for a monitor, not a watch)
    r"|(?<!the\s)(?<!a\s)(?<!an\s)(?<!my\s)(?<!our\s)(?<!your\s)(?<!this\s)"
    r"watch(?:ing)?\s+(?:[\w.#@/-]+\s+){1,8}?for\s+the\s+next\s+"
    r"(?:\d|(?:half|hour|few|couple|one|two|three|four|five|ten|fifteen|twenty|thirty|forty|sixty)\b)"
    r"|follow\s+(?:it|them|this|that|the\s+[\w-]+(?:\s+[\w-]+)?)\s+(?:up\s+)?(?:until|till)\b"
    # a report asked for when something happens ("let me know once it's live", "text me the
    # moment it arrives", "tell me if anything fires"), not when the agent is done ("let me
    # know when you're finished", "when it's ready for review") nor a date asked for ("tell
    # me when it was added")
    rf"|(?:{_REPORT_ME})\s+(?:the\s+(?:moment|minute|second)|as\s+soon\s+as|once|when"
    # (what is watched for may be told apart first: "if anything other than ok shows up";
    # not "if anything else comes up", a sign-off)
    r"|if\s+(?:anything|something|it|that|this|they)"
    r"(?:\s+(?:other\s+than|besides|except)(?:\s+\S{1,40}){1,3}?|\s+(?:new|unusual|odd|bad|wrong|weird))?"
    r"\s+(?:fires|changes|moves|happens|arrives"
    r"|comes|shows|appears|lands|drops|spikes|goes|recovers|starts))\b"
    r"(?!\s+(?:you|your|done|finished|complete|completed|ready)\b"
    r"|\s+(?:it|that|this)(?:['’]?s|\s+is)\s+(?:done|finished|complete|completed|ready)\b)"
    r"(?![^.!?;\n]{0,60}\b(?:was|were|did|had|happened|broke|began|started|changed|stopped|went)\b)"
    # a wait asked for ("wait for the build, then...")
    r"|wait\s+(?:for|until|till)\b)"
)
"""A message that asks the agent to watch for something to happen: "keep an eye on my
inbox", "watch the alert queue for 15 minutes", "watch Crashlytics for the next 30
minutes", "monitor the plate", "follow it until we
hear back", "let me know once it's live", "text me the moment it arrives", "tell me if
anything fires", "wait for the build". ASCII only, as :data:`_ASKED_INTERVAL`; each match
is then read in its clause (:func:`asks_watch`)."""
_CLAUSE_MARKS = ".!?;:,\n—–"
"""What ends a clause a watch is read in (its sentence's marks, a comma, a dash)."""
_CLAUSE_END = re.compile(f"[{_CLAUSE_MARKS}]")
_WATCH_DENIED = re.compile(
    # in the clause before the words: denied, described or dated ("don't just keep checking",
    # "no need to monitor", "I'm monitoring the logs", "I'll watch the deploy", "the script
    # seems to wait for input", "the test should wait for the server", "I was monitoring")
    r"(?ai)(?:n['’]t|\b(?:dont|not|never|no\s+need|stop|without|i['’]m|i\s+am|i['’]ll|i\s+will"
    r"|we['’]re|we\s+are|we['’]ll|we\s+will|seems?\s+to|should|would|must|was|were|been))\b"
)
_WATCH_BY_OTHERS = re.compile(r"(?ai)\b(?:myself|ourselves)\b")
"""After the words, in the clause: the user keeps the watch ("I'll watch the deploy myself")."""
_KEEP_ASKED = re.compile(
    r"(?ai)(?:^|\b(?:and|please|to|just|then|also|now|so|can\s+you|could\s+you|would\s+you"
    r"|will\s+you))$"
)
"""What may stand before "keep an eye on", "keep checking" in its clause (after bullets,
quotes and dashes): nothing, or a word that asks ("can you keep checking Resy"; not "why
does the worker keep polling", a complaint or a question)."""
_CLAUSE_TRIM = " \t\r\n-*•\"'“”‘’—–()"
_WATCH_REPORT_WORDS = re.compile(_REPORT_ME + r"\b")
"""The words a report asked for opens with, found before the whole pattern is tried."""
ASKED_WATCH_READ = 1024
"""Characters of a user's message read for a watch it asks for."""


def asks_watch(text: str) -> bool:
    """Whether a user's message asks the agent to watch for something to happen
    (:func:`asked_watch_in`), in its first :data:`ASKED_WATCH_READ` characters: then nothing
    yet is the answer awaited (``[waits] asked_watches``)."""
    head = text[:ASKED_WATCH_READ].lower()
    # (the words first, in C: most messages hold none, and the pattern tried at every
    # position of a message cost about 36,000 instructions a message)
    if not (
        "watch" in head or "monitor" in head or "keep" in head or "follow" in head or "wait" in head
        or ("me" in head and _WATCH_REPORT_WORDS.search(head) is not None)
    ):
        return False
    return asked_watch_in(text)


def asked_watch_in(text: str) -> bool:
    """:func:`asks_watch` without its first look for the words: a match of
    :data:`_ASKED_WATCH` whose clause (between ``.!?;:,``, dashes and line ends) neither denies,
    describes nor dates it before the words (:data:`_WATCH_DENIED`) nor leaves it to the
    user after them (:data:`_WATCH_BY_OTHERS`), and where "keep ..." stands where it is
    asked (:data:`_KEEP_ASKED`)."""
    text = text[:ASKED_WATCH_READ].replace("\u00a0", " ")  # a phone's no-break space
    for match in _ASKED_WATCH.finditer(text):
        start, end = match.start(), match.end()
        clause_start = _clause_start(text, start)
        following = _CLAUSE_END.search(text, end)
        clause_end = following.start() if following is not None else len(text)
        if _WATCH_DENIED.search(text, clause_start, start) is not None:
            continue
        if _WATCH_BY_OTHERS.search(text, end, clause_end) is not None:
            continue
        if match.group("keep") is not None:
            before = text[clause_start:start].strip(_CLAUSE_TRIM)
            if before and _KEEP_ASKED.search(before) is None:
                continue
        return True
    return False


_NUMBER_WORDS = {
    "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
    "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20, "thirty": 30, "fifty": 50,
    "hundred": 100,
    # a count given loosely ("rerun it a handful of times", "a few more times"): read at
    # the most it may mean
    "few": 5, "handful": 10, "several": 10, "bunch": 10, "dozen": 12,
}
_ASKED_REPETITIONS = re.compile(
    # a verb of doing it again, then the count within the clause: "run it 15 times", "repeat
    # the request 20 times", "ping it 10 more times", "execute the suite ten times in a row",
    # "run 25 iterations"
    r"(?ai)\b(?:run|re-?run|repeat|execute|exec|try|call|invoke|send|hit|ping|query|poll|check"
    r"|measure|time|benchmark|fire|replay|loop)\b"
    r"[^.!?;:,\n\u2014\u2013]{0,80}?\b(\d{1,6}|(?:a\s+)?(?:" + "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True)) + r"))"
    r"(?:\s+more)?(?:\s+of)?[ \t]*(?:x\b|times\b|iterations\b|rounds\b|trials\b)"
)
"""A request to do something a given number of times ("Run it 15 times locally and tell me
the failure rate"): the count is the only group. Not "the last 20 runs" (a count of runs
is no request to run). Read in its clause (:func:`asked_repetitions`)."""
_ASKED_STREAK = re.compile(
    # a streak of passing runs asked for: "(at least 10 consecutive passes)", "until you get
    # 5 green runs in a row"; not "the last 20 consecutive runs failed" (told, not asked)
    r"(?ai)\b(at\s+least|until|get|see|need|want|show|demonstrate)\s+(?:(?:you|we|it)\s+)?"
    r"(?:(?:get|see|have)\s+)?(\d{1,6}|" + "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True)) + r")"
    r"\s+(?:(?:consecutive|successive|straight|clean|green|passing)\s+(?:passes|runs|green\s+runs)\b"
    r"|(?:passes|runs|green\s+runs|passing\s+runs)\s+in\s+a\s+row\b)"
)
"""A streak of runs asked for by its length ("at least 10 consecutive passes", "5 green runs
in a row"), after a word that asks for it: read as a count of repetitions, twice the number
after "at least" (the least it asks for, and the agent may go past it)."""
_STREAK_TOLD = re.compile(r"(?ai)\b(?:has|have|had|was|were|been|fail\w*|red|broken|regress\w*)\b")
_ASKED_RUN_OPENING = re.compile(
    r"(?ai)(?:(?:please|pls|kindly|can|could|would|will|you|just|and|then|now|also|go|ahead|so)\s+){0,4}"
)
"""What may stand before the verb in its clause ("please", "can you", "and then"): the
verb opens the request, not a story ("I've tried to call you 3 times")."""
ASKED_REPETITIONS_MAX = 100
"""The most repetitions a message is read as asking for."""


def asked_repetitions(text: str) -> int:
    """How many times a user's message asks the agent to do something again ("run it 15
    times", "repeat the request twenty times", "run 25 iterations"), in its first
    :data:`ASKED_WATCH_READ` characters, at most :data:`ASKED_REPETITIONS_MAX`; 0 when it
    asks for no count of 3 or more ("so many more" adds to a count asked before it), or
    when the verb does not open its clause (a clause
    ends at ``.!?;:,``, a dash or a line end; "please", "can you", "and then" may stand
    before it): "don't run it 15 times", "run it once, not 15 times", "I've tried to call
    you 3 times", "the last 20 runs" ask for nothing. The same call that many times is
    what the user asked for, not a loop (``[waits] asked_repetitions``)."""
    head = text[:ASKED_WATCH_READ]
    low = head.lower()
    asked = 0
    if "time" in low or "x" in low or "iteration" in low or "round" in low or "trial" in low:
        for match in _ASKED_REPETITIONS.finditer(head):
            start = match.start()
            before = head[_clause_start(head, start):start].strip(_CLAUSE_TRIM)
            if before and _ASKED_RUN_OPENING.fullmatch(before + " ") is None:
                continue  # the verb does not open its clause: told, not asked
            count = _asked_count(match.group(1).lower().split()[-1])
            # (so many more, after a count asked before: "run it 10 times ..., fix it, and
            # then run it 10 more times" is twenty runs)
            asked = min(asked + count, ASKED_REPETITIONS_MAX) if " more " in match[0].lower() else max(asked, count)
    if "row" in low or "consecutive" in low or "successive" in low or "straight" in low or (
        "clean" in low or "green" in low or "passing" in low
    ):
        for match in _ASKED_STREAK.finditer(head):
            start = match.start()
            if _STREAK_TOLD.search(head, _clause_start(head, start), start) is not None:
                continue  # "has failed for at least 50 consecutive runs": history, not a request
            # at least so many: the agent may go past it
            twice = 2 if match.group(1).lower().startswith("at") else 1
            asked = max(asked, _asked_count(match.group(2).lower(), twice))
    return asked


def _clause_start(head: str, start: int) -> int:
    """Where the clause that holds ``head[start]`` opens (after a mark of :data:`_CLAUSE_MARKS`)."""
    return max(head.rfind(mark, 0, start) for mark in _CLAUSE_MARKS) + 1


def _asked_count(word: str, factor: int = 1) -> int:
    """The count a request's number word gives, times ``factor``, at most
    :data:`ASKED_REPETITIONS_MAX`; 0 under 3 (no run of repetitions)."""
    count = (int(word) if word.isdigit() else _NUMBER_WORDS.get(word, 0)) * factor
    return min(count, ASKED_REPETITIONS_MAX) if count >= 3 else 0


def names_restart(tool: str) -> bool:
    """Whether a tool's name says its call restarts what it names (:data:`_RESTART_NAME`)."""
    return _RESTART_NAME.search(tool) is not None


def commands_restart(command: str) -> bool:
    """Whether a command line restarts a device or a service (:data:`_RESTART_COMMAND`):
    after it, what it restarted is down for a while, and a probe that fails or answers
    the same until it is back is waiting (``[waits] restart_seconds``)."""
    head = command[:RESTART_COMMAND_READ].lower()
    # (the words first, in C: most command lines hold none, and the search is the cost)
    if not ("reboot" in head or "restart" in head or "reload" in head or "shutdown" in head
            or "kickstart" in head or "graceful" in head or "instances reset" in head
            or ("install" in head and ("activate" in head or "install all" in head))):
        return False
    return _RESTART_COMMAND.search(head) is not None


def _shell_block(args: dict[Any, Any]) -> bool:
    """Whether a code block's ``language`` says it is shell (any other value, a list or a
    number included, says it is not)."""
    language = args.get("language")
    return type(language) is str and language.lower() in SHELL_LANGUAGES


def _joined_prefix(parts: list[object]) -> str | None:
    """An argument list (``["bash", "-lc", "..."]``) as one line, joined only as far as
    :data:`COMMAND_TEXT_LIMIT` characters (nothing past it is read); None unless every
    part joined is a string."""
    taken: list[str] = []
    size = 0
    for part in parts:
        if not isinstance(part, str):
            return None
        taken.append(part)
        size += len(part) + 1
        if size > COMMAND_TEXT_LIMIT:
            break
    return " ".join(taken)


def _basename(token: str) -> str:
    return token.rstrip("/").rpartition("/")[2] or token


def _program_tokens(tokens: list[str]) -> list[str]:
    """Tokens from the program on: environment assignments, wrappers (``sudo -u x``,
    ``timeout 30``), ``bash -lc "..."`` and ``conda run -n env`` skipped."""
    i, n = 0, len(tokens)
    while i < n:
        token = tokens[i]
        if "=" in token and not token.startswith(("-", "=")) and token.split("=", 1)[0].isidentifier():
            i += 1
            continue
        name = _basename(token)
        if name in _WRAPPERS:
            i += 1
            # timeout 30 cmd / nice -n 5 cmd: skip the wrapper's own flags and numbers
            takes_value = _WRAPPER_VALUE_FLAGS.get(name, frozenset())
            while i < n and (tokens[i].startswith("-") or tokens[i][:1].isdigit()):
                i += 2 if tokens[i] in takes_value else 1
            continue
        if name in _SHELLS and i + 1 < n and tokens[i + 1][:1] == "-" and "c" in tokens[i + 1][1:]:
            # bash -lc "apt-get install x" (argument lists joined by spaces): the quoted command
            tokens = _given_command(tokens, i + 2, "'\"")
            i, n = 0, len(tokens)
            continue
        if name.lower() in _POWERSHELLS:
            # pwsh -NoProfile -c "Get-ChildItem ... | Select-String ...": the command it is
            # given (its other options skipped; `-File` runs a script, no command line)
            j = i + 1
            while j < n and tokens[j][:1] == "-" and tokens[j].lower() not in _POWERSHELL_COMMAND_FLAGS:
                j += 2 if tokens[j].lower() in _POWERSHELL_VALUE_FLAGS else 1
            if j < n and tokens[j].lower() in _POWERSHELL_COMMAND_FLAGS:
                tokens = _given_command(tokens, j + 1, "'\"&{( ")
                i, n = 0, len(tokens)
                continue
        if name in _ENV_RUNNERS and i + 1 < n and tokens[i + 1] == "run":
            i += 2
            while i < n and tokens[i].startswith("-"):
                i += 2 if tokens[i] in _ENV_RUN_VALUE_FLAGS else 1
            continue
        break
    return tokens[i:]


def _given_command(tokens: list[str], at: int, opening: str) -> list[str]:
    """The tokens of the command a shell is given from ``at`` on, the ``opening`` marks
    before its first word (a quote, PowerShell's ``& {``) taken off."""
    given = tokens[at:]
    if given:
        given[0] = given[0].lstrip(opening)
        if not given[0]:
            del given[0]
    return given


def _segment_action(tokens: list[str]) -> tuple[str, str]:
    """(program, sub-command or script) of one segment's tokens (program first)."""
    program = _basename(tokens[0].strip("'\"")).lower()
    rest = tokens[1:]
    if _PYTHON.match(program):
        program = "python"
        for j, token in enumerate(rest):
            if token == "-m" and j + 1 < len(rest):
                module = _basename(rest[j + 1]).lower()
                sub = _first_word(rest[j + 2 :]) if module in _SUBCOMMAND_PROGRAMS else ""
                return module, sub
            if token == "-c":
                return "python", "-c"
            if not token.startswith("-"):
                return "python", _basename(token)
        return "python", ""
    if program in _SUBCOMMAND_PROGRAMS:
        at = _word_at(rest, _VALUE_FLAGS.get(program, ()))
        if at < 0:
            return program, ""
        sub = rest[at].lower().rstrip("'\"")
        if sub == "compose" and program == "docker":
            # Compose as a plugin: its own sub-command is what the line does.
            program, rest = "docker-compose", rest[at + 1 :]
            at = _word_at(rest, _VALUE_FLAGS["docker-compose"])
            if at < 0:
                return program, ""
            sub = rest[at].lower().rstrip("'\"")
        elif sub == "lfs" and program == "git":
            # Git LFS as git's sub-command: its own sub-command is what the line does.
            program, rest = "git-lfs", rest[at + 1 :]
            at = _word_at(rest, ())
            if at < 0:
                return program, ""
            sub = rest[at].lower().rstrip("'\"")
        return program, sub
    return program, ""


def _program_writes(program: str, sub: str, segment: str) -> bool:
    """Whether a segment's program and sub-command change a file (``sed -i``, ``rm``,
    ``git commit``, ``docker-compose up``...)."""
    if program in _WRITE_PROGRAMS:
        return True
    if program in ("sed", "perl", "ruby"):
        return _IN_PLACE.search(segment) is not None
    return sub in _WRITE_SUBCOMMANDS.get(program, ())


def _container_command(tokens: list[str]) -> list[str]:
    """The command a ``docker exec`` / ``docker compose exec`` / ``podman exec`` segment
    runs in its container (its program first), or ``[]``."""
    rest = tokens[1:]
    at = _word_at(rest, _VALUE_FLAGS.get(_basename(tokens[0].strip("'\"")).lower(), ()))
    if at >= 0 and rest[at].lower().strip("'\"") == "compose":
        rest = rest[at + 1 :]
        at = _word_at(rest, _VALUE_FLAGS["docker-compose"])
    if at < 0 or rest[at].lower().strip("'\"") != "exec":
        return []
    inner = rest[at + 1 :]
    target = _word_at(inner, _EXEC_VALUE_FLAGS)  # the container or the service
    return _program_tokens(inner[target + 1 :]) if 0 <= target < len(inner) - 1 else []


_CONTAINER_PROGRAMS = frozenset({"docker", "docker-compose", "podman"})
_EXEC_VALUE_FLAGS = ("-u", "--user", "-w", "--workdir", "-e", "--env", "--env-file", "--index",
                     "--detach-keys")
"""Flags of ``docker exec`` / ``docker compose exec`` that take the next token as their value."""


def _word_at(tokens: list[str], value_flags: tuple[str, ...] = ()) -> int:
    """The index of the first token that is no flag (nor a flag's value), -1 when none."""
    skip = False
    for i, token in enumerate(tokens):
        if skip:
            skip = False
            continue
        if token.startswith("-"):
            skip = token in value_flags
            continue
        return i
    return -1


# Flags before a sub-command that take the next token as their value (`git -C repo
# status`, `kubectl -n prod rollout status`): the value is not the sub-command.
_VALUE_FLAGS: dict[str, tuple[str, ...]] = {
    "git": ("-C", "-c"),
    "kubectl": ("-n", "--namespace", "--context", "--kubeconfig", "--cluster", "--user", "-s",
                "--server"),
    "helm": ("-n", "--namespace", "--kube-context", "--kubeconfig"),
    "docker": ("-H", "--host", "--context", "-c", "--config", "-l", "--log-level"),
    "docker-compose": ("-f", "--file", "-p", "--project-name", "--env-file", "--profile",
                       "--project-directory", "--ansi", "--progress", "--parallel"),
    "podman": ("--url", "--connection", "-c", "--log-level", "--root", "--runroot"),
    # `mvn -o -pl gson test`: the module list is no goal
    "mvn": ("-pl", "--projects", "-f", "--file", "-s", "--settings", "-gs", "--global-settings",
            "-T", "--threads", "-rf", "--resume-from", "-P", "--activate-profiles", "-l",
            "--log-file", "-t", "--toolchains", "-b", "--builder", "-D", "--define"),
    "gradle": ("-p", "--project-dir", "-b", "--build-file", "-c", "--settings-file", "-g",
               "--gradle-user-home", "-x", "--exclude-task", "-D", "-P", "-I", "--init-script"),
    "npm": ("--prefix", "-w", "--workspace"),
    "pnpm": ("-C", "--dir", "--filter", "-F"),
    "yarn": ("--cwd",),
    "go": ("-C",),
}
_VALUE_FLAGS["mvnw"] = _VALUE_FLAGS["mvn"]  # the wrappers take their tool's options
_VALUE_FLAGS["gradlew"] = _VALUE_FLAGS["gradle"]


def _first_word(tokens: list[str], value_flags: tuple[str, ...] = ()) -> str:
    """The first token that is no flag, lower-cased, or "" (:func:`_word_at`)."""
    at = _word_at(tokens, value_flags)
    # (rstrip: the end of a quoted command, bash -c "make test")
    return tokens[at].lower().rstrip("'\"") if at >= 0 else ""


class CallFacts:
    """What one call does: its action, and whether it writes, searches or waits.

    ``shell``: the call's only write is a change of the shell later calls run in
    (``export``, ``cd``, ``source``, ``conda activate``...): no file is written, no
    writing program runs. Its action alone cannot say so: ``cd /repo && echo x >
    f.py`` has the action ``cd`` (``echo`` only sets the stage) and writes a file.

    ``ask``: the call asks the agent's user (a tool the classification calls
    ``user_input``, ``ask_human``, ``ask_followup_question``, or a call sent with
    ``kind: "user_input"``): its answer is the user's reply, not a fact of the world.

    ``read``: the call is known to only look (a tool the classification calls ``read``,
    ``resolve`` or ``verify``, or one it does not classify whose name holds no verb of
    an act, :func:`names_no_act`; a command runner's call that is no write and no wait).
    A call of an unclassified tool named with such a verb is not known to: it may have
    done something.
    """

    __slots__ = ("action", "ask", "listens", "read", "search", "shell", "wait", "waits_first", "write")

    def __init__(
        self, action: str, write: bool, search: bool, wait: bool = False, shell: bool = False,
        ask: bool = False, read: bool = False,
    ) -> None:
        self.action = action
        self.ask = ask
        self.write = write
        self.search = search
        self.wait = wait
        self.shell = shell
        self.read = read
        self.waits_first = False
        # a command line that listens for what comes, for a bounded time (listens_bounded)
        self.listens = False


_CODE_KEYS = ("code", "script", "source", "cell_source")
_CODE_WRITES = re.compile(
    # open(path, "w") and mode="w" anywhere. The path argument is matched up to its first
    # comma only: a scan that may run on past commas rescans from every "open(" of a
    # crafted line (quadratic).
    r"write|open\((?:\"[^\"]{0,200}\"|'[^']{0,200}'|[^),'\"]){0,200},\s*['\"][rb]*[wax+]"
    r"|mode\s*=\s*['\"][rb]*[wax+]|remove|unlink|rename|replace"
    r"|subprocess|os\.system|shutil"
    r"|mkdir|patch|install|sed -i"
    # a shell line of a notebook that redirects (`!ls > files.txt`), or a shell cell
    # (`%%bash`) that does; any other `>` in code compares (`df[df.amount > 100]`)
    r"|^[ \t]*!.*>|\A\s*%%(?:bash|sh|script)\b[\s\S]*>",
    re.MULTILINE,
)


_CODE_SLEEP = re.compile(
    r"(?:\s*(?:import (?:time|asyncio)|from (?:time|asyncio) import sleep)\s*[;\n])*"
    r"\s*(?:await )?(?:time\.|asyncio\.)?sleep\(\s*\d{1,6}(?:\.\d{1,3})?\s*\)\s*;?\s*"
)
"""Code that does nothing but sleep (its imports and one sleep call)."""


_CODE_SLEEP_FIRST = re.compile(
    # possessive: no run of blank lines or imports can be split two ways
    r"(?:[ \t\n]*+(?:import (?:time|asyncio)|from (?:time|asyncio) import sleep)[ \t]*+[;\n])*+"
    r"[ \t\n]*+(?:await )?+(?:time\.|asyncio\.)?+sleep\([ \t]*+(?P<seconds>\d{1,6})(?:\.\d{1,3})?+[ \t]*+\)[ \t]*+[;\n]"
)
"""Code that opens with a sleep (after its imports), then goes on (read in its first
1,024 characters)."""
_CODE_LOOP = re.compile(r"^[ \t]*+(?:while|for|async for)\b", re.MULTILINE)
_CODE_ACTS = re.compile(
    r"\.(?:post|put|patch|delete\w*|remove\w*|execute\w*|executemany|create\w*|cancel\w*|terminate\w*"
    r"|commit|rollback|send\w*|update\w*|insert\w*|upload\w*|start\w*|stop\w*|restart\w*|run\w*"
    r"|submit\w*|add\w*|set\w*|put_\w+|invoke\w*|publish\w*|trigger\w*|retry\w*|reboot\w*|kill\w*)\s*\("
)
"""A method call that acts (``requests.post(...)``, ``s3.delete_object(...)``, ``cur.execute(...)``,
``emr.add_job_flow_steps(...)``): code that makes one after its sleep is no read."""
PACED_SLEEP_SECONDS = 10
"""Shortest sleep before a read that paces a poll: a second or two is a pause between
retries, not a check scheduled."""


def code_facts(code: str) -> CallFacts:
    """Facts of free code handed to an interpreter tool: no readable action; a write
    unless the code plainly only reads (nothing that could change a file or run one); a
    wait when all it does is sleep; a read asked after a deliberate wait
    (``waits_first``) when it opens with a sleep of :data:`PACED_SLEEP_SECONDS` or more and
    then only reads: no write, no method call that acts (:data:`_CODE_ACTS`), no loop
    (``time.sleep(180)`` then ``describe_step(...)``: an agent whose only tool runs code
    paces its polls so, as a shell's ``sleep 120; ray job status`` does)."""
    if "sleep" in code:
        if len(code) <= 160 and _CODE_SLEEP.fullmatch(code):
            return CallFacts("", False, False, True)
        first = _CODE_SLEEP_FIRST.match(code, 0, 1024)
        if first is not None and int(first["seconds"]) >= PACED_SLEEP_SECONDS:
            rest = code[first.end() : first.end() + 4096]
            if (
                rest.strip() and _CODE_WRITES.search(rest) is None and _CODE_ACTS.search(rest) is None
                and _CODE_LOOP.search(rest) is None
            ):
                looked = CallFacts("", False, False)
                looked.waits_first = True
                return looked
    return CallFacts("", bool(_CODE_WRITES.search(code[:4096])), False)


def runner_facts(args: object, code_tool: bool = False, kind: str | None = None) -> CallFacts:
    """Action, write and search facts of a command-runner call from its arguments.

    ``code_tool``: the runner is an interpreter (``python``, ``ipython``), whose
    text is code, not a command line. ``kind``: the event's; ``"write"`` (the runtime
    says the call writes) makes it a write whatever its text, and no mere change of
    the shell.
    """
    facts = _runner_facts(args, code_tool)
    if kind == "write":
        facts.write = True
        facts.shell = False
        if facts.waits_first:  # a write after a wait: a wait and a write, as any such line
            facts.waits_first = False
            facts.wait = True
    facts.read = not facts.write and not facts.wait
    return facts


KEY_WAIT_SECONDS = 5
"""Seconds a terminal is told to wait after a key for the key to be a wait as well: a
second lets a pager redraw; a minute watches a build."""
_NO_INPUT_KEYS = frozenset({"chars", "keystrokes", "input", "command", "cmd", "code", "text"})
"""Arguments that carry input for a running command: a call with none of them and a
``session_id`` (Codex's ``write_stdin``) only reads what the command printed since."""


def _runner_facts(args: object, code_tool: bool) -> CallFacts:
    args = call_args(args)
    if isinstance(args, dict):
        for key in _CODE_KEYS:
            value = args.get(key)
            if isinstance(value, str):
                if _shell_block(args):
                    break  # a block of shell: a command line (command_text)
                return code_facts(value)
        command = args.get("command")
        keys = args.get("keystrokes", args.get("chars")) if command is None else None
        if keys is None and command is None and "session_id" in args and _NO_INPUT_KEYS.isdisjoint(args):
            keys = ""  # Codex's `write_stdin(session_id=3)`: `chars` left out is nothing typed
        if keys == "":
            # No keys for a terminal (Terminus' `send_keys` with only a `duration_sec`,
            # Codex's `write_stdin` with no `chars`): a wait, then a look at the screen or
            # the output since, read as any read after a wait of its own. (Enter, "\n",
            # is a key pressed.)
            looked = CallFacts("", False, False)
            looked.waits_first = True
            return looked
        if type(keys) is str and keys.isspace():
            # a key that is a blank (Enter, a space paging `less`): pressed, then the
            # screen read (no command line: a shell would read an empty one as a wait);
            # with a wait of its own (`duration_sec=60` while a build prints nothing),
            # read as any read after a wait
            pressed = CallFacts("keys", False, False)
            waited = args.get("duration_sec", args.get("timeout_sec"))
            if isinstance(waited, (int, float)) and waited >= KEY_WAIT_SECONDS:
                pressed.waits_first = True
            return pressed
        if command is None:
            action = args.get("action")
            acted = args  # (where the keys of a keypress are)
            if type(action) is dict:
                # OpenAI's computer-use shape: {"action": {"type": "keypress", "keys": [...]}}
                acted = action
                action = action.get("type")
            elif action is None:
                # ... or its action object sent as the arguments: {"type": "wait"}
                action = args.get("type")
            if type(action) is str and action in COMPUTER_ACTIONS:
                # A computer-use tool: what it does is its action; everything but a
                # look at the screen, a wait, a scroll or a key that moves the view
                # (`Page_Down`) changes what is on it.
                write = action in COMPUTER_ACTS and not (
                    action in ("key", "keypress")
                    # (OpenAI's shape nests the keys in the action: {"type": "keypress",
                    # "keys": ["PAGEDOWN"]})
                    and navigation_keys(acted)
                )
                return CallFacts(action, write, False, action == "wait")
        elif isinstance(command, str) and command in EDITOR_COMMANDS:
            path = ""
            for key in _PATH_KEYS:
                value = args.get(key)
                if isinstance(value, str):
                    path = value
                    break
            action = f"{command} {path}" if path else command
            return CallFacts(action, command in EDITOR_WRITES, False)
    text = command_text(args)
    if text is None and code_tool and isinstance(args, dict) and isinstance(args.get("query"), str):
        text = args["query"]  # LangChain's `python_repl_ast` takes its code as `query`
    if text is None and isinstance(args, dict):
        # No command line: an SQL statement in its own argument is read as one.
        statement = sql_statement(args)
        if statement is not None:
            return statement
    if not text or not text.strip():
        # An empty command line (not an absent one) asks for more output: a wait.
        return CallFacts("", False, False, text is not None)
    if code_tool:
        return code_facts(text)
    facts = shell_facts(text)
    facts.listens = listens_bounded(text)
    return facts


_SQL_KEYS = ("sql", "query", "statement")
_SQL_OBJECTS = (
    r"(?:table|index|view|schema|database|function|procedure|trigger|sequence|type|extension"
    r"|policy|role|user|column|constraint|materialized\s+view)"
)
_SQL_PRELUDE = (
    r"\s*(?:(?:--[^\n]*\n|/\*(?:[^*]|\*(?!/))*\*/|begin(?:\s+(?:transaction|work))?\s*;"
    r"|start\s+transaction\s*;|set\s[^;']{0,200};)\s*)*"
)
_SQL_WRITE = re.compile(
    # a statement that changes what is stored, by the shape only SQL has ("update me on the
    # outage" and "create react app docs" are words, not statements)
    _SQL_PRELUDE + r"(?:create\s+(?:or\s+replace\s+|unique\s+|temp(?:orary)?\s+|if\s+not\s+exists\s+)*"
    + _SQL_OBJECTS + r"|(?:alter|drop)\s+" + _SQL_OBJECTS
    + r"|(?:insert|replace|upsert)\s+(?:or\s+\w+\s+|ignore\s+)?(?:into\s+)?[\w.\"`\[\]]+\s*(?:\(|values\b|select\b|set\b|default\b)"
    r"|delete\s+(?:[\w.\"`]+\s+)?from|update\s+[\w.\"`\[\]]+(?:\s+(?:as\s+)?\w+)?\s+set"
    # MERGE with its INTO left out, as BigQuery and SQL Server allow (`MERGE `p.d.t` T
    # USING ... WHEN MATCHED`: the clause every MERGE has, so "merge sort using recursion"
    # is no statement)
    r"|merge\s+into|merge\s+(?:top\s*\([^)]{0,20}\)\s*(?:percent\s+)?)?[\w.\"`\[\]-]+(?:\s+with\s*\([^)]{0,80}\))?"
    r"(?:\s+(?:as\s+)?\w+)?\s+using\b[^;]{0,2000}?\bwhen\s+(?:not\s+)?matched\b|truncate\s+(?:table\s+)?[\w.\"`]+\s*(?:;|$)|(?:grant|revoke)\s+\w[\w, ]{0,80}?\s{1,16}on\b"
    r"|comment\s+on\s+\w+|rename\s+table|analyze\s+[\w.\"`]+\s*(?:;|$)"
    r"|vacuum\b|reindex\b|refresh\s+materialized|call\s+[\w.]+\s*\(|copy\s+[\w.\"]+[^;]{0,200}?\bfrom)",
    re.IGNORECASE,
)
_SQL_READ = re.compile(
    _SQL_PRELUDE + r"(?:select\b[^;]{0,400}?\bfrom\b"
    r"|select\s+(?:-?\d[\d.]*|'[^']{0,200}'|\w+\([^)]{0,200}\))\s*(?:,[^;]{0,200})?(?:;|$)"
    r"|with\s+(?:recursive\s+)?\w+\s*(?:\([^)]{0,200}\)\s*)?as\s*\(|explain\b"
    r"|show\s+(?:tables|columns|databases|schemas|create|index|indexes|variables|status|grants)\b"
    r"|desc(?:ribe)?\s+[\w.\"`]+\s*;?\s*$|pragma\s+\w+|values\s*\()",
    re.IGNORECASE,
)
_SQL_WRITE_INSIDE = re.compile(
    r"\b(?:insert\s+into|delete\s+from|update\s+[\w.\"`]+\s+set|merge\s+into"
    # (inside a statement already read as SQL, `MERGE t USING` is enough: no search for
    # its WHEN from every such pair, which a crafted statement repeats)
    r"|merge\s+(?:top\s*\([^)]{0,20}\)\s*)?[\w.\"`\[\]-]+(?:\s+(?:as\s+)?\w+)?\s+using)\b",
    re.IGNORECASE
)
_SQL_LITERAL = re.compile(
    r"--[^\n]*|/\*(?:[^*]|\*(?!/))*(?:\*/|\Z)|'(?:[^'\\]|\\.|'')*(?:'|\\?\Z)"
    r"|\"(?:[^\"\\]|\\.|\"\")*(?:\"|\\?\Z)"
)
"""A comment, a string literal or a double-quoted name or string: its words are no
statement ("where body = 'please update x set y'", "/* ; drop table t */"); a backslash
escape inside included. One left open runs to the end of the text (as it would for the
database), so it is scanned once: matched to the end, not searched again from every later
opener. A double-quoted one is read first where it comes first, so an apostrophe inside it
(``"o'brien"``) opens no literal that would hide a statement after it."""


def _bare_sql(head: str) -> str:
    """``head`` with its comments and literals replaced by an empty literal (a double-quoted
    name by ``""``, which still reads as a name)."""
    return _SQL_LITERAL.sub(lambda m: '""' if m.group(0)[:1] == '"' else "''", head)
_SQL_STATEMENTS = 16
"""Statements after the first read for a write among them (``SELECT 1; DROP TABLE t``)."""
_SQL_HEAD_LIMIT = 4096
SQL_ACTION = "sql:"
"""Prefix of the action of an SQL statement sent to a command runner (``sql:write``)."""


def _writes_within(head: str) -> bool:
    """Whether a read's text, its comments and literals taken out, holds a write: inside it
    or as a statement after it."""
    bare = _bare_sql(head)
    return _SQL_WRITE_INSIDE.search(bare) is not None or (";" in bare and any(
        _SQL_WRITE.match(statement) for statement in bare.split(";", _SQL_STATEMENTS)[1:]
    ))


def sql_statement(args: dict[Any, Any]) -> CallFacts | None:
    """Facts of an SQL statement sent to a command runner as its ``sql``, ``query`` or
    ``statement`` argument (``execute_sql(query="create index ...")``, a database MCP
    server's tool matched by ``execute*``), read by the shapes only a statement has: a
    write (``CREATE INDEX``, ``INSERT INTO``, ``UPDATE t SET``, ``DELETE FROM``, ``ALTER
    TABLE``...; also a ``WITH`` or ``EXPLAIN ANALYZE`` that holds one) or a read
    (``SELECT ... FROM``, ``WITH x AS (``, ``EXPLAIN``, ``SHOW TABLES``...), its action
    ``sql:write`` or ``sql:read``; a read with a write stacked after it (``SELECT 1; DROP
    TABLE t``, up to :data:`_SQL_STATEMENTS` statements) is a write, and the words of its
    string literals are data (``where body = 'please update x set y'`` reads). ``None``
    for anything else: words ("update me on the outage", "show me failing orders") are no
    statement."""
    for key in _SQL_KEYS:
        value = args.get(key)
        if type(value) is str:
            head = value.lstrip()[:_SQL_HEAD_LIMIT]
            if _SQL_WRITE.match(head):
                return CallFacts(SQL_ACTION + "write", True, False)
            if _SQL_READ.match(head):
                # Its literals are data; a write inside it (WITH d AS (DELETE ...), EXPLAIN
                # ANALYZE UPDATE) or in a statement after it (SELECT 1; DROP TABLE t) is a
                # write.
                # (Most reads hold neither: one search, and the comments and literals are
                # taken out only where a write or a second statement may be.)
                if (";" in head or _SQL_WRITE_INSIDE.search(head)) and _writes_within(head):
                    return CallFacts(SQL_ACTION + "write", True, False)
                return CallFacts(SQL_ACTION + "read", False, False)
            return None
    return None


_CODE_TOOL = re.compile(
    r"(?:.*[._/:])?(?:i?python\d*|jupyter\w*|notebook\w*|repl|code_interpreter|python_repl\w*"
    r"|run_cell|execute_code_cell|run_code_cell|exec_code_cell|run_python\w*)$"
)


def is_code_tool(tool: str) -> bool:
    """Whether a runner's text is code for an interpreter rather than a command line."""
    return bool(_CODE_TOOL.match(tool.lower()))


_DB_CLIENTS = frozenset({
    "psql", "pgcli", "mysql", "mariadb", "mycli", "sqlite3", "litecli", "duckdb", "trino",
    "presto", "bq", "snowsql", "clickhouse-client", "clickhouse", "spark-sql", "beeline",
    "hive", "impala-shell", "sqlcmd", "sqlplus", "cockroach", "usql", "vsql", "isql",
})
"""Programs that run the SQL statement they are given (:func:`shell_facts`)."""
_CLIENT_STATEMENT = re.compile(
    r"(?:(?<![\w-])(?:-c|-e|-q|--command|--execute|--query)|(?<![\w-])query(?:[ \t]+-[^\s\"']*)*+)"
    r"[ \t=]+(?:\"((?:[^\"\\]|\\.){1,4096})\"|'([^']{1,4096})')"
)
"""The statement a database client is given: the quoted argument of its statement flag
(``psql -c``, ``mysql -e``, ``trino --execute``, ``clickhouse-client --query``) or of ``bq
query`` after its flags; not any quoted string of the line (``echo "DELETE FROM jobs is
next"``)."""


_BACKGROUND = re.compile(r"(?:^|[\s;&|(])(?:nohup|setsid)\s|(?<![&>|])&(?![&>])")
"""A job sent to the background on a command line (``... &``, ``nohup``, ``setsid``; not
``&&``, ``2>&1``, ``&>``, nor a ``&`` in a quoted word, a URL's query, which the caller
takes out first, nor ``nohup.out``)."""
_SHELL_LOOP_HEAD = re.compile(r"\s*(?:for|while|until|select)\b")
"""A command line that opens with a shell loop."""


def shell_facts(text: str) -> CallFacts:
    """Facts of a shell command line (see the module docstring for the heuristic)."""
    head = text if len(text) <= 4096 else text[:4096]
    write = (
        (_redirects(head) and not _writes_scratch_read_back(head)) or bool(_HEREDOC.search(head))
        or ("<<<" in head and _here_string_writes(head))
    )
    search = False
    slept = _SLEEP.search(head) if "sleep" in head else None  # the line's first sleep
    wait = slept is not None
    blocking = False
    action = ""
    fallback = ""
    shell_change = False
    # At most MAX_SEGMENTS segments are parsed (each is Python work). A write further on
    # is still seen: by the redirection and here-document tests over the whole head, and
    # by one pattern over the rest that finds a writing program at a segment's start.
    segments = _SEGMENT_SPLIT.split(head, MAX_SEGMENTS)
    if len(segments) > MAX_SEGMENTS:
        late = segments.pop()
        write = write or bool(_LATE_WRITE.search(late)) or _fixes(late)
    db_client = False  # a database client among its programs (`psql`, `trino`, `bq`)
    leading_sleep: bool | None = None  # whether the line's first program is `sleep`
    previous = last_program = ""  # the program of the segment before, and of this one
    looping = False  # a shell loop after it (`...; until curl ...; do sleep 2; done`)
    for segment in segments:
        tokens = _program_tokens(segment.split())
        if not tokens or tokens[0][:1] == "#":
            continue  # nothing, or a comment (a shebang too)
        program, sub = _segment_action(tokens)
        previous, last_program = last_program, program
        if leading_sleep is None:
            leading_sleep = program == "sleep"
        elif program in _SHELL_LOOPS:
            looping = True
        if (program, sub) in _BLOCKING_AFTER:
            after = _BLOCKING_AFTER[(program, sub)]
            if after is None or (after[0].search(segment) and after[1] in segment):
                blocking = True  # a read that waits (`kubectl rollout status`), no write
                if not action:
                    action = f"{program} {sub}" if sub else program
                continue
        if sub == "exec" and program in _CONTAINER_PROGRAMS:
            # A command run in a container (`docker exec db psql -c "INSERT ..."`, `docker
            # compose exec -T web sed -i ...`): what it runs decides whether the line
            # writes; the line's action stays the exec (work in the task's containers).
            inner = _container_command(tokens)
            if inner:
                inner_program, inner_sub = _segment_action(inner)
                write = write or _program_writes(inner_program, inner_sub, segment)
                db_client = db_client or inner_program in _DB_CLIENTS
        if _program_writes(program, sub, segment) or ("--" in segment and _fixes(segment)):
            write = True
        if program in _SEARCH_PROGRAMS or (program == "git" and sub == "grep"):
            # the searched-for segment leads the line, or comes right after what only lists
            # or prints what it looks through (`cat a.log | grep x`; not `ls && make && grep`)
            search = search or not action or previous in _LISTERS
        elif search and program in _CHECKSUM_PROGRAMS and ("-c" in tokens or "--check" in tokens):
            # `grep ' a.fastq.gz$' md5sums.txt | md5sum -c -`: what the line answers is the
            # check of the file the search picked out ("a.fastq.gz: OK"), not a search's
            # hits; thirty files checked one by one are thirty answers
            search = False
        if program in _PRELUDE or (program in _ENV_RUNNERS and sub in _ENV_PRELUDE_SUBCOMMANDS):
            fallback = fallback or (f"{program} {sub}" if sub else program)
            if program not in _PRELUDE or (program in _SHELL_CHANGES and (len(tokens) > 1 or program != "export")):
                shell_change = True
            continue
        if program in _DB_CLIENTS:
            db_client = True
        if not action:
            action = f"{program} {sub}" if sub else program
    if db_client and not write:
        # A database client given a statement that changes what is stored (`psql -c "ALTER
        # TABLE ..."`, `trino --execute "INSERT ..."`, `bq query "DELETE ..."`): its
        # statement argument is read in the whole head, its own `;` having split the segment.
        write = any(
            (facts := sql_statement({"query": quoted})) is not None and facts.write
            for pair in _CLIENT_STATEMENT.findall(head) for quoted in pair if quoted
        )
    waits_first = False
    if wait and leading_sleep and action and not write and not blocking and not looping \
            and action.split(" ", 1)[0] not in _SHELL_LOOPS:
        # `sleep 120; ray job status ...`: a wait, then a read whose answer is evidence like
        # any other read's, asked after a deliberate wait (CallFacts.waits_first).
        wait = False
        waits_first = True
    # A sleep after a job launched in the background (`nohup python train.py ... & sleep 45;
    # tail f0.log`) waits for that launch's effect: the line is the launch with its check,
    # and the same launch answered alike again is no wait. (A sleep before a write, `sleep
    # 10 && npm run migrate`, or after one that waits for something else to come up,
    # `docker compose up -d && sleep 10 && curl ...`, stays a wait, as does a shell loop.)
    if wait and write and not leading_sleep and not looping and slept is not None and slept.start():
        # what comes before the sleep, without the separator that joins them (`&&`, `||`,
        # `;`, `|`; a lone `&` sends what is before it to the background)
        before = head[: head.index("sleep", slept.start())].rstrip()
        if before.endswith(("&&", "||")):
            before = before[:-2]
        elif before.endswith((";", "|", "(")):
            before = before[:-1]
        if _BACKGROUND.search(QUOTED_WORD.sub("''", before)) is not None and (
            _SHELL_LOOP_HEAD.match(before) is None
        ):
            launched = shell_facts(before)
            if launched.write and not launched.shell:
                wait = False
    # A blocking read polls, unless the line also writes (`kubectl apply ... && kubectl
    # rollout status ...` deploys): then it is the write's check, read as one.
    wait = wait or (blocking and not write)
    shell_only = False
    if shell_change and not action:
        # A line that only sets the stage (`export JAVA_HOME=...`, `cd build`, `source
        # venv/bin/activate`) changes what the next call runs in, so the same command
        # failing again after it is a retry in a changed shell, not a loop. It is a
        # change of the shell alone when nothing else on it writes (`cd /repo && echo
        # x > f.py` writes a file).
        shell_only = not write
        write = True
    facts = CallFacts(action or fallback, write, search, wait, shell_only)
    facts.waits_first = waits_first
    return facts


ASK_TOOLS = re.compile(
    r"(?:.*[._/:]|.*__)?(?:ask_?(?:the_?)?(?:user|human|followup|follow_up|operator|customer|client"
    r"|patient|guest|caller|student|traveller|traveler|passenger|dispatcher|lawyer|tenant|driver"
    r"|requester|approver|reviewer|owner|admin|manager|member|person|parent|buyer|seller)\w*"
    r"|request_?user_?input\w*|\w*user_?input|prompt_?(?:the_?)?user\w*|human_?input\w*"
    r"|get_?(?:user|human)_?(?:input|reply|response|confirmation)\w*)$",
    re.IGNORECASE,
)
"""Tool names that put a question to a person (``ask_human``, ``ask_followup_question``,
``request_user_input``, ``AskUser``; ``ask_`` and a person's role, ``ask_traveller``,
``ask_student``, ``ask_dispatcher``): not ``ask*`` alone, which also names tools that ask a
codebase or another agent, whose answers are information."""


_ONLY_SLEEP = re.compile(
    r"\s*(?:sleep|(?i:start-sleep)(?:\s+-(?i:seconds|s|milliseconds|ms|m))?)\s+\d{1,6}(?:\.\d{1,3})?[smhd]?\s*(?:;\s*)?"
)
_SLEEP_FACTS = CallFacts("sleep", False, False, True)
_ONLY_WAIT = re.compile(r"\s*wait\s*\d{0,6}\s*")
_WAIT_FACTS = CallFacts("wait", False, False, True)


_OPERATION_KEYS = ("operation", "op")
_OPERATION_WRITES = frozenset({
    "append", "archive", "assign", "cancel", "create", "delete", "insert", "modify", "patch",
    "publish", "put", "remove", "rename", "replace", "send", "set", "submit", "undelete",
    "update", "upsert", "write",
})
"""Operations that change what is stored (``operation="update"``, ``"bulk_update"``): not
``add``, which a calculator's operation is as often as a record's, nor ``merge``; ``set``
only alone (``set_difference`` computes)."""
_DRY_RUN_KEYS = ("dry_run", "dryRun", "preview", "validate_only", "validateOnly")


def operation_facts(tool: str, args: dict[Any, Any]) -> CallFacts | None:
    """The facts of a write when a tool that does several things is told by an argument
    which (``salesforce_dml_records(operation="update", records=[...])``,
    ``manage_object(op="create")``): its name, which holds no verb, said it only looks.
    ``None`` when no ``operation``/``op`` argument names a write (its first word, after
    ``bulk``/``batch``/``mass``, among :data:`_OPERATION_WRITES`), when the tool's name
    opens with a word of a look (``search_traces(operation="update")`` filters by it; not
    ``sharepoint_list_items``, whose list is a thing), when the operation is an API's
    operation name (``UpdateCart``, ``DeleteBucket``: what a trace or an audit log is
    filtered by), or when the call is a dry run."""
    for key in _OPERATION_KEYS:
        value = args.get(key)
        if type(value) is str and 0 < len(value) <= 64:
            words = name_words(value)
            if words and words[0] in _BATCH_WORDS:
                words = words[1:]
            tool_words = name_words(tool)
            if (
                not words or words[0] not in _OPERATION_WRITES
                or (words[0] == "set" and len(words) > 1)
                # a look by the tool's verb (`search_traces`, `get_audit_events`) filters by
                # an operation; so does an API's operation name (`UpdateCart`, `DeleteBucket`)
                or (tool_words and tool_words[0] in _LOOK_WORDS)
                or (value[:1].isupper() and len(words) > 1)
                or any(args.get(flag) is True for flag in _DRY_RUN_KEYS)
            ):
                return None
            return CallFacts(tool, True, False)
    return None


_NAVIGATION_KEYS = frozenset({
    "pagedown", "page_down", "pgdn", "next", "pageup", "page_up", "pgup", "prior", "down",
    "arrowdown", "up", "arrowup", "left", "arrowleft", "right", "arrowright", "home", "end",
    "ctrl+end", "ctrl+home",
})
"""Keys that move the view or the cursor over what is there (``PageDown``, ``ArrowDown``;
xdotool's ``Page_Down``, ``Next``): no write, whatever the tool that sends them."""
_KEY_ARGS = ("keys", "key", "text")
_KEY_TOOL_WORDS = frozenset({"key", "keys", "press", "send", "keyboard", "hotkey", "keypress"})
"""Words of a tool that sends keys (``send_keys``, ``browser_press_key``): a ``key``
argument of any other tool is no key pressed (``kv_set(key="next")``)."""


def navigation_keys(args: dict[Any, Any]) -> bool:
    """Whether a call only sends keys that move the view (:data:`_NAVIGATION_KEYS`; one key,
    or a list of them, under ``keys``, ``key`` or a computer-use key action's ``text``)."""
    for name in _KEY_ARGS:
        value = args.get(name)
        if type(value) is str:
            return 0 < len(value) <= 16 and value.strip().lower() in _NAVIGATION_KEYS
        if type(value) is list and 0 < len(value) <= 8:
            return all(type(k) is str and k.strip().lower() in _NAVIGATION_KEYS for k in value)
    return False


_NOOP_WAIT = re.compile(r"\s*noop\((\d{1,9})\)\s*(?:;|\n|$)")
_BROWSER_ACTS = re.compile(
    r"\b(?:fill|type|select_option|upload_file|send_msg_to_user|drag_and_drop|keyboard_type"
    r"|keyboard_insert_text|clear|report_infeasible)\("
)
"""BrowserGym actions that act rather than look: after a ``noop``, no read after a wait."""
NOOP_WAIT_MS = 5_000
"""Shortest ``noop(ms)`` opening a browser action that makes it a read after a wait."""
_PACED_READS = frozenset({
    "tail", "head", "cat", "grep", "egrep", "rg", "wc", "ls", "du", "df", "stat", "find",
    "journalctl", "dmesg", "ps", "pgrep", "free", "uptime", "date", "vmstat", "iostat",
    # a batch scheduler's status (Slurm, PBS, LSF, HTCondor; not `nvidia-smi`, whose
    # flags also reset and configure the GPU)
    "squeue", "sacct", "sinfo", "qstat", "bjobs", "bhist", "condor_q",
})
"""Programs that only look, read after a sleep by a named tool's command (:func:`argument_facts`):
anything else (a client, a restart, a request) keeps the tool's own facts. (A scheduler's
status after ``sleep 300``, through an ``ssh_exec`` tool, is a queue watched at the pace
its user asked; halted at its fourth reading in a blind batch before it was read so.)"""


_PACED_PIPES = frozenset({"sleep", "sort", "uniq", "cut", "jq", "tr", "column", "awk"})
"""What may stand beside the looks of a paced line (the sleep itself, a pipe's filters)."""
_PACED_LINE_LIMIT = 16
"""Segments of a paced line read; a longer line is no simple look."""


def _only_looks(command: str) -> bool:
    """Whether every program of a paced line (``sleep 300; squeue -j 42 | tail -1``) only
    looks (:data:`_PACED_READS`, or a filter of :data:`_PACED_PIPES` that writes nothing):
    ``sleep 300; squeue -j 1; scancel 1`` cancels, and ``xargs`` runs what it is given."""
    if _REDIRECT.search(command) is not None:
        return False
    segments = _SEGMENT_SPLIT.split(command, _PACED_LINE_LIMIT)
    if len(segments) > _PACED_LINE_LIMIT:
        return False
    looked = False
    for segment in segments:
        tokens = _program_tokens(segment.split())
        if not tokens:
            continue
        program = _basename(tokens[0]).lower()
        if program in _PACED_READS:
            looked = True
        elif program not in _PACED_PIPES:
            return False
    return looked


def pattern_search(tool: str, args: dict[Any, Any], facts: CallFacts) -> CallFacts | None:
    """The facts of a search when a read's filter matches by a pattern (OData's
    ``substringof('Nordvik', SupplierName)``, SQL's ``name LIKE 'NORDVIK%'``: a search for
    what matches, whose empty answer is nothing found); ``None`` otherwise. Read for a call
    the runtime says only reads (``kind: "read"``) too: its filter says how it reads."""
    if facts.write or facts.search or facts.wait or _FILTER_KEYS.isdisjoint(args):
        return None
    for key in _FILTER_KEYS.intersection(args):
        value = args[key]
        if type(value) is str and _PATTERN_FILTER.search(value, 0, PATTERN_FILTER_HEAD) is not None:
            return CallFacts(tool, False, True, read=True)
    return None


def argument_facts(tool: str, args: dict[Any, Any], facts: CallFacts) -> CallFacts:
    """A plain tool's facts (by its name) as the call's arguments amend them: a command
    line or an environment's action that only waits (:func:`sleep_facts`), or an
    operation named as a write (:func:`operation_facts`) of a tool that is neither a
    write nor a search by its name. One rule for the watchdog's call and its preview."""
    if "command" in args or "action" in args or "script" in args:
        waited = sleep_facts(args)
        if waited is not None:
            return waited
        command = args.get("command")
        if type(command) is str and command.lstrip()[:5] == "sleep" and not facts.write:
            # A named tool running a line that sleeps, then reads (`ssh_exec(host=...,
            # command="sleep 240; tail -n 2 convert.log")`): a read asked after a
            # deliberate wait, as a shell's same line is (its own facts decide).
            paced = runner_facts({"command": command})
            if paced.waits_first and _only_looks(command):
                paced.action = tool
                return paced
    if len(args) == 1 and not facts.wait:
        # A tool that waits for something (Playwright MCP's `browser_wait_for`) given a
        # time alone (`{"time": 300}`) waits; given a text or a selector to wait for, it
        # checks a condition, and its failures are a check's. (A tool named for waiting
        # alone is the [waits] tools list's to say.)
        [(key, value)] = args.items()
        if key in _DURATION_KEYS and type(value) in (int, float) and value > 0:
            words = name_words(tool)
            if "wait" in words and "for" in words:
                return _WAIT_FACTS
    if (
        ("operation" in args or "op" in args) and not facts.write and not facts.search
    ):
        return operation_facts(tool, args) or facts
    if (
        ("method" in args or "query" in args) and not facts.write and not facts.search
    ):
        requested = request_facts(tool, args)
        if requested is not None:
            return requested
    searched = pattern_search(tool, args, facts)
    if searched is not None:
        return searched
    code = args.get("code")
    if type(code) is str and code[:8].lstrip().startswith("noop(") and not facts.write:
        # A browser agent's action that waits first (BrowserGym's `noop(120000);
        # click('30')`: two minutes, then the refresh button): a look asked after a
        # deliberate wait, as a shell's `sleep 120; ...` is.
        noop = _NOOP_WAIT.match(code)
        if noop is not None and int(noop[1]) >= NOOP_WAIT_MS and _BROWSER_ACTS.search(code, 0, 4096) is None:
            paced = CallFacts(tool, False, False, read=True)
            paced.waits_first = True
            return paced
    if (
        facts.write and ("keys" in args or "key" in args) and navigation_keys(args)
        and not _KEY_TOOL_WORDS.isdisjoint(name_words(tool))
    ):
        # `send_keys(keys="PageDown")`: the page moved on, nothing was written; the same
        # key answered by the next part of a page is paging, by the same screen a loop
        return CallFacts(tool, False, False, read=True)
    return facts


_FILTER_KEYS = frozenset({"filter", "$filter", "where", "filters", "q", "query", "soql", "criteria", "sql", "statement"})
"""Arguments that hold what a read selects by (:data:`_PATTERN_FILTER`)."""
_PATTERN_FILTER = re.compile(
    r"(?i)\b(?:substringof|contains|startswith|endswith|indexof)\s*\("
    r"|\b(?:i?like|similar\s+to)\s+N?'[^'\n]{0,128}[%_*]"
)
"""A filter that matches by a pattern: OData's string functions (``substringof('x', Name)``,
``contains(Name, 'x')``), SQL's and SOQL's ``LIKE``/``ILIKE`` with a wildcard in its
pattern (``'NORDVIK%'``; not ``LIKE 'abc'``, an equality)."""
PATTERN_FILTER_HEAD = 1_024
"""Characters of a filter read for a pattern."""
_HTTP_WRITES = frozenset({"post", "put", "patch", "delete"})
_REQUEST_TARGET_KEYS = ("path", "url", "endpoint", "resource")
_REQUEST_LOOKS = frozenset({
    "search", "query", "graphql", "count", "msearch", "lookup", "find", "explain", "validate",
    "preview", "estimate", "simulate", "render", "token", "oauth", "login", "auth",
})
"""Words of a ``POST``'s path that say it asks rather than changes: a search or a query sent
in a body (``POST /index/_search``, ``POST /graphql``), a dry run, a token."""
_REQUEST_CHANGES = frozenset({"delete", "update", "create", "insert", "upsert", "remove", "bulk"})
"""Words of a ``POST``'s path that say it changes, beside a look's (``_delete_by_query``)."""
_PATH_WORD = re.compile(r"[a-z]+")
_GRAPHQL_MUTATION = re.compile(r"\s*(?:#[^\n]*\n\s*)*mutation(?:\s+[_A-Za-z][_A-Za-z0-9]*)?\s*[({@]")
"""A GraphQL document that opens with a mutation (after comments), named or not. (The name
needs the space before it: two optional runs of spaces side by side would try every split
of a long run of spaces.)"""
MUTATION_HEAD = 4_096
"""Characters of a ``query`` argument read for a mutation."""
REQUEST_PATH_LIMIT = 1_024
"""Characters of a request's path read for its words."""


def request_facts(tool: str, args: dict[Any, Any]) -> CallFacts | None:
    """The facts of a write when a tool that sends requests of any kind is told to change
    something by its arguments: a GraphQL mutation (``shopify_graphql(query="mutation
    ($input: ProductInput!) {...}")``), or an HTTP method that changes (``POST``, ``PUT``,
    ``PATCH``, ``DELETE``) sent to a path or an address (``stripe_api(method="POST",
    path="/v1/webhook_endpoints")``). Its name says neither, and a webhook created again at
    every lap of a create-then-list cycle, each time under a new id, was read as a look.
    ``None`` for a ``GET``, for a request without a path or an address, for a dry run, and
    for a ``POST`` whose path (not its host) has a word of a look (:data:`_REQUEST_LOOKS`:
    a search sent as ``POST``) and none of a change (``_delete_by_query`` changes)."""
    query = args.get("query")
    if type(query) is str and _GRAPHQL_MUTATION.match(query[:MUTATION_HEAD]) is not None:
        return CallFacts(tool, True, False)
    method = args.get("method")
    if type(method) is not str or len(method) > 8 or (method := method.lower()) not in _HTTP_WRITES:
        return None
    for key in _REQUEST_TARGET_KEYS:
        target = args.get(key)
        if type(target) is str and target:
            if any(args.get(flag) is True for flag in _DRY_RUN_KEYS):
                return None
            if method == "post":
                path = target[:REQUEST_PATH_LIMIT].split("?", 1)[0].split("#", 1)[0]
                if "://" in path:
                    path = path.split("://", 1)[1].partition("/")[2]  # (not the host's words)
                words = set(_PATH_WORD.findall(path.lower()))
                if not _REQUEST_LOOKS.isdisjoint(words) and _REQUEST_CHANGES.isdisjoint(words):
                    return None
            return CallFacts(tool, True, False)
    return None


_DURATION_KEYS = frozenset({"time", "seconds", "secs", "ms", "milliseconds", "duration", "delay"})


def sleep_facts(args: Any) -> CallFacts | None:
    """The facts of a wait when a tool that is no command runner is given a command line
    that only sleeps (``kubectl(command="sleep 120")``: a tool named after a CLI running
    whatever it is given; a PowerShell tool's ``script="Start-Sleep -Seconds 120"``), or a
    command that only waits (a text environment's ``wait``,
    ``wait1``, ``wait 10``: ScienceWorld lets time pass so; a thermometer read after each
    was a two-call cycle), else ``None``. Waiting is what it does, whatever runs it."""
    if type(args) is not dict:
        return None
    command = args.get("command")
    if type(command) is not str:
        # a PowerShell tool's script (`run_powershell(script="Start-Sleep -Seconds 120")`),
        # an environment's action (`step_env(action="wait1")`)
        command = args.get("script")
        if type(command) is not str:
            command = args.get("action")
            if type(command) is not str:
                return None
    if len(command) > 64:
        return None
    head = command.lstrip()
    if head.startswith("sleep") or head[:11].lower() == "start-sleep":
        return _SLEEP_FACTS if _ONLY_SLEEP.fullmatch(command) is not None else None
    if head.startswith("wait"):
        return _WAIT_FACTS if _ONLY_WAIT.fullmatch(command) is not None else None
    return None


def plain_facts(
    tool: str, kind: str | None, wait: bool = False, event_kind: str | None = None
) -> CallFacts:
    """Facts of a call to a tool that is not a command runner (its kind decides; ``wait``:
    its name says it waits, ``[waits] tools``; it asks the user when the event says
    ``kind: "user_input"`` or its name is one of :data:`ASK_TOOLS`)."""
    ask = event_kind == "user_input" or (event_kind is None and ASK_TOOLS.match(tool) is not None)
    write = kind == "write" or (kind is None and not wait and not ask and names_write(tool))
    return CallFacts(
        tool, write, kind == "resolve", wait and not write, ask=ask,
        read=not ask and not write
        and (kind in _READ_KINDS or (kind is None and not wait and names_no_act(tool))),
    )


_READ_KINDS = frozenset({"read", "resolve", "verify"})
_WRITE_VERBS = frozenset({
    "ack", "acknowledge", "add", "adjust", "allocate", "append", "apply", "approve", "archive",
    "assign", "attach", "book", "cancel", "change", "charge", "create", "decline",
    "delegate", "delete", "deploy", "deprovision", "detach", "disable", "discard", "dismiss",
    "dispatch", "draft", "drop", "edit", "enable", "enroll", "escalate", "grant", "insert",
    "install", "invite", "isolate", "kill",
    "lock", "mark", "merge", "modify", "move", "notify", "patch", "pay", "place", "post",
    "provision", "publish", "purge", "push", "put", "quarantine", "reboot", "rebook", "reconcile",
    "refund", "register", "reject", "remove", "rename", "reopen", "replace", "request",
    "rerun", "resend", "reschedule", "reserve", "reset", "restart", "restore", "revert", "revoke",
    "rotate", "save", "schedule", "send", "set", "snooze", "submit", "suspend",
    "terminate", "transfer", "unenroll", "uninstall", "unlink", "unlock", "unsuspend", "update",
    "upload", "upsert", "void", "write",
})
"""Verbs whose act changes what is stored somewhere (:func:`names_write`)."""
_NAMING_NOUNS = frozenset({"request"})
"""Write verbs whose noun names what a look reads as often (``pull_request_details``,
``get_request``): no act by being in a name, and a write only as its first word
(``request_documents``; not ``pull_request_comments``) or before an act
(``fleet_request_refresh``)."""
_ACT_VERBS = (_WRITE_VERBS - _NAMING_NOUNS) | {
    "act", "build", "call", "click", "close", "compile", "copy", "do", "exec", "execute",
    "expose", "fill", "fire", "invoke", "launch", "make", "open", "order", "press", "queue",
    "refresh", "retry", "run", "scroll", "select", "start", "stop", "sync",
    "trigger", "type",
}
"""Verbs of acts: a tool nobody classified whose name holds one (``trigger_cache_purge``,
``camera_expose``, ``stagehand_act``) may have done something; one whose name holds none
(``ais_position``, ``weather_station``, ``jira_issue``) is read as a look."""
_NAME_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")


def name_words(name: str) -> list[str]:
    """The words of a tool's or an argument's name, lower-cased, whatever its style
    (``snake_case``, ``camelCase``, ``PascalCase``, dotted or namespaced; digits are no
    words): ``fromDate`` is ``from``, ``date``; ``sysparm_query`` is ``sysparm``, ``query``."""
    return [word.lower() for word in _NAME_WORD.findall(name[:128])]


def own_name(tool: str) -> str:
    """An MCP tool's own name, after its server's (``mcp__gmail__send_email`` is
    ``send_email``: the server's name is no namespace word of the tool's); any other
    tool's name as it is."""
    return tool.rsplit("__", 1)[-1] if tool.startswith(WRAPPED_PREFIX) else tool


_LOOK_VERBS = frozenset({
    "get", "list", "describe", "show", "fetch", "read", "view", "lookup", "search", "find",
    "query", "inspect",
})
"""Verbs of a look that name a call by what it reads (:func:`names_no_act`)."""


def names_no_act(tool: str) -> bool:
    """Whether a tool's name holds no verb of an act (:data:`_ACT_VERBS`) among its words;
    or opens, at the verb's place (its first word, or the one after a namespace), with a
    verb of a look (:data:`_LOOK_VERBS`) followed by no verb that only writes: what it
    gets is named by nouns that are verbs as often (``swift_get_queue_status``,
    ``get_order``, ``list_build_runs``), while ``get_and_delete_item`` still acts."""
    words = name_words(tool)
    if _ACT_VERBS.isdisjoint(words):
        return True
    if tool.startswith(WRAPPED_PREFIX):
        words = name_words(own_name(tool)) or words  # (`mcp__bank__get_queue_status`)
    at = 0 if words[0] in _LOOK_VERBS else 1
    return (
        len(words) > at + 1 and words[at] in _LOOK_VERBS
        and (at == 0 or words[0] not in _ACT_VERBS)
        and _ONLY_WRITES.isdisjoint(words[at + 1:])
        # a look then another step (`get_and_run_job`, `find_and_click`) acts
        and _STEP_WORDS.isdisjoint(words)
    )


_STEP_WORDS = frozenset({"and", "then"})
"""Words that join a second step to a look in a tool's name (``search_and_add_to_cart``)."""


_NOUN_VERBS = frozenset({
    "add", "book", "charge", "draft", "drop", "lock", "merge", "move", "order", "pay", "place",
    "post", "request", "schedule", "terminate", "transfer",
})
"""Write verbs that are as often nouns (``address_book``, ``blog_post``, ``team_schedule``,
``order_status``): a write only when a word follows them and none of a look."""
_ONLY_WRITES = _WRITE_VERBS - _NOUN_VERBS
"""Write verbs that are no nouns: after a look's verb, they still say the call acts."""
_LOOK_WORDS = frozenset({
    "autocomplete", "check", "describe", "detail", "details", "diff", "fetch", "find", "get",
    "history", "info", "inspect", "list", "log", "logs", "lookup", "preview", "query", "read",
    "report", "search", "show", "state", "stats", "status", "suggest", "summary", "validate",
    "verify", "view",
})
"""Words of a look: beside a verb that is as often a noun, the name reads (``order_status``,
``post_list``, ``transfer_history``, ``merge_request_diff``)."""
_CALLS_NOT_CHANGES = {
    "send": frozenset({"command", "commands", "request", "http"}),
    "submit": frozenset({"query", "search"}),
    "request": frozenset({"url", "uri", "http", "https", "page", "get", "api", "endpoint", "data"}),
}
"""What a write verb sends when it sends a call rather than a change: a command to a
device's command line (netmiko's ``send_command``, whose answer is the command's output),
an HTTP request (Postman's ``send_request``, a fetch tool's ``request_url``), a query
(``submit_query``). What such a
call does is not in the tool's name, so it is named neither a write nor a read: a
router's ``show bgp summary`` is no write, nor is a car's ``lock`` (``tesla_send_command``)
named one. (Keys typed into a terminal, ``tmux_send_keys``, stay writes, as a browser's or
a desktop's typing does: the answer is an acknowledgement, the screen is read apart.)"""
_BATCH_WORDS = frozenset({"batch", "bulk", "mass"})
"""Words before a verb that say it is done for many at once (``batch_update``, ``bulk_create``)."""
NEUTRAL_TOOLS = frozenset({"TodoWrite", "TodoRead", "todo_write", "todo_read", "think", "Think",
                           "sequentialthinking", "sequential_thinking"})
"""Tools (not command runners) that only keep the agent's notes: they say nothing either
way (exact names, as the runtimes that have them spell them)."""
_BOOKKEEPING_WORDS = frozenset({"todo", "todos", "plan", "scratchpad", "memory", "think"})
"""An agent's own bookkeeping (``TodoWrite``, ``update_plan``): no write to the world."""


_NOT_METHOD_VERBS = _NOUN_VERBS | {"change", "set"}
"""Verbs that are nouns as often, after two words of a name (``stock_price_change``,
``sql_result_set``, ``google_maps_place_photos``): no method after a resource's path."""
_PATH_WORDS_NOT_RESOURCES = (
    _ACT_VERBS | _LOOK_WORDS | _BATCH_WORDS | {"progress"}
    | _CALLS_NOT_CHANGES["send"] | _CALLS_NOT_CHANGES["submit"]
)
"""Words that make no resource's path: an act, a look, a call sent (``router_command_send``)."""
_WORDS_OF_A_READING = _LOOK_WORDS | {"progress", "events", "time", "date", "count", "rate", "level"}
"""Words after a verb that make the name a reading of the act (``aws_stack_update_status``,
``cloudformation_stack_update_events``, ``github_issue_create_time``), not the act."""


def _resource_method(words: list[str]) -> int:
    """Where the verb of a name is when it follows a path of two words (the third word),
    or of three (the fourth and last: ``play_edits_tracks_update``, Google Play's
    ``edits.tracks.update``); 0 when it follows neither. A resource's path, as Google's
    APIs name their methods (``spreadsheets_values_append``, ``users_messages_send``,
    ``spreadsheets_values_batch_update``), or a namespace of two words
    (``google_calendar_create_event``, ``aws_dynamodb_put_item``). The path's words are
    neither acts nor looks (not ``trigger_cache_purge``, ``router_command_send``); the
    verb is no noun as often; no word of a reading follows it
    (``device_firmware_update_status`` reads)."""
    if len(words) == 4 and _method_verb_at(words, 3):
        return 3
    if len(words) >= 4 and words[2] in _BATCH_WORDS:
        words = words[:2] + words[3:]
    if len(words) >= 3 and _method_verb_at(words, 2) and _WORDS_OF_A_READING.isdisjoint(words[3:]):
        return 2
    return 0


def _method_verb_at(words: list[str], at: int) -> bool:
    """Whether ``words[at]`` is a method's verb after a path of the words before it: a
    verb of a write that is no noun as often, after words that are no act or look."""
    verb = words[at]
    return (
        verb in _WRITE_VERBS and verb not in _NOT_METHOD_VERBS
        and _PATH_WORDS_NOT_RESOURCES.isdisjoint(words[:at])
    )


def names_write(tool: str) -> bool:
    """Whether a tool nobody classified is named as a write: its first word, or the word
    after a namespace (``bacnet_write_property``, ``jira_create_issue``,
    ``hubspot.updateContact``), is a verb of :data:`_WRITE_VERBS`; one that is as often a
    noun (:data:`_NOUN_VERBS`) only when a word follows it and none of a look; a verb after
    ``batch``, ``bulk`` or ``mass`` (:data:`_BATCH_WORDS`) when no word of a look is beside
    it; Home Assistant's intents (``HassTurnOn``, ``HassListAddItem``) but those that get
    (``HassGetState``); never a tool of the agent's own bookkeeping."""
    last = tool.rsplit("__", 1)[-1]
    words = [word for word in name_words(own_name(tool)) if word != "str"]  # `file_str_replace`
    if not words or not _BOOKKEEPING_WORDS.isdisjoint(words):
        return False
    if last.startswith("Hass") and last[4:5].isupper():
        # Home Assistant's intents, the tools its LLM API exposes (`HassTurnOn`,
        # `HassListAddItem`, `HassClimateSetTemperature`; behind an MCP server's name,
        # `mcp__home-assistant__HassTurnOn`): commands to the home, the verb after a
        # domain's name, except the ones that get a state or a time. (Not any tool of a
        # server named `hass`.)
        intent = name_words(last)[1:]
        return bool(intent) and intent[0] not in ("nevermind", "respond") and "get" not in intent
    at = 0
    if words[0] not in _WRITE_VERBS and len(words) > 1 and words[0] not in _LOOK_WORDS:
        at = 1  # a namespace first: `jira_create_issue`, `bacnet_write_property`
        # a resource's path or a namespace of two words first
        # (`spreadsheets_values_append`, `google_calendar_create_event`)
        at = _resource_method(words) or 1
    if words[at] in _BATCH_WORDS and at + 1 < len(words):
        # a write done in bulk (`sheets_batch_update`, `bulk_create_users`), not the status
        # of one (`poll_bulk_update_status`, `batch_update_progress`)
        if not _LOOK_WORDS.isdisjoint(words) or "progress" in words:
            return False
        at += 1
    verb = words[at]
    if verb not in _WRITE_VERBS or (verb == "mark" and words[at + 1 : at + 2] == ["price"]):
        return False  # (a market's mark price is no mark: `futures_mark_price`)
    if at and verb in _NAMING_NOUNS and (at + 1 == len(words) or words[at + 1] not in _ACT_VERBS):
        # a noun after another word (`pull_request_comments`), unless an act follows it
        # (`fleet_request_refresh`: a refresh requested)
        return False
    if at + 1 < len(words) and words[at + 1] in _CALLS_NOT_CHANGES.get(verb, ()):
        return False  # a command, a request, a query sent (`netmiko_send_command`)
    if verb in _NOUN_VERBS:
        return at + 1 < len(words) and _LOOK_WORDS.isdisjoint(words)
    # The state of a run (`deploy_status`, `content_deploy_status`, `db_migrate_progress`:
    # how the deploy goes) is read; a state set or made (`jira_update_status`,
    # `create_status`) is written.
    return not (at + 2 == len(words) and words[-1] in _STATE_OF_A_RUN and verb not in _VERBS_OF_A_STATE)


_STATE_OF_A_RUN = frozenset({"status", "state", "progress"})
_VERBS_OF_A_STATE = frozenset({
    "update", "set", "change", "put", "patch", "edit", "modify", "write", "mark", "toggle",
    "reset", "clear", "save", "create", "add", "post", "publish", "send", "submit", "report",
})
"""Verbs whose object may be a status (``jira_update_status``, GitHub's ``create_status``):
a state set or made, a write."""


TRANSCRIPT_HEAD = "Command: "
"""How a shell transcript answer opens (:func:`shell_transcript`)."""


def shell_transcript(text: str) -> tuple[str, str | None] | None:
    """Gemini CLI's (and its forks') ``run_shell_command`` answer, a transcript of the run
    (``Command: ...``, ``Directory: ...``, ``Stdout: ...`` or ``Output: ...``, ``Stderr:
    ...``, ``Error: ...``, ``Exit Code: ...``, then signal and process lines), read as what
    it says: its output (``(empty)`` is none; standard error after standard output), and a
    failure when its exit code is a number other than 0, its error is not ``(none)`` or a
    signal ended it, its error then standard error, the error line, the signal or the exit
    code. ``None`` when the text is no such transcript. The command it repeats is the
    call's: answers that differ only in it (the date a statement compacts) are one answer,
    and the same command's output is what it printed, not its transcript's process ids."""
    if not text.startswith(TRANSCRIPT_HEAD):
        return None
    code_at = text.rfind("\nExit Code: ")
    error_at = text.rfind("\nError: ", 0, code_at) if code_at > 0 else -1
    if error_at < 0:
        return None
    out = text.find("\nStdout: ", 0, error_at)
    if out < 0:
        out = text.find("\nOutput: ", 0, error_at)
        if out < 0:
            return None
    err = text.rfind("\nStderr: ", out, error_at)
    stdout = _stated(text[out + 9 : err if err >= 0 else error_at])
    stderr = _stated(text[err + 9 : error_at]) if err >= 0 else ""
    error = _stated(text[error_at + 8 : code_at])
    code = _line_after(text, code_at + 12)
    signal_at = text.find("\nSignal: ", code_at)
    signal = _stated(_line_after(text, signal_at + 9)) if signal_at > 0 else ""
    answer = "\n".join(part for part in (stdout, stderr) if part)
    if not (code.lstrip("-").isdigit() and code != "0") and not error and not signal:
        return answer, None
    reason = stderr or error or (f"signal {signal}" if signal else f"exit code {code}")
    return answer, reason[:MCP_ERROR_CHARS]


_ENVELOPE_KEYS = frozenset({"output", "metadata"})
_ENVELOPE_METADATA = frozenset({"exit_code", "duration_seconds"})
RECORD_HEADS = ('{"exit_code":', '{"stdout":', '{"returncode":')
"""How a run record sent as JSON text opens (:func:`runner_answer`)."""
RECORD_TEXT_LIMIT = 1 << 20
"""Longest run record read from its JSON text."""
ENVELOPE_HEAD = '{"output":'
"""How a runner's output envelope sent as JSON text opens (:func:`runner_envelope`)."""


_RUN_RECORD_KEYS = frozenset({
    "stdout", "stderr", "exit_code", "exitCode", "returncode", "return_code",
    "duration", "duration_ms", "duration_seconds", "elapsed", "elapsed_ms",
})
_OUTPUT_RECORD_KEYS = frozenset({"output", "exit_code", "exitCode", "code_file"})
"""A run recorded with its output in one stream: AutoGen's code executors'
``CommandLineCodeResult`` (``{"exit_code": 1, "output": "...", "code_file": "..."}``)."""
_EXIT_KEYS = ("exit_code", "exitCode", "returncode", "return_code")


def run_record(result: Any) -> tuple[str, str | None] | None:
    """A command's run recorded as an object (``{"stdout": "...", "stderr": "...",
    "exit_code": 1}``, ``returncode``, with or without its duration) by a command runner,
    read as what it says: its output (standard error after standard output),
    and a failure when the exit code is a number other than 0, its error all that the
    run printed (or ``exit code N`` when it printed nothing): ``kubectl rollout status
    --timeout=60s`` timing out while the rollout moves (3, then 5, then 8 of 12 replicas
    updated) fails with the same standard error each time and is a poll, not the same
    failure again. ``None`` when ``result`` is no such record (it has no ``stdout`` or
    no exit code, or anything else in it)."""
    if type(result) is not dict:
        return None
    if "stdout" in result:
        if not _RUN_RECORD_KEYS.issuperset(result):
            return None
        stdout = result["stdout"]
        stderr = result.get("stderr") or ""
    elif "output" in result and _OUTPUT_RECORD_KEYS.issuperset(result):
        stdout = result["output"]
        stderr = ""
    else:
        return None
    if type(stdout) is not str or type(stderr) is not str:
        return None
    code: Any = None
    for key in _EXIT_KEYS:
        if key in result:
            code = result[key]
            break
    if type(code) is not int:
        return None
    answer = f"{stdout}\n{stderr}" if stdout and stderr else stdout or stderr
    return answer, ((answer or f"exit code {code}")[:MCP_ERROR_CHARS] if code else None)


def runner_envelope(result: Any) -> tuple[str, str | None] | None:
    """Codex CLI's ``shell`` answer, an envelope of the run (``{"output": "...",
    "metadata": {"exit_code": 1, "duration_seconds": 0.4}}``, as an object or as its JSON
    text), read as what it says: its output, and a failure ``exit code N`` when the exit
    code is a number other than 0 (a failure that says only that is read with its
    output). ``None`` when ``result`` is no such envelope (nothing else in it: another
    key makes it an answer of its own). The run's duration is how long it took, not what
    it answered: the same command printing the same lines in 0.4 s and then in 0.7 s
    answered the same thing, and compared as the object it was, every such answer was
    new."""
    if type(result) is str:
        if not result.startswith(ENVELOPE_HEAD):
            return None
        result = as_object(result)
    if type(result) is not dict or "output" not in result or not _ENVELOPE_KEYS.issuperset(result):
        return None
    output = result["output"]
    metadata = result.get("metadata", {})
    if type(output) is not str or type(metadata) is not dict or not _ENVELOPE_METADATA.issuperset(metadata):
        return None
    code = metadata.get("exit_code", 0)
    if type(code) is not int:
        return None
    return output, (f"exit code {code}" if code else None)


OBSERVATION_HEAD = "<returncode>"
"""How mini-SWE-agent's observation of a command opens (:func:`returncode_report`)."""


_RETURN_CODE = re.compile(r"-?[0-9]{1,10}")


def returncode_report(text: str) -> tuple[str, str | None] | None:
    """mini-SWE-agent's observation of a command, as its harness writes it for the model
    (``<returncode>1</returncode>\n<output>\n...\n</output>``), read as what it says: its
    output, and a failure ``exit code N`` when the code is not 0. ``None`` when the text is
    no such observation (its code no integer, or no output element after it). Read with
    its markup, every silent ``sed -i`` of a sweep was the same answer, not a silent write
    (a healthy migration of twenty files was halted), and a failing command no failure."""
    end = text.find("</returncode>", 12, 40)
    if end < 0:
        return None
    code = text[12:end].strip()
    if _RETURN_CODE.fullmatch(code) is None:
        return None  # (ASCII digits only: "²" and "--1" pass str.isdigit, not int())
    opened = text.find("<output>", end, end + 40)
    if opened < 0:
        return None
    start = opened + 8
    if text.startswith("\n", start):
        start += 1
    closed = text.rfind("</output>", start)
    output = text[start:closed] if closed >= 0 else text[start:]
    return output, (f"exit code {int(code)}" if int(code) != 0 else None)


RUN_HEAD = "Command "
"""How an IDE agent's report of a command run opens (:func:`run_report`)."""
_RUN_REPORT = re.compile(
    r"Command (?:executed|completed|failed|finished)\b[^\n]{0,240}(?:\n(?!Output:)[^\n]{0,80}){0,2}\nOutput:[ \t]*(?:\n|$)"
)
_EXIT_CODE = re.compile(r"(?i)exit code:?[ \t]*(-?\d{1,10})(?!\d)")


def run_report(text: str) -> tuple[str, str | None] | None:
    """Cline's, Roo Code's (and their kin's) answer to ``execute_command``, a short report
    of the run before its output (``Command executed.\nOutput:\n...``, ``Command executed
    in terminal within working directory '/src'. Exit code: 0\nOutput:\n...``, ``Command
    completed.\nExit code: 1\nOutput:\n...``), read as what it says: its output, and a
    failure ``exit code N`` when the report names an exit code other than 0 (or says the
    command failed). ``None`` when the text opens with no such report. The report is the
    same for every command: a silent ``git add -A`` answered it alone, and read with it
    was the same answer every time, not a silent write."""
    head = _RUN_REPORT.match(text)
    if head is None:
        return None
    code = _EXIT_CODE.search(text, 0, head.end())
    error = None
    if code is not None and code.group(1) != "0":
        error = f"exit code {code.group(1)}"
    elif code is None and text.startswith("Command failed"):
        error = "failed"
    return text[head.end():], error


EXIT_HEAD = "Exit code: "
"""How Codex CLI opens its report of a command for the model (:func:`exit_report`)."""
_EXIT_REPORT = re.compile(
    r"Exit code: (-?[0-9]{1,10})\nWall time: [0-9.]{1,20} seconds\n"
    r"(?:Total output lines: [0-9]{1,12}\n)?Output:\n?"
)


def exit_report(text: str) -> tuple[str, str | None] | None:
    """Codex CLI's report of a command as it shows it to the model (``Exit code: 1\nWall
    time: 0.9 seconds\nOutput:\n...``, a ``Total output lines: N`` line before the output
    when it was cut), read as what it says: its output, and a failure ``exit code N`` when
    the code is not 0. ``None`` when the text does not open so. Read with the report, the
    wall time made every answer new and hid the figures after it: a canary's error rate
    read between waits, ``0.0026`` then ``0.0031``, was one answer with its digits out, and
    a healthy watch was halted as a cycle."""
    match = _EXIT_REPORT.match(text)
    if match is None:
        return None
    code = int(match[1])
    return text[match.end():], (f"exit code {code}" if code != 0 else None)


UNIFIED_HEAD = "Chunk ID: "
"""How Codex CLI opens its report of an ``exec_command`` (:func:`unified_exec_report`)."""
_UNIFIED_REPORT = re.compile(
    r"(?:Command: [^\n]{0,4096}\n)?Chunk ID: [0-9A-Za-z]{1,32}\nWall time: [0-9.]{1,20} seconds\n"
    r"(?:Process exited with code (-?[0-9]{1,10})\n|Process running with session ID [0-9]{1,20}\n)?"
    r"(?:Original token count: [0-9]{1,12}\n)?Output:\n?"
)


def unified_exec_report(text: str) -> tuple[str, str | None] | None:
    """Codex CLI's report of an ``exec_command`` (its unified exec: ``Chunk ID: 9f3a1c\nWall
    time: 0.1500 seconds\nProcess exited with code 1\nOriginal token count: 16\nOutput:\n...``,
    ``Process running with session ID 3`` while the command runs on; a recording may put
    ``Command: ...`` first), read as what it says: its output, and a failure ``exit code N``
    when the code is not 0. ``None`` when the text does not open so. Read as sent, the chunk
    id, new for every call, made every answer new: ``git commit`` answered "nothing to
    commit, working tree clean" eight laps in a row was never one answer."""
    match = _UNIFIED_REPORT.match(text)
    if match is None:
        return None
    code = match[1]
    return text[match.end():], (f"exit code {code}" if code is not None and code != "0" else None)


CODE_EXECUTOR_HEAD = "exitcode: "
"""How AutoGen's code executors answer (:func:`code_executor_report`)."""
_CODE_EXECUTOR_REPORT = re.compile(
    r"exitcode: (-?\d{1,10}) \(execution (?:succeeded|failed|timed out)\)\r?\nCode output:[ \t]?(?:\r?\n)?"
)


def code_executor_report(text: str) -> tuple[str, str | None] | None:
    """AutoGen's code executor's answer (``exitcode: 1 (execution failed)\nCode output:
    ...``), read as what it says: its output, and a failure ``exit code N`` when the code is
    not 0. ``None`` for any other text. Read with its envelope, a Space's build stage read
    after each ``sleep 30`` was the same template whatever it said (its quoted values
    masked behind the envelope's prose), and a status under way no poll's answer."""
    match = _CODE_EXECUTOR_REPORT.match(text)
    if match is None:
        return None
    code = int(match[1])
    return text[match.end():], (f"exit code {code}" if code else None)


SCRIPT_HEAD = "The script ran"
"""How Magentic-One's and AutoGen's terminal agents open their report of a script run
(:func:`script_report`)."""
_SCRIPT_REPORT = re.compile(
    r"The script ran, then exited with (?:an error |Success )?\(?(?:Unix|POSIX) exit code:? "
    r"(-?[0-9]{1,10})\)?\.?\nIts output was:\n?"
    r"|The script ran but produced no output to console\. The (?:Unix|POSIX) exit code was:? (-?[0-9]{1,10})"
)


def script_report(text: str) -> tuple[str, str | None] | None:
    """The report of a script run by Magentic-One's ``ComputerTerminal`` or an AutoGen
    executor agent (``The script ran, then exited with an error (POSIX exit code: 1)\nIts
    output was:\n...``, ``... with Unix exit code: 0 ...``, ``The script ran but produced no
    output to console. The Unix exit code was: 0. ...``), read as what it says: its output
    (empty when it printed nothing), and a failure ``exit code N`` when the code is not 0.
    Read as sent, the temporary file of every run, named by a hash in the traceback, made
    the same failing script a new answer each time (a coder re-sending one import of a
    module that is not installed was never halted). ``None`` when the text does not open so."""
    match = _SCRIPT_REPORT.match(text)
    if match is None:
        return None
    if match[1] is not None:
        code, output = int(match[1]), text[match.end():]
    else:
        code, output = int(match[2]), ""
    return output, (f"exit code {code}" if code != 0 else None)


SILENT_RUN = "Your command ran successfully and did not produce any output."
"""SWE-agent's words for a command that printed nothing (:func:`silent_run`)."""
OBSERVATION_LINE = "OBSERVATION:"
"""The line SWE-agent 1.x's observation template puts above a command's output."""
_SILENT_SPAN = 1_024
_HARNESS_STATE = re.compile(
    r"\s*(?:\(Open file: [^\n]{0,400}\)\s*)?(?:\(Current directory: [^\n]{0,400}\)\s*)?(?:bash-\$\s*)?"
)
"""The state 0.x's harness shows after an observation (``(Open file: ...)``, ``(Current
directory: ...)``, its prompt ``bash-$``): the harness's, not the command's."""


def silent_run(text: str) -> tuple[str, str | None] | None:
    """SWE-agent's answer to a command that printed nothing (``Your command ran successfully
    and did not produce any output.``, under 1.x's ``OBSERVATION:`` line or alone, the
    harness's state lines after it or not), read as what it stands for: an empty output.
    Read as sent, it was one answer told again and again: a reproducer's files written one
    ``cat > ... <<EOF`` after another, with a check between, were halted as a stall, where
    a silent write is news. ``None`` for any other answer (an observation with output is
    read as sent)."""
    if len(text) > _SILENT_SPAN:
        return None
    if text.startswith(OBSERVATION_LINE):
        text = text[len(OBSERVATION_LINE):].lstrip()
    if not text.startswith(SILENT_RUN):
        return None
    return ("", None) if _HARNESS_STATE.fullmatch(text, len(SILENT_RUN)) is not None else None


CELL_ERROR_HEAD = "-" * 24
"""How IPython opens the traceback of a cell that raised (a rule of dashes, then the
exception's name and ``Traceback (most recent call last)``): :func:`cell_error`."""
CELL_TRACEBACK_SPAN = 240
"""Characters at the start of an answer in which a cell's traceback names itself."""


_CELL_HEADER = re.compile(r"-{75}\n\w+\s+Traceback \(most recent call last\)")
"""IPython's header of a cell's traceback: a rule of exactly 75 dashes, then the
exception's name and ``Traceback (most recent call last)`` on the next line."""
CELL_TOOLS = re.compile(
    r"(?i)ipython|jupyter|notebook|(?:^|_)cells?(?:_|$)|code_interpreter|^execute(?:_code)?$"
)
"""Tools that run a notebook's cells (OpenHands' ``execute_ipython_cell``, ``run_cell``,
``jupyter_execute``, OpenAI's ``code_interpreter``, Open Interpreter's ``execute`` and
``execute_code``, which run Python in an IPython kernel): only their answers are read for a
cell's traceback (a shell's ``cat`` of a log that opens the same way is that log)."""


def cell_error(text: str) -> tuple[str, str | None] | None:
    """A notebook cell's answer that is its traceback (OpenHands' ``execute_ipython_cell``,
    a Jupyter kernel's display of an exception: a rule of dashes, ``KeyError
    Traceback (most recent call last)``, the cell and the frames), read as what it is: a
    failure whose error is the traceback. A cell has no exit code; this is how it says it
    failed (a column guessed again and again, each time a ``KeyError``, was every time a new
    success: the cell's number moves). ``None`` for any other answer."""
    if _CELL_HEADER.match(text, 0, CELL_TRACEBACK_SPAN) is None:
        return None
    return text, text[:MCP_ERROR_CHARS]


SCREEN_HEADS = ("Current Terminal Screen:\n", "New Terminal Output:\n")
"""How Terminal-Bench's Terminus answers keystrokes: the tmux pane as it is now, or what
it printed since the last look (:func:`terminal_screen`)."""
_PROMPT = (
    r"(?:\([^)\s]{1,64}\) ){0,3}"  # environments first: `(testbed) (base) `
    r"(?:\[[^\]\n]{1,128}\]"  # `[root@h app]#`
    r"|[^\s#$%>\[@]{0,160}@[^\s#$%>]{1,160}"  # `root@e84b:/app#`, `user@host:~$`
    r"|[A-Za-z]{1,16}-\d{1,3}(?:\.\d{1,3}){0,3}"  # bash's own: `bash-5.2#`, `sh-5.1$`
    r"|\w{1,32}:[/~][^\s#$%>]{0,160}"  # `root:/app#`
    r"|[/~][^\s#$%>]{0,160} ?)"  # BusyBox's `/app # `
    r"[#$%]"
)
_PROMPT_COMMAND = re.compile(r"(?m)^" + _PROMPT + r" +\S[^\n]*$")
"""A line of a shell prompt with a command typed at it (``root@e84b:/app# make``; a prompt
names its user and host, or opens with a path: a grep hit on a comment, ``src/db.py:7:#
TODO``, is no prompt)."""
_BARE_PROMPT = re.compile(_PROMPT + r"[ \t]{0,8}")
"""A prompt with nothing typed at it: the last line a finished command leaves."""
SCREEN_SPAN = 16_384
"""Characters at the end of a terminal screen read for its last command (:func:`terminal_screen`)."""


def terminal_screen(text: str) -> tuple[str, str | None] | None:
    """A terminal screen as Terminus captures it (:data:`SCREEN_HEADS`), read as what the
    last command typed at a prompt printed: the lines after that prompt's line, without
    the bare prompt that closes a finished command. The lines above it are earlier
    commands' output scrolling by: the same failing ``make`` typed again showed the
    previous attempt's lines above its own, so each screen was a new answer. A screen
    with no prompt line (a program's own screen: an editor, a pager, a REPL) is read
    whole. No exit code is told; a failure is what the output says. Several commands
    typed at once are read by the last one's output."""
    head = next((h for h in SCREEN_HEADS if text.startswith(h)), None)
    if head is None:
        return None
    body = text[max(len(head), len(text) - SCREEN_SPAN) :]
    last = None
    for last in _PROMPT_COMMAND.finditer(body):  # noqa: B007 (the last one is wanted)
        pass
    if last is None:
        return body, None
    output = body[last.end() :].rstrip()
    before, _, final = output.rpartition("\n")
    if _BARE_PROMPT.fullmatch(final.strip()) is not None:
        output = before
    return output.strip("\n"), None


RUNNER_ANSWER_HEADS = (
    TRANSCRIPT_HEAD, OBSERVATION_HEAD, RUN_HEAD, ENVELOPE_HEAD, EXIT_HEAD, CELL_ERROR_HEAD,
    SCRIPT_HEAD, UNIFIED_HEAD, SILENT_RUN, OBSERVATION_LINE, CODE_EXECUTOR_HEAD, *SCREEN_HEADS,
)
"""How a runner's answer wrapped by its runtime opens when it is text (:func:`runner_answer`)."""

EXIT_TAIL = "[Command finished with exit code "
"""How OpenHands closes its observation of a command (:func:`command_observation`)."""
EXIT_TAIL_SPAN = 64
"""Characters at the end of a text answer looked at for :data:`EXIT_TAIL`."""
COMPLETED_NOTE = "[The command completed with exit code "
"""How OpenHands states a command's exit code after its output: the last line of the
software-agent SDK's observation, or followed only by the working directory and the
interpreter (:func:`command_observation`)."""
NOTES_SPAN = 640
"""Characters at the end of a text answer looked at for :data:`COMPLETED_NOTE` (its line and
the two notes that may follow it, each naming a path)."""
_OBSERVATION_NOTES = (
    "[The command completed with exit code", "[Current working directory: ",
    "[Python interpreter: ", "[Command finished with exit code ",
)
"""The lines OpenHands writes after a command's output (its metadata)."""


def ends_with_exit_code(text: str) -> bool:
    """Whether ``text`` closes as OpenHands' observation of a command does (a cheap test of
    its last characters, before :func:`command_observation` reads it)."""
    return text.endswith("]") and (
        EXIT_TAIL in text[-EXIT_TAIL_SPAN:] or COMPLETED_NOTE in text[-NOTES_SPAN:]
    )


def command_observation(text: str) -> tuple[str, str | None] | None:
    """OpenHands' observation of a command, as it writes it for the model: the output, then
    ``[The command completed with exit code 1.]``, ``[Current working directory: ...]``,
    ``[Python interpreter: ...]`` and ``[Command finished with exit code 1]``, read as what
    it says: its output without those lines, and a failure ``exit code N`` when the code is
    not 0. ``None`` when the text does not close so. Read as sent, a test that failed was
    no failure, and the interpreter's temporary folder in pytest's header (``pytest-4``,
    then ``pytest-6``) made every re-run of it a new answer: an agent re-running its own
    failing test twenty times unchanged was never halted."""
    if not text.endswith("]"):
        return None
    at = text.rfind(EXIT_TAIL, max(0, len(text) - EXIT_TAIL_SPAN))
    if at < 0:
        return _completed_observation(text)
    if at and text[at - 1] != "\n":
        return None
    code = text[at + len(EXIT_TAIL) : -1]
    if _RETURN_CODE.fullmatch(code) is None:
        return None
    output = text[: max(at - 1, 0)]
    for _ in range(len(_OBSERVATION_NOTES)):
        line = output.rfind("\n") + 1
        if not output.startswith(_OBSERVATION_NOTES, line):
            break
        output = output[: max(line - 1, 0)]
    return output, (f"exit code {int(code)}" if int(code) != 0 else None)


def _completed_observation(text: str) -> tuple[str, str | None] | None:
    """OpenHands' observation closed by its ``[The command completed with exit code N.]``
    line, alone (the software-agent SDK's terminal) or followed by the working directory
    and the interpreter: the output before that line, and a failure when N is not 0. Read
    as sent, every answer said "completed" (a training log tailed between sleeps was a job
    said to be over, and its polls a loop) and no failing test failed."""
    at = text.rfind(COMPLETED_NOTE, max(0, len(text) - NOTES_SPAN))
    if at < 0 or (at and text[at - 1] != "\n"):
        return None
    start = at + len(COMPLETED_NOTE)
    end = text.find(".]", start)
    if end < 0 or _RETURN_CODE.fullmatch(text, start, end) is None:
        return None
    rest = end + 2
    while rest < len(text):
        # only the notes may follow, a line each
        if text[rest] != "\n" or not text.startswith(_OBSERVATION_NOTES[1:3], rest + 1):
            return None
        line_end = text.find("\n", rest + 1)
        if line_end < 0:
            break
        if text[line_end - 1] != "]":
            return None
        rest = line_end
    code = int(text[start:end])
    return text[: max(at - 1, 0)], (f"exit code {code}" if code != 0 else None)


OBSERVATION_TOOLS = frozenset({"execute_bash", "terminal"})
"""The runners whose text answers OpenHands closes with its exit code
(:func:`command_observation`): its own (``execute_bash``, and ``terminal`` in its
software-agent SDK). Another runner's output that happens to end so (a shell's ``tail`` of
an OpenHands log) is that output."""


def runner_answer(payload: Any, exit_tail: bool = False, cell: bool = False) -> tuple[str, str | None] | None:
    """A command runner's answer as its runtime wraps it, read as ``(output, error)``:
    Gemini CLI's transcript (:func:`shell_transcript`), mini-SWE-agent's observation
    (:func:`returncode_report`), Cline's and Roo Code's run report (:func:`run_report`),
    a run recorded as an object or as its JSON text (:func:`run_record`), Codex CLI's envelope, as an object
    or as its JSON text (:func:`runner_envelope`), or as its text report
    (:func:`exit_report`), or its report of an ``exec_command``
    (:func:`unified_exec_report`), a terminal agent's report of a script (:func:`script_report`),
    AutoGen's code executor's (:func:`code_executor_report`),
    SWE-agent's words for no output (:func:`silent_run`),
    with ``cell`` (the runner runs a notebook's cells:
    :data:`CELL_TOOLS`) a cell's traceback (:func:`cell_error`), and, with
    ``exit_tail`` (the runner is
    one of :data:`OBSERVATION_TOOLS`), OpenHands' observation closed by its exit code
    (:func:`command_observation`). ``None`` for any other answer, which is read as sent.
    The shapes are told apart by how they open (a run report's ``Command `` never reads a
    transcript's ``Command: ``, which is tried first), and OpenHands' by how it closes,
    whatever its output opens with (``Command 'pytest' not found``)."""
    if type(payload) is str:
        answer: tuple[str, str | None] | None
        if payload.startswith(TRANSCRIPT_HEAD):
            # (a recording of Codex's exec_command may open with the command too)
            answer = shell_transcript(payload) or unified_exec_report(payload)
        elif payload.startswith(OBSERVATION_HEAD):
            answer = returncode_report(payload)
        elif payload.startswith(RUN_HEAD):
            answer = run_report(payload)
        elif payload.startswith(EXIT_HEAD):
            answer = exit_report(payload)
        elif cell and payload.startswith(CELL_ERROR_HEAD):
            answer = cell_error(payload)
        elif payload.startswith(SCRIPT_HEAD):
            answer = script_report(payload)
        elif payload.startswith(CODE_EXECUTOR_HEAD):
            answer = code_executor_report(payload)
        elif payload.startswith(UNIFIED_HEAD):
            answer = unified_exec_report(payload)
        elif payload.startswith((SILENT_RUN, OBSERVATION_LINE)):
            answer = silent_run(payload)
        elif payload.startswith(SCREEN_HEADS):
            answer = terminal_screen(payload)
        else:
            answer = runner_envelope(payload)
            if answer is None and payload.startswith(RECORD_HEADS) and len(payload) <= RECORD_TEXT_LIMIT:
                # a run record sent as its JSON text (`'{"exit_code": 0, "stdout": "16
                # Updating\n", "stderr": ""}'`): read as the object it is
                answer = run_record(as_object(payload))
        if answer is None and exit_tail:
            return command_observation(payload)  # (it tests the closing line itself)
        return answer
    if type(payload) is dict:
        if "stdout" in payload:
            return run_record(payload)
        if "outputs" in payload:
            return interpreter_logs(payload, cell)
        return runner_envelope(payload) or run_record(payload)
    if type(payload) is list:
        return context_items(payload)
    return None


def context_items(payload: list[Any]) -> tuple[str, str | None] | None:
    """Continue's answer to a tool: a list of context items (``[{"name": "Terminal",
    "description": "Terminal command output", "content": "..."}]``), read as their
    contents joined (at most 8 items; ``None`` for any other list)."""
    if not 0 < len(payload) <= 8:
        return None
    contents = []
    for item in payload:
        if type(item) is not dict or "name" not in item or type(item.get("content")) is not str:
            return None
        contents.append(item["content"])
    return "\n".join(contents), None


INTERPRETER_OUTPUTS = 64
"""Most entries of a code interpreter's ``outputs`` read (:func:`interpreter_logs`)."""


def interpreter_logs(payload: dict[str, Any], cell: bool = False) -> tuple[str, str | None] | None:
    """A code interpreter's answer as OpenAI's Assistants record it (``{"outputs": [{"type":
    "logs", "logs": "..."}, {"type": "image", ...}]}``), read as what it printed: its logs,
    and, for a runner of cells (``cell``), a traceback among them as a failure
    (:func:`cell_error`). Read as sent, a cell raising the same ``KeyError`` again was a new
    success each time (its cell number moved in the traceback): a groupby on a column that
    does not exist, re-run twenty times unchanged, was never halted. ``None`` for any other
    shape (an ``outputs`` that is no list of such entries)."""
    outputs = payload.get("outputs")
    if type(outputs) is not list or len(outputs) > INTERPRETER_OUTPUTS:
        return None
    logs: list[str] = []
    for entry in outputs:
        if type(entry) is not dict or type(entry.get("type")) is not str:
            return None
        if entry["type"] == "logs":
            text = entry.get("logs")
            if type(text) is not str:
                return None
            logs.append(text)
    text = "\n".join(logs)
    if cell and text.startswith(CELL_ERROR_HEAD):
        return cell_error(text) or (text, None)
    return text, None


def _stated(value: str) -> str:
    """A transcript field's value, "" for its words of nothing (``(empty)``, ``(none)``)."""
    return "" if value in ("(empty)", "(none)") else value


def _line_after(text: str, at: int) -> str:
    """The rest of the line of ``text`` from ``at``, stripped."""
    end = text.find("\n", at)
    return text[at : end if end >= 0 else len(text)].strip()


_MCP_KEYS = frozenset({"content", "isError", "structuredContent", "_meta"})
MCP_ERROR_CHARS = 2_048
"""Characters of an MCP error's text kept as the result's ``error``."""


def mcp_answer(result: Any, error: str | None) -> tuple[Any, str | None] | None:
    """An MCP ``CallToolResult`` passed through as a tool's result (``{"content": [{"type":
    "text", "text": ...}], "isError": false, "structuredContent": {...}}``) read as what it
    says: its ``structuredContent`` when it has one, else its text (the text items joined),
    and, when ``isError`` is true, a failure whose error is that text. ``None`` when
    ``result`` is no such object (anything else is read as sent). Content of other types
    (an image) keeps the object as the answer, so its size is what it is."""
    if not _MCP_KEYS.issuperset(result):
        return None
    content = result.get("content")
    if type(content) is not list or len(content) > 256:
        return None
    texts: list[str] = []
    only_text = True
    for item in content:
        if type(item) is not dict:
            return None
        text = item.get("text")
        if item.get("type") == "text" and type(text) is str:
            texts.append(text)
        else:
            only_text = False
    structured = result.get("structuredContent")
    if structured is not None:
        answer: Any = structured
    elif only_text:
        answer = texts[0] if len(texts) == 1 else "\n".join(texts)
    else:
        answer = result
    if result.get("isError") is True and not error:
        error = ("\n".join(texts) or "isError")[:MCP_ERROR_CHARS]
    return answer, error
