"""Claude Code session logs (``*.jsonl``), one session per file.

One JSON record per line: ``type`` user / assistant / system / summary, with
``uuid``, ``parentUuid``, ``isSidechain``, ``timestamp`` and a ``message``.

* Main chain only: records with ``isSidechain: true`` (the conversations of
  sub-agents started by the Task tool) are dropped and counted in
  ``extra["sidechain_records_dropped"]``. Records are taken in file order.
* assistant ``text`` blocks are text, ``thinking`` blocks are text with role
  ``reasoning``, ``tool_use`` blocks are calls (``name``, ``input``, ``id``).
  Claude Code writes one record per block of a model message, each repeating
  the message's ``usage``: one ``usage`` event per message id, with the figures
  of its last record. ``input_tokens`` is the context the call measured: input
  plus cache creation plus cache reads. ``context_window`` is 200,000 for a
  ``claude-*`` model, the window Claude Code runs them with (its own
  auto-compaction fires before the end of it); the log does not record it, and
  without it the context guardrail would assume 128,000 and cut turns that
  Claude Code compacts on its own.
* user ``tool_result`` blocks are results; ``is_error: true`` makes the result's
  text its error. Other user text is a prompt and starts a turn; a
  ``[Request interrupted by user`` block is a user text too, and when it is the
  session's last word ``ended`` is ``"interrupted"`` (else None: the format has
  no exit label).
* Compaction summaries (``isCompactSummary``) and ``system`` notices are text
  with role ``system``. Meta records (``isMeta``), local command echoes
  (``<command-name>``, ``<local-command-stdout>``, the shell mode's
  ``<bash-input>`` / ``<bash-stdout>``) and ``summary`` records (the
  session's title, kept in ``extra["title"]``) are dropped, as are the
  bookkeeping records newer versions write (``file-history-snapshot``,
  ``queue-operation``, ``custom-title``...), which may come first in the file.
* An assistant record Claude Code writes itself when the API fails
  (``isApiErrorMessage``, model ``<synthetic>``: "API Error: 529 ...") is text
  with role ``system``, never the model speaking; when it is the session's last
  word ``ended`` is ``"api_error"``.
* A sub-agent's own transcript (``agent-<id>.jsonl``, every record a
  sidechain) is that sub-agent's session: its records are mapped, and its id is
  ``<sessionId>/agent-<agentId>``.
"""

from __future__ import annotations

import json
from pathlib import PurePath
from typing import Any

from ._common import (
    ImportedSession,
    RecordError,
    SessionBuilder,
    block_text,
    parse_ts,
    require_dict,
)

NAME = "claude-code"
CLAUDE_WINDOW = 200_000  # tokens: the window Claude Code runs claude-* models with
SUFFIXES = (".jsonl",)

INTERRUPT_MARKER = "[Request interrupted by user"
# Echoes of what the person ran themselves (slash commands, and the ``!`` shell
# mode's ``<bash-input>``/``<bash-stdout>``): neither a prompt nor the agent's call.
_LOCAL_COMMAND_PREFIXES = (
    "<command-name>",
    "<command-message>",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<bash-input>",
    "<bash-stdout>",
    "<bash-stderr>",
)


#: Records newer versions write around the conversation; none of them is an event.
BOOKKEEPING_TYPES = frozenset({"file-history-snapshot", "queue-operation", "custom-title", "summary"})
#: How many leading bookkeeping records detection looks past before giving up.
SNIFF_RECORDS = 50


def sniff_record(record: Any) -> bool:
    return (
        isinstance(record, dict)
        and record.get("type") in ("user", "assistant", "summary", "system")
        and ("sessionId" in record or "leafUuid" in record or "parentUuid" in record)
    )


def is_bookkeeping(record: Any) -> bool:
    """A record Claude Code writes beside the conversation (file snapshots, queue
    operations, titles): one that says nothing about the format on its own."""
    if not isinstance(record, dict):
        return False
    kind = record.get("type")
    return isinstance(kind, str) and kind in BOOKKEEPING_TYPES and "message" not in record


def decode_lines(path: str, data: bytes) -> list[tuple[int, Any]]:
    records = []
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append((number, json.loads(line)))
        except ValueError as exc:
            raise RecordError(number, f"not JSON: {exc}", "line") from None
    return records


