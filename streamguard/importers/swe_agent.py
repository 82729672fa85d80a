"""SWE-agent trajectories (``.traj``), one session per file.

* 0.x: ``trajectory[]`` of ``{action, observation, thought, response}`` steps; the
  action is a command line, either one of SWE-agent's own commands (``open``,
  ``edit``, ``search_dir``...) or plain shell. No exit code is recorded, so a
  failure is recognised from the observation text (:func:`observation_error`).
* 1.x with function calling: ``history[]`` chat messages, assistant ``tool_calls``
  answered by ``tool`` messages (``tool_call_ids``). The same text heuristics
  apply to their results, once the observation template's ``OBSERVATION:``
  line is set aside.
* 1.x without function calling: the ``trajectory[]`` as in 0.x, with two kinds
  of step no shell ran: a reply with no parsable action (``action`` empty) and
  an action the harness refused before running it (blocklisted, bad bash
  syntax: no ``observation``, ``execution_time`` exactly 0, a ``query``
  recorded). Neither is a call; both are counted in
  ``extra["unexecuted_steps"]`` and the reply's thought is kept as text.
* A retry-loop run (``attempts[]``) holds each attempt's trajectory; the
  top-level one is the chosen attempt, and a file saved before the choice
  (``attempts`` only) is read from its last attempt.

The harness's own steps (``exit_cost``, ``exit_context``, ``exit_format``...: the
run stopping itself, then autosubmitting) are not the agent's calls: they are
dropped, and counted in ``extra["harness_steps_dropped"]``. 0.x writes them as
an ``exit_*`` action; 1.x as a step with no action whose thought is the
harness's "Exit due to ..." message.
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import Any

from ._common import (
    ImportedSession,
    RecordError,
    SessionBuilder,
    block_text,
    parse_arguments,
    require_dict,
    require_list,
    run_label,
    sub,
)

NAME = "swe-agent"
SUFFIXES = (".traj",)

#: SWE-agent 0.x's own commands: the tool is the command's first word. Any
#: other command line is plain shell, tool "bash".
SWE_AGENT_COMMANDS = frozenset(
    {
        "open",
        "goto",
        "scroll_up",
        "scroll_down",
        "create",
        "edit",
        "search_dir",
        "search_file",
        "find_file",
        "submit",
    }
)

#: The harness ending the run (cost, context, format, errors), never the agent.
#: 0.x writes these as the step's action (``exit_forfeit`` is also one the agent
#: itself can issue; either way it ran no command).
_HARNESS_EXIT = re.compile(r"^exit_(?:cost|context|format|api|error|forfeit|total_execution_time)\b|^exit_\w+$")
#: 1.x writes the harness's exit as a step with no action and this thought.
_HARNESS_EXIT_THOUGHT = re.compile(r"^\s*Exit due to ")
#: 1.x's default observation template puts this line above the output.
_OBSERVATION_HEADER = re.compile(r"^OBSERVATION:[ \t]*\n?")

# Observation heuristics. Conservative: each pattern is a message that only a
# failed command prints. Checked on the first non-empty line of the observation:
_FIRST_LINE_ERRORS = re.compile(
    "|".join(
        (
            r": command not found$",  # bash: line 1: javac: command not found
            r"^\S*(?:ba)?sh: (?:line \d+: )?.*(?:No such file or directory|Permission denied)$",
            r"syntax error near unexpected token",
            r"unexpected EOF while looking for matching",
            r"syntax error: unexpected end of file",
            r"^[\w.+-]+: cannot access '.*': No such file or directory$",  # ls, stat
            r"^[\w.+-]+: .*: No such file or directory$",  # cat, find, python...
            r"^[\w.+-]+: can't open file .*No such file or directory",
            # SWE-agent's own commands complaining:
            r"^No matches found for ",
            r"^More than \d+ files matched for ",
            r"^Your proposed edit has introduced new syntax error",
            r"^Usage: ",
            r"^Error: ",
            r"^ERROR: ",
            r"^File .+ not found$",
            r"^Directory .+ not found$",
            r"^EXECUTION TIMED OUT",
            r"^The path .+ does not exist",  # 1.x str_replace_editor
        )
    )
)
# ...and on any line: a crash report or a compiler error is a failure wherever it is.
_ANY_LINE_ERRORS = re.compile(
    r"^(?:Traceback \(most recent call last\):|Exception in thread \"|\S+\.java:\d+: error: )",
    re.MULTILINE,
)


def observation_error(observation: str) -> str | None:
    """The failure an observation reports (its telling line), or None when it reports none."""
    for line in observation.splitlines():
        if line.strip():
            if _FIRST_LINE_ERRORS.search(line.strip()):
                return line.strip()
            break
    match = _ANY_LINE_ERRORS.search(observation)
    if match:
        end = observation.find("\n", match.start())
        return observation[match.start() : end if end >= 0 else len(observation)]
    return None


def tool_of_command(command: str) -> str:
    words = command.split(maxsplit=1)
    first = words[0] if words else ""
    return first if first in SWE_AGENT_COMMANDS else "bash"


def model_of(path: str) -> str | None:
    """The model from the run folder's name (``20240825_SWE-agent_gpt-4o-2024-05-13``)."""
    label = run_label(path) or ""
    match = re.search(r"SWE-agent_(.+)$", label, re.IGNORECASE)
    return match.group(1) if match else None


