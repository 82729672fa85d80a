"""OpenAI-style chat message lists: tau-bench, tau2-bench and AgentDojo logs.

Shapes recognised in one file:

* a list of messages (one session, named after the file);
* a list of tau-bench results ``[{task_id, trial, reward, info, traj: [messages]}]``;
* an object with ``messages[]``: an AgentDojo log (``suite_name``,
  ``pipeline_name``, ``user_task_id``, ``injection_task_id``, ``attack_type``,
  a top-level ``error``, ``utility``, ``security``; some runners add
  ``run_id``, ``final_answer``, ``evaluation``);
* a tau2-bench results file, ``simulations[]`` each with ``messages[]`` and a
  ``termination_reason`` (``info.agent_info.llm`` names the agent's model);
* one tau2-bench simulation (``id``, ``task_id``, ``termination_reason``,
  ``messages``): the ``simulations/<id>.json`` files of tau2's directory
  format, whose ``results.json`` holds no messages.

Messages: ``system`` is dropped; a ``user`` message starts a turn (text, role
user); ``assistant`` content is text (``reasoning_content`` is text with role
reasoning, and so are thinking blocks) and each of its ``tool_calls`` a call —
OpenAI's ``{id, function: {name, arguments}}``, tau2's ``{id, name,
arguments}`` and AgentDojo's ``{id, function: "name", args}``; Anthropic-style
``tool_use`` content blocks (early tau-bench's Claude agent) are calls too. A
``tool`` message is the result of the call its ``tool_call_id`` (tau2: ``id``)
names (tau2's grouped ``tool_messages``: each one; a legacy ``function_call``
is a call answered by a ``function`` message); a user message's
``tool_result`` blocks are results, not the user speaking. tau-bench's
ReAct agents write their calls as text (``Action: {"name", "arguments"}``)
answered by a user message the harness starts with ``API output:``: a call
and its result. Errors: a non-empty
``error`` string (AgentDojo), ``error: true`` (tau2: the content is the error
text); plain OpenAI logs record none, and no text heuristic is applied.
The tau2 simulated user's own tool calls (``requestor: "user"``, telecom
domains) are the user's actions, not the agent's: dropped, with their results.
Usage (tau2 ``usage`` and ``cost`` per assistant message) and ``timestamp``
are kept where recorded.
"""

from __future__ import annotations

import json
import re
from pathlib import PurePath
from typing import Any

from ._common import (
    ImportedSession,
    RecordError,
    SessionBuilder,
    block_text,
    exception_name,
    parse_arguments,
    parse_ts,
    reasoning_text,
    require_dict,
    require_list,
    run_label,
    sub,
)

NAME = "openai-chat"
SUFFIXES = (".json",)


def _is_message_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(m, dict) and "role" in m for m in value[:5])


def _is_simulation(data: Any) -> bool:
    """One tau2 simulation run (the directory format's ``simulations/<id>.json``)."""
    return (
        isinstance(data, dict)
        and "termination_reason" in data
        and "task_id" in data
        and (isinstance(data.get("messages"), list) or data.get("ticks") is not None)
    )


def sniff(path: str, data: Any) -> bool:
    if _is_message_list(data):
        return True
    if isinstance(data, list) and data and all(isinstance(r, dict) and isinstance(r.get("traj"), list) for r in data[:5]):
        return True
    if isinstance(data, dict):
        if isinstance(data.get("simulations"), list) or _is_simulation(data):
            return True
        messages = data.get("messages")
        return isinstance(messages, list) and "info" not in data and (not messages or _is_message_list(messages))
    return False