def parse(path: str, data: bytes) -> list[ImportedSession]:
    records = decode_lines(path, data)
    for number, record in records:
        require_dict(record, number, "line", "a record")
    conversation = [r for _, r in records if r.get("type") in ("user", "assistant")]
    # A sub-agent's own transcript: every conversation record is a sidechain.
    subagent = bool(conversation) and all(r.get("isSidechain") for r in conversation)
    session: str | None = None
    agent_id: str | None = None
    model = None
    last_record_of_message: dict[str, int] = {}
    for number, record in records:
        if record.get("isSidechain") and not subagent:
            continue
        if subagent and agent_id is None and isinstance(record.get("agentId"), str) and record["agentId"]:
            agent_id = record["agentId"]
        if session is None and isinstance(record.get("sessionId"), str) and record["sessionId"]:
            session = record["sessionId"]
        message = record.get("message")
        if record.get("type") == "assistant" and isinstance(message, dict):
            if model is None and isinstance(message.get("model"), str) and message["model"] != "<synthetic>":
                model = message["model"]
            if isinstance(message.get("id"), str):
                last_record_of_message[message["id"]] = number
    stem = PurePath(path).name.removesuffix(".jsonl")
    if subagent:
        agent_name = f"agent-{agent_id}" if agent_id else stem
        session = f"{session}/{agent_name}" if session else agent_name
    session = session or stem
    builder = SessionBuilder(session, f"claude-code/{model}" if model else "claude-code")
    extra: dict[str, Any] = {"sidechain_records_dropped": 0}
    if subagent:
        extra["subagent"] = True
    last_word_interrupt = False
    last_word_api_error = False
    for number, record in records:
        kind = record.get("type")
        if kind is not None and not isinstance(kind, str):
            # a record whose kind cannot be read: dropping it would lose its calls and
            # leave their results without a tool
            raise RecordError(number, f"type must be a string, not {type(kind).__name__}", "line")
        if record.get("isSidechain") and not subagent:
            extra["sidechain_records_dropped"] += 1
            continue
        stamp = record.get("timestamp")
        if stamp is not None and not isinstance(stamp, str | int | float):
            raise RecordError(number, f"timestamp must be a string, not {type(stamp).__name__}", "line")
        ts = parse_ts(stamp)
        if kind == "summary":
            if isinstance(record.get("summary"), str):
                extra.setdefault("title", record["summary"])
            continue
        if kind == "system":
            notice = block_text(record.get("content"))
            if not record.get("isMeta") and not notice.lstrip().startswith(_LOCAL_COMMAND_PREFIXES):
                builder.text(notice, role="system", ts=ts)
            continue
        if kind not in ("user", "assistant"):
            continue  # other record kinds carry no conversation
        if record.get("isMeta"):
            continue
        message = require_dict(record.get("message"), number, "line", "message")
        content = message.get("content")
        if kind == "assistant":
            last_word_interrupt = False
            if record.get("isApiErrorMessage"):
                # Claude Code's own notice that the API call failed, not the model.
                builder.text(block_text(content), role="system", ts=ts)
                last_word_api_error = True
                continue
            last_word_api_error = False
            _assistant(builder, number, message, content, ts)
            message_id = message.get("id")
            if isinstance(message_id, str) and last_record_of_message.get(message_id) == number:
                _usage(builder, message, ts)
            continue
        last_word_api_error = False
        if record.get("isCompactSummary"):
            builder.text(block_text(content), role="system", ts=ts)
            continue
        if isinstance(content, str):
            if content.lstrip().startswith(_LOCAL_COMMAND_PREFIXES):
                continue
            last_word_interrupt = content.lstrip().startswith(INTERRUPT_MARKER)
            if not last_word_interrupt:
                builder.turn_start(ts)
            builder.text(content, role="user", ts=ts)
            continue
        if not isinstance(content, list):
            raise RecordError(number, "message.content must be a string or a list of blocks", "line")
        for block in content:
            block = require_dict(block, number, "line", "a content block")
            if block.get("type") == "tool_result":
                call_id = block.get("tool_use_id")
                key = str(call_id) if call_id is not None else None
                text = block_text(block.get("content"))
                error = text if block.get("is_error") else None
                builder.result(builder.tool_of_call.get(key, "unknown") if key else "unknown", text, call_id=key, error=error, ts=ts)
                last_word_interrupt = False
            elif block.get("type") == "text" and isinstance(block.get("text"), str):
                if block["text"].lstrip().startswith(_LOCAL_COMMAND_PREFIXES):
                    continue  # a shell or slash-command echo, dropped as in a string content
                interrupt = block["text"].lstrip().startswith(INTERRUPT_MARKER)
                if not interrupt:
                    builder.turn_start(ts)
                builder.text(block["text"], role="user", ts=ts)
                last_word_interrupt = interrupt
    ended = "interrupted" if last_word_interrupt else "api_error" if last_word_api_error else None
    return [builder.finish(path, ended, extra)]


def _assistant(builder: SessionBuilder, number: int, message: dict[str, Any], content: Any, ts: float | None) -> None:
    if isinstance(content, str):
        builder.text(content, ts=ts)
        return
    if not isinstance(content, list):
        raise RecordError(number, "message.content must be a string or a list of blocks", "line")
    for block in content:
        block = require_dict(block, number, "line", "a content block")
        kind = block.get("type")
        if kind == "text":
            builder.text(str(block.get("text") or ""), ts=ts)
        elif kind == "thinking":
            builder.text(str(block.get("thinking") or ""), role="reasoning", ts=ts)
        elif kind == "tool_use":
            name = block.get("name")
            if not isinstance(name, str) or not name:
                raise RecordError(number, "a tool_use block has no name", "line")
            call_id = str(block["id"]) if block.get("id") is not None else None
            builder.call(name, block.get("input"), call_id=call_id, ts=ts)


def _usage(builder: SessionBuilder, message: dict[str, Any], ts: float | None) -> None:
    usage = message.get("usage")
    if not isinstance(usage, dict) or message.get("model") == "<synthetic>":
        return
    parts = [usage.get(k) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")]
    numbers = [p for p in parts if isinstance(p, int) and not isinstance(p, bool) and p >= 0]
    model = message.get("model") if isinstance(message.get("model"), str) else None
    builder.usage(
        model=model,
        input_tokens=sum(numbers) if numbers else None,
        output_tokens=usage.get("output_tokens"),
        cost_usd=None,
        ts=ts,
        context_window=CLAUDE_WINDOW if model and model.startswith("claude-") else None,
    )
