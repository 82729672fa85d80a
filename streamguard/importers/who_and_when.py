"""Who&When multi-agent logs: Magentic-One (Hand-Crafted) and CaptainAgent
(Algorithm-Generated) runs, ``history[]`` of ``{role, content, name?}``; one
session per file, the multi-agent system as one agent.

Magentic-One (roles ``Orchestrator (thought)``, ``Orchestrator (-> Agent)``,
agent names, ``human``):

* ``human``: the task; starts the turn (text, role user).
* ``Orchestrator (thought)``: the orchestrator's own words (plan, ledger, next
  speaker): assistant text.
* ``Orchestrator (-> Agent)``: a call of tool ``Agent`` with
  ``{"instruction": content}``; that agent's next message is its result. An
  agent message no instruction asked for is text with role ``tool``.
* ``Orchestrator (termination condition)``: not an event; it gives ``ended``:
  ``max_rounds`` ("Max rounds (N) reached"), ``max_time`` ("Max time (Ns)
  reached"), ``finished`` ("No agent selected", the orchestrator choosing no
  one once the request is satisfied, or a ``FINAL ANSWER``), else
  ``terminated``; a ``FINAL ANSWER:`` line becomes a ``final_answer`` event.
* Errors, by text (the log records none): a Python traceback, ``exited with
  Unix exit code: N`` with N ≠ 0, ``No code block detected`` (a code executor
  given nothing to run), ``encountered an error``.

CaptainAgent (roles user/assistant with ``name``):

* the first message is the task as the manager hands it over: text, role user;
* an expert's message is assistant text;
* ``Computer_terminal`` answering ``exitcode: N (...)`` ran the code blocks of
  the message before it: a call of tool ``Computer_terminal`` with
  ``{"code": ...}`` and its result, an error when N ≠ 0;
* ``Computer_terminal`` saying there is no code to run is the group chat's
  bookkeeping: text with role ``system``, no call;
* ``ended`` is ``finished`` when the last message says ``TERMINATE``, else None.
"""

from __future__ import annotations

import os
import re
from pathlib import PurePath
from typing import Any

from ._common import (
    ImportedSession,
    RecordError,
    SessionBuilder,
    require_dict,
    require_list,
)

NAME = "who-and-when"
SUFFIXES = (".json",)

_TO_AGENT = re.compile(r"^Orchestrator \(-> (.+)\)$")
_FINAL_ANSWER = re.compile(r"^FINAL ANSWER:\s*(.*)$", re.MULTILINE)
_AGENT_ERRORS = re.compile(
    r"^Traceback \(most recent call last\):|exited with (?:an error|Unix exit code: [1-9]\d*)"
    r"|^No code block detected|encountered an error",
    re.MULTILINE,
)
_EXITCODE = re.compile(r"^exitcode:\s*(-?\d+)")
_CODE_BLOCK = re.compile(r"```[\w+-]*\n(.*?)```", re.DOTALL)
TERMINAL = "Computer_terminal"


def sniff(path: str, data: Any) -> bool:
    history = data.get("history") if isinstance(data, dict) else None
    return (
        isinstance(history, list)
        and bool(history)
        and isinstance(history[0], dict)
        and "role" in history[0]
        and "content" in history[0]
        and "trajectory" not in data
    )


def classify_termination(text: str) -> str:
    if re.match(r"\s*Max rounds \(\d+\) reached", text):
        return "max_rounds"
    if re.match(r"\s*Max time \(\d+s?\) reached", text):
        return "max_time"
    if text.lstrip().startswith("No agent selected") or _FINAL_ANSWER.search(text):
        return "finished"
    return "terminated"


def parse(path: str, data: Any) -> list[ImportedSession]:
    doc = require_dict(data, None, "file", "the log")
    history = require_list(doc.get("history"), None, "history", "history")
    for number, message in enumerate(history, start=1):
        message = require_dict(message, number, "history", "a message")
        if not isinstance(message.get("role"), str):
            raise RecordError(number, "role must be a string", "history")
        if not isinstance(message.get("content"), str):
            raise RecordError(number, "content must be a string", "history")
    p = PurePath(os.path.abspath(path))  # the same id from any working folder
    name = f"{p.parent.name}/{p.stem}" if p.parent.name else p.stem
    extra: dict[str, Any] = {
        k: doc[k]
        for k in ("question_ID", "is_correct", "is_corrected", "mistake_agent", "mistake_step", "level")
        if k in doc
    }
    magentic = any(m["role"].startswith("Orchestrator") for m in history)
    if magentic:
        builder = SessionBuilder(name, "magentic-one")
        ended = _magentic(builder, history, extra)
    else:
        builder = SessionBuilder(name, "captain-agent")
        ended = _captain(builder, history)
    return [builder.finish(path, ended, extra)]


def _magentic(builder: SessionBuilder, history: list[dict[str, Any]], extra: dict[str, Any]) -> str | None:
    pending: dict[str, str] = {}  # agent name -> the call awaiting its answer
    ended: str | None = None
    for number, message in enumerate(history, start=1):
        role, content = message["role"], message["content"]
        target = _TO_AGENT.match(role)
        if role == "human":
            builder.turn_start()
            builder.text(content, role="user")
        elif role == "Orchestrator (thought)":
            builder.text(content)
        elif target:
            agent = target.group(1)
            call_id = f"step-{number}"
            pending[agent] = call_id
            builder.call(agent, {"instruction": content}, call_id=call_id)
        elif role == "Orchestrator (termination condition)":
            ended = classify_termination(content)
            extra["termination"] = content.strip().splitlines()[0][:200] if content.strip() else ""
            answer = _FINAL_ANSWER.search(content)
            if answer:
                builder.final_answer(answer.group(1))
        elif role in pending:
            match = _AGENT_ERRORS.search(content)
            error = content[match.start() :].splitlines()[0] if match else None
            builder.result(role, content, call_id=pending.pop(role), error=error)
        else:
            builder.text(content, role="tool")
    return ended


def _captain(builder: SessionBuilder, history: list[dict[str, Any]]) -> str | None:
    last_code: str | None = None
    for number, message in enumerate(history, start=1):
        content = message["content"]
        speaker = message.get("name") if isinstance(message.get("name"), str) else message["role"]
        if number == 1:
            builder.turn_start()
            builder.text(content, role="user")
            last_code = _code_of(content)
            continue
        if speaker == TERMINAL:
            code = _EXITCODE.match(content)
            if code is None:
                builder.text(content, role="system")  # "no code to execute": bookkeeping
                continue
            call_id = f"step-{number}"
            builder.call(TERMINAL, {"code": last_code} if last_code is not None else None, call_id=call_id)
            rc = int(code.group(1))
            error = content.splitlines()[0] if rc != 0 else None
            builder.result(TERMINAL, content, call_id=call_id, error=error)
            last_code = None
        else:
            builder.text(content)
            last_code = _code_of(content)
    last = history[-1]["content"] if history else ""
    return "finished" if "TERMINATE" in last else None


def _code_of(content: str) -> str | None:
    blocks = _CODE_BLOCK.findall(content)
    return "\n".join(block.rstrip("\n") for block in blocks) if blocks else None