def parse(path: str, data: Any) -> list[ImportedSession]:
    stem = PurePath(path).stem
    if isinstance(data, dict) and isinstance(data.get("simulations"), list):
        return _tau2(path, stem, data)
    if _is_simulation(data):
        sim_id = str(data.get("id") or stem)
        run = run_label(path, sim_id)
        return [_tau2_simulation(path, data, f"{run}/{sim_id}" if run else sim_id, None, None, "messages")]
    if isinstance(data, dict):
        messages = require_list(data.get("messages"), None, "messages", "messages")
        pipeline = data.get("pipeline_name") if isinstance(data.get("pipeline_name"), str) else None
        agent = f"agentdojo/{pipeline}" if pipeline else "openai-chat"
        builder = SessionBuilder(_agentdojo_id(data) or stem, agent)
        _messages(builder, messages, "messages")
        return [builder.finish(path, *_agentdojo_outcome(data, messages))]
    if isinstance(data, list) and data and isinstance(data[0], dict) and "traj" in data[0]:
        sessions = []
        for number, result in enumerate(data, start=1):
            result = require_dict(result, number, "results", "a result")
            traj = require_list(result.get("traj"), number, "results", "traj")
            name = f"{stem}/task-{result.get('task_id')}/trial-{result.get('trial', 0)}"
            builder = SessionBuilder(name, "tau-bench")
            _messages(builder, traj, f"results[{number}].traj")
            extra: dict[str, Any] = {k: result[k] for k in ("reward", "task_id", "trial") if k in result}
            sessions.append(builder.finish(path, _tau_bench_outcome(result.get("info"), traj), extra))
        return sessions
    messages = require_list(data, None, "file", "the message list")
    builder = SessionBuilder(stem, "openai-chat")
    _messages(builder, messages, "messages")
    return [builder.finish(path, None, {})]


def _agentdojo_id(data: dict[str, Any]) -> str | None:
    """A runner's ``run_id``; else, for AgentDojo's own logs (one file per
    ``<pipeline>/<suite>/<user task>/<attack>/<injection task or none>.json``),
    those five names: the file name alone repeats across every task."""
    if isinstance(data.get("run_id"), str) and data["run_id"]:
        return str(data["run_id"])
    if not (isinstance(data.get("suite_name"), str) and data.get("user_task_id") is not None):
        return None
    parts = [data.get("pipeline_name"), data["suite_name"], data["user_task_id"],
             data.get("attack_type"), data.get("injection_task_id")]
    return "/".join(str(part) if part not in (None, "") else "none" for part in parts)


def _agentdojo_outcome(data: dict[str, Any], messages: list[Any]) -> tuple[str | None, dict[str, Any]]:
    """AgentDojo records no exit status: a run ``error`` names an exception (its
    class is ``ended``); a run without one that gave a final answer ended
    ``"finished"`` (a runner's ``final_answer``; in AgentDojo's own logs, which
    have none, the model's last message answering with no tool call)."""
    extra: dict[str, Any] = {}
    evaluation = data.get("evaluation")
    if isinstance(evaluation, dict):
        extra.update({k: evaluation[k] for k in ("utility", "security", "outcome") if k in evaluation})
    extra.update({k: data[k] for k in ("utility", "security") if k in data and k not in extra})
    error = data.get("error")
    if isinstance(error, str) and error.strip():
        extra["error"] = error[:500]
        return exception_name(error) or "error", extra
    if "final_answer" in data:
        answered = isinstance(data["final_answer"], str) and bool(data["final_answer"].strip())
        return ("finished" if answered else None), extra
    last = messages[-1] if messages else None
    if isinstance(last, dict) and last.get("role") == "assistant" and not last.get("tool_calls"):
        return "finished", extra
    return None, extra


def _tau_bench_outcome(info: Any, traj: list[Any]) -> str | None:
    """tau-bench writes no end label; its ``info`` says how the episode ended.

    A run that raised records ``info.error`` (early versions: ``info`` is the
    string ``"Error: ..."``): the exception's class, else ``"error"``. The
    environment scores an episode (``info.reward_info``) only when it is done:
    the user ended it (``source: "user"``, ``user_stop``) or the agent called a
    terminating tool (``agent_stop``). An episode the agent's loop left unscored
    ran out of steps (``max_steps``): the loop has no other way out.
    """
    if isinstance(info, str):
        text = info.removeprefix("Error: ")
        return (exception_name(text) or "error") if info.startswith("Error") else None
    if not isinstance(info, dict):
        return None
    if isinstance(info.get("error"), str) and info["error"].strip():
        return exception_name(info["error"]) or "error"
    if "reward_info" not in info:
        return None  # an early version's info: no record of how it ended
    if info["reward_info"] is not None:
        return "user_stop" if info.get("source") == "user" else "agent_stop"
    return "max_steps" if traj else None


