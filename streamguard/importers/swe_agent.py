"""SWE-agent trajectories (``.traj``), one session per file.

* 0.x: ``trajectory[]`` of ``{action, observation, thought, response}`` steps; the
  action is a command line, either one of SWE-agent's own commands (``open``,
  ``edit``, ``search_dir``...) or plain shell. No exit code is recorded, so a
  failure is recognised from the observation text (:func:`observation_error`).
* 1.x with function calling: ``history[]`` chat messages, assistant ``tool_calls``
  answered by ``tool`` messages (``tool_call_ids``). The same text heuristics
  apply to their results.

The harness's own steps (``exit_cost``, ``exit_context``, ``exit_format``...: the
run stopping itself, then autosubmitting) are not the agent's calls: they are
dropped, and counted in ``extra["harness_steps_dropped"]``.
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
_HARNESS_EXIT = re.compile(r"^exit_(?:cost|context|format|api|error|forfeit|total_execution_time)\b|^exit_\w+$")

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
    return isinstance(data, dict) and isinstance(data.get("trajectory"), list) and "info" in data


def parse(path: str, data: Any) -> list[ImportedSession]:
    """Map one decoded ``.traj`` document."""
    doc = require_dict(data, None, "file", "the trajectory file")
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
    if function_calling:
        dropped = _map_history(builder, require_list(history, None, "history", "history"))
        version = "1.x"
    else:
        dropped = _map_trajectory(builder, require_list(doc.get("trajectory"), None, "trajectory", "trajectory"))
        version = "0.x"
    stats = sub(info, "model_stats")
    # Only the run's total is recorded: one usage event with its cost. tokens_sent
    # is a sum over every model call, not a context size, so it is not reported.
    builder.usage(model=model, cost_usd=stats.get("instance_cost"))
    exit_status = info.get("exit_status")
    extra: dict[str, Any] = {"format_version": version, "harness_steps_dropped": dropped}
    if stats:
        extra["model_stats"] = stats
    if isinstance(info.get("submission"), str):
        extra["submitted_patch"] = bool(info["submission"].strip())
    return [builder.finish(path, exit_status if isinstance(exit_status, str) else None, extra)]


def _map_trajectory(builder: SessionBuilder, steps: list[Any]) -> int:
    dropped = 0
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
        if _HARNESS_EXIT.match(command.strip()):
            dropped += 1
            continue
        thought = step.get("thought")
        if isinstance(thought, str):
            builder.text(thought)
        tool = tool_of_command(command.strip())
        call_id = f"step-{number}"
        builder.call(tool, {"command": command}, call_id=call_id)
        builder.result(tool, observation, call_id=call_id, error=observation_error(observation))
    return dropped


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
            builder.text(text)
            calls = message.get("tool_calls") or []
            for call in require_list(calls, number, "history", "tool_calls"):
                call = require_dict(call, number, "history", "a tool call")
                function = sub(call, "function")
                name = function.get("name")
                if not isinstance(name, str) or not name:
                    raise RecordError(number, "a tool call has no function name", "history")
                args = parse_arguments(function.get("arguments"))
                if name.startswith("exit_") and _HARNESS_EXIT.match(name):
                    dropped += 1
                    continue
                builder.call(name, args, call_id=str(call.get("id")) if call.get("id") else None)
            if not calls and isinstance(message.get("action"), str):
                command = message["action"].strip("\n")
                if _HARNESS_EXIT.match(command.strip()):
                    dropped += 1
        elif role == "tool":
            ids = message.get("tool_call_ids") or ([message["tool_call_id"]] if message.get("tool_call_id") else [])
            text = block_text(message.get("content"))
            error = observation_error(text)
            for call_id in ids or [None]:
                key = str(call_id) if call_id is not None else None
                tool = builder.tool_of_call.get(key, "unknown") if key else "unknown"
                builder.result(tool, text, call_id=key, error=error)
    return dropped
