"""mini-SWE-agent trajectories (``.traj.json``), one session per file.

``messages[]`` of system/user/assistant (and, for tool-call models, ``tool``)
messages, ``info{exit_status, model_stats, config}``.

* Actions: an assistant's ``tool_calls`` (tool-call variant), or the single
  fenced ``bash`` block of its text (text-action variant; an answer with no
  block or several blocks is no call: the harness refuses it).
* Results: the harness answers ``<returncode>N</returncode><output>…</output>``
  (a ``tool`` message, or the next user message in the text variant). A
  non-zero return code, an ``<exception>`` or a timeout notice is an error; the
  result is the text inside ``<output>``.
* Harness bookkeeping: a complaint about the answer's format ("No tool calls
  found", "Please always provide EXACTLY ONE action", any user message the
  harness marks with ``extra.interrupt_type``) is mapped to a ``text`` event with
  role ``system``: injected text, never the agent speaking nor a call. The final
  ``exit`` message is dropped (its status is ``ended``).
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
    parse_ts,
    require_dict,
    require_list,
    run_label,
    sub,
)

NAME = "mini-swe-agent"
SUFFIXES = (".traj.json",)

_BASH_BLOCK = re.compile(r"```(?:bash|sh)\s*\n(.*?)\n```", re.DOTALL)
_RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_OUTPUT = re.compile(r"<output>\n?(.*?)</output>", re.DOTALL)
_EXCEPTION = re.compile(r"<exception>(.*?)</exception>", re.DOTALL)
_TIMEOUT = re.compile(r"timed out and has been killed|has timed out", re.IGNORECASE)


def sniff(path: str, data: Any) -> bool:
    return (
        isinstance(data, dict)
        and isinstance(data.get("messages"), list)
        and isinstance(data.get("info"), dict)
        and (
            str(data.get("trajectory_format", "")).startswith("mini-swe-agent")
            or "exit_status" in data["info"]
            or path.endswith(".traj.json")
        )
    )


def harness_reply(text: str) -> tuple[str, str | None] | None:
    """``(output, error)`` of a harness observation, or None when ``text`` is not one."""
    code = _RETURNCODE.search(text)
    if code is None:
        if _TIMEOUT.search(text):
            return text, "timed out"
        return None
    output_match = _OUTPUT.search(text, code.end())
    output = output_match.group(1) if output_match else text[code.end() :]
    exception = _EXCEPTION.search(text, 0, code.start())
    if exception:
        return output, exception.group(1).strip() or "exception"
    rc = int(code.group(1))
    return output, (f"exit code {rc}" if rc != 0 else None)


def parse(path: str, data: Any) -> list[ImportedSession]:
    doc = require_dict(data, None, "file", "the trajectory file")
    info = sub(doc, "info")
    messages = require_list(doc.get("messages"), None, "messages", "messages")
    config = sub(info, "config")
    model_cfg = sub(config, "model")
    model = model_cfg.get("model_name") if isinstance(model_cfg.get("model_name"), str) else None
    instance = doc.get("instance_id") if isinstance(doc.get("instance_id"), str) else None
    instance = instance or PurePath(path).name.removesuffix(".traj.json")
    run = run_label(path, instance)
    builder = SessionBuilder(f"{run}/{instance}" if run else instance, f"mini-swe-agent/{model}" if model else "mini-swe-agent")

    pending_text_call: str | None = None  # text variant: the call awaiting its reply
    seen_task = False
    complaints = 0
    exit_status = info.get("exit_status")
    for number, message in enumerate(messages, start=1):
        message = require_dict(message, number, "messages", "a message")
        role = message.get("role")
        extra = sub(message, "extra")
        ts = parse_ts(extra.get("timestamp"))
        text = block_text(message.get("content"))
        if role == "system":
            continue
        if role == "user":
            if not seen_task:
                seen_task = True
                builder.turn_start(ts)
                builder.text(text, role="user", ts=ts)
                continue
            reply = harness_reply(text) if pending_text_call is not None else None
            if reply is not None and pending_text_call is not None:
                output, error = reply
                builder.result("bash", output, call_id=pending_text_call, error=error, ts=ts)
                pending_text_call = None
                continue
            # Anything else the harness says is bookkeeping (a format complaint, a
            # limit notice): injected text, never a call.
            complaints += 1
            pending_text_call = None
            builder.text(text, role="system", ts=ts)
        elif role == "assistant":
            response = sub(extra, "response")
            reasoning = message.get("reasoning_content")
            if isinstance(reasoning, str):
                builder.text(reasoning, role="reasoning", ts=ts)
            builder.text(text, ts=ts)
            calls = message.get("tool_calls")
            if calls:
                for call in require_list(calls, number, "messages", "tool_calls"):
                    call = require_dict(call, number, "messages", "a tool call")
                    function = sub(call, "function")
                    name = function.get("name")
                    if not isinstance(name, str) or not name:
                        raise RecordError(number, "a tool call has no function name", "messages")
                    call_id = str(call["id"]) if call.get("id") is not None else None
                    builder.call(name, parse_arguments(function.get("arguments")), call_id=call_id, ts=ts)
            else:
                blocks = _BASH_BLOCK.findall(text)
                if len(blocks) == 1:
                    pending_text_call = f"message-{number}"
                    builder.call("bash", {"command": blocks[0]}, call_id=pending_text_call, ts=ts)
            usage = sub(response, "usage")
            builder.usage(
                model=response.get("model") if isinstance(response.get("model"), str) else model,
                input_tokens=usage.get("prompt_tokens"),
                output_tokens=usage.get("completion_tokens"),
                cost_usd=extra.get("cost"),
                ts=ts,
            )
        elif role == "tool":
            call_id = message.get("tool_call_id")
            key = str(call_id) if call_id is not None else None
            reply = harness_reply(text)
            output, error = reply if reply is not None else (text, None)
            tool = builder.tool_of_call.get(key, "bash") if key else "bash"
            builder.result(tool, output, call_id=key, error=error, ts=ts)
        elif role == "exit":
            if exit_status is None and isinstance(extra.get("exit_status"), str):
                exit_status = extra["exit_status"]
        else:
            raise RecordError(number, f"unknown role {role!r}", "messages")
    stats = sub(info, "model_stats")
    result_extra: dict[str, Any] = {"harness_messages": complaints}
    if stats:
        result_extra["model_stats"] = stats
    if isinstance(doc.get("trajectory_format"), str):
        result_extra["format_version"] = doc["trajectory_format"]
    return [builder.finish(path, exit_status if isinstance(exit_status, str) else None, result_extra)]