def sniff(path: str, data: Any) -> bool:
    if not isinstance(data, dict):
        return False
    if isinstance(data.get("trajectory"), list) and "info" in data:
        return True
    attempts = data.get("attempts")
    return (
        path.endswith(".traj")
        and isinstance(attempts, list)
        and bool(attempts)
        and isinstance(attempts[-1], dict)
        and isinstance(attempts[-1].get("trajectory"), list)
    )


def parse(path: str, data: Any) -> list[ImportedSession]:
    """Map one decoded ``.traj`` document."""
    doc = require_dict(data, None, "file", "the trajectory file")
    attempts = doc.get("attempts")
    if "trajectory" not in doc and isinstance(attempts, list) and attempts:
        # Saved mid-run by the retry loop: no attempt chosen yet; the last one is the one running.
        doc = require_dict(attempts[-1], len(attempts), "attempts", "an attempt")
    info = doc.get("info") or {}
    if not isinstance(info, dict):
        raise RecordError(None, "info must be an object", "info")
    stem = PurePath(path).name.removesuffix(".traj")
    run = run_label(path, stem)
    model = model_of(path)
    builder = SessionBuilder(f"{run}/{stem}" if run else stem, f"swe-agent/{model}" if model else "swe-agent")
    history = doc.get("history") or []
    function_calling = isinstance(history, list) and any(
        isinstance(m, dict) and m.get("role") == "assistant" and m.get("tool_calls") for m in history
    )
    builder.turn_start()
    unexecuted = 0
    if function_calling:
        dropped = _map_history(builder, require_list(history, None, "history", "history"))
        version = "1.x"
    else:
        steps = require_list(doc.get("trajectory"), None, "trajectory", "trajectory")
        dropped, unexecuted = _map_trajectory(builder, steps)
        # 1.x steps record the model query and their execution time; 0.x steps do not.
        version = "1.x" if any(isinstance(s, dict) and "query" in s for s in steps) else "0.x"
    stats = sub(info, "model_stats")
    # Only the run's total is recorded: one usage event with its cost. tokens_sent
    # is a sum over every model call, not a context size, so it is not reported.
    builder.usage(model=model, cost_usd=stats.get("instance_cost"))
    exit_status = info.get("exit_status")
    extra: dict[str, Any] = {"format_version": version, "harness_steps_dropped": dropped}
    if unexecuted:
        extra["unexecuted_steps"] = unexecuted
    if stats:
        extra["model_stats"] = stats
    if isinstance(info.get("submission"), str):
        extra["submitted_patch"] = bool(info["submission"].strip())
    ended = exit_status if isinstance(exit_status, str) and exit_status.strip() else None
    return [builder.finish(path, ended, extra)]


