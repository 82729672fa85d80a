"""mini-SWE-agent trajectories (``.traj.json``), one session per file.

``messages[]`` of system/user/assistant (and, for tool-call models, ``tool``)
messages, ``info{exit_status, model_stats, config}``.

* Actions: an assistant's ``tool_calls`` (tool-call variant); else the actions
  the harness parsed (``extra.actions``, 2.x); else the single action block of
  its text (1.x text variant: a fenced ``bash``/``sh``/``mswea_bash_command``
  block or a ``<bash_code>``/``<mswea_bash_command>`` element; an answer with
  no block or several is no call: the harness refuses it).
* Responses-API models (2.x) write the model's whole response (``object:
  "response"``, ``output[]`` items: ``message``, ``reasoning``,
  ``function_call``) and answer with ``function_call_output`` items: read as
  the same assistant message and tool results.
* Results: the harness answers ``<returncode>N</returncode><output>…</output>``
  (a ``tool`` message, or the next user message in the text variant). A
  non-zero return code, an ``<exception>`` or a timeout notice is an error; the
  result is the text inside ``<output>``. An observation in another template
  is read from its recorded ``extra`` (``returncode``, ``raw_output``,
  ``exception_info``). In 1.x the submitting command is answered by the
  submission itself (no return code): that is its result.
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

# The action formats mini-SWE-agent's configurations parse (1.x ``bash`` blocks,
# 2.x ``mswea_bash_command`` blocks, and the XML-style variants of both).
# Each searched only up to its last closing mark: a block left open cannot match, and a
# lazy body searched from every such opener to the end of the text was quadratic (a
# hundred kilobytes of openers took seconds).
_FENCED_BLOCK = (re.compile(r"```(?:bash|sh|mswea_bash_command)\s*\n(.*?)\n```", re.DOTALL), "\n```")
_TAGGED_BLOCKS = tuple(
    (re.compile(rf"<{tag}>(.*?)</{tag}>", re.DOTALL), f"</{tag}>")
    for tag in ("bash_code", "mswea_bash_command")
)
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
    # bounded by the last closing tag: from an opener with no closing after it the lazy
    # match would scan to the end, and many such openers made the search quadratic
    close = text.rfind("</output>")
    output_match = _OUTPUT.search(text, code.end(), close + 9) if close >= code.end() else None
    output = output_match.group(1) if output_match else text[code.end() :]
    closed = text.rfind("</exception>", 0, code.start())
    exception = _EXCEPTION.search(text, 0, closed + 12) if closed >= 0 else None
    if exception:
        return output, exception.group(1).strip() or "exception"
    rc = int(code.group(1))
    return output, (f"exit code {rc}" if rc != 0 else None)


def action_blocks(text: str) -> list[str]:
    """The action blocks of a text-variant answer, in every format the harness parses."""
    pattern, close = _FENCED_BLOCK
    last = text.rfind(close)
    found = pattern.findall(text, 0, last + len(close)) if last >= 0 else []
    tagged: list[tuple[int, int, str]] = []
    for pattern, close in _TAGGED_BLOCKS:
        last = text.rfind(close)
        if last >= 0:
            tagged += [(m.start(), m.end(), m.group(1)) for m in pattern.finditer(text, 0, last + len(close))]
    if len(tagged) > 1:
        # in the order of the text, a block inside another one's body not counted again
        tagged.sort()
        kept, end = [], -1
        for start, stop, body in tagged:
            if start >= end:
                kept.append((start, stop, body))
                end = stop
        tagged = kept
    found += [body for _, _, body in tagged]
    return [block.strip("\n") for block in found]


def _structured_reply(extra: dict[str, Any]) -> tuple[str, str | None] | None:
    """``(output, error)`` from an observation's recorded fields (2.x), or None."""
    if "returncode" not in extra:
        return None
    output = extra.get("raw_output")
    exception = extra.get("exception_info")
    rc = extra.get("returncode")
    if isinstance(exception, str) and exception.strip():
        error: str | None = exception.strip()
    elif isinstance(rc, int) and not isinstance(rc, bool) and rc != 0:
        error = f"exit code {rc}"
    else:
        error = None
    return (output if isinstance(output, str) else ""), error


def _response_message(message: dict[str, Any]) -> dict[str, Any]:
    """A Responses-API entry as the chat message it stands for."""
    if message.get("object") == "response":
        texts, reasoning, calls = [], [], []
        for item in message.get("output") or []:
            if not isinstance(item, dict):
                continue
            kind = item.get("type")
            if kind == "message":
                texts.append(block_text(item.get("content")))
            elif kind == "reasoning":
                reasoning.append(block_text(item.get("summary")))
            elif kind == "function_call":
                call_id = item.get("call_id") or item.get("id")
                calls.append({"id": call_id, "function": {"name": item.get("name"), "arguments": item.get("arguments")}})
        usage = sub(message, "usage")
        response = {"model": message.get("model"), "usage": {
            "prompt_tokens": usage.get("input_tokens"), "completion_tokens": usage.get("output_tokens")}}
        return {
            "role": "assistant",
            "content": "\n".join(t for t in texts if t),
            "reasoning_content": "\n".join(r for r in reasoning if r) or None,
            "tool_calls": calls,
            "extra": {**sub(message, "extra"), "response": response},
        }
    if message.get("type") == "function_call_output":
        return {"role": "tool", "tool_call_id": message.get("call_id"), "content": message.get("output"),
                "extra": sub(message, "extra")}
    return message


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
    if not (isinstance(exit_status, str) and exit_status.strip()):
        exit_status = None  # unset (a run saved before it ended): the exit message may say
    last_conversation = max(
        (n for n, m in enumerate(messages, start=1) if isinstance(m, dict) and m.get("role") != "exit"), default=0
    )
    for number, message in enumerate(messages, start=1):
        message = _response_message(require_dict(message, number, "messages", "a message"))
        role = message.get("role")
        extra = sub(message, "extra")
        # 2.x stamps extra.timestamp; 1.x stamps the message itself.
        ts = parse_ts(extra.get("timestamp", message.get("timestamp")))
        text = block_text(message.get("content"))
        if role == "system":
            continue
        if role == "user":
            if not seen_task:
                seen_task = True
                builder.turn_start(ts)
                builder.text(text, role="user", ts=ts)
                continue
            reply = None
            if pending_text_call is not None and not extra.get("interrupt_type"):
                # the recorded fields first: the text is only what the model was shown
                reply = _structured_reply(extra) or harness_reply(text)
                if reply is None and number == last_conversation and exit_status == "Submitted":
                    reply = (text, None)  # 1.x: the submission answers the submitting command
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
                actions = extra.get("actions")
                if isinstance(actions, list) and actions:  # 2.x: the harness's own parse
                    blocks = [a["command"] for a in actions if isinstance(a, dict) and isinstance(a.get("command"), str)]
                else:
                    blocks = action_blocks(text)
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
            reply = _structured_reply(extra) or harness_reply(text)
            output, error = reply if reply is not None else (text, None)
            tool = builder.tool_of_call.get(key, "bash") if key else "bash"
            builder.result(tool, output, call_id=key, error=error, ts=ts)
        elif role == "exit":
            if exit_status is None and isinstance(extra.get("exit_status"), str) and extra["exit_status"].strip():
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