def _tau2(path: str, stem: str, data: dict[str, Any]) -> list[ImportedSession]:
    info = sub(data, "info")
    agent_info = sub(info, "agent_info")
    llm = agent_info.get("llm") if isinstance(agent_info.get("llm"), str) else None
    sessions = []
    for number, simulation in enumerate(data["simulations"], start=1):
        simulation = require_dict(simulation, number, "simulations", "a simulation")
        sim_id = simulation.get("id")
        name = f"{stem}/{sim_id}" if sim_id else f"{stem}/simulation-{number}"
        sessions.append(_tau2_simulation(path, simulation, name, llm, number, f"simulations[{number}].messages"))
    return sessions


def _tau2_simulation(
    path: str, simulation: dict[str, Any], name: str, llm: str | None, number: int | None, where: str
) -> ImportedSession:
    """One simulation run; ``number`` its position in ``simulations[]`` (None: a file of its own)."""
    builder = SessionBuilder(name, f"tau2/{llm}" if llm else "tau2")
    messages = simulation.get("messages")
    if messages is None and simulation.get("ticks") is not None:
        raise RecordError(number, "a full-duplex (voice) simulation records ticks, not messages: not supported", where)
    messages = require_list(messages, number, "simulations" if number is not None else None, "messages")
    _messages(builder, messages, where, model=llm)
    reward = simulation.get("reward_info")
    extra: dict[str, Any] = {"task_id": simulation.get("task_id")}
    if isinstance(reward, dict) and "reward" in reward:
        extra["reward"] = reward["reward"]
    reason = simulation.get("termination_reason")
    return builder.finish(path, reason if isinstance(reason, str) and reason else None, extra)


def _call_parts(call: dict[str, Any]) -> tuple[Any, Any]:
    function = call.get("function")
    if isinstance(function, dict):  # OpenAI
        return function.get("name"), parse_arguments(function.get("arguments"))
    if isinstance(function, str):  # AgentDojo
        return function, call.get("args")
    return call.get("name"), parse_arguments(call.get("arguments"))  # tau2


_EMPTY = re.compile(r"^\s*$")


#: tau-bench's ReAct agents: the harness runs the JSON after the last "Action:"
#: and answers with a user message it starts with this prefix.
_REACT_ACTION = "Action:"
_REACT_OUTPUT = "API output: "
_REACT_RESPOND = "respond"


def _react_action(text: str, following: Any) -> tuple[str, Any] | None:
    """``(tool, arguments)`` of a tau-bench ReAct answer the harness ran as a tool,
    or None (no action, a reply to the user, or no ``API output:`` answer)."""
    if _REACT_ACTION not in text or not isinstance(following, dict) or following.get("role") != "user":
        return None
    answer = following.get("content")
    if not (isinstance(answer, str) and answer.startswith(_REACT_OUTPUT)):
        return None
    try:
        action = json.loads(text.split(_REACT_ACTION)[-1].strip())
    except ValueError:
        return None
    if not isinstance(action, dict) or not isinstance(action.get("name"), str) or action["name"] == _REACT_RESPOND:
        return None
    return action["name"], action.get("arguments")


def _tool_message_error(message: dict[str, Any], text: str) -> str | None:
    error = message.get("error")
    if error is True:
        return text or "error"
    if isinstance(error, str) and error.strip():
        return error
    return None


