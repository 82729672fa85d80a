"""Records crafted to cost: what bounds the work, asserted by behaviour (no timing).

Each bound here replaced work that grew faster than the record: a regex rescanning from
every ``open(``, a nesting walk allocating per element, Python work per key, per shell
segment or per list element, integers thousands of digits long (bounded for ``run`` and
``bridge``), whole unbounded texts normalised, and caches pinning the long strings they
were keyed by. The costs measured
before and after are in docs/performance.md ("Records crafted to cost").
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamguard import canonical
from streamguard.canonical import MAX_PATH_KEYS_SCANNED, canonicalize
from streamguard.engine import Engine
from streamguard.events import (
    MAX_INT_DIGITS,
    MAX_NESTING,
    NestingTooDeep,
    ToolCall,
    ToolResult,
    TurnStart,
    decode_agent_record,
)
from streamguard.events import _depth_exceeds as depth_exceeds
from streamguard.kafka.lifecycle import bound_integer_digits
from streamguard.kafka.routing import DeadLetter, decode_event
from streamguard.policy import PolicySet
from streamguard.signals.chat_stall import ChatStall
from streamguard.signals.facts import (
    COMMAND_TEXT_LIMIT,
    MAX_SEGMENTS,
    code_facts,
    command_text,
    shell_facts,
)
from streamguard.signals.result_stall import TEXT_LIMIT, template


def reference_depth(value: Any) -> int:
    """The nesting the contract bounds, written plainly (recursive): containers count one
    level each, and a string holding JSON text counts with its own depth."""
    if isinstance(value, dict):
        return 1 + max((reference_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((reference_depth(v) for v in value), default=0)
    if isinstance(value, str) and value.lstrip(" \t\n\r")[:1] in ("[", "{"):
        try:
            return reference_depth(json.loads(value))
        except (ValueError, RecursionError):
            return 0
    return 0


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text("ab[{ ", max_size=4),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text("kx", max_size=2), inner, max_size=3)
    | inner.map(lambda v: json.dumps(v)),  # JSON text inside a string
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(json_values, st.integers(0, 6))
def test_the_level_walk_bounds_exactly_the_depth_defined(value: Any, limit: int) -> None:
    assert depth_exceeds(value, limit) == (reference_depth(value) > limit)


def test_wide_shallow_values_pass_and_deep_ones_are_refused() -> None:
    wide = json.dumps({"items": [[] for _ in range(50_000)]})
    assert decode_agent_record(f'{{"type":"tool_result","session":"s","tool":"t","result":{wide}}}')
    deep = "[" * (MAX_NESTING + 1) + "]" * (MAX_NESTING + 1)
    with pytest.raises(NestingTooDeep):
        decode_agent_record(f'{{"type":"tool_result","session":"s","tool":"t","result":[1,{deep}]}}')


# -------------------------------------------------------------------- integers


def record(field: str, value: str) -> bytes:
    return f'{{"type":"tool_call","session":"s","tool":"t","{field}":{value}}}'.encode()


@pytest.fixture
def bounded_digits() -> Any:
    before = sys.get_int_max_str_digits()
    bound_integer_digits()
    yield
    sys.set_int_max_str_digits(before)


def test_run_and_bridge_refuse_integers_longer_than_the_bound(bounded_digits: None) -> None:
    data = record("args", json.dumps({"n": [1, {"deep": "X"}]}).replace('"X"', "9" * (MAX_INT_DIGITS + 1)))
    letter = decode_event(data)
    assert isinstance(letter, DeadLetter) and letter.reason == "invalid_event"
    event = decode_event(record("args", json.dumps({"n": 10**600, "big": 2**64})))
    assert isinstance(event, ToolCall) and event.args["n"] == 10**600


# ----------------------------------------------------------------- call facts


def test_code_that_opens_for_writing_is_a_write_and_crafted_opens_are_not() -> None:
    assert code_facts("with open('out.txt', 'w') as f:\n    f.write(x)").write
    assert code_facts("data = open(path, mode='a')").write
    assert not code_facts("print(open('a.txt').read())").write
    assert not code_facts("open(," * 683).write  # a crafted line: no write, and bounded


def test_only_the_first_segments_of_a_command_line_are_read() -> None:
    line = " && ".join(["git status"] + [f"echo {i}" for i in range(MAX_SEGMENTS * 3)])
    facts = shell_facts(line + " && make install")
    assert facts.action == "git status"
    assert facts.write  # `make install` lies past the segments parsed: one pattern finds it
    assert not shell_facts(line + " && ls -la").write
    assert shell_facts(line + " > build.log").write  # a redirection is seen on the whole head


def test_an_argument_list_is_joined_only_as_far_as_it_is_read() -> None:
    parts = ["bash", "-lc", "pytest -x"] + ["a"] * 250_000
    text = command_text({"command": parts})
    assert text is not None and text.startswith("bash -lc pytest -x")
    assert len(text) <= COMMAND_TEXT_LIMIT + 2
    assert command_text({"command": ["ls", 3]}) is None  # not a command line


# -------------------------------------------------------------- canonical args


def test_path_keys_are_looked_for_only_in_an_object_of_few_keys() -> None:
    """Within MAX_PATH_KEYS_SCANNED keys, wherever the path key is; past them, in none
    (compared exactly): a crafted object of 70,000 keys costs no Python work per key, and
    a form restored from the sorted text finds the same paths."""
    few = {f"k{i}": "v" for i in range(MAX_PATH_KEYS_SCANNED - 1)}
    assert canonicalize({**few, "path": "./src//a.py"}).paths == {"path": "src/a.py"}
    assert canonicalize({"path": "./src//a.py", **few}).paths == {"path": "src/a.py"}
    many = {f"k{i}": "v" for i in range(70_000)}
    assert canonicalize({"path": "./src//a.py", **many}).paths is None
    assert canonicalize({**many, "path": "./src//a.py"}).paths is None


def test_the_path_key_cache_keeps_no_long_keys() -> None:
    long_key = "file_" + "x" * 5000
    canonicalize({long_key: "a.py"})
    assert long_key not in canonical._path_key_cache


# ---------------------------------------------------------------------- texts


def test_a_failures_error_is_read_to_the_same_bound_as_a_payload() -> None:
    head = "E" * TEXT_LIMIT
    engine = Engine(PolicySet())
    engine.process(TurnStart(session="s"))
    outs = []
    for i in range(12):
        engine.process(ToolCall(session="s", tool="bash", args={"command": f"make t{i}"}, call_id=f"c{i}"))
        # The same first TEXT_LIMIT characters, then a megabyte that differs each time.
        error = head + str(i) * 1_000_000
        outs += engine.process(ToolResult(session="s", tool="bash", call_id=f"c{i}", error=error))
    assert "result-stall" in {getattr(o, "signal", None) for o in outs}
    assert template(head) == template(head[:TEXT_LIMIT])


def test_the_sketch_cache_of_chat_stall_keeps_no_long_texts() -> None:
    from streamguard.events import Text

    signal = ChatStall()
    state = signal.new_state()
    long_text = "word " * 100_000
    for _ in range(4):
        signal.on_text(state, Text(session="s", role="assistant", text=long_text))
    assert long_text not in signal._sketches
    signal.on_text(state, Text(session="s", role="assistant", text="short"))
    assert "short" in signal._sketches


def _record_of(value: Any) -> bytes:
    return json.dumps({"type": "tool_result", "session": "s", "tool": "t", "result": value}).encode()


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_the_raw_depth_test_refuses_exactly_what_the_walk_refuses(value: Any) -> None:
    # Padded past the bracket count that sends a record to the nesting test at all.
    padded = [value, [[]] * (MAX_NESTING // 2 + 1)]
    data = _record_of(padded)
    try:
        decode_agent_record(data)
        refused = False
    except NestingTooDeep:
        refused = True
    assert refused == (reference_depth(padded) > MAX_NESTING)


def test_a_megabyte_of_shallow_containers_passes_and_one_level_too_many_does_not() -> None:
    assert decode_agent_record(_record_of([[] for _ in range(300_000)]))
    deep: Any = []
    for _ in range(MAX_NESTING - 1):
        deep = [deep]
    assert reference_depth(deep) == MAX_NESTING
    assert decode_agent_record(_record_of(deep))  # 64 levels: the bound itself
    with pytest.raises(NestingTooDeep):
        decode_agent_record(_record_of([deep, [[]] * 1000]))


def test_json_text_spelled_with_escapes_is_read_safely_downstream() -> None:
    # Escaped brackets are not counted by the raw bound; whatever reads the JSON text
    # (canonical arguments, the repeat comparison) guards its own recursion.
    deep = "\\u007b\\u0022a\\u0022:" * 900 + "1" + "\\u007d" * 900
    engine = Engine(PolicySet())
    for i in range(6):
        data = f'{{"type":"tool_call","session":"s","tool":"t","call_id":"c{i}","args":"{deep}"}}'
        engine.process(decode_agent_record(data.encode()))
        engine.process(ToolResult(session="s", tool="t", call_id=f"c{i}", result=deep))
    assert engine.snapshot("s")


def test_a_deep_field_the_contract_does_not_know_is_ignored_either_way() -> None:
    deep = "[" * 70 + "]" * 70
    for pad in ('"plain"', '"[not json"'):
        data = ('{"type":"tool_call","session":"s","tool":"t","args":{"q":' + pad + '},"x_trace":'
                + deep + "}").encode()
        assert isinstance(decode_agent_record(data), ToolCall)


@pytest.mark.parametrize(
    "run", [".", "@", "a", "a/", "+-", "x" * 7 + "://", "/.", "--region ", "--", "0x", "0xa" * 14], ids=repr
)
def test_a_read_target_can_start_only_where_a_run_of_its_characters_starts(run: str) -> None:
    """result-stall reads the files and URLs a shell read names with one pattern over the
    head of its command line. A match may begin only where a run of the characters it is
    made of begins (its look-behinds), so a crafted run of dots, at-signs or letters is
    scanned from one place, not from each of its characters (which was quadratic)."""
    from streamguard.signals.result_stall import _TARGETS

    line = "echo " + run * (600 // len(run)) + " /tail/x"
    starts = [i for i in range(len(line)) if _TARGETS.match(line, i)]
    assert starts  # (the tail's path at least)
    # never inside a run: the character before a start is none of a name's characters
    assert not any(line[i - 1].isalnum() or line[i - 1] in "._@+-" for i in starts)


# ------------------------------------------ patterns that could split a run many ways


def test_a_log_lines_clock_prefix_splits_a_run_of_capitals_one_way_only() -> None:
    """The time of day a log line opens with may follow a word in capitals and a
    separator. With ``[ T]+`` as the separator, a line of capital T's could be split into
    word and separator every way (seconds for one answer); the separator is now spaces or
    one ``T``, and what the pattern reads is unchanged."""
    from streamguard.signals.result_stall import _LINE_CLOCK

    for line, masked in [
        ("09:21:03 Done.", "T Done."), ("INFO 11-03 05:21:14 [runner.py] ok", "INFO 11-03 T [runner.py] ok"),
        ("2025-10-31T05:21:14Z started", "2025-10-31TTZ started"), ("  [WARN 05:21:14.123 slow", "  [WARN T slow"),
        ("next run 06:30:00", "next run 06:30:00"),
    ]:
        assert _LINE_CLOCK.sub(r"\1T", line) == masked, line
    # the word and its separator cannot share the T's: a match is its fixed shape or none
    assert _LINE_CLOCK.match("T" * 40 + "05:21:14") is None
    assert _LINE_CLOCK.match("TTT 05:21:14") is not None  # a word of capitals, then spaces
    assert "(?: +|T)" in _LINE_CLOCK.pattern and "[ T]+" not in _LINE_CLOCK.pattern


@pytest.mark.parametrize(("sql", "action"), [
    ("GRANT SELECT, INSERT ON orders TO analyst", "sql:write"),
    ("revoke all privileges\n  on schema s from bob", "sql:write"),
    ("grant" + " " * 4000, None),
    ("grant x" + " " * 4000 + "on t", None),  # a gap no statement has
    ("select" + " " * 4000, None),
    ("select\n  count(*)\nfrom t", "sql:read"),
    ("SELECT*FROM t", "sql:read"),
    ("select 1 from t; /* drop table t", "sql:read"),  # a comment left open runs to the end
    ("select 1 from t; drop table t /* x", "sql:write"),
    ("select 1 from t; " + "/*x" * 1333, "sql:read"),
    ("select 1 from t; select 'it''s \\' here; drop table u", "sql:read"),  # all one literal
    # an apostrophe inside a double-quoted name or string opens no literal
    ('SELECT * FROM "o\'brien"; DROP TABLE t', "sql:write"),
    ('SELECT * FROM posts WHERE title = "it\'s"; DELETE FROM posts', "sql:write"),
    ('select 1; insert into "t" values (1)', "sql:write"),
])
def test_sql_statements_are_read_by_shapes_that_cannot_be_split_many_ways(sql: str, action: str | None) -> None:
    """`grant` and `select` followed by a long run of spaces, and comments or literals left
    open, had patterns whose gaps overlapped (a run of spaces split between them every
    way) or a search restarted at every opener: seconds for one call. The gaps are now
    bounded or disjoint and an open comment or literal runs to the end of the text."""
    from streamguard.signals.facts import sql_statement

    facts = sql_statement({"sql": sql})
    assert (facts.action if facts is not None else None) == action


def test_command_tags_are_read_from_a_short_answer_only() -> None:
    """A write's acknowledgement by command tags is short; a megabyte of `INSERT 0 1` lines
    declared as one byte (`result_bytes`) is not read line by line."""
    from streamguard.signals.base import TAGS_TEXT_LIMIT, _command_tags

    assert _command_tags("INSERT 0 1\n" * 10)
    assert not _command_tags("INSERT 0 1\n" * (TAGS_TEXT_LIMIT // 11 + 1))


def test_a_calls_page_arguments_are_looked_for_in_its_head_only() -> None:
    """The listing a paged call reads is its canonical JSON without its page values, read
    in its first PAGE_SPAN bytes: pages of one listing share it, other listings differ, and
    a megabyte of arguments is not searched."""
    from streamguard.signals.result_stall import PAGE_SPAN, _page_base

    def canonical(page: int, filt: str) -> bytes:
        return json.dumps({"filter": filt, "page": page}, sort_keys=True, separators=(",", ":")).encode()

    assert _page_base("list", canonical(2, "a")) == _page_base("list", canonical(3, "a"))
    assert _page_base("list", canonical(2, "a")) != _page_base("list", canonical(2, "b"))
    assert _page_base("list", canonical(2, "a")) != _page_base("other", canonical(2, "a"))
    far = "p" * PAGE_SPAN  # the page key lands past the head: not linked, not searched
    assert _page_base("list", canonical(2, far)) != _page_base("list", canonical(3, far))
    assert _page_base("list", canonical(2, far)) == _page_base("list", canonical(2, far))


def test_an_importers_blocks_are_searched_only_up_to_their_last_closing_mark() -> None:
    """mini-SWE-agent's action blocks and exceptions: an opener with no closing mark after
    it cannot match, so a text of openers is not searched from each of them to its end
    (a hundred kilobytes took seconds); blocks that close are read as before."""
    from streamguard.importers.mini_swe_agent import action_blocks, harness_reply

    text = ("hi\n```bash\nls -la\n```\nthen <bash_code>pwd</bash_code> and "
            "<mswea_bash_command>echo <bash_code>x</bash_code></mswea_bash_command>")
    assert action_blocks(text) == ["ls -la", "pwd", "echo <bash_code>x</bash_code>"]
    assert action_blocks(text + "```bash\nx" * 5000 + "<bash_code>" * 5000) == action_blocks(text)
    assert harness_reply("<exception>boom</exception><returncode>1</returncode><output>\nout</output>") == ("out", "boom")
    assert harness_reply("<exception>" * 5000 + "<returncode>0</returncode>") == ("", None)


def test_a_terminal_screens_closing_prompt_is_looked_for_on_its_last_line_only() -> None:
    """The bare prompt a finished command leaves was stripped by a pattern tried at every
    position of the screen's end, whose two runs of blanks overlapped: a prompt-like word
    and sixteen thousand tabs took two minutes. It is now one bounded pattern matched
    against the last line alone."""
    from streamguard.signals.facts import _BARE_PROMPT, _PROMPT_COMMAND, terminal_screen

    prompt = "root@e84bc8ce87e6:/app# "
    crafted = "Current Terminal Screen:\n" + prompt + "make\n" + "a@b" * 50 + "#" + "\t" * 16000 + "x"
    output, _ = terminal_screen(crafted)
    assert output.endswith("x")  # the last line is no prompt: kept whole
    kept = terminal_screen("Current Terminal Screen:\n" + prompt + "cat -A f\nlast line ends here$\n" + prompt)
    assert kept == ("last line ends here$", None)
    for pattern in (_BARE_PROMPT.pattern, _PROMPT_COMMAND.pattern):
        assert "\\Z" not in pattern and "\\s*" not in pattern
    # a run of blanks is bounded where it may follow the prompt's mark
    assert "[ \\t]{0,8}" in _BARE_PROMPT.pattern


# ------------------------------------------ the status words of an answer read again

# What the status reading's patterns are made of, upper and lower case, with the
# characters a case-insensitive match reads as ASCII letters (İ, ı, ſ, the Kelvin sign)
# and the separators their alternatives turn on.
STATUS_TOKENS = [
    "status", "State", "STATUS", "phase", "stage", "progress", "still", "currently", "remains",
    "remain", "wait", "waiting", "awaiting", "watch", "polling", "for", "until", "to", "finish",
    "awaiting rollout to finish", "poll until it completes", "still running",
    "completed", "Complete", "success", "done", "failed", "noerror", "error", "no", "none",
    "No such", "n/a", "can't", "couldn't", "unknown", "Unable", "missing", "empty", "absent",
    "nothing", "nil", "dead", "http/1.1", "HTTP/2", "503", "404", "Service", "Not",
    "pending", "queued", "queueing", "in_progress", "in-progress", "running", "RUNNING",
    "awaiting_input", "not_ready", "not yet ready", "expires", "expires_at", "estimated",
    "EstimatedCompletionTime", "null", "false", "0", "1", "0.5", '""', "data", "rows",
    "ſtatus", "İn_progress", "ınvalid", "Kılled", "\u212a", "build_in_progress", "un_running",
    "timed out", "timeout", "not found", "cancel", "Invalidation", "invalidated", "invalidates",
    "InvalidationBatch", "invalidation_id", "TooManyInvalidationsInProgress", "invalidate", "<status>", "</status>", "\\\"", "…", "..",
    "!", " ", "  ", "\n", "\t", ":", "=", '"', "'", ",", "[", "]", "{", "}", ";", ".", "_", "-",
    "x", "a", "é", "ΣΑ", "12", "7", "Pending", "PHASE", "Init:3", "ContainerCreating",
    "downloading", "INSTALLING", "Copying", "replicating", "transcoding", "rendering",
    "extracting", "state", "ACTIVATING", "deactivating", "stopping", "Deleting", "terminating",
    "upgrading", "rebooting",
    # flags and failovers
    "true", "false", "failover", "fail-back", "fail over", "failed", "audio_processing", "isPending",
    "include_", "not_", "non", "no_", "notification_pending", "reindexing", "s", "ed", "advancing", "Advancing",
]


def _folded_pairs() -> list[tuple[Any, Any]]:
    from streamguard.signals import base

    return [
        (base._FAILED, base._FAILED_FOLDED),
        (base._DONE, base._DONE_FOLDED),
        (base._FINISHED, base._FINISHED_FOLDED),
        (base._DONE_VALUE, base._DONE_VALUE_FOLDED),
        (base._END_AWAITED, base._END_AWAITED_FOLDED),
        (base._COUNT_KEY, base._COUNT_KEY_FOLDED),
        (base._IN_PROGRESS, base._IN_PROGRESS_FOLDED),
        (base._ABSENT, base._ABSENT_FOLDED),
    ]


def test_folding_reads_letters_as_a_case_insensitive_match_does() -> None:
    """Every character, once folded, is an ASCII letter exactly when a case-insensitive
    match takes it for that letter, and folding keeps every position (one character
    for one), so a folded pattern's matches sit where its definition's would."""
    from streamguard.signals.base import fold_case

    letter = re.compile("(?i)[a-z]")
    for code in range(0x110000):
        char = chr(code)
        folded = fold_case(char)
        assert len(folded) == 1
        if letter.fullmatch(char):
            assert re.fullmatch("(?i)" + folded, char) and folded.isascii() and folded.isalpha()
        else:
            assert not ("a" <= folded <= "z")


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(STATUS_TOKENS), max_size=40), st.integers(0, 20))
def test_each_folded_pattern_matches_as_its_definition_does(tokens: list[str], start: int) -> None:
    """The status words of an answer are read by case-sensitive patterns over its folded
    text; each finds the same matches, spans and groups as the case-insensitive pattern
    that defines it, from any starting position, and a replacement made through it is
    the one ``re.sub`` makes through the definition."""
    from streamguard.signals.base import _replaced, fold_case

    text = "".join(tokens)
    folded = fold_case(text)
    assert len(folded) == len(text)
    for definition, fast in _folded_pairs():
        assert [m.regs for m in fast.finditer(folded, start)] == [
            m.regs for m in definition.finditer(text, start)
        ], definition.pattern
        replaced, refolded = _replaced(fast, text, folded, fast.groups > 0)
        assert replaced == definition.sub(r"\1#" if fast.groups else "#", text)
        assert refolded == fold_case(replaced)


def test_each_folded_pattern_matches_as_its_definition_does_on_every_pair_of_words() -> None:
    """The same, exhaustively over every two tokens joined by the separators the
    patterns turn on (a word boundary before a word, a key's quote and colon, a value's
    quote): where a look-behind stands for a word boundary, the letter before it is
    tried every way; and over keys whose words sit at the bounds a key is read to."""
    from streamguard.signals.base import fold_case

    pairs = _folded_pairs()
    texts: list[str] = []
    for first in STATUS_TOKENS:
        for second in STATUS_TOKENS:
            for between in ("", " ", '": "', '":'):
                for text in (first + between + second + ' "x', "x" + first + between + second):
                    texts.append(text)
    # and keys at the bounds of a key's words: up to 40 characters before and after
    for before in (39, 40, 41):
        for after in (39, 40, 41):
            for word in ("fail", "complete", "expires", "noerror"):
                for value in ("0", "null", '""', "1", "0.5", '["x"]', "[]"):
                    texts.append('"' + "a" * before + word + "a" * after + '": ' + value)
    for text in texts:
        folded = fold_case(text)
        for definition, fast in pairs:
            assert [m.regs for m in fast.finditer(folded)] == [
                m.regs for m in definition.finditer(text)
            ], (definition.pattern, text)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(STATUS_TOKENS), max_size=40), st.integers(0, 20))
def test_the_listing_patterns_find_what_their_word_boundaries_would(tokens: list[str], start: int) -> None:
    """A status column's header and a row still coming up are found where the plain
    word-boundary patterns would find them, from any starting position."""
    from streamguard.signals.base import _LISTING_HEADER, _LISTING_ROW

    text = "".join(tokens)
    for fast, plain in (
        (_LISTING_HEADER, r"\b(?:STATUS|STATE|PHASE)\b"),
        (_LISTING_ROW, r"\b(?:Pending|ContainerCreating|PodInitializing|Init:\d)"),
    ):
        assert [m.span() for m in fast.finditer(text, start)] == [
            m.span() for m in re.compile(plain).finditer(text, start)
        ]


def test_every_status_pattern_starts_only_where_a_literal_character_is() -> None:
    """What bounds the cost of reading an answer's status words: every folded pattern,
    and the listing patterns, open each alternative with a literal character, so the
    regular-expression engine skips in C to the positions where a match can start
    instead of trying every alternative at every position (which, case-insensitive, cost
    about a millisecond per pattern over 4 KB)."""
    from re import _compiler, _parser  # type: ignore[attr-defined]

    from streamguard.signals.base import _LISTING_HEADER, _LISTING_ROW

    def starts(pattern: re.Pattern[str]) -> list[Any] | None:
        parsed = _parser.parse(pattern.pattern, pattern.flags)
        prefix = _compiler._get_literal_prefix(parsed, pattern.flags)[0]
        return prefix or _compiler._get_charset_prefix(parsed, pattern.flags)

    for _definition, fast in _folded_pairs():
        assert not fast.flags & re.IGNORECASE
        assert starts(fast), fast.pattern
    for pattern in (_LISTING_HEADER, _LISTING_ROW):
        assert starts(pattern), pattern.pattern
