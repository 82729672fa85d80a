"""OpenAI-style chat message lists: tau-bench, tau2-bench and AgentDojo logs.

Shapes recognised in one file:

* a list of messages (one session, named after the file);
* a list of tau-bench results ``[{task_id, trial, reward, traj: [messages]}]``;
* an object with ``messages[]`` (AgentDojo: ``run_id``, ``pipeline_name``, a
  top-level ``error``, ``final_answer``, ``evaluation``);
* a tau2-bench results file, ``simulations[]`` each with ``messages[]`` and a
  ``termination_reason`` (``info.agent_info.llm`` names the agent's model).

Messages: ``system`` is dropped; a ``user`` message starts a turn (text, role
user); ``assistant`` content is text (``reasoning_content`` is text with role
reasoning) and each of its ``tool_calls`` a call — OpenAI's
``{id, function: {name, arguments}}``, tau2's ``{id, name, arguments}`` and
AgentDojo's ``{id, function: "name", args}``; a ``tool`` message is the result
of the call its ``tool_call_id`` (tau2: ``id``) names. Errors: a non-empty
``error`` string (AgentDojo), ``error: true`` (tau2: the content is the error
text); plain OpenAI logs record none, and no text heuristic is applied.
The tau2 simulated user's own tool calls (``requestor: "user"``, telecom
domains) are the user's actions, not the agent's: dropped, with their results.
Usage (tau2 ``usage`` and ``cost`` per assistant message) and ``timestamp``
are kept where recorded.
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
    exception_name,
    parse_arguments,
    parse_ts,
    require_dict,
    require_list,
    sub,
)

NAME = "openai-chat"
SUFFIXES = (".json",)


def _is_message_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(m, dict) and "role" in m for m in value[:5])


def sniff(path: str, data: Any) -> bool:
    if _is_message_list(data):
        return True
    if isinstance(data, list) and data and all(isinstance(r, dict) and isinstance(r.get("traj"), list) for r in data[:5]):
        return True
    if isinstance(data, dict):
        if isinstance(data.get("simulations"), list):
            return True
        messages = data.get("messages")
        return isinstance(messages, list) and "info" not in data and (not messages or _is_message_list(messages))
    return False


def parse(path: str, data: Any) -> list[ImportedSession]:
    stem = PurePath(path).stem
    if isinstance(data, dict) and isinstance(data.get("simulations"), list):
        return _tau2(path, stem, data)
    if isinstance(data, dict):
        messages = require_list(data.get("messages"), None, "messages", "messages")
        pipeline = data.get("pipeline_name") if isinstance(data.get("pipeline_name"), str) else None
        agent = f"agentdojo/{pipeline}" if pipeline else "openai-chat"
        run_id = data.get("run_id") if isinstance(data.get("run_id"), str) else None
        builder = SessionBuilder(run_id or stem, agent)
        _messages(builder, messages, "messages")
        return [builder.finish(path, *_agentdojo_outcome(data))]
    if isinstance(data, list) and data and isinstance(data[0], dict) and "traj" in data[0]:
        sessions = []
        for number, result in enumerate(data, start=1):
            result = require_dict(result, number, "results", "a result")
            traj = require_list(result.get("traj"), number, "results", "traj")
            name = f"{stem}/task-{result.get('task_id')}/trial-{result.get('trial', 0)}"
            builder = SessionBuilder(name, "tau-bench")
            _messages(builder, traj, f"results[{number}].traj")
            extra: dict[str, Any] = {k: result[k] for k in ("reward", "task_id", "trial") if k in result}
            sessions.append(builder.finish(path, None, extra))
        return sessions
    messages = require_list(data, None, "file", "the message list")
    builder = SessionBuilder(stem, "openai-chat")
    _messages(builder, messages, "messages")
    return [builder.finish(path, None, {})]


def _agentdojo_outcome(data: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """AgentDojo records no exit status: a run ``error`` names an exception (its
    class is ``ended``); a run without one that gave a final answer ended
    ``"finished"``."""
    extra: dict[str, Any] = {}
    evaluation = data.get("evaluation")
    if isinstance(evaluation, dict):
        extra.update({k: evaluation[k] for k in ("utility", "security", "outcome") if k in evaluation})
    error = data.get("error")
    if isinstance(error, str) and error.strip():
        extra["error"] = error[:500]
        return exception_name(error) or "error", extra
    if isinstance(data.get("final_answer"), str) and data["final_answer"].strip():
        return "finished", extra
    return None, extra


def _tau2(path: str, stem: str, data: dict[str, Any]) -> list[ImportedSession]:
    info = sub(data, "info")
    agent_info = sub(info, "agent_info")
    llm = agent_info.get("llm") if isinstance(agent_info.get("llm"), str) else None
    sessions = []
    for number, simulation in enumerate(data["simulations"], start=1):
        simulation = require_dict(simulation, number, "simulations", "a simulation")
        sim_id = simulation.get("id")
        name = f"{stem}/{sim_id}" if sim_id else f"{stem}/simulation-{number}"
        builder = SessionBuilder(name, f"tau2/{llm}" if llm else "tau2")
        messages = require_list(simulation.get("messages"), number, "simulations", "messages")
        _messages(builder, messages, f"simulations[{number}].messages", model=llm)
        reward = simulation.get("reward_info")
        extra: dict[str, Any] = {"task_id": simulation.get("task_id")}
        if isinstance(reward, dict) and "reward" in reward:
            extra["reward"] = reward["reward"]
        reason = simulation.get("termination_reason")
        sessions.append(builder.finish(path, reason if isinstance(reason, str) else None, extra))
    return sessions


def _call_parts(call: dict[str, Any]) -> tuple[Any, Any]:
    function = call.get("function")
    if isinstance(function, dict):  # OpenAI
        return function.get("name"), parse_arguments(function.get("arguments"))
    if isinstance(function, str):  # AgentDojo
        return function, call.get("args")
    return call.get("name"), parse_arguments(call.get("arguments"))  # tau2


_EMPTY = re.compile(r"^\s*$")


def _messages(builder: SessionBuilder, messages: list[Any], where: str, model: str | None = None) -> None:
    user_calls: set[str] = set()
    for number, message in enumerate(messages, start=1):
        message = require_dict(message, number, where, "a message")
        role = message.get("role")
        ts = parse_ts(message.get("timestamp"))
        if role == "system":
            continue
        if role == "user":
            text = block_text(message.get("content"))
            for call in message.get("tool_calls") or []:
                if isinstance(call, dict) and call.get("id") is not None:
                    user_calls.add(str(call["id"]))
            if not _EMPTY.match(text):
                builder.turn_start(ts)
                builder.text(text, role="user", ts=ts)
        elif role == "assistant":
            reasoning = message.get("reasoning_content")
            if isinstance(reasoning, str):
                builder.text(reasoning, role="reasoning", ts=ts)
            builder.text(block_text(message.get("content")), ts=ts)
            for call in require_list(message.get("tool_calls") or [], number, where, "tool_calls"):
                call = require_dict(call, number, where, "a tool call")
                name, args = _call_parts(call)
                if not isinstance(name, str) or not name:
                    raise RecordError(number, "a tool call has no function name", where)
                call_id = str(call["id"]) if call.get("id") is not None else None
                builder.call(name, args, call_id=call_id, ts=ts)
            usage = sub(message, "usage")
            cost = message.get("cost")
            builder.usage(
                model=model,
                input_tokens=usage.get("prompt_tokens") or None,
                output_tokens=usage.get("completion_tokens") or None,
                cost_usd=cost if cost else None,
                ts=ts,
            )
        elif role == "tool":
            raw_id = message.get("tool_call_id", message.get("id"))
            key = str(raw_id) if raw_id is not None else None
            if message.get("requestor") == "user" or (key is not None and key in user_calls):
                continue
            text = block_text(message.get("content"))
            error = message.get("error")
            if error is True:
                error_text: str | None = text or "error"
            elif isinstance(error, str) and error.strip():
                error_text = error
            else:
                error_text = None
            tool = builder.tool_of_call.get(key) if key else None
            if tool is None:
                name = message.get("name")
                tool_call = message.get("tool_call")
                if isinstance(tool_call, dict):
                    name = _call_parts(tool_call)[0]
                tool = name if isinstance(name, str) and name else "unknown"
            builder.result(tool, text, call_id=key, error=error_text, ts=ts)
        else:
            raise RecordError(number, f"unknown role {role!r}", where)