def _never_ran(step: dict[str, Any], observation: str) -> bool:
    """A 1.x step the harness refused before running it (blocklisted, bad syntax):
    it records the query but no observation and an execution time of exactly 0."""
    return "query" in step and not observation and step.get("execution_time") == 0


def _map_trajectory(builder: SessionBuilder, steps: list[Any]) -> tuple[int, int]:
    """``(harness steps dropped, unexecuted steps)``."""
    dropped = unexecuted = 0
    for number, step in enumerate(steps, start=1):
        step = require_dict(step, number, "trajectory", "a trajectory step")
        action = step.get("action")
        observation = step.get("observation")
        if not isinstance(action, str):
            raise RecordError(number, "action must be a string", "trajectory")
        if observation is not None and not isinstance(observation, str):
            raise RecordError(number, "observation must be a string", "trajectory")
        observation = observation or ""
        command = action.strip("\n")
        raw_thought = step.get("thought")
        thought = raw_thought if isinstance(raw_thought, str) else ""
        if _HARNESS_EXIT.match(command.strip()):
            dropped += 1
            continue
        if not command.strip():
            if _HARNESS_EXIT_THOUGHT.match(thought):
                dropped += 1  # 1.x: the harness stopping the run
            else:
                # No action was parsed: the shell was sent nothing (0.x runs no
                # sub-action for an empty action; 1.x asks the model again).
                unexecuted += 1
                builder.text(thought)
            continue
        builder.text(thought)
        if _never_ran(step, observation):
            unexecuted += 1
            continue
        tool = tool_of_command(command.strip())
        call_id = f"step-{number}"
        builder.call(tool, {"command": command}, call_id=call_id)
        builder.result(tool, observation, call_id=call_id, error=observation_error(observation))
    return dropped, unexecuted


def _map_history(builder: SessionBuilder, history: list[Any]) -> int:
    dropped = 0
    for number, message in enumerate(history, start=1):
        message = require_dict(message, number, "history", "a history message")
        if message.get("is_demo"):
            continue  # a worked example shown to the model, not this run
        role = message.get("role")
        if role == "assistant":
            thought = message.get("thought")
            text = thought if isinstance(thought, str) else block_text(message.get("content"))
            calls = message.get("tool_calls") or []
            if not calls and not str(message.get("action") or "").strip() and _HARNESS_EXIT_THOUGHT.match(text):
                dropped += 1  # the harness stopping the run: its words, not the model's
                continue
            builder.text(text)
            for call in require_list(calls, number, "history", "tool_calls"):
                call = require_dict(call, number, "history", "a tool call")
                function = sub(call, "function")
                name = function.get("name")
                if not isinstance(name, str) or not name:
                    raise RecordError(number, "a tool call has no function name", "history")
                args = parse_arguments(function.get("arguments"))
                # A function call is always the model's: 1.x never writes its own
                # exits as calls (an ``exit_forfeit`` tool is the agent giving up).
                builder.call(name, args, call_id=str(call.get("id")) if call.get("id") else None)
            if not calls and isinstance(message.get("action"), str):
                command = message["action"].strip("\n")
                if _HARNESS_EXIT.match(command.strip()):
                    dropped += 1
        elif role == "tool":
            ids = message.get("tool_call_ids") or ([message["tool_call_id"]] if message.get("tool_call_id") else [])
            if isinstance(ids, str):
                ids = [ids]  # one id written bare: not its characters one by one
            ids = require_list(ids, number, "history", "tool_call_ids")
            text = block_text(message.get("content"))
            error = observation_error(_OBSERVATION_HEADER.sub("", text, count=1))
            for call_id in ids or [None]:
                key = str(call_id) if call_id is not None else None
                tool = builder.tool_of_call.get(key, "unknown") if key else "unknown"
                builder.result(tool, text, call_id=key, error=error)
    return dropped