def _messages(builder: SessionBuilder, messages: list[Any], where: str, model: str | None = None) -> None:
    user_calls: set[str] = set()
    react_call: str | None = None  # the ReAct call the next user message answers
    for number, message in enumerate(messages, start=1):
        message = require_dict(message, number, where, "a message")
        role = message.get("role")
        ts = parse_ts(message.get("timestamp"))
        if role == "system":
            continue
        if role == "user":
            content = message.get("content")
            for call in message.get("tool_calls") or []:
                if isinstance(call, dict) and call.get("id") is not None:
                    user_calls.add(str(call["id"]))
            if react_call is not None and isinstance(content, str):
                tool = builder.tool_of_call.get(react_call, "unknown")
                builder.result(tool, content.removeprefix(_REACT_OUTPUT), call_id=react_call, ts=ts)
                react_call = None
                continue
            if isinstance(content, list):
                # Anthropic-style results (early tau-bench's Claude agent): not the user speaking.
                for block in content:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        key = str(block["tool_use_id"]) if block.get("tool_use_id") is not None else None
                        result_text = block_text(block.get("content"))
                        error_text = (result_text or "error") if block.get("is_error") else None
                        tool = builder.tool_of_call.get(key, "unknown") if key else "unknown"
                        builder.result(tool, result_text, call_id=key, error=error_text, ts=ts)
                content = [b for b in content if not (isinstance(b, dict) and b.get("type") == "tool_result")]
            text = block_text(content)
            if not _EMPTY.match(text):
                builder.turn_start(ts)
                builder.text(text, role="user", ts=ts)
        elif role == "assistant":
            content = message.get("content")
            reasoning = message.get("reasoning_content")
            if isinstance(reasoning, str):
                builder.text(reasoning, role="reasoning", ts=ts)
            builder.text(reasoning_text(content), role="reasoning", ts=ts)
            text = block_text([b for b in content if not (isinstance(b, dict) and b.get("type") == "tool_use")]
                              if isinstance(content, list) else content)
            builder.text(text, ts=ts)
            tool_calls = require_list(message.get("tool_calls") or [], number, where, "tool_calls")
            for call in tool_calls:
                call = require_dict(call, number, where, "a tool call")
                name, args = _call_parts(call)
                if not isinstance(name, str) or not name:
                    raise RecordError(number, "a tool call has no function name", where)
                call_id = str(call["id"]) if call.get("id") is not None else None
                builder.call(name, args, call_id=call_id, ts=ts)
            legacy = message.get("function_call")  # OpenAI's function calling before tool calls
            if isinstance(legacy, dict) and not tool_calls:
                if not isinstance(legacy.get("name"), str) or not legacy["name"]:
                    raise RecordError(number, "a function_call has no name", where)
                builder.call(legacy["name"], parse_arguments(legacy.get("arguments")), ts=ts)
            uses = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"] if isinstance(content, list) else []
            for block in uses:
                if not isinstance(block.get("name"), str) or not block["name"]:
                    raise RecordError(number, "a tool_use block has no name", where)
                call_id = str(block["id"]) if block.get("id") is not None else None
                builder.call(block["name"], block.get("input"), call_id=call_id, ts=ts)
            if not tool_calls and not uses and legacy is None and isinstance(content, str):
                action = _react_action(content, messages[number] if number < len(messages) else None)
                if action is not None:
                    react_call = f"message-{number}"
                    builder.call(action[0], action[1], call_id=react_call, ts=ts)
            usage = sub(message, "usage")
            cost = message.get("cost")
            builder.usage(
                model=model,
                input_tokens=usage.get("prompt_tokens") or None,
                output_tokens=usage.get("completion_tokens") or None,
                cost_usd=cost if cost else None,
                ts=ts,
            )
        elif role == "function":  # the legacy function call's answer, named by the function
            _tool_result(builder, message, user_calls, ts)
        elif role == "tool":
            # tau2 groups parallel results as one message's ``tool_messages``.
            grouped = message.get("tool_messages")
            parts = grouped if isinstance(grouped, list) else [message]
            for part in parts:
                part = require_dict(part, number, where, "a tool message")
                _tool_result(builder, part, user_calls, ts)
        else:
            raise RecordError(number, f"unknown role {role!r}", where)


def _tool_result(builder: SessionBuilder, message: dict[str, Any], user_calls: set[str], ts: float | None) -> None:
    raw_id = message.get("tool_call_id", message.get("id"))
    key = str(raw_id) if raw_id is not None else None
    if message.get("requestor") == "user" or (key is not None and key in user_calls):
        return
    text = block_text(message.get("content"))
    tool = builder.tool_of_call.get(key) if key else None
    if tool is None:
        name = message.get("name")
        tool_call = message.get("tool_call")
        if isinstance(tool_call, dict):
            name = _call_parts(tool_call)[0]
        tool = name if isinstance(name, str) and name else "unknown"
    builder.result(tool, text, call_id=key, error=_tool_message_error(message, text), ts=ts)
