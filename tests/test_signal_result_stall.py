"""result-stall: answers the session already had, result after result."""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from streamguard.engine import Engine
from streamguard.events import Alert, Text, ToolCall, ToolResult, TurnStart, decode_agent_event
from streamguard.policy import PolicyError, parse_policy_set
from streamguard.signals.base import ResultView
from streamguard.signals.facts import FLAG_RUNNER, FLAG_WRITE, request_facts
from streamguard.signals.result_stall import (
    _SSH_HOST,
    LISTED,
    LISTED_FIELDS,
    LISTED_ITEMS,
    SILENT_SWEEP,
    _ids,
    _kube_object,
    _page_code,
    found_nothing,
    light_template,
    listed_code,
    listed_values,
    reports_act,
    says_bare_value,
    sql_tables,
    template,
    templates,
)
from streamguard.watchdog import Watchdog

WARN = 'mode = "warn"\ndisabled_signals = ["tools-without-text", "near-duplicate-calls"]\n'


def word(i: int) -> str:
    return "".join("abcdefghij"[int(d)] for d in str(i))


def hits(trace: list[Any], policy: str = WARN, signal: str = "result-stall") -> list[int]:
    """Call numbers at which ``signal`` alerted."""
    engine = Engine(parse_policy_set(policy))
    engine.process(TurnStart(session="s"))
    calls, out = 0, []
    for event in trace:
        calls += isinstance(event, ToolCall)
        out += [calls for o in engine.process(event) if isinstance(o, Alert) and o.signal == signal]
    return out


def alerts(trace: list[Any], policy: str = WARN) -> list[Alert]:
    engine = Engine(parse_policy_set(policy))
    engine.process(TurnStart(session="s"))
    return [o for e in trace for o in engine.process(e) if isinstance(o, Alert)]


def step(tool: str, args: dict[str, Any], result: Any = None, error: str | None = None) -> list[Any]:
    return [ToolCall(session="s", tool=tool, args=args),
            ToolResult(session="s", tool=tool, result=result, error=error)]


def test_templates_mask_quotes_numbers_and_ids() -> None:
    assert template('No matches found for "setup.txt" in /repo') == template(
        "No matches found for 'java_env.*' in /repo")
    assert template("/bin/bash: line 27424: javac: command not found") == template(
        "/bin/bash: line 27478: javac: command not found")
    assert template("took 12.5s, 3 left") == template("took 7.25s, 14 left")
    assert template("a   b\n c") == b"a b c"
    assert light_template("assert 3 == 7") != light_template("assert 4 == 7")
    assert light_template("bash: line 12: x") == light_template("bash: line 9041: x")
    assert light_template("code 12") != light_template("code 13")


def test_reworded_searches_for_something_absent_trip_at_the_eighth() -> None:
    trace: list[Any] = []
    for i in range(12):
        trace += step("find_file", {"command": f"find_file config_{word(i)}.txt"},
                      error=f'No matches found for "config_{word(i)}.txt" in /repo')
    # the first answer is news; the next eight are stale
    assert hits(trace) == [9]
    got = next(a for a in alerts(trace) if a.signal == "result-stall")
    assert (got.severity, got.scope) == ("critical", "session")
    assert "8 tool results in a row" in got.reason and "Your last 8 tool calls" in got.guidance
    assert got.detail["tools"] == ["find_file"]


def test_prose_instead_of_commands_trips() -> None:
    trace: list[Any] = []
    for i in range(10):
        trace += step("bash", {"command": f"DISCUSSION\nLet me try plan {word(i)}"},
                      error=f"/bin/bash: line {1000 + 7 * i}: DISCUSSION: command not found")
    assert hits(trace) == [9]


def test_interleaved_real_work_does_not_hide_the_stall() -> None:
    trace: list[Any] = []
    for i in range(16):
        if i % 5 == 4:
            trace += step("open", {"command": f"open src/F{word(i)}.java"}, f"class F{word(i)} body")
        else:
            trace += step("search_dir", {"command": f"search_dir {word(i)}"},
                          error=f'No matches found for "{word(i)}" in /repo')
    assert hits(trace)
    got = next(a for a in alerts(trace) if a.signal == "result-stall")
    assert "of the last 12 tool results" in got.reason and "in a row" not in got.reason
    assert "of your last 12 tool calls" in got.guidance


def test_a_phrase_searched_for_file_after_file_is_one_answer() -> None:
    # The scope a search found nothing in is the call's own: file after file, nothing found.
    trace: list[Any] = []
    for i in range(10):
        path = f"/repo/src/main/java/com/acme/F{word(i)}.java"
        trace += step("search_file", {"command": f'search_file "handle missing type" {path}'},
                      error=f'No matches found for "handle missing type" in {path}')
    assert hits(trace) == [9]  # the first answer is news, the next eight are stale
    # a search that finds something in one of them is news
    found = trace[:8] + step("search_file", {"command": "search_file x /repo/src/G.java"},
                             'Found 2 matches for "x" in /repo/src/G.java') + trace[8:]
    assert hits(found) == []
    # paths stay in what is not a search's failure: a read failing on file after file is
    # a different answer each time (and in a relative path, a search's too)
    reads: list[Any] = []
    for i in range(10):
        reads += step("open", {"command": f"open /repo/src/F{word(i)}.java"},
                      error=f"File /repo/src/F{word(i)}.java is locked")
    assert hits(reads) == []


def test_a_failed_search_and_another_call_failing_alike_are_not_confused() -> None:
    # The same tool failing with the same error, once as a search and once not: the
    # search's template masks the path, the other keeps it (templates are cached).
    error = "nothing readable in /repo/data/a.csv"
    search = step("bash", {"command": "grep -r token /repo/data/a.csv"}, error=error)
    read = step("bash", {"command": "cat /repo/data/a.csv"}, error=error)
    trace: list[Any] = []
    for i in range(9):
        trace += step("bash", {"command": f"grep -r token /repo/data/{word(i)}.csv"},
                      error=f"nothing readable in /repo/data/{word(i)}.csv")
    # after the first, eight stale failed searches trip; a read failing alike in
    # between is news (its path is its answer) and breaks the run
    assert hits(search + trace) == [9]
    assert hits(search + read + trace) == [10]
    assert hits(search + trace[:8] + read + trace[8:]) == []


def test_empty_answers_count_only_for_searches() -> None:
    tidy: list[Any] = []
    for i in range(14):
        tidy += step("bash", {"command": f"mv a{word(i)} b{word(i)}"}, "")
    assert hits(tidy) == []
    hunt: list[Any] = []
    for root in ("/usr", "/opt", "/etc", "/var", "/srv", "/home", "/mnt", "/root", "/tmp", "/lib"):
        hunt += step("bash", {"command": f"find {root} -name javac"}, "")
    assert hits(hunt) == [8]  # eight searches in a row found nothing


@pytest.mark.parametrize(
    ("payload", "nothing"),
    [
        ([], True),
        ({}, True),
        ({"query": "blue running shoe", "results": []}, True),
        ({"query": "x", "status": "ok", "total": 0, "items": [], "next": None}, True),
        ({"data": {"hits": [], "q": "x"}}, True),
        ('{"query": "blue shoe", "results": []}', True),  # JSON text, as MCP delivers it
        ({"query": "x", "results": [{"id": 7}]}, False),
        ({"query": "x", "total": 3, "results": []}, False),  # a count: something was found
        ({"id": "u1", "name": "Bo", "email": "b@x.io", "city": "Oslo", "orders": []}, False),
        ({"status": "ok"}, False),
        # a record found with an empty list in it, or an empty page with a cursor, is a hit
        ({"customer_id": "cus_b", "name": "Ada", "email": "a@x", "open_tickets": []}, False),
        ({"results": [], "next_cursor": "c_b"}, False),
        ({"Query": "x", "Message": "no results", "items": []}, True),
        # what the answer says of its own request: its receipt, when, how long it took
        ({"query": "x", "answer": None, "images": [], "results": [], "response_time": 1.67,
          "request_id": "9f1c0a7e-5b2d-4e0b-8c1a-3d6e2f4a9b10"}, True),
        ({"offer_request_id": "orq_0000A4rTCtXjvT9263A3Pw", "offers": [], "count": 0,
          "created_at": "2025-10-14T05:39:37Z", "message": "No offers found."}, True),
        ({"searchId": "s-77", "took": 3, "hits": []}, True),
        # Splunk's search job id: the search's own receipt
        ({"sid": "1765523600.81893", "results": [], "resultCount": 0, "messages": []}, True),
        ({"sid": "1765523600.81893", "results": [], "resultCount": 4, "messages": []}, False),
        # Datadog's empty series: the window it searched, the kind of answer, an empty message
        ({"status": "ok", "res_type": "time_series", "query": "p95:celery.task.duration{*}",
          "from_date": 1766693600000, "to_date": 1766780000000, "series": [], "message": "",
          "group_by": []}, True),
        ({"status": "ok", "res_type": "time_series", "from_date": 1, "to_date": 2,
          "series": [{"pointlist": [[1, 0.4]]}]}, False),
        ({"from": 1, "to": 2, "total": 3, "results": []}, False),  # a count: found
        ({"results": [], "next_cursor": ""}, True),  # no next page
        ({"results": [], "next_cursor": "c_b"}, False),
        ({"request_id": "r1", "total": 2, "results": []}, False),  # the count still says found
        ({"request_id": "r1", "customer": "Ada", "results": []}, False),
        ({"took": True, "hits": []}, False),
        # ids and figures of what was found, under names like a receipt's
        ({"pull_request_id": "PR_kwDO1", "comments": []}, False),
        ({"trace_id": "4bf92f3577b34da6", "error_spans": []}, False),
        ({"latency_ms": 812, "alerts": []}, False),
        ({"duration": 3600, "failures": []}, False),
        ({"request_id": "r", "search_id": "s", "response_id": "p", "message": "none", "items": []}, False),
        # a scored search's cut-off and the best score it saw below it: no hit above it
        ({"results": [], "threshold": 0.6, "max_score_seen": 0.35}, True),
        ({"hits": [], "max_score": 0.41, "took": 3}, True),
        ({"results": [{"id": "c9", "score": 0.71}], "threshold": 0.6}, False),
        ({"results": [], "threshold": 0.6, "total": 2}, False),  # a count: found
        ({"data": {"page": {"items": []}}}, False),  # two levels of wrapping: not read
        ("[]" + " " * 2000, False),  # too long to read
        ("no results", False),
        ([{"id": 1}], False),
    ],
)
def test_found_nothing_reads_empty_structured_answers(payload: Any, nothing: bool) -> None:
    assert found_nothing(payload) is nothing


def test_reworded_searches_answered_empty_with_a_new_receipt_each_time_stall() -> None:
    """An API that answers every search with the request's own id and time (Tavily's
    ``request_id``, a flight search's ``offer_request_id``) found nothing all the same."""
    trace: list[Any] = []
    for i in range(12):
        receipt = hashlib.sha256(str(i).encode()).hexdigest()[:22]
        trace += step("search_flights", {"origin": "EYW", "destination": "HAV", "adults": 1 + i % 3,
                                         "date": f"2025-11-{20 + i % 4}"},
                      {"offer_request_id": f"orq_{receipt}", "offers": [], "count": 0,
                       "created_at": f"2025-10-14T05:{10 + i}:37Z",
                       "message": "No offers found for the requested journey."})
    assert hits(trace) == [8]  # nothing found, eight times
    # the same searches answered by offers found are each an answer
    found: list[Any] = []
    for i in range(12):
        found += step("search_flights", {"origin": "EYW", "destination": f"A{word(i)}"},
                      {"request_id": f"r{i}", "offers": [{"id": f"off_{word(i)}", "price": 100 + i}],
                       "count": 1})
    assert hits(found) == []


def test_an_empty_answer_naming_what_the_search_was_given_found_nothing() -> None:
    """A catalogue search that names back the supplier it was asked about, and a document
    search naming the repository it searched: nothing found, whatever else they echo. Read
    as hits, 27 reworded searches for a memo that does not exist were never halted."""
    assert found_nothing({"supplier": "SNDSRC", "query": "HP220", "total": 0, "hits": []}, 0, ("SNDSRC", "HP220"))
    assert not found_nothing({"supplier": "SNDSRC", "query": "HP220", "total": 0, "hits": []})
    # a name the search was not given is what it found: a customer with no open tickets
    assert not found_nothing({"customer": "Ada", "tickets": []}, 0, ("cus_b",))
    assert found_nothing({"data": [], "meta": {"page": {}, "status": "done", "elapsed": 130}})
    hunt: list[Any] = []
    for i in range(12):
        hunt += step("records.search_documents", {"query": f"Greenline memo {word(i)}", "repository": "edms"},
                     {"total": 0, "results": [], "searched": "edms", "took_ms": 100 + i})
    assert hits(hunt) == [9]  # the first look in the repository is news, the next eight stale
    # a recall swept store by store, nothing found in most: each store's answer is news
    sweep: list[Any] = []
    for i in range(14):
        sweep += step("inventory_lot_search", {"store": f"0{310 + 5 * i}", "ndc": "58160082311"},
                      {"store": f"0{310 + 5 * i}", "matches": []})
    assert hits(sweep) == []
    # so is a window or a filter the search was given: each date asked is another place
    for field, values in (("date", [f"2025-03-{d:02d}" for d in range(1, 15)]),
                          ("status", [f"state_{word(i)}" for i in range(14)])):
        dated: list[Any] = []
        for value in values:
            dated += step("search_availability", {"venue": "V-118", field: value},
                          {"venue": "V-118", field: value, "slots": []})
        assert hits(dated) == [], field
    # a crafted query cannot make the mutation test slow (it reads the head only)
    assert request_facts("graphql", {"query": "mutation" + " " * 200_000 + "x"}) is None
    # the same searches finding a document are answers
    found: list[Any] = []
    for i in range(12):
        found += step("records.search_documents", {"query": f"Greenline memo {word(i)}", "repository": "edms"},
                      {"total": 1, "results": [{"doc": f"D-{i}"}], "searched": "edms", "took_ms": 100 + i})
    assert hits(found) == []


def test_reworded_scored_searches_with_a_new_best_score_each_time_stall() -> None:
    """A semantic search that states its cut-off and the best score it saw below it (a
    new one for every wording) found nothing all the same: the clause hunted under
    twelve wordings is halted, while the same searches finding a clause are answers."""
    trace: list[Any] = []
    for i in range(12):
        trace += step("semantic_clause_search", {"document_ids": ["L-9"], "text": f"favored {word(i)}"},
                      {"results": [], "threshold": 0.6, "max_score_seen": round(0.3 + i / 100, 2)})
    assert hits(trace) == [8]
    found: list[Any] = []
    for i in range(12):
        found += step("semantic_clause_search", {"document_ids": ["L-9"], "text": f"favored {word(i)}"},
                      {"results": [{"clause": f"c{i}", "score": 0.7}], "threshold": 0.6})
    assert hits(found) == []


def meter_reads(meters: list[str], timeouts: list[int], failing: set[int]) -> list[Any]:
    """On-demand reads asked of meters (a named write, as its runtime labels it), the
    ``n``-th timing out when ``n`` is in ``failing``."""
    trace: list[Any] = []
    for n, (meter, timeout) in enumerate(zip(meters, timeouts, strict=True)):
        trace.append(ToolCall(session="s", tool="request_read", kind="write", call_id=f"c{n}",
                              args={"meter_id": meter, "timeout_s": timeout}))
        trace.append(ToolResult(session="s", tool="request_read", call_id=f"c{n}",
                                error=f"TIMEOUT: no response from endpoint after {timeout}s"
                                if n in failing else None,
                                result=None if n in failing else {"meter_id": meter, "kwh": 100 + n}))
    return trace


def test_a_sweep_whose_devices_time_out_is_each_ones_silence() -> None:
    """A sweep of meters asked for a reading, most of which answer and a few of which time
    out twice (the retry with a longer time-out), is each meter's silence, not one answer
    again and again; one meter asked again and again, whatever the time-out, is the same
    silence; and so is every meter timing out (the service is down): past SILENT_SWEEP
    time-outs in a row, one more id is the same silence again."""
    # meters 3 to 5 and 8 time out twice (six time-outs in a row), the others answer at once
    silent = {3, 4, 5, 8}
    meters = [f"MTR-45{i:02d}" for i in range(12) for _ in range(2 if i in silent else 1)]
    timeouts = [60, 120] * 12
    failing = {n for n, meter in enumerate(meters) if int(meter[-2:]) in silent}
    assert hits(meter_reads(meters, timeouts[: len(meters)], failing)) == []
    one = meter_reads(["MTR-4501"] * 24, [60 + 7 * i for i in range(24)], set(range(24)))
    assert hits(one) == [9]
    # ...after it answered once too, across the bound of time-outs in a row
    after = meter_reads(["MTR-4501"] * 25, [60 + 7 * i for i in range(25)], set(range(1, 25)))
    assert hits(after) == [10]
    # nothing answers: no place's silence of its own
    outage = meter_reads([f"MTR-45{i:02d}" for i in range(24)], [60] * 24, set(range(24)))
    assert hits(outage) == [9]
    # the service goes down after answering: halted once SILENT_SWEEP time-outs pass
    down = meter_reads([f"MTR-45{i:02d}" for i in range(30)], [60] * 30, set(range(2, 30)))
    assert hits(down) == [2 + SILENT_SWEEP + 9]
    meters = [f"MTR-45{i:02d}" for i in range(12) for _ in range(2)]
    # a failure that says the place is not there stays the hunt going on, and so does work
    # that took too long (a statement's time-out is the query's) or a time-out beside
    # another failure
    for error in ("meter not found", "Statement reached its statement timeout of 300 second(s)",
                  "401 Unauthorized: invalid API key; connection timed out during retry"):
        guessed = meter_reads(meters, timeouts, set(range(24)))
        for event in guessed:
            if isinstance(event, ToolResult):
                event.error = error
        assert hits(guessed) == [9], error


def test_a_named_writes_answers_are_not_kept_with_its_ids() -> None:
    """A named write's ids are kept for its time-outs only: stock updates of a dozen
    items, each answered by the same unchanged product list, are still writes that never
    move the list, whatever item each names."""
    listing = {"products": [{"sku": f"S{i}", "stock": 5} for i in range(30)], "page": 1}
    trace: list[Any] = []
    for i in range(12):
        trace += [ToolCall(session="s", tool="update_stock", kind="write", call_id=f"w{i}",
                           args={"sku": f"S{i}", "stock": 5}),
                  ToolResult(session="s", tool="update_stock", call_id=f"w{i}", result=listing)]
    assert hits(trace)


def _blocked(url: str, i: int) -> str:
    ref = hashlib.sha256(f"{url}{i}".encode()).hexdigest()
    reference = f"18.{ref[:8]}.{1718796126 + i * 977}.{ref[8:15]}"
    return (f'Access Denied\nYou don\'t have permission to access "{url}" on this server.\n'
            f"Reference #{reference}\nhttps://errors.edgesuite.net/{reference}\n")


def test_a_blocked_page_read_again_is_the_same_answer_whatever_its_reference() -> None:
    url = "https://www.statista.com/statistics/1409055/us-cold-brew-sales/"
    assert template(_blocked(url, 1)) == template(_blocked(url, 2))
    cloudflare = "Attention Required! | Cloudflare\nSorry, you have been blocked\nCloudflare Ray ID: {}"
    assert template(cloudflare.format("8c1f2a3b4d5e6f70")) == template(cloudflare.format("8c20aa3b4d5e6f71"))
    trace: list[Any] = []
    for i in range(10):
        trace += step("read_website_content", {"website_url": url}, _blocked(url, i))
    # the same call answered alike: no poll of something changing
    assert hits(trace, signal="repeated-tool-call") == [5]
    varied: list[Any] = []
    for i in range(10):
        address = url + ("?locale=en" if i % 2 else "")  # (the query is no other place)
        varied += step("read_website_content", {"website_url": address}, _blocked(address, i))
    assert hits(varied) == [9]  # the first answer is news, the next eight are not
    # the reference is masked, not the page: another answer of the same page is news
    other = _blocked(url, 1).replace("Access Denied", "Service Unavailable")
    assert template(other) != template(_blocked(url, 2))


def test_a_search_polled_with_a_new_timestamp_is_a_poll() -> None:
    # The same search, nothing yet, each answer stamped anew: waiting, not hunting.
    trace: list[Any] = []
    for i in range(12):
        trace += step("list_jobs", {"queue": "exports", "status": "finished"},
                      {"jobs": [], "as_of": f"2026-12-04T20:{10 + i:02d}:00Z"})
    assert hits(trace) == []
    # a search reworded every time, stamped anew, is still a hunt that finds nothing
    reworded: list[Any] = []
    for i in range(12):
        reworded += step("list_jobs", {"queue": f"exports-{word(i)}", "status": "finished"},
                         {"jobs": [], "as_of": f"2026-12-04T20:{10 + i:02d}:00Z"})
    assert hits(reworded) == [8]


def test_reworded_searches_with_echoing_json_answers_trip() -> None:
    # A search API that echoes its query: every answer differs exactly, none found anything.
    trace: list[Any] = []
    for i in range(10):
        query = f"wireless headphones model {word(i)}"
        trace += step("search_products", {"query": query}, {"query": query, "results": [], "page": 0})
    assert hits(trace) == [8]  # like an empty output: eight searches in a row found nothing
    # a search named by what it searches, as research agents have it
    web: list[Any] = []
    for i in range(10):
        query = f"globex memo springfield plant {word(i)}"
        web += step("web_search", {"query": query, "num_results": 10}, {"query": query, "results": []})
    assert hits(web) == [8]
    # the same answers from a tool that is not a search are compared exactly: all new
    lookups: list[Any] = []
    for i in range(10):
        query = f"wireless headphones model {word(i)}"
        lookups += step("get_catalogue", {"query": query}, {"query": query, "results": []})
    assert hits(lookups) == []


def test_searches_that_find_things_now_and_then_are_work() -> None:
    trace: list[Any] = []
    for i in range(16):
        query = f"invoice {word(i)}"
        found = [{"id": f"inv-{word(i)}", "amount": i + 1}] if i % 3 == 0 else []
        trace += step("search_emails", {"query": query}, {"query": query, "results": found})
    assert hits(trace) == []


def test_errors_that_echo_the_reworded_call_are_stale() -> None:
    # The SQL reworded again and again, each error quoting it back: only the echo differs.
    trace: list[Any] = []
    for i in range(10):
        sql = f"SELECT strftime('%Y-%m', order_date) AS month_{word(i)}, AVG(total) FROM orders"
        trace += step("run_sql", {"query": sql},
                      error=f"sqlite3.OperationalError: no such column: order_date\n[SQL: {sql}]")
    assert hits(trace) == [9]  # the first answer is news; the next eight are stale
    got = next(a for a in alerts(trace) if a.signal == "result-stall")
    assert "[SQL: …]" in got.detail["latest"]


def test_the_echo_is_read_whatever_the_arguments_form_and_order() -> None:
    def reworded(args_of: Any) -> list[Any]:
        trace: list[Any] = []
        for i in range(10):
            sql = f"SELECT month_{word(i)}, AVG(total) FROM analytics.orders"
            trace += step("run_sql", args_of(sql),
                          error=f"no such column: order_date in analytics\n[SQL: {sql}]")
        return trace

    # arguments sent as a JSON object in a string (the OpenTelemetry bridge's form)
    assert hits(reworded(lambda sql: json.dumps({"query": sql}))) == [9]
    # a short value inside a longer one: masked longest first, whatever the order
    assert hits(reworded(lambda sql: {"database": "analytics", "sql": sql})) == [9]
    assert hits(reworded(lambda sql: {"sql": sql, "database": "analytics"})) == [9]


def test_numbers_echoed_in_errors_are_digits_like_any_other() -> None:
    # Pages asked for and refused alike, each error naming its page: one failure again,
    # from the second page on, whether the page number is small or large.
    trace: list[Any] = []
    for page in range(95, 115):
        trace += step("list_invoices", {"page": page}, error=f"page {page} is out of range")
    assert hits(trace)[0] == 9


def test_the_echo_is_dropped_once_its_call_is_answered() -> None:
    engine = Engine(parse_policy_set(WARN))
    engine.process(TurnStart(session="s"))
    query = "SELECT a_very_distinctive_column_name FROM orders"
    engine.process(ToolCall(session="s", tool="run_sql", args={"query": query}))
    assert query.encode() in (engine.snapshot("s") or b"")  # awaiting its answer
    engine.process(ToolResult(session="s", tool="run_sql", result="1 row"))
    assert query.encode() not in (engine.snapshot("s") or b"")


def test_errors_that_echo_a_guessed_path_are_stale() -> None:
    # Guessing where a config lives: every error names the path it was given.
    trace: list[Any] = []
    for i in range(10):
        path = f"/srv/app/conf.d/retry_{word(i)}.yaml"
        trace += step("load_config", {"path": path}, error=f"open {path}: no such file or directory")
    assert hits(trace) == [9]


def test_the_echo_survives_a_snapshot_and_never_breaks_one() -> None:
    engine = Engine(parse_policy_set(WARN))
    engine.process(TurnStart(session="s"))
    engine.process(ToolCall(session="s", tool="run_sql", args={"query": "SELECT \ud800 FROM t",
                                                              "note": "naïve ümlaut"}))
    assert engine.snapshot("s")  # a lone surrogate is not kept (it could not be encoded)
    # nor among what a search was given
    engine.process(ToolCall(session="s", tool="search_docs", args={"query": "x\ud800y", "store": "0315"}))
    assert engine.snapshot("s")
    # Restored between a call and its failure, the echo is still masked: the trip comes
    # at the same call as without the restart.
    trace: list[Any] = []
    for i in range(10):
        query = f"SELECT total_{word(i)} FROM orders"
        trace += step("run_sql", {"query": query}, error=f"no such column in {query}")
    first = Engine(parse_policy_set(WARN))
    first.process(TurnStart(session="s"))
    for event in trace[:15]:  # the eighth call, not yet its failure
        first.process(event)
    second = Engine(parse_policy_set(WARN))
    second.restore("s", first.snapshot("s") or b"")
    tripped = [i for i, event in enumerate(trace[15:], 15)
               if any(isinstance(o, Alert) and o.signal == "result-stall" for o in second.process(event))]
    assert tripped == [17] and hits(trace) == [9]  # the ninth failure, both ways


def test_successes_are_read_as_they_are_echo_or_not() -> None:
    # A sweep of orders whose answers name their order, and statements acknowledged
    # with their text: each answer is its own.
    orders: list[Any] = []
    for order in range(50120, 50132):
        orders += step("get_order_status", {"order_id": order}, f"Order {order}: shipped")
    assert hits(orders) == []
    inserts: list[Any] = []
    for i in range(12):
        sql = f"INSERT INTO events_{word(i)} SELECT * FROM staging"
        inserts += step("run_sql", {"query": sql}, f"Executed: {sql}")
    assert hits(inserts) == []
    # a command runner's transcript quoting its command is no echo either
    shell: list[Any] = []
    for i in range(12):
        command = f"mkdir -p build/{word(i)}"
        shell += [ToolCall(session="s", tool="bash", args={"command": command}),
                  ToolResult(session="s", tool="bash", error=f"$ {command}\nexit status 1")]
    assert hits(shell) == []


def test_an_echo_is_masked_only_in_its_own_calls_answer() -> None:
    # The pages of a real walk hold the numbers they were asked for and new text: news.
    walk: list[Any] = []
    for offset in range(1000, 13000, 1000):
        walk += step("read_log", {"path": "/var/log/app.log", "offset": offset},
                     f"{offset}: worker {word(offset)} started\n{offset + 1}: job {word(offset + 7)} done")
    assert hits(walk) == []
    # Only the answer to the newest call is read for its echo: here a second call comes
    # between each query and its error, so the queries are not masked in the errors.
    errors: list[Any] = []
    for i in range(10):
        query = f"SELECT c_{word(i)} FROM t"
        errors += [ToolCall(session="s", tool="run_sql", args={"query": query}),
                   ToolCall(session="s", tool="list_tables", args={"schema": "analytics"}),
                   ToolResult(session="s", tool="list_tables", result="t, u, v"),
                   ToolResult(session="s", tool="run_sql", error=f"no such column in {query}")]
    assert hits(errors) == []
    one_by_one = [e for e in errors if getattr(e, "tool", "") == "run_sql"]
    assert hits(one_by_one) == [9]  # the same errors, each answering the newest call
    # short strings and small numbers are not masked: "limit 10" in "showing 10 rows"
    small: list[Any] = []
    for i in range(10):
        small += step("top_rows", {"table": "t", "n": 10 + i}, f"showing {10 + i} rows of t")
    assert hits(small) == []


def test_exploration_with_new_answers_is_silent() -> None:
    trace: list[Any] = []
    for i in range(40):
        trace += step("read_file", {"path": f"src/m{i}.py"}, f"def handler_{word(i)}(): pass")
    assert hits(trace) == []


def test_a_poll_whose_numbers_change_is_not_stale() -> None:
    trace: list[Any] = []
    for i in range(20):
        trace += step("job_state", {"id": "7"}, f"running, {i * 10} of 200 done")
    assert hits(trace) == []


def test_writes_that_change_nothing_are_futile() -> None:
    trace: list[Any] = []
    for i in range(7):
        trace += step("edit_file", {"path": "Other.java", "text": f"// probe {word(i)}"},
                      f"edited Other.java: {word(i)}")
        trace += step("bash", {"command": "python reproduce.py"}, "")
    got = [a for a in alerts(trace) if a.signal == "result-stall"]
    assert len(got) == 1 and got[0].detail["rule"] == "futile_writes"
    assert hits(trace) == [12]  # the fifth re-run after a write that changed nothing


def test_edits_that_change_the_failure_are_work() -> None:
    trace: list[Any] = []
    for i in range(10):
        trace += step("edit_file", {"path": "app.py", "text": f"x = {word(i)}"}, f"edited {word(i)}")
        trace += step("bash", {"command": "pytest -x"}, error=f"1 failed: assert {i} == 11")
    assert hits(trace) == []


def test_a_failing_check_that_differs_only_in_how_long_it_ran_is_unchanged() -> None:
    """Edit, run the failing test, the same failure again, five times: the run time in
    its summary ("1 failed in 0.29s", then "in 0.31s") is not a change the edit made."""
    def edit_then_test(source: str, test: str, failure: Callable[[int], str]) -> list[Any]:
        trace: list[Any] = []
        for i in range(7):
            trace += step("Edit", {"file_path": source, "old_string": word(i), "new_string": word(i + 1)},
                          f"The file {source} has been updated: {word(i + 1)}")
            trace += step("Bash", {"command": f"python -m pytest {test} -q"}, error=failure(i))
        return trace

    same = edit_then_test("app/export.py", "tests/test_export.py", lambda i: (
        f"FAILED tests/test_export.py::test_csv - AssertionError\n1 failed in 0.{29 + i}s (12:04:{10 + i}.5)"))
    got = [a for a in alerts(same) if a.signal == "result-stall"]
    assert len(got) == 1 and got[0].detail["rule"] == "futile_writes"
    # A failure whose values move (not its timing) is work, as above.
    moving = edit_then_test("app/export.py", "tests/test_export.py",
                            lambda i: f"FAILED - assert {word(i)} == 'x'\n1 failed in 0.{29 + i}s")
    assert hits(moving) == []
    # A performance test's own figures are its result, not its run time: improving after
    # each edit is work.
    faster = edit_then_test("app/cache.py", "tests/test_perf.py",
                            lambda i: f"FAILED - p99 latency {900 - 60 * i}ms exceeds 200ms\n1 failed in 4.{i}s")
    assert hits(faster) == []


def test_a_build_that_reports_its_failure_as_output_is_a_check() -> None:
    """`npm run build | tail` loses the build's exit status: its failure comes back as a
    successful output. A build counts as a command runner's write (a generous guess),
    unless its output reports a failure: then it changed nothing and answers like a
    check, so config edit → the same build error (only "in NNNN ms" moving) is futile."""
    def edit_then_build(error: Callable[[int], str]) -> list[Any]:
        trace: list[Any] = []
        for i in range(8):
            trace += step("Edit", {"file_path": "/repo/webpack.admin.js", "old_string": word(i),
                                   "new_string": word(i + 1)},
                          "The file /repo/webpack.admin.js has been updated.")
            trace += step("Bash", {"command": "npm run build:admin 2>&1 | tail -12"},
                          f"{error(i)}\n\nwebpack 5.94.0 compiled with 1 error in {8211 + 37 * i} ms")
        return trace

    same = edit_then_build(lambda i: "ERROR in ./src/admin/icons/index.ts\nModule not found")
    got = [a for a in alerts(same) if a.signal == "result-stall"]
    assert [a.detail["rule"] for a in got] == ["futile_writes"]
    # The error moving from edit to edit is debugging.
    moving = edit_then_build(lambda i: f"ERROR in ./src/admin/icons/{word(i)}.ts\nModule not found")
    assert hits(moving) == []
    # A build that succeeds, with only its time moving, is a write that worked.
    ok: list[Any] = []
    for i in range(8):
        ok += step("Edit", {"file_path": "/repo/a.js", "old_string": word(i), "new_string": word(i + 1)},
                   "The file /repo/a.js has been updated.")
        ok += step("Bash", {"command": "npm run build 2>&1 | tail -3"},
                   f"webpack 5.94.0 compiled successfully in {8211 + 37 * i} ms")
    assert hits(ok) == []


def test_an_editor_showing_code_that_says_error_is_still_a_write() -> None:
    # The editor answers with the file around its edit; Java code says "error" and
    # "failed" all the time. Its write is no guess: edit → the same empty run, five
    # times, is futile as before.
    trace: list[Any] = []
    for i in range(7):
        trace += step("str_replace_editor",
                      {"command": "str_replace", "path": "/repo/A.java", "old_str": word(i),
                       "new_str": word(i + 1)},
                      f"[File: /repo/A.java]\n  log.error(\"failed {word(i)}\");\n  throw new Error();")
        trace += step("bash", {"command": "python reproduce.py"}, "")
    got = [a for a in alerts(trace) if a.signal == "result-stall"]
    assert [a.detail["rule"] for a in got] == ["futile_writes"]


def test_deference_to_the_call_keyed_loops() -> None:
    same: list[Any] = []
    for _ in range(20):
        same += step("read_file", {"path": "a.go"}, "same bytes")
    assert [a.signal for a in alerts(same)] == ["repeated-tool-call"]


def test_no_new_state_warns_first_then_the_stall_is_proven() -> None:
    trace: list[Any] = []
    for i in range(14):
        trace += step("search", {"q": f"where is config, take {word(i)}"}, "no match in the index")
    # six repeats: the exact-payload warning; eight: the critical; nothing more after
    assert [a.signal for a in alerts(trace)] == ["no-new-state", "result-stall"]


def test_policy_validation() -> None:
    with pytest.raises(PolicyError, match="result-stall"):
        parse_policy_set("[signals.result-stall]\nwindow = 8\nwindow_threshold = 9\n")
    with pytest.raises(PolicyError, match="result-stall"):
        parse_policy_set("[signals.result-stall]\nthreshold = 2\n")
    trace: list[Any] = []
    for i in range(6):
        trace += step("find_file", {"n": i}, error=f'No matches found for "{word(i)}"')
    assert hits(trace, WARN + "[signals.result-stall]\nthreshold = 4\n") == [5]


def test_snapshot_round_trip() -> None:
    watchdog = Watchdog(parse_policy_set(WARN).base)
    state = watchdog.new_state("s")
    trace: list[Any] = []
    for i in range(9):
        trace += step("find_file", {"n": i}, error=f'No matches found for "{word(i)}"')
    for event in trace[:10]:
        watchdog.process(state, event)
    restored = watchdog.decode_state(watchdog.encode_state(state))
    index = [s.id for s in watchdog.signals].index("result-stall")
    assert restored.signals[index] == state.signals[index]
    out = [o for e in trace[10:] for o in watchdog.process(restored, e) if isinstance(o, Alert)]
    assert [o.signal for o in out] == ["result-stall"]


def test_the_same_write_acknowledged_again_is_stale_while_new_writes_stay_news() -> None:
    """A write tool's bare acknowledgement is news for each new write (twelve files
    written, one "File written successfully." each), but the same write re-sent and
    acknowledged the same way again (the same rows appended after every fetch of a page
    that never changes) tells the agent nothing: with the fetches it is a stall."""
    page = {"rows": [{"id": i, "name": word(i)} for i in range(20)], "page": 1}

    def lap(page_number: int) -> list[Any]:
        return [*step("fetch_url", {"url": f"https://shop.example/list?page={page_number}"},
                      json.dumps(page)),
                *step("append_file", {"path": "rows.jsonl", "content": json.dumps(page["rows"])},
                      "Appended 20 lines.")]

    # The same page every time, and the same append after it: halted.
    stuck = [event for n in range(2, 14) for event in lap(n)]
    assert hits(stuck) != []
    # New pages, each appended: every append is a new write, never stale.
    new_pages: list[Any] = []
    for n in range(2, 14):
        page = {"rows": [{"id": i, "name": word(i)} for i in range(20 * n, 20 * n + 20)], "page": n}
        new_pages += lap(n)
    assert hits(new_pages) == []
    # Twelve different files written, each acknowledged alike: news each time.
    files = [event for i in range(12) for event in step(
        "write_file", {"path": f"docs/{word(i)}.md", "content": f"# {word(i)}\n"},
        "File written successfully.")]
    assert hits(files) == []


def test_one_content_read_from_many_files_is_many_answers() -> None:
    """Fourteen Dockerfiles, eleven of them one shared template, read through a named
    read tool: each file's content is that file's answer. The same file read again and
    again unchanged is the same answer (stale), and so is a call that names no file
    (SWE-agent's ``goto N`` showing the same window of a short file)."""
    shared = "FROM python:3.12-slim\nWORKDIR /app\nCOPY . .\nCMD [\"python\", \"-m\", \"service\"]\n"
    audit: list[Any] = []
    for i in range(14):
        content = shared if i % 5 else f"FROM node:22\nWORKDIR /{word(i)}\n"
        audit += step("Read", {"file_path": f"/repo/services/{word(i)}/Dockerfile"}, content)
    assert hits(audit) == []
    # One file read again and again (at other offsets, so no two calls are the same call,
    # which would be repeated-tool-call's): its unchanged content is stale.
    reread = [event for k in range(10)
              for event in step("Read", {"file_path": "/repo/Dockerfile", "offset": k}, shared)]
    assert hits(reread) != []
    window = "[File: /repo/A.java (30 lines total)]\n1:class A {}\n"
    gotos = [event for n in range(20, 32) for event in step("goto", {"command": f"goto {n}"}, window)]
    assert hits(gotos) != []


def test_one_answer_from_many_hosts_through_a_shell_is_many_answers() -> None:
    """`curl` of one version endpoint in twelve regions, every region answering the same
    JSON, is a fan-out whose identical answers are the point: each URL's answer is its
    own. A shell re-reading one file unchanged (`cat` of it with other flags) is stale."""
    version = '{"service": "edgecfg", "version": "2025.11.4", "commit": "3c9e1f2"}'
    regions = [f"{word(i)}-{word(i + 1)}" for i in range(12)]
    fan_out = [event for region in regions for event in step(
        "bash", {"command": f"curl -s https://edgecfg.{region}.example.net/_meta/version"}, version)]
    assert hits(fan_out) == []
    flags = ["-A", "-E", "-T", "-n", "-b", "-s", "-v", "-e", "-t", "-u"]
    rereads = [event for flag in flags for event in step(
        "bash", {"command": f"cat {flag} config/settings.yaml"}, "debug: false\nworkers: 4\n")]
    assert hits(rereads) != []


def test_a_page_fetched_again_under_another_query_is_the_same_answer() -> None:
    """A URL names its place by scheme, host and the words of its path: pages 2 to 13 of
    one listing that all return page one are one answer again and again, whether the page
    is in the query or in the path's numbers, as when the same list is paged through a
    named tool."""
    page = json.dumps({"items": [{"id": i, "name": word(i)} for i in range(20)], "page": 1})
    for url in ("https://shop.example/list?page={n}", "https://shop.example/list/page/{n}"):
        stuck = [event for n in range(2, 14)
                 for event in step("bash", {"command": f"curl -s '{url.format(n=n)}'"}, page)]
        assert hits(stuck) != [], url


def test_pages_of_other_names_on_one_host_are_a_sweep() -> None:
    """Twenty-four pricing pages checked after a CDN purge, `curl -sI` each, nearly all
    answering `cf-cache-status: MISS`: a page of another name is another place."""
    pages = [f"/{lang}/pricing/{plan}" for lang in ("de", "fr", "es", "ja", "pt-br", "it")
             for plan in ("team", "enterprise", "compare", "faq")]
    checks = [event for page in pages for event in step(
        "bash", {"command": f"curl -sI https://www.example.io{page} | grep -i cf-cache-status"},
        "cf-cache-status: MISS\r\n")]
    assert hits(checks) == []
    # the same page under other numbers (an id, a page) is one place
    ids = [event for n in range(24) for event in step(
        "bash", {"command": f"curl -sI https://www.example.io/orders/{1000 + n}/label | grep -i etag"},
        "etag: W/\"0\"\r\n")]
    assert hits(ids) != []


def test_a_cluster_cli_names_the_object_its_sub_command_reads() -> None:
    """Twenty-four gateway pods each asked for their readiness through `kubectl exec`,
    each answering 200 and the proxy's version: the pod is the place, as the namespace
    is. The same pod asked again and again is stale, a listing by label names no object,
    and the type and name of `get` or `describe` (or `type/name`) are one place."""
    answer = "200\n8d3e2b0e4f4f81a6d2c3b8e7a1f9d0c5c1e2b3a4/1.31.2-dev/Clean/RELEASE/BoringSSL"
    pods = [f"istio-ingressgateway-7b9f8c6d5-{word(i + 100)}" for i in range(24)]
    probe = ("kubectl -n istio-ingress exec {pod} -c istio-proxy -- sh -c "
             "'curl -s -o /dev/null -w \"%{{http_code}}\" localhost:15021/healthz/ready; echo'")
    sweep = [event for pod in pods for event in step("run_command", {"command": probe.format(pod=pod)}, answer)]
    assert hits(sweep) == []
    same = [event for i in range(12) for event in step(
        "run_command", {"command": probe.format(pod=pods[0]) + f" # try {i}"}, answer)]
    assert hits(same) == [9]
    listing = [event for i in range(12) for event in step(
        "run_command", {"command": f"kubectl -n istio-ingress get pods -l istio=ingressgateway --v={i}"}, answer)]
    assert hits(listing) == [9]
    for form in ("kubectl -n web describe pod {pod}", "kubectl get pod/{pod} -o yaml", "kubectl logs {pod} --tail=5"):
        objects = [event for pod in pods[:12] for event in step(
            "run_command", {"command": form.format(pod=pod)}, answer)]
        assert hits(objects) == [], form
    assert _kube_object("kubectl -n a get job migrate-7 -o jsonpath='{.status}'") == "get job migrate-7"
    assert _kube_object("kubectl --context prod logs deploy/api -c app --tail=2") == "logs deployment api"
    assert _kube_object("kubectl get pods -l app=web") == ""
    assert _kube_object("kubectl apply -f job.yaml") == ""
    # one object however its type is spelt, and kubectl's flags with values skipped
    assert len({_kube_object(f"kubectl get {form}") for form in (
        "deploy/web", "deployment web", "deployments.apps web", "deploy web", "deployments/web")}) == 1
    assert _kube_object("kubectl logs -f web-1 --tail 5") == _kube_object("kubectl logs pod/web-1")
    assert _kube_object("kubectl logs --limit-bytes 500 web-1") == "logs pod web-1"
    assert _kube_object("kubectl -v 6 logs web-1") == "logs pod web-1"
    assert _kube_object("kubectl get --chunk-size 500 pods") == ""
    assert _kube_object("oc logs web-1") == "logs pod web-1"


def test_an_http_response_read_again_is_the_same_answer_whatever_its_date() -> None:
    """One health endpoint fetched with `curl -i` under forty reworded command lines, each
    answered 503 with the date the server answered at: the date is no news. Pages of other
    names answering alike are still a sweep."""
    def response(n: int) -> str:
        return (f"HTTP/2 503 \r\ndate: Wed, 29 Oct 2025 12:{28 + n // 60:02d}:{n % 60:02d} GMT\r\n"
                "content-type: text/html\r\ncontent-length: 190\r\n\r\n<html><body><h1>503 Service "
                "Temporarily Unavailable</h1></body></html>")
    flags = ["", "-H 'Accept: application/json'", "--http1.1", "-k", "-A Mozilla/5.0", "--retry 3"]
    stuck = [event for n in range(14) for event in step(
        "run_command", {"command": f"curl -sS -i {flags[n % 6]} https://eta.example.app/health"}, response(n * 7))]
    assert hits(stuck) != []
    pages = [event for n in range(14) for event in step(
        "run_command", {"command": f"curl -sS -i https://eta.example.app/{word(n)}/health"}, response(n * 7))]
    assert hits(pages) == []
    # ...and so is its `expires:`, which moves with it; a mail's date, in the same form but in
    # no response's headers, names which mail it is
    expiring = [event for n in range(14) for event in step(
        "run_command", {"command": f"curl -sS -i {flags[n % 6]} https://eta.example.app/health"},
        response(n * 7).replace("content-type:", f"expires: Wed, 29 Oct 2025 13:{n:02d}:00 GMT\r\ncontent-type:"))]
    assert hits(expiring) != []
    mails = [event for n in range(14) for event in step(
        "run_command", {"command": f"notmuch show --format=raw id:{n}"},
        f"From: ops@example.app\nDate: Wed, 29 Oct 2025 12:{n:02d}:00 GMT\nSubject: nightly report")]
    assert hits(mails) == []


def test_a_page_saying_it_found_nothing_for_other_words_is_the_same_answer() -> None:
    """A results page extracted after each reworded search, each answering that nothing
    was found for the words it names back (browser-use's extraction, the words quoted in
    escaped JSON text): the search's own words are no news."""
    def page(term: str) -> str:
        return ('📄  Extracted from page\n: ```json\n{\n "results": [],\n "message": '
                f'"No Results For \\"{term}\\"."\n}}\n```\n')
    terms = [f"dishwasher {word(i)} noise" for i in range(12)]
    stuck = [event for term in terms for event in step(
        "extract_content", {"goal": f"search results for {term}"}, page(term))]
    assert hits(stuck) != []
    found = [event for n, term in enumerate(terms) for event in step(
        "extract_content", {"goal": f"search results for {term}"},
        page(term).replace('"results": []', f'"results": ["thread {n}"]'))]
    assert hits(found) == []


def test_a_named_fetch_reads_the_address_it_is_given() -> None:
    """Thirty-four dataset links checked one by one with a named tool
    (`requests_head(url=...)`), most answering 200: each address is the place its answer is
    of, as a command line's is; one address asked again and again, or its pages by number,
    are one place."""
    ok = {"status_code": 200, "reason": "OK", "content_type": "application/json"}
    sweep = [event for n in range(16) for event in step(
        "requests_head", {"url": f"https://data.example.org/dataset/{word(n + 10)}/rows.csv", "timeout": 15}, ok)]
    assert hits(sweep) == []
    pages = [event for n in range(16) for event in step(
        "requests_head", {"url": f"https://data.example.org/dataset/list/page/{n}", "timeout": 15}, ok)]
    assert hits(pages) != []


def test_a_browser_reads_the_page_it_went_to() -> None:
    """A navigation's report names where it went, nothing of the page: neither stale nor
    news. What the next extraction reads is that page's, kept with its address without
    the query: a forum search reworded in the address sixteen times, each results page
    extracted "No results", is one page read again; orders opened one by one by their id,
    each extracted "No shipments", are each order's."""
    def visit(url: str, extracted: str) -> list[Any]:
        return (step("go_to_url", {"url": url}, f"🔗  Navigated to {url}")
                + step("extract_content", {"goal": "search results titles and links"},
                       f"📄  Extracted from page\n: ```json\n{extracted}\n```\n"))
    searches = [event for i in range(16) for event in visit(
        f"http://forum.example/search?q=bosch+{word(i)}+dishwasher", '{"results": [], "message": "No results."}')]
    assert hits(searches) != []
    orders = [event for i in range(16) for event in visit(
        f"http://shop.example/sales/order/view/order_id/{1000 + i}/", '{"shipments": [], "note": "No shipments"}')]
    assert hits(orders) == []
    products = [event for i in range(16) for event in visit(
        f"http://shop.example/monitor-{word(i)}.html", '{"in_stock": false}')]
    assert hits(products) == []
    # an id in the query or a route in the fragment names the page too
    for form in ("http://shop.example/sales/order/view?order_id={n}&tab=shipments",
                 "http://forum.example/viewtopic.php?t={n}", "https://app.example/#/orders/{n}"):
        pages = [event for i in range(16) for event in visit(form.format(n=1000 + i), '{"shipments": []}')]
        assert hits(pages) == [], form
    # a tool that is no browser's read keeps its own answers: the page is not its place
    notes = [event for i in range(16) for event in (
        step("go_to_url", {"url": f"http://docs.example/guide/{word(i)}"}, f"🔗  Navigated to http://docs.example/guide/{word(i)}")
        + step("read_notes", {}, "1. check the guide\n2. report back"))]
    assert hits(notes) != []
    assert _page_code("🔗  Navigated to https://A.example/x?q=1") == _page_code("Navigated to https://a.example/x/?q=2")
    assert _page_code("🔗  Navigated to https://a.example/x/1") != _page_code("🔗  Navigated to https://a.example/x/2")
    assert _page_code("Navigated to https://a.example/p?id=1&page=2") != _page_code("Navigated to https://a.example/p?id=2")
    assert _page_code("Navigated to https://a.example/s?q=a+b&page=2") == _page_code("Navigated to https://a.example/s?q=c")
    assert _page_code("Navigated to https://a.example/d/1AbC") != _page_code("Navigated to https://a.example/d/1abc")


def test_an_interpreter_cell_names_the_files_it_reads() -> None:
    """Thirty shards validated one by one in an interpreter
    (`print(check('/data/rank_v7/train/part-00007.parquet'))`), each answering `['OK']`: a
    path or a data file named in a cell is the place its answer is of, as on a command
    line. The same shard checked again and again is stale."""
    def cell(code: str) -> list[Any]:
        return step("execute_python", {"code": code}, '{"stdout": "[\'OK\']\\n"}')
    sweep = [event for n in range(24) for event in cell(f"print(check('/data/rank_v7/train/part-{n:05d}.parquet'))")]
    assert hits(sweep) == []
    again = [event for n in range(12) for event in cell(f"print(check('/data/rank_v7/train/part-00000.parquet'))  # {n}")]
    assert hits(again) != []


def test_a_loop_writing_a_new_file_each_lap_is_still_the_same_answer() -> None:
    """A status fetched into a new file each lap and shown back (`curl -o resp_7.json ...
    && jq .state resp_7.json`), or read through a method of the same name
    (`r7.json()`), answering the same each time: the file it writes is no place it reads,
    and a method call is no file."""
    fetched = [event for n in range(12) for event in step(
        "bash", {"command": f"curl -s -o resp_{n}.json https://ci.example/api/runs/42 && jq -r .state resp_{n}.json"},
        '{"replicas": 2, "ready": 1}')]
    assert hits(fetched) != []
    cells = [event for n in range(12) for event in step(
        "execute_python", {"code": f"r{n} = requests.get(URL); print(r{n}.json()['items'])"}, "[]\n['job-7']")]
    assert hits(cells) != []


def test_parallel_reads_of_many_files_find_their_own_names() -> None:
    """Reads sent four at a time, then their four results: each result is matched with
    its own call's file, so sixteen files of one content are sixteen answers however the
    reads were batched."""
    shared = "FROM python:3.12-slim\nWORKDIR /app\nCOPY . .\n"
    trace: list[Any] = []
    for batch in range(4):
        names = [f"/repo/services/{word(4 * batch + k)}/Dockerfile" for k in range(4)]
        trace += [ToolCall(session="s", tool="Read", args={"file_path": name}, call_id=name)
                  for name in names]
        trace += [ToolResult(session="s", tool="Read", result=shared, call_id=name) for name in names]
    assert hits(trace) == []


def test_an_editor_view_names_its_file_by_its_path_argument() -> None:
    """`str_replace_editor` is a command runner whose command (`view`) names no file; the
    file is its `path` argument, which is then what the view reads."""
    shared = "Here's the result of running `cat -n` on the file:\n     1\t[tool.ruff]\n"
    views = [event for i in range(12) for event in step(
        "str_replace_editor", {"command": "view", "path": f"/repo/pkg{word(i)}/ruff.toml"}, shared)]
    assert hits(views) == []
    again = [event for i in range(12) for event in step(
        "str_replace_editor", {"command": "view", "path": "/repo/ruff.toml", "view_range": [1, i + 5]},
        shared)]
    assert hits(again) != []


def test_a_cloud_cli_sweep_over_regions_is_one_answer_per_region() -> None:
    """`aws ec2 describe-instances --region R` over fourteen regions, each answering the
    same: the region is the place read, as a host is a URL's, so each region's answer is
    its own. The same region asked again and again, the same answer each time, is stale."""
    # (Codex CLI's envelope, read as its output: an answer that is more than a bare `[]`,
    # which says no more than the call and is neither stale nor news)
    empty = {"output": '{"Reservations": [{"Instances": [{"InstanceId": "i-0a1b2c3d", "State": "stopped"}]}]}',
             "metadata": {"exit_code": 0, "duration_seconds": 1.2}}
    regions = [f"{word(i)}-{word(i + 3)}-1" for i in range(14)]
    sweep = [event for region in regions for event in step(
        "shell", {"command": ["bash", "-lc", f"aws ec2 describe-instances --region {region} --output json"]},
        empty)]
    assert hits(sweep) == []
    again = [event for i in range(12) for event in step(
        "shell", {"command": ["bash", "-lc", f"aws ec2 describe-instances --region eu-west-1 --max-items {i + 5}"]},
        empty)]
    assert hits(again) != []
    # fourteen regions answering a bare `[]` (no instance anywhere) are a sweep too
    bare = {"output": "[]", "metadata": {"exit_code": 0, "duration_seconds": 0.9}}
    assert hits([event for region in regions for event in step(
        "shell", {"command": ["bash", "-lc", f"aws ec2 describe-instances --region {region} --output json"]},
        bare)]) == []


def test_a_cluster_cli_sweep_over_namespaces_named_short_is_one_answer_per_namespace() -> None:
    """`kubectl get secret registry-pull -n <ns>` read back in twenty namespaces, each
    answering the same fingerprint: `-n` names the place for kubectl, helm and oc, as
    `--namespace` does. The same namespace asked again and again is stale, and `-n` of
    another program (`head -n 20`) names no place."""
    answer = "4f1e9a0c7b22d1e3 secret fingerprint\n"
    namespaces = [f"team-{word(i)}" for i in range(20)]
    sweep = [event for ns in namespaces for event in step(
        "Bash", {"command": f"kubectl get secret registry-pull -n {ns} -o jsonpath='{{.data}}' | sha256sum"},
        answer)]
    assert hits(sweep) == []
    helm = [event for ns in namespaces for event in step(
        "Bash", {"command": f"helm get manifest app -n {ns} | pluto detect -"}, "There were no resources found.")]
    assert hits(helm) == []
    again = [event for i in range(12) for event in step(
        "Bash", {"command": f"kubectl get secret registry-pull -n team-a -o jsonpath='{{.data}}' --v={i}"},
        answer)]
    assert hits(again) == [9]
    heads = [event for i in range(12) for event in step(
        "Bash", {"command": f"tail -c 100 build.log | head -n {i + 5}"}, answer)]
    assert hits(heads) == [9]
    # nor after kubectl's own segment, nor on a line that only mentions a word with "oc "
    for command in ("kubectl logs deploy/web --since=1h | head -n {n}", "ls doc | head -n {n}",
                    "kubectl get pods -o name; echo -n run{n}"):
        piped = [event for i in range(12) for event in step(
            "Bash", {"command": command.format(n=i + 5)}, answer)]
        assert hits(piped) == [9], command
    # a namespace quoted is one too, and so is kubectl's after what runs it
    for form in ('kubectl get secret registry-pull -n "{ns}" -o name',
                 "sudo -E kubectl get secret registry-pull -n {ns}",
                 "KUBECONFIG=/etc/kube/prod timeout 20 /usr/local/bin/kubectl get secret x -n {ns}",
                 "microk8s kubectl get secret x -n {ns}",
                 "echo checking\nkubectl get secret x -n {ns}"):
        swept = [event for ns in namespaces for event in step("Bash", {"command": form.format(ns=ns)}, answer)]
        assert hits(swept) == [], form


def test_a_search_that_rewrites_what_it_finds_says_nothing_new_when_silent() -> None:
    """`grep -rl x src | xargs -r sed -i ...` for twenty renamed imports prints nothing:
    the line searches, but it also writes, and a write that answers nothing is news (as
    a silent `sed -i` is), not "nothing found" again."""
    fixes = [event for i in range(20) for event in step(
        "bash", {"command": f"grep -rl \"components/{word(i)}'\" src | xargs -r sed -i "
                            f"\"s#components/{word(i)}'#components/{word(i).title()}'#g\""}, "")]
    assert hits(fixes) == []
    # The same search without the rewrite, finding nothing twenty times, is stale.
    hunts = [event for i in range(20) for event in step(
        "bash", {"command": f"grep -rl \"components/{word(i)}'\" src"}, "")]
    assert hits(hunts) != []


def test_a_browser_agent_typing_a_form_is_writing() -> None:
    """Typing into fields and choosing options are a browser agent's writes: "Typed
    "..." into "..."" is their acknowledgement, news for each field, as "File written" is."""
    form: list[Any] = []
    for row in range(9):
        for field_name in ("Date", "Merchant", "Amount"):
            form += step("mcp__playwright__browser_type",
                         {"element": field_name, "ref": f"e{row}{field_name}", "text": word(row)},
                         f'Typed "{word(row)}" into "{field_name}"')
        form += step("mcp__playwright__browser_select_option",
                     {"element": "Category", "ref": f"c{row}", "values": ["Train"]},
                     'Selected option "Train" in "Category"')
    assert hits(form) == []



def test_cosmetic_edits_through_search_replace_are_futile() -> None:
    """Edits sent through an editor named `search_replace`, each changing a line, and the
    test suite after each answering exactly as before: futile writes, not searches."""
    failure = {"returncode": 1, "stdout": "round-trips ISO week dates FAILED [1]\n1 example, 1 failure"}
    trace: list[Any] = []
    for n in range(7):
        trace += step("search_replace", {"file_path": "src/WeekDate.hs", "content": f"variant {word(n)}"},
                      {"file": "src/WeekDate.hs", "blocks_applied": 1, "lines_changed": 1})
        trace += step("bash", {"command": "cabal test 2>&1 | tail -25"}, failure)
    assert [a.detail["rule"] for a in alerts(trace) if a.signal == "result-stall"] == ["futile_writes"]


def test_a_desktop_agent_typing_rows_is_writing() -> None:
    """A desktop agent entering rows into a spreadsheet: a click on the name box (the
    same click, the same answer, every row), the cell typed into it, the row typed into
    the grid, every action answered ``{"status": "SUCCESS", "results": ""}``. The typing
    is a write whose acknowledgement is news for each new text, as a browser's is."""
    trace: list[Any] = []
    for row in range(12):
        trace += step("click_input", {"id": "14", "name": "Name Box", "button": "left"},
                      {"status": "SUCCESS", "results": ""})
        trace += step("keyboard_input", {"id": "14", "name": "Name Box", "keys": f"A{row + 6}{{ENTER}}"},
                      {"status": "SUCCESS", "results": ""})
        trace += step("keyboard_input", {"id": "21", "name": "Grid", "keys": f"{word(row)}{{TAB}}{row}{{ENTER}}"},
                      {"status": "SUCCESS", "results": ""})
    assert hits(trace) == []
    # The same rows typed again, every one already acknowledged: the acknowledgements
    # restate the acts (no evidence to this signal), and the replay is long-loop's.
    again = trace + trace[6:]
    assert hits(again) == []
    assert hits(again, "", signal="long-loop") != []


@pytest.mark.parametrize(("answer", "bare"), [
    ("Listed 0 items.", True), ("(0 rows)", True), ("0 results", True), ("count: 0", True),
    ('[{"stuck": 0}]', True), ({"count": 0, "exists": False}, True), ([], True),
    ({"items": [], "total": 0}, True), ("[]", True),
    ("Listed 10 items.", False), ("404 Not Found", False), ("0 passed, 1 failed", False),
    ('[{"stuck": 14}]', True), ({"saved": True}, True), ('{"ok": true}', True),
    ('{"status": "none"}', False), ({"id": 0, "name": "x"}, False),
    ({"rows": [], "elapsed_ms": 9}, False), ({"hits": 3, "misses": 1}, False),
    ("No resources found in /srv/0", False), ('{"count": 0' + " " * 80 + "}", False),
])
def test_a_bare_value_or_a_zero_count_in_other_words(answer: Any, bare: bool) -> None:
    size = len(answer) if isinstance(answer, str) else len(json.dumps(answer))
    assert says_bare_value(answer, size) is bare


def test_a_sweep_of_reads_answering_none_is_no_stall() -> None:
    # One inventory command per region, through a shell: "Listed 0 items." in most. An
    # empty output in other words, and an empty output of a call that is no search is
    # neither stale nor news.
    trace: list[Any] = []
    for region in ("us-east1", "us-east4", "us-west1", "us-west2", "europe-west1",
                   "europe-west2", "europe-west3", "europe-north1", "asia-east1",
                   "asia-northeast1", "asia-southeast1", "australia-southeast1"):
        trace += step("run_shell_command",
                      {"command": f"gcloud compute instances list --filter='zone ~ {region}'"},
                      "Listed 0 items.")
    assert hits(trace) == []
    # a decision recorded per paper by a tool not named as a write, "saved" each time
    decisions: list[Any] = []
    for paper in range(12):
        decisions += step("screening_record_decision",
                          {"pmid": str(39480883 + paper), "decision": "include" if paper % 3 else "exclude"},
                          {"saved": True})
    assert hits(decisions) == []
    # and a count of zero per day from a read tool
    days = []
    for day in range(1, 15):
        days += step("get_stuck_payments", {"date": f"2025-11-{day:02d}"}, '[{"stuck": 0}]')
    assert hits(days) == []


def test_a_search_answering_none_is_still_nothing_found() -> None:
    # A search (a resolve tool: query*, search*...) finding nothing, in whatever words,
    # is stale however it was reworded: that is what makes hunts for an absent symbol
    # visible. (A count per day through a tool named as a search is the price.)
    trace: list[Any] = []
    for day in range(1, 15):
        trace += step("query", {"sql": f"SELECT count(*) AS stuck FROM p WHERE day = {day}"},
                      '[{"stuck": 0}]')
    assert hits(trace) != []


@pytest.mark.parametrize("summary", [
    "[INFO] Tests run: 12, Failures: 0, Errors: 0, Skipped: 0\n[INFO] BUILD SUCCESS\n[INFO] Total time: {t} s",
    "✖ 0 problems (0 errors, 0 warnings)\nDone in {t}s.",
    "Build succeeded.\n    0 Warning(s)\n    0 Error(s)\nTime Elapsed 00:00:{t}",
])
def test_a_build_that_counts_no_failure_is_a_write_that_worked(summary: str) -> None:
    trace: list[Any] = []
    for i in range(8):
        trace += step("Edit", {"file_path": "/repo/src/App.java", "old_string": word(i),
                               "new_string": word(i + 1)}, "The file /repo/src/App.java has been updated.")
        trace += step("Bash", {"command": "mvn -q package"}, summary.format(t=11 + i))
    assert hits(trace) == []


def test_a_sessions_answers_do_not_depend_on_another_sessions() -> None:
    """The template cache is shared by the sessions of a process: what one session's
    search made of an output must not change how another's build reads it."""
    output = "src/a.py:3: raise Error('x')\nsrc/b.py:9: raise Error('y')"

    def build_session(session: str) -> list[Any]:
        trace: list[Any] = []
        for i in range(8):
            trace += [ToolCall(session=session, tool="Edit", args={"file_path": "/repo/a.py",
                                                                   "old_string": word(i), "new_string": word(i + 1)}),
                      ToolResult(session=session, tool="Edit", result="The file /repo/a.py has been updated."),
                      ToolCall(session=session, tool="Bash", args={
                          "command": "grep -rl old src | xargs sed -i 's/old/new/' && grep -rn Error src"}),
                      ToolResult(session=session, tool="Bash", result=output)]
        return trace

    def alerts_of(session: str, events: list[Any]) -> list[tuple[str, int | None]]:
        engine = Engine(parse_policy_set(WARN))
        out = [o for e in events for o in engine.process(e)]
        return [(a.signal, a.seq) for a in out if isinstance(a, Alert) and a.session == session]

    alone = alerts_of("b", build_session("b"))
    searched_first = [ToolCall(session="a", tool="Bash", args={"command": "grep -rn Error src"}),
                      ToolResult(session="a", tool="Bash", result=output)]
    assert alerts_of("b", searched_first + build_session("b")) == alone


def test_the_places_a_sweep_reads_keep_their_answers_apart() -> None:
    """One check per bucket, per host, per table: the same answer from each is that
    place's answer. The same place asked again is the same answer."""
    def sweep(tool: str, args: Callable[[int], dict[str, Any]], answer: Any) -> list[Any]:
        return [e for i in range(12) for e in step(tool, args(i), answer)]

    buckets = sweep("execute_command", lambda i: {
        "command": f"aws s3api get-bucket-encryption --bucket acme-prod-{word(i)} --output json"},
        '{"Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]}')
    assert hits(buckets) == []
    hosts = sweep("shell", lambda i: {"cmd": f'ssh api-{i:02d} "zgrep -h req_7f2c19 /var/log/app/*.log"'},
                  "(no output)\n[exit code: 1]")
    assert hits(hosts) == []
    tables = sweep("run_sql", lambda i: {
        "sql": f"select count(*) as null_rows from analytics.core.t_{word(i)} where customer_id is null"},
        {"columns": ["NULL_ROWS"], "rows": [[0]], "row_count": 1})
    assert hits(tables) == []
    # one table asked again and again with other values: the same place
    one_table = sweep("run_sql", lambda i: {
        "sql": f"select count(*) from orders where customer_name = '{word(i)}'"},
        {"columns": ["COUNT"], "rows": [[0]], "row_count": 1})
    assert hits(one_table) != []


def test_a_hunt_over_guessed_tables_is_still_a_hunt() -> None:
    """The tables a query reads are its place only when it found something there: an
    error sent as output, or a search's "none", from one more guessed table is the hunt
    going on."""
    guesses = ["users", "user", "accounts", "customers", "members", "people", "profiles",
               "app_users", "auth_users", "user_accounts", "clients", "logins"]
    errors = [e for t in guesses for e in step(
        "run_sql", {"sql": f"select id, email from {t} where email = 'x@acme.com'"},
        f'Error: relation "{t}" does not exist')]
    assert hits(errors) != []
    none = [e for t in guesses for e in step(
        "query", {"sql": f"select id from {t} where email = 'x@acme.com'"}, "(0 rows)")]
    assert hits(none) != []


@pytest.mark.parametrize(("args", "tables"), [
    ({"sql": "SELECT count(*) FROM analytics.orders o JOIN customers c ON c.id = o.cid"},
     "analytics.orders\0customers"),
    ({"sql": "with recent as (select * from events) select count(*) from recent"}, "recent"),
    ({"sql": "select extract(year from created_at) from orders"}, "orders"),
    ({"sql": "select * from logs where message like '%login failed from 10.0.3.7%'"}, "logs"),
    ({"query": "without sudo, install node from source"}, ""),
    ({"query": "Selector from the menu"}, ""),
    ({"q": "select * from t"}, ""),
    ({"query": "status", "sql": "select 1 from dual"}, "dual"),
])
def test_sql_tables_are_the_tables_a_query_reads(args: dict[str, Any], tables: str) -> None:
    assert sql_tables(args) == tables


@pytest.mark.parametrize(("command", "host"), [
    ('ssh api-03 "zgrep -h req /var/log/app.log"', "api-03"),
    ("ssh -i key.pem -p 2222 deploy@web-3 'uptime'", "deploy@web-3"),
    ("ssh -o StrictHostKeyChecking=no web-4 uptime", "web-4"),
    ("cd /srv && ssh -A bastion 'ls'", "bastion"),
    ("grep -c ssh auth.log", None),
    ("journalctl -u ssh --since today", None),
])
def test_the_host_of_an_ssh_is_its_place(command: str, host: str | None) -> None:
    assert _SSH_HOST.findall(command) == ([host] if host else [])


def test_the_thing_a_named_read_names_keeps_its_answer_apart() -> None:
    """One balance per account code, one state per entity: the same answer from each is
    that one's. The same account read again is the same answer."""
    accounts = [e for i in range(14) for e in step(
        "xero_get_account_balance", {"account_code": str(801 + i), "date": "2025-11-30"},
        {"balance": "0.00", "currency": "NZD", "as_at": "2025-11-30"})]
    assert hits(accounts) == []
    entities = [e for i in range(14) for e in step(
        "homeassistant__get_state", {"entity_id": f"light.room_{word(i)}"}, "off")]
    assert hits(entities) == []
    again = [e for i in range(14) for e in step(
        "xero_get_account_balance", {"account_code": "805", "date": f"2025-11-{10 + i}"},
        {"balance": "0.00", "currency": "NZD", "as_at": "2025-11-30"})]
    assert hits(again) != []


def test_an_objects_address_in_a_failing_tests_output_is_no_news() -> None:
    """A test that fails the same way prints the object it compared at a new address each
    run (`<built-in method startswith of bytes object at 0x7f1c2b3d5a10>`): rerun between
    cache clears dozens of times, every answer was new. A changed failure after an edit
    is still a change."""
    def run(n: int, got: str = "no bom") -> str:
        return (f"E        +  where False = <built-in method startswith of bytes object at 0x7f1c2b{n * 7919 % 65536:04x}>"
                f"(b'\\xef\\xbb\\xbf')\nE   got {got}\nFAILED tests/test_export.py::test_csv_export_unicode\n"
                "1 failed in 0.41s\n[The command completed with exit code 1.]")

    clears = ["find . -name __pycache__ -prune -exec rm -rf {} +", "pip install -e . -q",
              "find . -name '*.pyc' -delete", "export PYTHONDONTWRITEBYTECODE=1"]
    reruns = [e for n in range(16) for e in step(
        "execute_bash", {"command": f"{clears[n % 4]} && python -m pytest tests/test_export.py -q"}, run(n))]
    assert hits(reruns) != []
    assert template(run(1)) == template(run(2)) and light_template(run(1)) == light_template(run(2))
    # a failure that changes after each edit is the work going on
    edits = [e for n in range(16) for e in (
        step("str_replace_editor", {"command": "str_replace", "path": "src/csv.py", "old_str": f"v{n}", "new_str": f"v{n + 1}"},
             "The file src/csv.py has been edited.")
        + step("execute_bash", {"command": "python -m pytest tests/test_export.py -q"}, run(n, f"header {word(n)}")))]
    assert hits(edits) == []


def test_a_timestamp_element_is_no_news() -> None:
    """Claude Code's BashOutput stamps each answer with when it was read: the same status
    of a background shell, read again, is the same answer; another status is not."""
    def output(status: str, at: str) -> str:
        return (f"<status>{status}</status>\n\n<exit_code>137</exit_code>\n\n<stdout>\nbaked level_02.png\n"
                f"</stdout>\n\n<timestamp>2025-09-17T17:{at}.548Z</timestamp>")

    assert template(output("failed", "21:38")) == template(output("failed", "23:52"))
    assert light_template(output("failed", "21:38")) == light_template(output("failed", "23:52"))
    assert template(output("failed", "21:38")) != template(output("running", "21:38"))
    assert light_template("<timestamp>" + "x" * 100 + "</timestamp>") == "<timestamp>" + "x" * 100 + "</timestamp>"


def test_an_ended_process_read_again_between_waits_is_asked_not_polled() -> None:
    """A background run that has ended, read again and again between sleeps: each reading
    differs only in the time stamped on it, which is no progress (the same call with new
    numbers was read as a poll, and the loop never halted). A run whose counts move is
    still a poll, stamped or not."""
    def reading(status: str, done: int, at: int) -> str:
        return (f"<status>{status}</status>\n\n<stdout>\n[{done}/45] chromium e2e/payments.spec.ts\n</stdout>\n\n"
                f"<timestamp>2025-08-08T09:{at // 60:02d}:{at % 60:02d}.285Z</timestamp>")

    def session(status: str, moving: bool) -> list[Any]:
        trace: list[Any] = []
        for n in range(24):
            trace += step("Bash", {"command": f"sleep {30 + 15 * (n % 3)}"}, "")
            trace += step("BashOutput", {"bash_id": "bash_1"}, reading(status, n if moving else 45, 60 * n + n % 7))
            if n % 5 == 4:
                trace += step("Bash", {"command": "ls test-results/"}, "payments-records-a-partial-payment-chromium\n")
        return trace

    assert hits(session("completed", moving=False)) != []
    assert hits(session("running", moving=True)) == []
    # the same status with moving counts and no timestamp: a poll as before
    assert hits([e for n in range(20) for e in step("Bash", {"command": "sleep 30"}, "")
                 + step("BashOutput", {"bash_id": "b"}, f"<status>completed</status>\n[{n}/45]")]) == []


def test_a_restamped_answer_is_compared_whole_and_in_a_row() -> None:
    """Only what the comparison reads whole can be said to have moved only its times: a
    long log tail whose progress line is past the first 2,048 characters is a poll. And
    "the same again" is of two answers in a row: idle, busy, idle is no repeat."""
    retries = "".join(f"2025-08-08T09:{i:02d}:00Z WARN shard-07 upload failed (503), retrying\n" for i in range(45))

    def tail(i: int) -> str:
        return retries.replace("09:", f"1{i % 10}:") + f"uploaded {300 + 37 * i}/2000 shards"

    trace: list[Any] = []
    for i in range(14):
        trace += step("Bash", {"command": "sleep 60"}, "")
        trace += step("Bash", {"command": "sleep 60; tail -n 46 /tmp/upload.log"}, tail(i))
    assert len(tail(0)) > 2048 and hits(trace) == []
    states = ["idle", "idle", "busy", "idle", "busy", "idle", "busy", "idle", "busy", "idle", "busy", "idle"]
    trace = []
    for i, state in enumerate(states):
        trace += step("Bash", {"command": "sleep 30"}, "")
        trace += step("Bash", {"command": "sleep 30; cat /run/worker/state"},
                      f"2025-08-08T09:{i:02d}:00Z worker {state} (errors: 1 failed)")
    assert hits(trace) == []


def test_a_package_scripts_log_is_read_after_its_echo() -> None:
    """`pnpm test-ci-karma` echoes the script (`> chart.js@4.4.8 test-ci-karma /repo`, `>
    cross-env ... karma start ...`, a blank line) before karma's log, whose lines open with
    `20 04 2025 10:58:03.821:`. The times are when it ran: the same failing run re-sent
    between the same reads is the same answer, and the loop halts."""
    def karma(second: int) -> str:
        stamp = f"20 04 2025 10:{58 + second // 60:02d}:{second % 60:02d}.{(second * 37) % 1000:03d}"
        return ("\n> chart.js@4.4.8 test-ci-karma /chartjs__Chart.js\n> cross-env NODE_ENV=test karma start "
                "./karma.conf.cjs --single-run --grep \"controller.doughnut\"\n\n"
                f"{stamp}: INFO [karma-server]: Karma v6.4.4 server started at http://localhost:9876/\n"
                f"{stamp}: ERROR [launcher]: No binary for Chrome browser on your platform.\n"
                " ELIFECYCLE  Command failed with exit code 1.")

    assert light_template(karma(3)) != light_template(karma(20))  # (light: no clock masked)
    assert templates(karma(3), digits=False)[0] == templates(karma(20), digits=False)[0]
    trace: list[Any] = []
    run = {"command": "pnpm test-ci-karma controller.doughnut 2>&1 | tail -n 14"}
    for lap in range(4):  # a lap of five: run, run, grep, run, run, then open the file again
        trace += step("bash", run, karma(70 * lap)) + step("bash", run, karma(70 * lap + 17))
        trace += step("bash", {"command": "grep -n spacing test/specs/controller.doughnut.tests.js"}, "")
        trace += step("bash", run, karma(70 * lap + 35)) + step("bash", run, karma(70 * lap + 52))
        trace += step("open", {"path": "src/controllers/controller.doughnut.js", "line_number": 56},
                      "[File: src/controllers/controller.doughnut.js (396 lines total)]\n56:  spacing: 0,")
    assert hits(trace) != []
    # a time after words on a line of its own is still what was asked
    assert templates("> app@1.0.0 cron\n> node next.js\n\nnext run at 06:30:00\n", digits=False)[0] != templates(
        "> app@1.0.0 cron\n> node next.js\n\nnext run at 07:30:00\n", digits=False)[0]


def test_an_acts_report_may_open_with_an_emoji_but_not_a_warning() -> None:
    from streamguard.signals.result_stall import _NOT_DONE, _REPORTS_ACT

    for text in ("\U0001f50d  Scrolled down the page by one page", "\U0001f5b1\ufe0f  Clicked button with index 47: next",
                 "Clicked element 'button.load-more'"):
        assert _REPORTS_ACT.match(text) and not _NOT_DONE.search(text), text
    assert not _REPORTS_ACT.match(": Clicked x") and not _REPORTS_ACT.match("-- Clicked x")
    assert _NOT_DONE.search("\u26a0\ufe0f Clicked 'Save', nothing happened")


def test_data_in_a_fenced_block_keeps_its_strings() -> None:
    """browser-use answers an extraction with a short lead and the page's data as JSON in
    a fence: twenty catalogue pages, clicked through with the same "next", differ in their
    quoted titles and prices, which a prose message's quoted-term masking made one answer
    (halted at the thirty-eighth call). The same page extracted again is the same answer."""
    def page(n: int) -> str:
        books = [{"title": f"The {word(n)} Sisters", "price": f"£{10 + n}.{n:02d}"},
                 {"title": f"Tales of {word(n + 50)}", "price": "£12.00"}]
        return "\U0001f4c4  Extracted from page\n: ```json\n" + json.dumps(
            {"page": f"{n} of 50", "books": books}, indent=2) + "\n```\n"

    goal = {"goal": "List all books on this page with star-rating Five: title and price"}
    pages = [e for n in range(1, 26) for e in (
        step("click_element_by_index", {"index": 47}, "\U0001f5b1\ufe0f  Clicked button with index 47: next")
        + step("extract_content", goal, page(n)))]
    assert hits(pages) == []
    again = [e for n in range(25) for e in (
        step("scroll_down", {"amount": 600 + n}, "\U0001f50d  Scrolled down the page by 600 pixels")
        + step("extract_content", {"goal": f"books, attempt {word(n)}"}, page(1)))]
    assert hits(again) != []
    # prose quoting its term is still masked there; a fence of prose is prose
    assert template('No matches found for "a.txt" in /repo') == template('No matches found for "b.txt" in /repo')
    assert template('Ran ```sh\ngrep "a" x``` and found "one"') == template('Ran ```sh\ngrep "b" x``` and found "two"')
    assert template(page(1)) != template(page(2))


def test_the_ids_of_an_object_of_arguments_name_the_place_too() -> None:
    """Amazon Q's ``use_aws`` sends the operation's own arguments as an object: one check
    per bucket is that bucket's answer; the same bucket asked again is the same answer."""
    def use_aws(bucket: str, label: str = "Check access") -> dict[str, Any]:
        return {"service_name": "s3api", "operation_name": "get-public-access-block",
                "parameters": {"bucket": bucket}, "region": "us-east-1", "label": label}

    answer = {"exit_status": "0", "stdout": '{"PublicAccessBlockConfiguration": {"BlockPublicAcls": true}}'}
    sweep = [e for i in range(14) for e in step("use_aws", use_aws(f"acme-{word(i)}"), answer)]
    assert hits(sweep) == []
    again = [e for i in range(14) for e in step("use_aws", use_aws("acme-one", f"Check {word(i)}"), answer)]
    assert hits(again) != []
    assert _ids(use_aws("b1")) == "region=us-east-1\0service_name=s3api\0parameters:bucket=b1"
    # one level down only, after the call's own
    assert _ids({"order_id": "A1", "params": {"inner": {"bucket": "deep"}, "region": "r"}}) == (
        "order_id=A1\0params:region=r"
    )
    assert _ids({"parameters": {}}) == _ids({"parameters": {"page": 2}}) == ""
    # a request's own id names no place, wherever it is and however it is spelled
    for args in ({"url": "https://api.example.com/orders/A-1001", "headers": {"X-Request-ID": "r1"}},
                 {"url": "https://api.example.com/orders/A-1001", "client_request_id": "r1"},
                 {"url": "https://api.example.com/orders/A-1001", "options": {"x-correlation-id": "c1"}}):
        assert _ids(args) == "", args
    assert _ids({"pipeline_id": "P-7"}) == "pipeline_id=P-7"  # a word inside no word
    order = {"id": "A-1001", "status": "pending", "note": "awaiting stock", "lines": [1, 2, 3]}
    fresh = [e for i in range(14) for e in step(
        "http_get", {"url": "https://api.example.com/orders/A-1001", "headers": {"X-Request-ID": f"{word(i)}-{i}"}},
        order)]
    assert hits(fresh) != []


@pytest.mark.parametrize("answer", [
    '{"error": "Order not found"}', {"detail": "Not found."}, "Order not found.", "404 Not Found",
    {"status": 404, "body": "missing"},
])
def test_guessed_ids_answering_not_found_are_a_hunt(answer: Any) -> None:
    trace = [e for i in range(14) for e in step("get_order", {"order_id": f"ORD-{1000 + i}"}, answer)]
    assert hits(trace) != []


def test_ids_are_names_that_say_so() -> None:
    assert _ids({"account_code": "801", "date": "2025-11-30"}) == "account_code=801"
    assert _ids({"entityId": "light.kitchen"}) == "entityId=light.kitchen"
    assert _ids({"b_id": 2, "a_id": 1}) == _ids({"a_id": 1, "b_id": 2}) == "a_id=1\0b_id=2"
    for key in ("paid", "grid", "hotkey", "valid", "page_number", "pageNumber", "request_id",
                "idempotency_key", "x" * 65 + "_id"):
        assert _ids({key: "v"}) == "", key
    assert _ids({"order_id": 10**5000}) == ""  # too large for an id; no exception
    assert _ids({f"k{i}_id": i for i in range(9)}) == ""  # more than a read names


def mcp(payload: Any, is_error: bool = False, structured: bool = True) -> dict[str, Any]:
    """An MCP CallToolResult as a client passes it through."""
    text = payload if isinstance(payload, str) else json.dumps(payload)
    out: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": is_error}
    if structured and not isinstance(payload, str):
        out["structuredContent"] = payload
    return out


def test_an_mcp_result_is_read_as_what_it_says() -> None:
    from streamguard.signals.facts import mcp_answer

    assert mcp_answer(mcp({"results": []}), None) == ({"results": []}, None)
    assert mcp_answer(mcp("plain text", structured=False), None) == ("plain text", None)
    assert mcp_answer(mcp("Permission denied", is_error=True), None) == (
        "Permission denied", "Permission denied")
    assert mcp_answer(mcp("x", is_error=True), "declared") == ("x", "declared")
    image = {"content": [{"type": "image", "data": "AAAA", "mimeType": "image/png"}]}
    assert mcp_answer(image, None) == (image, None)
    for other in ({"content": "text"}, {"content": [], "rows": 3}, {"content": ["a"]}):
        assert mcp_answer(other, None) is None


def test_reworded_searches_through_an_mcp_client_finding_nothing_are_a_stall() -> None:
    """Confluence searched through an MCP client for a runbook that does not exist, each
    CQL rewording answered "no results" with the query echoed back (`cqlQuery`), inside
    the CallToolResult the client passes through: the same nothing, again and again."""
    trace: list[Any] = []
    for n in range(12):
        cql = f'type=page AND title ~ "{word(n)} failover runbook"'
        trace += step("mcp__atlassian__searchConfluenceUsingCql",
                      {"cloudId": "b2f8d1c4-0a9e-4d7b-8c61-3e5f2a9d0b17", "cql": cql},
                      mcp({"results": [], "size": 0, "totalSize": 0, "cqlQuery": cql}))
    assert hits(trace) != []
    # the same searches finding a page each are a sweep of answers
    found = []
    for n in range(12):
        cql = f'type=page AND title ~ "{word(n)}"'
        found += step("mcp__atlassian__searchConfluenceUsingCql", {"cql": cql},
                      mcp({"results": [{"id": str(1000 + n), "title": word(n)}], "cqlQuery": cql}))
    assert hits(found) == []


def test_an_mcp_error_is_a_failure() -> None:
    """`isError: true` with no `error` field: the same write denied again and again is a
    failure loop."""
    denied = []
    for _ in range(8):
        denied += step("opcua_write", {"node": "ns=2;s=Filler.Speed", "value": 410},
                       mcp("BadUserAccessDenied (0x801F0000)", is_error=True))
    assert hits(denied, signal="failure-loop") != []


def test_an_argument_named_as_a_place_names_the_place_a_read_reads() -> None:
    """Twelve chillers' setpoints read by host through a Modbus tool, each answering 6.5 °C:
    `host` names the place, as `--host` does on a command line. The same chiller read
    again and again is the same answer."""
    answer = {"registers": [65], "scaled": [6.5], "unit": "°C", "scale": 0.1}
    sweep = [event for n in range(12) for event in step(
        "modbus_read_holding_registers",
        {"host": f"10.40.2.{21 + n}", "unit_id": 1, "address": 40101, "count": 1}, answer)]
    assert hits(sweep) == []
    again = [event for n in range(12) for event in step(
        "modbus_read_holding_registers",
        {"host": "10.40.2.21", "unit_id": 1, "address": 40101, "count": 1, "note": f"try {n}"},
        answer)]
    assert hits(again) != []


def web_search(query: str, urls: list[str], options: dict[str, Any] | None = None) -> list[Any]:
    """A web search through a runtime that calls it a read (`kind: "read"`)."""
    answer = {"query": query, "results": [
        {"title": f"Page {u[-6:]}", "url": u, "content": f"About {query} ..."} for u in urls]}
    return [ToolCall(session="s", tool="tavily_search", args={"query": query, "max_results": 5, **(options or {})},
                     kind="read"),
            ToolResult(session="s", tool="tavily_search", result=answer)]


SITES = [f"https://www.example{n}.org/iec-62443-4-{n % 3 + 1}" for n in range(6)]


def test_reworded_web_searches_that_find_only_pages_found_before_are_a_stall() -> None:
    """A research agent looking for a standard that does not exist: every rewording
    answers with the same five pages in another order. Nothing found, again and again."""
    hunt: list[Any] = []
    for n in range(14):
        rotated = SITES[n % 5:] + SITES[: n % 5]
        hunt += web_search(f"IEC 62443-4-3 security requirements {word(n)}", rotated[:5])
    assert hits(hunt) != []
    # a real survey finds new pages with every query, among some already found
    survey: list[Any] = []
    for n in range(14):
        survey += web_search(f"62443 part {word(n)}", [*SITES[:3], f"https://news{n}.example.com/a"])
    assert hits(survey) == []


def test_questions_answered_from_the_same_few_documents_are_no_stall() -> None:
    """A security questionnaire answered from a knowledge base of a few documents: every
    question finds the same handbook and report (other passages of them). The questions
    share no words: each is the next question, not the last one reworded."""
    questions = ["encryption at rest", "MFA for employees", "access reviews frequency",
                 "background checks", "security awareness training", "penetration testing",
                 "vulnerability scanning", "patch management SLA", "logging retention",
                 "incident response plan", "disaster recovery objectives", "subprocessor list",
                 "data residency", "password policy"]
    sweep: list[Any] = []
    for question in questions:
        sweep += web_search(question, SITES[:2])
    assert hits(sweep) == []
    # options sent with every search (Tavily's) are not its words
    with_options: list[Any] = []
    for question in questions:
        with_options += web_search(question, SITES[:2], options={"search_depth": "advanced", "topic": "general"})
    assert hits(with_options) == []
    # the same documents for one question reworded again and again: a stall
    hunt: list[Any] = []
    for n in range(14):
        hunt += web_search(f"student discount policy for {word(n)}", SITES[:2])
    assert hits(hunt) == [10]  # the eighth answer already held (the first two found the pages)


def kb_search(query: str, docs: list[str], passage: str = "") -> list[Any]:
    """A knowledge base's search (Onyx's shape): its documents named by id, no address,
    each with the passage that answered (the same ``passage`` for every document), as JSON
    text; the score moves with every query."""
    answer = {"top_documents": [
        {"document_id": d, "semantic_identifier": d.title(), "blurb": f"{passage} ({d})",
         "score": round(0.7 - 0.01 * n - 0.001 * len(query), 3)} for n, d in enumerate(docs)]}
    return [ToolCall(session="s", tool="run_search", args={"query": query}),
            ToolResult(session="s", tool="run_search", result=json.dumps(answer))]


KB_DOCS = ["bookstack__page__41", "bookstack__page__57", "gitea__ops/homelab__README.md"]


def test_reworded_searches_that_find_only_documents_found_before_are_a_stall() -> None:
    """A knowledge base's documents are named by their ids, not by addresses: a page that
    was never written, searched for in other words, finds the same three documents every
    time. The same question reworded is halted; a questionnaire of new questions answered
    from the same documents is not."""
    hunt: list[Any] = []
    for n in range(14):
        hunt += kb_search(f"IoT VLAN firewall rules {word(n)}", KB_DOCS, "VLANs: 10 LAN, 30 IoT")
    assert hits(hunt) == [9]  # the eighth answer after the first, which found the documents
    # a questionnaire on one policy: the questions share most of their words, but each is
    # answered by other passages of the same documents
    questions = [f"Is customer data encrypted {where}?" for where in (
        "at rest", "in transit", "in backups", "on employee laptops", "in logs", "in the data warehouse",
        "in test environments", "when exported", "in caches", "in queues", "in email", "in support tickets")]
    sweep: list[Any] = []
    for question in questions:
        sweep += kb_search(question, KB_DOCS, f"Policy on {question.split('encrypted ')[1]}")
    assert hits(sweep) == []
    # a help center's articles named by "id", the answer an object (not JSON text)
    articles: list[Any] = []
    for n in range(14):
        query = f"fee waiver for late payment {word(n)}"
        articles += [ToolCall(session="s", tool="search_knowledge_base", args={"query": query}),
                     ToolResult(session="s", tool="search_knowledge_base", result={"articles": [
                         {"id": 118 + 86 * k, "title": f"Fees and charges, part {k}", "score": 0.4 - 0.01 * k}
                         for k in range(3)]})]
    assert hits(articles) == [9]
    # a survey that finds a new document with every query is no stall
    survey: list[Any] = []
    for n in range(14):
        survey += kb_search(f"IoT VLAN firewall rules {word(n)}", [*KB_DOCS[:2], f"bookstack__page__{90 + n}"],
                            "VLANs: 10 LAN, 30 IoT")
    assert hits(survey) == []


def test_a_search_that_says_in_words_what_it_did_not_find_echoes_its_term() -> None:
    """An AutoCodeRover-style agent hunting a method that does not exist through five
    search tools, each answering in words with the term it was given ("Could not find
    method get_site_pages in the codebase."): the term is the call's echo, so the hunt is
    the same few answers again (before, every rewording was news and nothing fired)."""
    tools = [
        ("search_method", lambda t: ({"method_name": t}, f"Could not find method {t} in the codebase.")),
        ("search_method_in_file", lambda t: ({"method_name": t, "file_name": "wagtail/query.py"},
                                             f"There is no method with name `{t}` in file wagtail/query.py.")),
        ("search_code", lambda t: ({"code_str": f"def {t}("}, f"Could not find code def {t}( in the codebase.")),
    ]
    hunt: list[Any] = []
    for n in range(18):
        tool, make = tools[n % 3]
        args, answer = make(f"get_pages_for_{word(n)}_site")
        hunt += step(tool, args, answer)
    assert hits(hunt) == [11]  # the first answer of each tool is news, then eight stale
    # the same tools finding what they look for: each answer is news
    found: list[Any] = []
    for n in range(18):
        term = f"get_pages_for_{word(n)}_site"
        found += step("search_method", {"method_name": term},
                      f"Found method {term} in wagtail/models/pages.py: def {term}(self, site): ...")
    assert hits(found) == []


IOCS = ["cdn-telemetry-sync.net", "updates-msft-cdn.org", "paper-tiger-c2.top", "185.220.101.44",
        "91.219.236.12", "45.142.212.61", "4f1c0e7a9b2d3c6e8f", "9be2d41f77c05a13e0",
        "d03a7f6b2e1c98d4f5", "CVE-2024-3094", "203.0.113.77", "files-sync-cdn.io"]


def ioc_search(indicator: str, index: str = "proxy") -> list[Any]:
    return step("splunk_search",
                {"search": f'search index={index} earliest=-30d "{indicator}" | stats count by src_ip',
                 "output_mode": "json"},
                {"results": [], "resultCount": 0})


def test_a_sweep_of_indicators_that_finds_nothing_is_no_stall() -> None:
    """A threat hunt: each indicator of an advisory (domains, addresses, hashes, a CVE)
    searched once, and, as usual, none found. Each search looks for another thing, so each
    "nothing found" is that indicator's answer (before, halted at the eighth)."""
    sweep = [event for ioc in IOCS for event in ioc_search(ioc)]
    assert hits(sweep) == []
    # answered by an empty text, or searched as a field's value (KQL's `field:value`)
    empty = [event for ioc in IOCS for event in step(
        "splunk_search", {"search": f'search index=proxy "{ioc}" | stats count'}, "")]
    assert hits(empty) == []
    fields = [event for ioc in IOCS for event in step(
        "elastic_search", {"query": f"destination.ip:{ioc}", "index": "logs-*"},
        {"hits": {"total": 0, "hits": []}})]
    assert hits(fields) == []
    # one indicator searched again and again, in other words, finding nothing: a stall
    hunt = [event for n in range(12) for event in ioc_search("185.220.101.44", index=word(n))]
    assert hits(hunt) == [9]


def test_a_query_tool_that_varies_an_address_shaped_literal_in_one_failing_query_is_a_stall() -> None:
    """A KQL query re-sent with a new address-shaped literal each time and answered, as
    output, by the same column error: the literal changes nothing of the answer, and the
    loop is a stall (reading the indicators of a query tool's query as its places was
    tried and withdrawn: it left this unhalted)."""
    loop: list[Any] = []
    for n in range(14):
        loop += step("sentinel_kql_query",
                     {"workspace": "soc-prod", "query": f"AppRequests | where ClientIP == '10.20.{n}.7'"},
                     "Query failed: Failed to resolve column or scalar expression named 'ClientIP'")
    assert hits(loop) != []


@pytest.mark.parametrize(("query", "indicators"), [
    ('search index=dns query="*cdn-telemetry-sync.net"', "cdn-telemetry-sync.net"),
    ("dest_ip=185.220.101.44 | stats count", "185.220.101.44"),
    ("sha256=4f1c0e7a9b2d3c6e8f* | stats count by host", "4f1c0e7a9b2d3c6e8f"),
    ("CVE-2024-3094 xz backdoor", "CVE-2024-3094"),
    # a search's scope is no indicator: a site, a sender, an address's domain, a URL
    ("site:docs.acme.dev v4 migration", ""), ("from:contoso.com invoice", ""),
    ("from:billing@contoso.com", ""), ("https://github.com/acme/sdk/releases", ""),
    # nor are words, file names, plain numbers or a hex word
    ("parseConfig3", ""), ("settings.py config", ""), ("order 1234567890123456789", ""),
    ("deadbeefcafebabe", ""),
    # a field's value is (KQL), a name of code under a domain that is also a word is not
    ("destination.ip:185.220.101.44", "185.220.101.44"), ("dns.question.name:evil-c2.top", "evil-c2.top"),
    ("logger.info", ""), ("scipy.io loadmat", ""), ("request.site", ""), ("self.net", ""),
    ("files-sync-cdn.io", "files-sync-cdn.io"),
])
def test_the_indicators_a_search_looks_for(query: str, indicators: str) -> None:
    from streamguard.signals.result_stall import _indicators

    assert _indicators({"query": query}) == indicators


@pytest.mark.parametrize(("earlier", "query", "reworded"), [
    (["Bruno Le Maire Europe qui produit Le Monde 2019"], "Le Maire une Europe qui produit interview", True),
    (["encryption at rest"], "encryption in transit TLS version", False),
    (["student discount"], "students", False),  # one word: too little to tell
    (["IEC 62443-4-3 requirements"], "IEC 62443-4-3 standard scope", True),  # a number is a word
    (["encryption at rest"], "key rotation", False),
    ([], "anything at all", False),
])
def test_reworded_searches(earlier: list[str], query: str, reworded: bool) -> None:
    from streamguard.signals.result_stall import _query_words, _reworded

    queries = tuple(_query_words({"query": text}).to_bytes(32, "little") for text in earlier)
    assert _reworded(_query_words({"query": query}), queries) is reworded


def test_the_words_of_recent_searches_survive_a_snapshot() -> None:
    watchdog = Watchdog(parse_policy_set(WARN).base)
    state = watchdog.new_state("s")
    index = [s.id for s in watchdog.signals].index("result-stall")
    for n in range(6):
        for event in web_search(f"alpha beta gamma delta epsilon zeta eta theta {word(100 + 37 * n)}", SITES[:2]):
            watchdog.process(state, event)
    restored = watchdog.decode_state(watchdog.encode_state(state))
    assert restored.signals[index].queries == state.signals[index].queries
    assert len(state.signals[index].queries) == 4


def test_a_search_the_runtime_calls_a_read_is_still_a_search() -> None:
    """`kind: "read"` on `tavily_search`: its empty answers, the query echoed, are nothing
    found again and again, as a search's are."""
    empty: list[Any] = []
    for n in range(12):
        query = f"IEC 62443-4-3 {word(n)}"
        empty += [ToolCall(session="s", tool="tavily_search", args={"query": query}, kind="read"),
                  ToolResult(session="s", tool="tavily_search", result={"query": query, "results": []})]
    assert hits(empty) != []


@pytest.mark.parametrize(("tool", "search"), [
    ("tavily_search_results_json", True),  # LangChain's name: the word in the middle
    ("web_search_preview", True),
    ("vector_search_upsert", False),  # the verb of an act in the name: no search
    ("researcher_notes", False),  # "researcher" is no "search"
])
def test_a_tool_named_a_search_in_the_middle_is_a_search(tool: str, search: bool) -> None:
    """An unclassified name with the word "search" among its words: its empty answers,
    the query echoed, are nothing found again and again, as a search's are."""
    empty: list[Any] = []
    for n in range(12):
        query = f"Le Maire Europe qui produit {word(n)}"
        empty += [ToolCall(session="s", tool=tool, args={"input": query}),
                  ToolResult(session="s", tool=tool, result={"query": query, "results": []})]
    assert (hits(empty) != []) is search


def test_the_pages_searches_found_are_remembered_within_bounds() -> None:
    from streamguard.signals.result_stall import FOUND_URLS

    watchdog = Watchdog(parse_policy_set(WARN).base)
    state = watchdog.new_state("s")
    index = [s.id for s in watchdog.signals].index("result-stall")
    for n in range(100):
        for event in web_search(f"q{n}", [f"https://site{n}.example/{k}" for k in range(5)]):
            watchdog.process(state, event)
    assert len(state.signals[index].found_urls) == 4 * FOUND_URLS


def status_rounds(done_by_round: list[int], files: int = 12, news_first: bool = True) -> list[Any]:
    """``files`` processing jobs polled in rounds of parallel calls (every call of a round
    sent before any answer), ``done_by_round[r]`` of them finished at round ``r``."""
    trace: list[Any] = []
    for r, done in enumerate(done_by_round):
        ids = [f"file-{word(i + 1)}" for i in range(files)]
        trace += [ToolCall(session="s", tool="get_file_status", args={"fileId": f},
                           call_id=f"r{r}-{f}") for f in ids]
        answers = [ToolResult(session="s", tool="get_file_status", call_id=f"r{r}-{f}",
                              result={"fileId": f, "status": "PROCESSED" if i < done else "PROCESSING"})
                   for i, f in enumerate(ids)]
        # the answers that changed this round first (or last), the rest as they come
        changed = [a for i, a in enumerate(answers) if r and done_by_round[r - 1] <= i < done]
        rest = [a for a in answers if a not in changed]
        trace += changed + rest if news_first else rest + changed
    return trace


@pytest.mark.parametrize("news_first", [True, False])
def test_a_round_of_parallel_polls_that_moved_is_no_stall(news_first: bool) -> None:
    """Twelve files' processing polled in rounds: the finished ones asked again beside
    the one that just finished are eleven answers already held, but the round moved."""
    assert hits(status_rounds([0, 11, 12], news_first=news_first)) == []


def test_a_round_of_parallel_polls_that_did_not_move_trips_at_its_last_answer() -> None:
    trace = status_rounds([0, 11, 12, 12])
    engine = Engine(parse_policy_set(WARN))
    engine.process(TurnStart(session="s"))
    answers, got = 0, []
    for event in trace:
        answers += isinstance(event, ToolResult)
        got += [answers for o in engine.process(event) if isinstance(o, Alert) and o.signal == "result-stall"]
    assert got == [48]  # the twelfth stale answer of the fourth round, not the eighth


def test_the_same_polls_sent_one_at_a_time_are_judged_answer_by_answer() -> None:
    """Without the round (each call answered before the next), eight finished files asked
    again in a row are eight answers already held, whatever came before them."""
    parallel = status_rounds([0, 11, 12])
    calls = [e for e in parallel if isinstance(e, ToolCall)]
    results = {e.call_id: e for e in parallel if isinstance(e, ToolResult)}
    order = [e.call_id for e in parallel if isinstance(e, ToolResult)]
    serial = [x for c in order for x in (next(k for k in calls if k.call_id == c), results[c])]
    assert hits(serial) == [33]  # the third round's eighth finished file asked again


def test_a_round_left_unanswered_is_judged_when_the_next_call_is_sent() -> None:
    trace = status_rounds([0, 11, 12, 12])
    trace = trace[:-1]  # the fourth round's last answer never comes
    trace += step("list_dir", {"path": "/rx"}, result="a.zip\nb.zip\n")
    # (long-loop, which result-stall defers to, sees the fourth round repeat the third)
    no_long_loop = WARN.replace('"near-duplicate-calls"', '"near-duplicate-calls", "long-loop"')
    assert hits(trace, no_long_loop) == [49]  # on the next call: the round had no news


def test_a_round_survives_a_snapshot() -> None:
    watchdog = Watchdog(parse_policy_set(WARN).base)
    state = watchdog.new_state("s")
    trace = status_rounds([0, 11, 12, 12])
    cut = len(trace) - 4  # after the fourth round's eighth answer: the trip is held
    for event in trace[:cut]:
        watchdog.process(state, event)
    index = [s.id for s in watchdog.signals].index("result-stall")
    assert state.signals[index].held and state.signals[index].round_left == 4
    restored = watchdog.decode_state(watchdog.encode_state(state))
    assert restored.signals[index] == state.signals[index]
    got = [n for n, e in enumerate(trace[cut:]) for o in watchdog.process(restored, e)
           if isinstance(o, Alert) and o.signal == "result-stall"]
    assert got == [3]  # at the round's last answer, not at the first after the restore


@pytest.mark.parametrize(("payload", "empty"), [
    ({"people": [], "pagination": {"page": 7, "per_page": 25, "total_entries": 137, "total_pages": 6}}, True),
    ({"code": 200, "msg": "success", "data": {"total": 1843, "pageNo": 20, "pageSize": 100, "list": []}}, True),
    ('{"items": [], "offset": 400, "limit": 50}', True),
    ([], True),
    ({"people": [{"name": "Paul"}], "pagination": {"page": 6}}, False),
    ({"items": [], "next": "cursor-8f2a"}, True),  # one short string: still nothing on it
    ({"items": [], "a": "x", "b": "y", "c": "z", "d": "w"}, False),  # four strings: something
    ({"total": 3}, False),  # no list: no page
    ({"entry": [], "link": [{"url": "https://fhir.example/Patient?_getpagesoffset=750"}]}, False),
    ("[]x", False),
])
def test_an_empty_page(payload: Any, empty: bool) -> None:
    from streamguard.signals.result_stall import empty_page

    assert empty_page(payload) is empty


def pages(last: int, asked: int, filters: Callable[[int], str] | None = None) -> list[Any]:
    """A people search paged with `page` = 1, 2, ... ``asked``; pages past ``last`` are empty."""
    trace: list[Any] = []
    for page in range(1, asked + 1):
        found = [{"name": word(page * 10 + i)} for i in range(3)] if page <= last else []
        args = {"titles": ["VP Finance"], "country": filters(page) if filters else "DE", "page": page}
        trace += step("apollo_search_people", args,
                      {"people": found, "pagination": {"page": page, "per_page": 25, "total_pages": last}})
    return trace


def test_pages_asked_past_the_end_are_nothing_found() -> None:
    # six pages of people, then page 7, 8, ... each with nobody on it
    assert hits(pages(6, 13)) == []
    assert hits(pages(6, 14)) == [14]  # the eighth empty page in a row


def test_one_empty_page_per_listing_is_a_sweep() -> None:
    """The first page of twelve different listings, each empty (each answer naming its
    listing): no page was asked twice, so none is past an end."""
    trace: list[Any] = []
    for n in range(12):
        trace += step("get_people", {"country": word(n), "page": 1},
                      {"people": [], "country": word(n), "pagination": {"page": 1, "total_pages": 0}})
    assert hits(trace) == []


def test_an_empty_page_of_another_listing_is_not_the_next_page() -> None:
    # page 2 of twelve listings in turn (the filter changes each time): no walk past an end
    trace: list[Any] = []
    for n in range(12):
        trace += step("list_invoices", {"customer": f"cus-{word(n)}", "page": 1},
                      {"invoices": [{"id": word(n)}], "page": 1})
        trace += step("list_invoices", {"customer": f"cus-{word(n)}", "page": 2},
                      {"invoices": [], "page": 2})
    assert hits(trace) == []


def test_an_error_that_differs_only_in_its_request_id_is_the_same_failure() -> None:
    """A rejected contact re-sent with cosmetic changes: HubSpot's error names a new
    correlation id each time, the failure is the same."""
    trace: list[Any] = []
    for n in range(12):
        digest = hashlib.md5(bytes([n])).hexdigest()  # a new request id on every attempt
        request = f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:]}"
        trace += step("hubspot_create_contact", {"properties": {"email": "h.w@x..co.uk", "note": word(n)}},
                      error='DataError: [400] Property values were not valid: [{"isValid":false,'
                            '"message":"Email address h.w@x..co.uk is invalid"}] (category: '
                            f"VALIDATION_ERROR, correlationId: {request})")
    assert hits(trace) == [9]  # the eighth failure like the first
    # errors that differ in what they say are not one failure, ids or not
    distinct = [e for n in range(12) for e in step(
        "hubspot_create_contact", {"properties": {"email": f"{word(n)}@x..co.uk"}},
        error=f"DataError: [400] Property {word(n)} invalid (correlationId: {n:08x}-f88c-73ea-579a-a870ee87d791)")]
    assert hits(distinct) == []


@pytest.mark.parametrize(("text", "masked"), [
    ("correlationId: c2347299-f88c-73ea-579a-296cde72a285", True),
    ("trace 4bf92f3577b34da6a3ce929d0e0e4736 failed", True),
    ("commit deadbeefcafebabe", False),  # sixteen hex letters and no digit: a word, not an id
    ("sha 1234567890123456", False),  # digits alone: masked as digits anyway
])
def test_opaque_ids_in_errors(text: str, masked: bool) -> None:
    from streamguard.signals.result_stall import _OPAQUE_ID

    assert (_OPAQUE_ID.search(text) is not None) is masked


def test_pages_asked_through_an_http_tools_params_are_pages() -> None:
    """An HTTP tool whose page number sits in its `params`: the same listing, pages 7,
    8, 9... of six, each empty, is a walk past the end; twelve listings' first pages
    (another filter each time) are not."""
    def get(page: int, line: str = "commercial", rows: int = 0) -> list[Any]:
        return step("ams_get_policies",
                    {"method": "GET", "url": "https://api.example/v2/policies",
                     "params": {"lob_type": line, "page": page, "per_page": 50}},
                    {"data": [{"policy_id": f"P-{page}-{i}"} for i in range(rows)], "page": page,
                     "lob_type": line, "total_pages": 6, "has_more": page < 6})
    walk = [e for page in range(1, 7) for e in get(page, rows=3)]
    walk += [e for page in range(7, 16) for e in get(page)]
    assert hits(walk) == [14]  # the eighth page past the end
    firsts = [e for n in range(12) for e in get(1, line=word(n))]
    assert hits(firsts) == []


@pytest.mark.parametrize("page", [2**64, -(2**63) - 1, 10**30, 2**62])
def test_a_page_number_of_any_size_leaves_the_session_snapshotable(page: int) -> None:
    watchdog = Watchdog(parse_policy_set(WARN).base)
    state = watchdog.new_state("s")
    for n in range(3):
        for event in step("list_items", {"q": "x", "page": page + n}, {"items": []}):
            watchdog.process(state, event)
    restored = watchdog.decode_state(watchdog.encode_state(state))
    index = [s.id for s in watchdog.signals].index("result-stall")
    assert restored.signals[index] == state.signals[index]


def test_an_echoed_argument_holding_an_id_is_still_the_echo() -> None:
    """Guessed object keys under one upload's UUID: each error echoes the key it could not
    find, UUID and all. The echo is masked whole, so the guesses are one failure."""
    trace: list[Any] = []
    for n in range(12):
        key = f"uploads/3f2a9c1e-7b4d-4e8a-9c2f-1a2b3c4d5e6f/report_{word(n + 100)}.pdf"
        trace += step("s3_get_object", {"bucket": "reports", "key": key},
                      error=f"NoSuchKey: The specified key does not exist: {key}")
    assert hits(trace) == [9]  # the eighth guess answered like the first


def test_a_fresh_question_sent_beside_a_rewording_is_judged_by_its_own_words() -> None:
    """Questions sent in parallel pairs, each with a rewording of the one before: every
    answer names the same two known pages. The fresh question is no hunt; only the
    rewordings could be, and they alternate with news-free fresh ones, which stay apart."""
    questions = ["encryption at rest", "MFA for employees", "access reviews frequency",
                 "background checks", "security awareness training", "penetration testing",
                 "vulnerability scanning", "patch management SLA", "logging retention",
                 "incident response plan", "disaster recovery objectives", "data residency"]
    trace: list[Any] = []
    for n, question in enumerate(questions):
        pair = [question, f"{questions[n - 1]} policy details"] if n else [question]
        calls = [ToolCall(session="s", tool="tavily_search", args={"query": q}, call_id=f"q{n}-{i}", kind="read")
                 for i, q in enumerate(pair)]
        answers = [ToolResult(session="s", tool="tavily_search", call_id=c.call_id, result={
            "query": q, "results": [{"title": "Handbook", "url": u, "content": "..."} for u in SITES[:2]]})
            for c, q in zip(calls, pair, strict=True)]
        trace += calls + answers
    assert hits(trace) == []


def _rule_through_the_dialog(sender: str, folder: str) -> list[Any]:
    """One mail rule set up through a desktop client's dialog: the same clicks answered
    the same way for every rule, the sender typed and the folder picked."""
    trace: list[Any] = []
    for loc, answer in (((1212, 96), "Clicked on Button 'Rules' at (1212,96)."),
                        ((1240, 160), "Clicked on MenuItem 'Manage Rules & Alerts...' at (1240,160)."),
                        ((688, 244), "Clicked on Button 'New Rule...' at (688,244).")):
        trace += step("Click-Tool", {"loc": list(loc), "button": "left"}, answer)
    trace += step("Type-Tool", {"loc": [760, 640], "text": sender}, f"Typed {sender} on Edit 'From ->' at (760,640).")
    trace += step("Click-Tool", {"loc": [1018, 712], "button": "left"}, "Clicked on Button 'OK' at (1018,712).")
    trace += step("Click-Tool", {"loc": [640, 300], "button": "left"}, f"Clicked on TreeItem '{folder}' at (640,300).")
    trace += step("Click-Tool", {"loc": [946, 690], "button": "left"}, "Clicked on Button 'Finish' at (946,690).")
    return trace


def test_one_procedure_gone_through_for_each_item_is_no_stall() -> None:
    """Six mail rules made through one dialog: the same clicks, answered "Clicked on ..."
    the same way for every rule. The answers restate the act; they show nothing of the
    screen, so they are no evidence of a stall either way."""
    trace: list[Any] = []
    for n in range(6):
        trace += _rule_through_the_dialog(f"{word(n)}@example.com", f"Folder {word(n)}")
    assert hits(trace) == []


def test_the_same_procedure_whose_screen_never_changes_still_stalls() -> None:
    """The same clicks, lap after lap, each lap ending with a look at the screen that
    shows what it showed the first time: the look is stale, the clicks are neither.
    (The signals that see the laps themselves are off: this is about the answers.)"""
    trace: list[Any] = []
    for _ in range(10):
        trace += _rule_through_the_dialog("a@example.com", "Inbox")[:6]
        trace += step("State-Tool", {"use_vision": False},
                      "Focused App: Rules and Alerts\nInteractive Elements:\n0|Button|New Rule...|(688,244)")
    answers_only = WARN.replace(
        '"near-duplicate-calls"]',
        '"near-duplicate-calls", "alternating-tool-cycle", "long-loop", "repeated-tool-call",'
        ' "dominant-tool-call"]')
    assert hits(trace, answers_only) != []
    # the same laps with a new screen each time (a rule added to the list) move
    moving: list[Any] = []
    for n in range(10):
        moving += _rule_through_the_dialog("a@example.com", "Inbox")[:6]
        moving += step("State-Tool", {"use_vision": False}, f"Focused App: Rules and Alerts\n{n + 1} rules")
    assert hits(moving, answers_only) == []


@pytest.mark.parametrize(("answer", "act"), [
    ("Clicked on Button 'OK' at (1018,712).", True), ("Typed text into element 'Result'.", True),
    ("Pressed key '{Enter}' on element 'Sample ID'.", True), ("double-clicked cell B4", True),
    ("Successfully tapped element 12", True), ("Scrolled down 3 pages", True),
    ("Clicked element 'Save'. The dialog says: " + "x" * 200, False),
    ("Clicked on Button 'Save' at (10,20). Dialog: Error - session expired, sign in again.", False),
    ("Click failed: element not found", False), ("Typing...", False),
    ("Focused App: Rules and Alerts", False), ("é" * 150, False),
])
def test_an_answer_that_only_reports_the_act(answer: str, act: bool) -> None:
    event = ToolResult(session="s", tool="Click-Tool", result=answer)
    assert reports_act(ResultView(event, False, 1, len(answer))) is act
    # a failure that says it clicked is a failure, read as any
    failed = ToolResult(session="s", tool="Click-Tool", result=answer, error="element not found")
    assert not reports_act(ResultView(failed, True, 0, len(answer)))


@pytest.mark.parametrize("answer", [
    "Dropped table staging_orders", "Released lock deploy-prod", "Selected 0 rows",
    "Entered an invalid state; nothing was saved", "Clicked on Button 'OK' at (1018,712).",
])
def test_what_a_tool_that_is_no_interface_act_says_is_read_as_any_answer(answer: str) -> None:
    event = ToolResult(session="s", tool="run_maintenance", result=answer)
    assert not reports_act(ResultView(event, False, 1, len(answer)))


def test_json_text_that_says_error_in_a_field_is_read_as_its_object() -> None:
    from streamguard.signals.result_stall import says_missing

    annotations = '[{"context": "rspec", "style": "error", "body_html": "1 failure"}]'
    assert not says_missing(annotations)
    assert says_missing('[{"message": "Not Found"}]')
    assert says_missing('{"errorMessages": ["Issue does not exist or you do not have permission"], "errors": {}}')
    assert says_missing('{"result": {"error": "Order not found"}}')
    assert says_missing('{"ok": false, "error_message": "Table not found"}')
    assert says_missing('{"error": "Build not found"}')
    # a JSON-text object is read as the object it is, the same as a structured answer
    assert not says_missing('{"available": 0, "backorder": true, "warehouse": "unknown"}')
    assert not says_missing({"available": 0, "backorder": True, "warehouse": "unknown"})
    assert says_missing('Error: relation "builds" does not exist')
    assert says_missing('[{"style": "error"} cut off')  # not JSON: its words decide


def test_a_search_over_builds_by_number_keeps_each_builds_answer() -> None:
    """A flaky test triaged over twenty builds' annotations, fetched through a tool read
    as a search (`list_*`), five at a time: the same failure in build after build is
    the data being gathered, each answer that build's. The same build asked again and
    again is the same answer."""
    failure = '[{"context": "rspec", "style": "error", "body_html": "rspec ./spec/jobs/rollup_spec.rb:31"}]'
    trace: list[Any] = []
    for first in range(18800, 18820, 5):
        calls = [ToolCall(session="s", tool="list_annotations", call_id=f"c{n}",
                          args={"pipeline_slug": "api", "build_number": str(n)})
                 for n in range(first, first + 5)]
        trace += calls + [ToolResult(session="s", tool="list_annotations", call_id=c.call_id, result=failure)
                          for c in calls]
    assert hits(trace) == []
    again = step("list_annotations", {"pipeline_slug": "api", "build_number": "18800"}, failure) * 12
    assert hits(again, WARN.replace('"]\n', '", "repeated-tool-call", "dominant-tool-call"]\n')) != []


def _create_and_status(name: str, lap: int, status: str) -> list[Any]:
    """A create request answered by a fresh request token, then the status of that token."""
    token = hashlib.sha256(f"{name}{lap}".encode()).hexdigest()[:32]
    return (step("create_resource", {"type": "AWS::RDS::DBSubnetGroup", "name": name},
                 {"OperationStatus": "IN_PROGRESS", "RequestToken": token})
            + step("get_resource_request_status", {"request_token": token},
                   {"OperationStatus": status, "StatusMessage": "AZ coverage: add a second AZ"
                    if status == "FAILED" else "created"}))


def test_the_same_write_re_sent_and_checked_by_its_new_token_is_futile() -> None:
    """One create request re-sent as it was, each time answered by a new request token
    whose status says FAILED for the same reason: the same check of the same write,
    whatever the token, and the writes are futile."""
    trace = [e for lap in range(10) for e in _create_and_status("orders-db", lap, "FAILED")]
    # (the status call names the token the create made again just handed back, so the
    # laps are one and the cycle detector halts them first: docs/signals.md, "Ids a write
    # hands back"; without it, the futile writes)
    assert [a.signal for a in alerts(trace)] == ["alternating-tool-cycle"]
    no_cycle = WARN.replace('"]\n', '", "alternating-tool-cycle"]\n')
    assert [a.detail["rule"] for a in alerts(trace, no_cycle) if a.signal == "result-stall"] == ["futile_writes"]
    # different resources created one after the other, each checked: no futile write
    sweep = [e for lap in range(10) for e in _create_and_status(f"db-{word(lap)}", lap, "SUCCESS")]
    assert hits(sweep) == []
    # the same create re-sent until it took: its status moved, nothing futile
    retried = [e for lap in range(4) for e in _create_and_status("orders-db", lap, "FAILED")]
    retried += _create_and_status("orders-db", 9, "SUCCESS")
    assert hits(retried) == []


@pytest.mark.parametrize(("tool", "answer", "act"), [
    ("click_at", {"status": "ok", "element": "button 'Submit claim'"}, True),
    ("type_text_at", {"status": "ok", "field": "Trip date"}, True),
    ("press_key", "OK", True),
    ("click_at", {"status": "error", "element": "Submit"}, False),
    ("get_claim", {"status": "ok", "field": "Trip date"}, False),
    ("type_text_at", {"status": "ok", "page": "x" * 300}, False),
])
def test_a_bare_success_of_a_tool_named_by_an_interface_act(tool: str, answer: Any, act: bool) -> None:
    size = len(answer) if isinstance(answer, str) else len(json.dumps(answer))
    assert reports_act(ResultView(ToolResult(session="s", tool=tool, result=answer), False, 1, size)) is act


def test_a_form_filled_per_claim_through_computer_use_actions_is_no_stall() -> None:
    """Eight mileage claims entered through one form with a computer-use model's actions
    (`navigate`, `type_text_at`, `click_at`), each answered with a bare "ok" naming the
    field or element, and the confirmation read per claim: the same acts answered the
    same way for every claim, not a stall."""
    trace: list[Any] = []
    for n in range(8):
        trace += step("navigate", {"url": "https://claims.example/new"}, {"status": "loaded", "title": "New Claim"})
        for field, y in (("Trip date", 352), ("Route", 435), ("Miles", 517), ("Purpose", 599)):
            text = "Client site visit" if field == "Purpose" else f"{field} {word(n)}"
            trace += step("type_text_at", {"x": 285, "y": y, "text": text}, {"status": "ok", "field": field})
        trace += step("click_at", {"x": 700, "y": 842}, {"status": "ok", "element": "button 'Submit claim'"})
        trace += step("read_page", {"selector": ".alert"}, {"text": f"Claim submitted. Reference MC-{word(n)}"})
    assert hits(trace) == []


def test_a_deploy_after_each_edit_answered_succeeded_is_no_futile_write() -> None:
    """Edit (new content each time), the same deploy, its status SUCCEEDED, then the smoke
    tests failing fewer each round: the status answers for the edit and the deploy, so
    the same "SUCCEEDED" after each is the answer hoped for."""
    trace: list[Any] = []
    for n in range(8):
        trace += step("edit_file", {"path": "svc.py", "content": f"fix {word(n)}"}, "File written successfully.")
        trace += step("deploy_service", {"service": "checkout"}, {"deployment": "queued"})
        trace += step("get_deployment_status", {"service": "checkout"}, {"status": "SUCCEEDED"})
        trace += step("run_smoke_tests", {"suite": "checkout"}, f"{8 - n} failed, {n} passed")
    assert "futile_writes" not in [a.detail.get("rule") for a in alerts(trace) if a.signal == "result-stall"]


def test_the_write_re_sent_and_failing_is_counted_once_per_failure() -> None:
    from streamguard.watchdog import Watchdog as _W  # noqa: F401  (the engine below builds one)

    engine = Engine(parse_policy_set(WARN))
    engine.process(TurnStart(session="s"))
    for event in step("create_resource", {"name": "db"}, {"RequestToken": "t1"}):
        engine.process(event)
    for event in step("create_resource", {"name": "db"}, error="AlreadyExists: db"):
        engine.process(event)
    state = next(x for x in engine.sessions["s"].signals if type(x).__name__ == "ResultStallState")
    assert state.futile == 0


@pytest.mark.parametrize(("tool", "act"), [
    ("Click-Tool", True), ("type_into_element", True), ("click_at", True), ("type_text_at", True),
    ("browser_click", True), ("press_key", True), ("keyboard_input", True), ("mouse_move", True),
    ("type_check", False), ("get_content_type", False), ("key_rotate", False),
    ("long_running_job_status", False), ("get_click_stats", False), ("tap_water_quality", False),
])
def test_tools_named_by_an_interface_act(tool: str, act: bool) -> None:
    from streamguard.signals.result_stall import _ui_act_tool

    assert _ui_act_tool(tool) is act


def test_a_search_over_issues_by_a_structured_filter_keeps_each_issues_answer() -> None:
    """A JQL filter per issue (`key = ENG-9xx`), each answered "Done": twelve answers, one
    per issue; the same term hunted under a search's term argument is still one hunt."""
    trace: list[Any] = []
    for n in range(12):
        trace += step("search_issues", {"jql": f"key = ENG-9{n:02d}"}, '[{"status": "Done"}]')
    assert hits(trace) == []
    hunt: list[Any] = []
    for n in range(12):
        hunt += step("search_docs", {"keyword": f"ORD-10{n:02d}"}, "No matches found")
    assert hits(hunt) != []


@pytest.mark.parametrize(("flags", "action", "act"), [
    (FLAG_RUNNER | FLAG_WRITE, "left_click", True),   # a computer-use click: "clicked"
    (FLAG_RUNNER | FLAG_WRITE, "keypress", True),
    (FLAG_RUNNER, "type", False),                     # a shell's `type status.txt`: no act
    (FLAG_RUNNER | FLAG_WRITE, "screenshot", False),  # a look, not an act
])
def test_a_computer_use_act_reports_itself(flags: int, action: str, act: bool) -> None:
    event = ToolResult(session="s", tool="computer", result="clicked")
    view = ResultView(event, False, 1, 7, call_key=1, call_flags=flags, action=action)
    assert reports_act(view) is act


def test_edits_whose_build_fails_the_same_way_at_another_time_are_futile() -> None:
    """An agent editing a copy of a model the build never reads: every build prints the
    same error under a new time of day ("09:21:03  Database Error in model stg_orders").
    The time is when the run printed it, not what it found: five edits the check answers
    alike are futile (before, every answer was new by its clock and nothing fired). A
    build whose error changes after each edit is work."""
    def build(n: int, error: str) -> str:
        return (f"09:{21 + n:02d}:0{n % 10}  Database Error in model stg_orders (models/stg_orders.sql)\n"
                f"  {error}\n  compiled code at target/run/stg_orders.sql")

    futile: list[Any] = []
    for n in range(8):
        futile += step("replace_string_in_file", {"filePath": "copy/stg_orders.sql", "newString": word(n)},
                       "The file copy/stg_orders.sql has been edited.")
        futile += step("run_in_terminal", {"command": "dbt build -s stg_orders 2>&1 | tail -n 4"},
                       build(n, "division by zero: 0 / 0"))
    assert hits(futile) == [12]
    work: list[Any] = []
    for n in range(8):
        work += step("replace_string_in_file", {"filePath": "models/stg_orders.sql", "newString": word(n)},
                     "The file models/stg_orders.sql has been edited.")
        work += step("run_in_terminal", {"command": "dbt build -s stg_orders 2>&1 | tail -n 4"},
                     build(n, f"column {word(n)} not found"))
    assert hits(work) == []


def test_an_update_a_sync_reverts_read_back_with_a_new_modified_time_is_futile() -> None:
    """A CRM contact's phone updated (in five formats) and read back, a sync reverting it
    each time: the read answers the old value under a new `date_modified`. The time it was
    touched moves by itself; the answer does not (before, every read was news by its
    timestamp and nothing fired). Times that are the data (a calendar's free slots) are
    compared as they are: booking slot after slot is no futile write."""
    def read(n: int, phone: str) -> dict[str, Any]:
        return {"id": "5e1b9c70", "phone_work": phone,
                "date_modified": f"2025-11-18T14:45:{n:02d}-06:00", "modified_by_name": "erp_sync"}

    reverted: list[Any] = []
    for n in range(8):
        reverted += step("sugar_update_record", {"id": "5e1b9c70", "fields": {"phone_work": f"409-555-{word(n)}"}},
                         {"id": "5e1b9c70", "status": "updated"})
        reverted += step("sugar_get_record", {"id": "5e1b9c70", "fields": "phone_work,date_modified"},
                         read(n, "(409) 555-0112"))
    assert hits(reverted) == [12]
    booking: list[Any] = []
    for n in range(8):
        booking += step("send_invite", {"candidate_id": f"C-{word(n)}", "start": f"slot {n}"},
                        {"status": "queued", "message_id": f"SM{word(n)}"})
        booking += step("scheduling_find_availability", {"event_id": "EVT-DC7", "window": "afternoon"},
                        {"slots": [f"2025-11-12T{14 + (n + k) // 3:02d}:{20 * ((n + k) % 3):02d}:00-08:00"
                                   for k in range(5)]})
    assert hits(booking) == []


def test_a_check_asked_again_after_the_user_spoke_is_no_futile_write() -> None:
    """Colleagues asking one after another whether the VPN is down: the service's health
    read for each (its `updated_at` new, its status the same), then each linked to the
    incident. The read answers the colleague, not the link: no futile writes. The same
    rounds without anyone asking are compared but for the timestamp."""
    from streamguard.events import Text

    def rounds(users: bool) -> list[Any]:
        trace: list[Any] = []
        for n in range(8):
            if users:
                trace.append(Text(session="s", role="user", text=f"{word(n)}: is the vpn down?"))
            trace += step("get_service_health", {"service": "Remote Access VPN"},
                          {"status": "major_outage", "updated_at": f"2025-10-30T07:{10 + n:02d}:00Z"})
            trace += step("update_incident", {"ticket_id": 48213, "add_requester": word(n)},
                          {"linked": True, "requester_count": 15 + n})
        return trace

    assert hits(rounds(users=True)) == []
    assert hits(rounds(users=False)) != []


def test_review_shapes_that_must_stay_news() -> None:
    """Shapes where the rules of this change must not reach: a count that moves in a JSON
    text check after each scale-up; search results named by small ids whose contents
    differ; a timer's next run further on in a line that opens with the log's time."""
    from streamguard.events import Text

    scale: list[Any] = []
    for n in range(8):
        scale += step("scale_deployment", {"name": "api", "replicas": 2 + n}, {"status": "accepted"})
        scale += step("get_deployment", {"name": "api"},
                      json.dumps({"ready_replicas": 2 + n, "updated_at": f"2025-01-01T00:00:{n:02d}Z"}))
    assert hits(scale) == []
    flights: list[Any] = []
    for n in range(12):
        flights += [Text(session="s", role="user", text="any cheaper?")] if n == 6 else []
        flights += step("search_flights", {"query": f"cheap flights lisbon berlin {word(n)} morning"},
                        {"results": [{"id": k + 1, "flight": f"TP{540 + 10 * n + k}", "price": 89 + 7 * n + k}
                                     for k in range(3)]})
    assert hits(flights) == []
    timers: list[Any] = []
    for n in range(8):
        timers += step("set_timer", {"unit": "backup.timer", "at": f"0{n}:30"}, "OK")
        timers += step("bash", {"command": "systemctl list-timers backup.timer"},
                       f"09:21:03 list-timers\nnext run 0{n}:30:00 backup.timer")
    assert hits(timers) == []


def test_a_grep_tool_is_a_search_as_grep_through_a_shell_is() -> None:
    """Claude Code's `Grep` was a read (the verification machine's defaults name `grep`
    so), its answer kept with the path it named: a flag file looked for under a dozen
    paths and patterns, each "No files found" or "No matches found", was a new place every
    time, and the hunt was never halted. Read as the search it is, that nothing is found
    again; a sweep whose greps each find files is news."""
    patterns = [("THM\\{", "/"), ("thm\\{", "/var"), ("THM", "/opt"), ("T.H.M", "/"),
                ("flag", "/home"), ("THM\\{[^}]+\\}", "/var/www"), ("FLAG", "/srv"), ("thm", "/etc"),
                ("flag\\{", "/tmp"), ("VEhNe", "/"), ("THM", "/root"), ("secret", "/mnt")]
    hunt: list[Any] = []
    for n, (pattern, path) in enumerate(patterns):
        hunt += step("Grep", {"pattern": pattern, "path": path, "output_mode": "files_with_matches"},
                     "No files found" if n % 2 else "No matches found")
    assert hits(hunt) != []
    found: list[Any] = []
    for n, (pattern, path) in enumerate(patterns):
        found += step("Grep", {"pattern": pattern, "path": path, "output_mode": "files_with_matches"},
                      f"{path.rstrip('/')}/{word(n)}/config.{word(n + 3)}.yaml")
    assert hits(found) == []


def test_a_calculators_answer_is_its_arguments_own() -> None:
    """A Gordon-growth grid filled with `subtract` and `divide` calls: cells share their
    denominators, so the same quotient comes back for another row and one division is
    asked again now and then. A calculation answers its own arguments, so the grid is no
    stall; the same calculation asked again and again still is."""
    from streamguard.signals.result_stall import _is_calculation

    assert all(_is_calculation(t) for t in ("divide", "subtract", "calculate", "Calculator", "calculator_add"))
    assert not any(_is_calculation(t) for t in ("add_user", "is_prime_customer", "get_math_score", "tool"))
    grid: list[Any] = []
    for r in (0.065, 0.07, 0.075, 0.08):
        for g in (0.03, 0.035, 0.04, 0.045):
            spread = round(r - g, 3)
            grid += step("subtract", {"a": r, "b": g}, json.dumps({"operation": "subtraction", "result": spread}))
            grid += step("divide", {"a": 2.04, "b": spread},
                         json.dumps({"operation": "division", "result": round(2.04 / spread, 6)}))
    assert hits(grid) == []
    again: list[Any] = []
    for _ in range(12):
        again += step("calculate", {"expression": "2.04 / (0.07 - 0.035)"}, "58.285714")
        again += step("calculate", {"expression": "2.04 / (0.075 - 0.035)"}, "51.0")
    assert [a for a in alerts(again) if a.severity == "critical"] != []


def test_the_object_a_gh_view_reads_is_its_place() -> None:
    """Twenty CI runs' jobs read with `gh run view <id> --json jobs`, most answering "all
    success": the run id is the object read (the repository flag is the same for all), so
    the sweep is no stall. The same run viewed again and again after it finished still is."""
    from streamguard.signals.result_stall import _GH_OBJECT

    assert _GH_OBJECT.findall("gh run view 18898679055 --repo k/k --json jobs") == [("run", "view", "18898679055")]
    assert _GH_OBJECT.findall("cd repo && gh pr view 12 --comments") == [("pr", "view", "12")]
    assert _GH_OBJECT.findall("echo gh run view 5") == []
    jobs = "lint\tsuccess\ntest (ubuntu)\tsuccess\ntest (macos)\tsuccess\n"
    sweep: list[Any] = []
    for n in range(20):
        sweep += step("bash", {"command": f"gh run view {18898679055 - n * 977} --repo k/k --json jobs --jq '.jobs[]'"},
                      jobs)
    assert hits(sweep) == []
    again: list[Any] = []
    for n in range(12):
        again += step("bash", {"command": f"gh run view 18898679055 --repo k/k --json jobs {'-q .' if n % 2 else ''}"},
                      jobs)
    assert [a for a in alerts(again) if a.severity == "critical"] != []


COUNTERPARTIES = ["Harbor Freight Logistics LLC", "Nordlys Shipping AS", "Blue Mesa Dental PC",
                  "Kestrel Agritech Ltd", "Amber Coast Imports Inc", "Riverside Pediatrics PLLC",
                  "Orion Tooling GmbH", "Sable & Finch LLP", "Cedar Lane Bakery LLC",
                  "Polaris Marine Supply", "Greenfield Solar LLC", "Tidewater Seafood Inc",
                  "Copperline Electric", "Vantage Point Realty", "Ironbridge Fabrication"]


STALL_ONLY = WARN.replace('"near-duplicate-calls"]', '"near-duplicate-calls", "repeated-tool-call", "failure-loop"]')


def critical(trace: list[Any]) -> list[str]:
    return [a.signal for a in alerts(trace) if a.severity == "critical"]


def screening(names: list[str], listing: Any = None) -> list[Any]:
    """A batch read (``listing``), then one sanctions search per name, each "no hits"."""
    trace: list[Any] = []
    if listing is not None:
        trace += step("onboarding_get_batch", {"batch_id": "OB-1207"}, listing)
    for name in names:
        trace += step("screening_search", {"query": name, "lists": ["OFAC_SDN", "UN", "EU"], "min_score": 0.75},
                      {"hits": [], "total": 0, "lists_version": "2025-12-03"})
    return trace


def test_a_sweep_through_what_a_listing_named_is_each_items_answer() -> None:
    """Fifteen counterparties of an onboarding batch screened one by one, each "no hits":
    the names were handed over by the batch's answer, not guessed, so each "nothing found"
    is that name's answer. The same names never listed are reworded guesses found nothing
    for (the hunt), one listed name screened again and again is the same answer, and so is
    the batch swept a second time."""
    batch = {"batch_id": "OB-1207", "counterparties": [
        {"cp_id": f"CP-{3300 + i}", "name": name.upper(), "country": "DE"} for i, name in enumerate(COUNTERPARTIES)]}
    assert hits(screening(COUNTERPARTIES, batch)) == []  # (listed in capitals, sent as written)
    assert hits(screening(COUNTERPARTIES, json.dumps(batch))) == []  # JSON text: the same
    guessed = hits(screening(COUNTERPARTIES))
    assert guessed == [9]  # the first "no hits", then eight more
    # listed only as a plain list of names
    assert hits(screening(COUNTERPARTIES, {"names": COUNTERPARTIES})) == []
    # the listing read lists other names: the hunt, one call later
    others = {"counterparties": [{"name": f"Other Party {word(i)}"} for i in range(15)]}
    assert hits(screening(COUNTERPARTIES, others)) == [guessed[0] + 1]
    assert critical(screening([COUNTERPARTIES[0]] * 12, batch)) == ["repeated-tool-call"]
    # ... and result-stall's own rule, with the call-keyed signals off: the same name again
    assert hits(screening([COUNTERPARTIES[0]] * 12, batch), STALL_ONLY) == [guessed[0] + 1]
    # the second lap: each name's answer again
    assert hits(screening(COUNTERPARTIES * 2, batch)) == [1 + len(COUNTERPARTIES) + 8]


def buckets(names: list[str], listed: list[str] | None, error: str) -> list[Any]:
    trace: list[Any] = []
    if listed is not None:
        trace += step("s3_list_buckets", {}, {"Buckets": [{"Name": b, "CreationDate": "2023-08-03T17:20:00Z"}
                                                          for b in listed]})
    for bucket in names:
        trace += step("s3_get_bucket_lifecycle_configuration", {"Bucket": bucket}, error=error)
    return trace


def test_a_resource_type_the_cluster_lacks_answers_every_listed_namespace_alike() -> None:
    """`the server could not find the requested resource` says the cluster has no such
    kind of resource: every namespace answers it alike, so a sweep of them is no news."""
    namespaces = [f"team-{word(i)}" for i in range(16)]
    trace = step("Bash", {"command": "kubectl get ns -o name"}, "\n".join(namespaces) + "\n")
    for ns in namespaces:
        trace += step("Bash", {"command": f"kubectl get widgets.example.io -A --context {ns}"},
                      error="Error from server (NotFound): the server could not find the requested resource")
    assert hits(trace, STALL_ONLY) == [10]


def test_listed_items_that_lack_what_was_asked_are_each_ones_answer() -> None:
    """Sixteen buckets of an account read for their lifecycle configuration, each failing
    "NoSuchLifecycleConfiguration": each bucket's answer, since the listing named them.
    Guessed buckets that are not there, a listed bucket asked again and again, and a
    failure that says nothing of the item (an outage answers every item alike) stay the
    hunt or the same failure again."""
    names = [f"acme-{word(i)}-data" for i in range(16)]
    missing = ("NoSuchLifecycleConfiguration: An error occurred (NoSuchLifecycleConfiguration) when "
               "calling the GetBucketLifecycleConfiguration operation: The lifecycle configuration does not exist")
    assert critical(buckets(names, names, missing)) == []
    assert critical(buckets(names, None, missing)) == ["result-stall"]
    assert critical(buckets(names[:1] * 12, names, missing))  # (failure-loop's: the same call failing)
    assert hits(buckets(names[:1] * 12, names, missing), STALL_ONLY) == [10]  # and result-stall's
    assert hits(buckets(names, names, "ServiceUnavailable: Please reduce your request rate. (503)")) == [10]
    # an absence told as output: {"error": "... not found"} for the next listed name
    told: list[Any] = step("get_batch", {"batch": "B-7"}, {"names": COUNTERPARTIES})
    for name in COUNTERPARTIES:
        told += step("get_counterparty_profile", {"legal_name": name}, {"error": "Counterparty profile not found"})
    assert critical(told) == []
    assert critical(told[2:]) == ["result-stall"]


def shell_buckets(names: list[str], listed: list[str] | None, error: str) -> list[Any]:
    """The buckets listed by the AWS CLI through a shell (one name a line), then each
    one's lifecycle configuration read by a command naming it."""
    trace: list[Any] = []
    if listed is not None:
        trace += step("Bash", {"command": "aws s3api list-buckets --query 'Buckets[].Name' --output text"
                                          " | tr '\\t' '\\n'"}, "\n".join(listed) + "\n")
    for bucket in names:
        trace += step("Bash", {"command": f"aws s3api get-bucket-lifecycle-configuration --bucket {bucket}"},
                      error=f"Exit code 254\n\n{error}")
    return trace


def test_a_shell_sweep_of_listed_items_that_lack_what_was_asked_is_each_ones_answer() -> None:
    """The same sweep through a shell: the listing is the command's output of bare names,
    and each read names its bucket in its command. Guessed buckets, a listed one asked
    again and again, and an outage answering every bucket alike stay stale."""
    names = [f"acme-{word(i)}-data" for i in range(16)]
    missing = ("An error occurred (NoSuchLifecycleConfiguration) when calling the "
               "GetBucketLifecycleConfiguration operation: The lifecycle configuration does not exist")
    assert critical(shell_buckets(names, names, missing)) == []
    assert critical(shell_buckets(names, None, missing)) == ["result-stall"]
    assert hits(shell_buckets(names[:1] * 12, names, missing), STALL_ONLY) == [10]
    outage = "An error occurred (SlowDown) when calling the operation: Please reduce your request rate. (503)"
    assert hits(shell_buckets(names, names, outage)) == [10]
    # the bucket is found among the command's words whatever stands before it (another
    # listed name, `--bucket=`, an `s3://` address, quotes)
    regions = "us-east-1\neu-west-1\nap-south-1\n"
    for form in ("aws s3api get-bucket-lifecycle-configuration --region us-east-1 --bucket {b}",
                 "aws s3api get-bucket-lifecycle-configuration --bucket={b}",
                 "aws s3 ls s3://{b}/logs/",
                 "aws s3api get-bucket-lifecycle-configuration --bucket '{b}'"):
        trace = step("Bash", {"command": "aws ec2 describe-regions --output text"}, regions)
        trace += step("Bash", {"command": "aws s3api list-buckets --output text"}, "\n".join(names) + "\n")
        for bucket in names:
            trace += step("Bash", {"command": form.format(b=bucket)}, error=f"Exit code 254\n\n{missing}")
        assert critical(trace) == [], form


def test_a_shell_sweep_of_listed_hosts_answering_alike_is_each_hosts_answer() -> None:
    """Twenty servers listed by name, then the same hotfix asked of each through
    PowerShell remoting, most answering the same JSON (installed): one answer per listed
    host. The same host asked again and again, or hosts the listing never named, stay
    stale."""
    hosts = [f"GCU-T1-{kind}{n:02d}" for kind in ("APP", "SQL", "WEB") for n in range(1, 7)]
    installed = '{\n    "HotFixID":  "KB5058392",\n    "InstalledOn":  "/Date(1747785600000)/"\n}\n'
    check = ('powershell -NoProfile -c "Invoke-Command -ComputerName {h} -ScriptBlock '
             '{{ Get-HotFix -Id KB5058392 | ConvertTo-Json }}"')

    def sweep(listed: bool, asked: list[str]) -> list[Any]:
        trace: list[Any] = []
        if listed:
            trace += step("run_command", {"cmd": "powershell -c \"Get-ADComputer -Filter * | Select -Expand Name\""},
                          "\n".join(hosts) + "\n")
        for host in asked:
            trace += step("run_command", {"cmd": check.format(h=host)}, installed)
        return trace

    assert critical(sweep(True, hosts)) == []
    assert critical(sweep(True, hosts[:1] * 14)) != []
    assert critical(sweep(False, hosts)) == ["result-stall"]


def test_a_fixer_swept_over_named_packages_answering_alike_is_each_packages_answer() -> None:
    """`eslint . --fix` run in each of twenty packages (a write by guess), most answering
    "0" files changed: one answer per package it names. The same package again and again
    stays stale."""
    packages = [f"pkg-{word(i)}" for i in range(18)]
    fix = ("pnpm --filter @acme/{p} exec eslint . --fix --format unix 2>&1 | tail -6; "
           "git status --short packages/{p} | wc -l")

    def sweep(names: list[str]) -> list[Any]:
        trace: list[Any] = []
        for name in names:
            trace += step("run_command", {"command": fix.format(p=name)}, {"stdout": "0\n", "stderr": "", "code": 0})
        return trace

    assert critical(sweep(packages)) == []
    assert critical(sweep(packages[:1] * 14)) != []


def test_what_a_listing_lists_is_read_within_bounds() -> None:
    """listed_values reads strings of a list of three or more at the top, or under the
    top-level object (two lists at most), and the first strings of each element object;
    the first LISTED_ITEMS elements; values of 3 to 128 characters; JSON text as its
    object. A session remembers at most LISTED of them, the newest."""
    def codes(*values: str) -> bytes:
        return b"".join(listed_code(v).to_bytes(4, "little") for v in values)

    assert listed_values(["alpha", "beta", "gamma"]) == codes("alpha", "beta", "gamma")
    assert listed_values(["alpha", "beta"]) == b""  # two things are no listing
    assert listed_values({"items": ["alpha", "beta", "gamma"], "next": "x"}) == codes("alpha", "beta", "gamma")
    assert listed_values('{"items": ["alpha", "beta", "gamma"]}') == codes("alpha", "beta", "gamma")
    # a command's output of bare names, one a line or tab-separated, is a listing; text
    # with a space in it (a sentence, a table, a log) is not
    assert listed_values("alpha\nbeta\ngamma\n") == codes("alpha", "beta", "gamma")
    assert listed_values("alpha\tbeta\tgamma") == codes("alpha", "beta", "gamma")
    assert listed_values("alpha\nbeta") == b""
    assert listed_values("alpha\nbeta gamma delta epsilon\nzeta") == b""
    assert listed_values("NAME READY\nweb-1 1/1\nweb-2 1/1") == b""
    assert listed_values('["alpha", "beta", "gamma"') == b""  # nor JSON text cut short
    row = {f"f{i}": f"value-{i}" for i in range(LISTED_FIELDS + 3)}
    assert listed_values([row] * 3) == codes(*[f"value-{i}" for i in range(LISTED_FIELDS)])  # once each
    rows = [{"id": f"CP-{i}", "name": f"Party {word(i)}", "country": "DE", "note": "x" * 5} for i in range(60)]
    assert listed_values({"batch": rows}) == codes(
        *[v for i in range(60) for v in (f"CP-{i}", f"Party {word(i)}", "DE")][:2], *[
            v for i in range(1, 60) for v in (f"CP-{i}", f"Party {word(i)}")])  # "DE" once, no fourth field
    assert listed_values(["ab", "x" * 129, "abc", 12345, None]) == codes("abc")
    assert len(listed_values([f"item-{i}" for i in range(LISTED_ITEMS * 2)])) == 4 * LISTED_ITEMS
    three = {"a": ["a1a", "a2a", "a3a"], "b": ["b1b", "b2b", "b3b"], "c": ["c1c", "c2c", "c3c"]}
    assert listed_values(three) == codes("a1a", "a2a", "a3a", "b1b", "b2b", "b3b")
    assert listed_values([[["deep", "deeper", "deepest"]]] * 3) == b""  # one level only
    assert listed_code(" ACME Corp ") == listed_code("acme corp")
    # the session's memory: bounded, newest kept
    engine = Engine(parse_policy_set(WARN))
    engine.process(TurnStart(session="s"))
    for page in range(LISTED // LISTED_ITEMS + 3):
        for event in step("list_items", {"page": page}, [f"item-{page}-{i}" for i in range(LISTED_ITEMS)]):
            engine.process(event)
    state = next(x for x in engine.sessions["s"].signals if type(x).__name__ == "ResultStallState")
    assert len(state.listed) == 4 * LISTED
    assert state.listed.endswith(codes(*[f"item-{page}-{i}" for i in range(LISTED_ITEMS)]))


def test_what_a_listing_listed_survives_a_snapshot() -> None:
    """Restored between the batch's answer and the sweep, the names are still the batch's."""
    batch = {"counterparties": [{"name": name} for name in COUNTERPARTIES]}
    trace = screening(COUNTERPARTIES, batch)
    first = Engine(parse_policy_set(WARN))
    first.process(TurnStart(session="s"))
    for event in trace[:2]:
        first.process(event)
    second = Engine(parse_policy_set(WARN))
    second.restore("s", first.snapshot("s") or b"")
    assert not any(isinstance(o, Alert) and o.signal == "result-stall" for event in trace[2:]
                   for o in second.process(event))
    # restored without the batch's answer (a fresh session), the same sweep is the hunt
    assert hits(trace[2:]) != []


def test_a_listed_item_asked_again_is_the_same_answer_whatever_else_changes() -> None:
    """One listed bucket read again and again with other options each time (so that no
    call-keyed signal holds), each time without the configuration, is one item's answer
    again: result-stall halts it, whether the absence is a failure or told as output; and
    so are answers that say nothing of the item (an outage told as output, a rate limit)."""
    names = [f"acme-{word(i)}-data" for i in range(16)]
    listing = step("s3_list_buckets", {}, {"Buckets": [{"Name": b} for b in names]})
    failure = "NoSuchLifecycleConfiguration: The lifecycle configuration does not exist"

    def reads(bucket: Callable[[int], str], **answer: Any) -> list[Any]:
        trace = list(listing)
        for i in range(16):
            trace += step("s3_get_bucket_lifecycle_configuration",
                          {"Bucket": bucket(i), "ExpectedBucketOwner": f"1234567{i:05d}"}, **answer)
        return trace

    assert hits(reads(lambda i: names[i], error=failure)) == []
    assert hits(reads(lambda i: names[0], error=failure)) == [10]
    told = {"error": {"code": "NoSuchLifecycleConfiguration", "message": "The lifecycle configuration does not exist"}}
    assert hits(reads(lambda i: names[i], result=told)) == []
    assert hits(reads(lambda i: names[0], result=told)) == [10]
    for outage in ({"error": "Service Unavailable"}, {"error": "Rate limit exceeded, retry later"},
                   "Internal server error", {"message": "Invalid API token"}):
        assert hits(reads(lambda i: names[i], result=outage)) == [10], outage
    for error in ("dial tcp: lookup s3.internal: no such host", "Tool 's3_get_bucket_lifecycle' not found",
                  "404 page not found", "SyntaxError at line 404"):
        assert hits(reads(lambda i: names[i], error=error)) == [10], error


def test_a_listed_search_answered_by_an_error_is_no_items_answer() -> None:
    batch = {"counterparties": [{"name": name} for name in COUNTERPARTIES]}
    trace = step("onboarding_get_batch", {"batch_id": "OB-1207"}, batch)
    for name in COUNTERPARTIES:
        trace += step("screening_search", {"query": name}, {"error": "rate limit exceeded"})
    assert hits(trace) == [10]
    # the same names searched in different letter case are one name each
    again = step("onboarding_get_batch", {"batch_id": "OB-1207"}, batch)
    for i in range(12):
        name = COUNTERPARTIES[0]
        again += step("screening_search", {"query": name.upper() if i % 2 else f" {name.lower()} ", "page_size": i},
                      {"hits": [], "total": 0})
    assert hits(again) == [10]


def test_a_search_in_listed_places_is_still_a_hunt() -> None:
    """A phrase searched for in file after file of a listing: the files are its scope,
    not what it looks for; the hunt is halted as without the listing."""
    files = [f"src/pkg/module_{word(i)}.py" for i in range(12)]
    trace = step("list_files", {"path": "src/pkg"}, {"files": files})
    for path in files:
        trace += step("search_file", {"pattern": "def parse_config_v3", "path": path},
                      {"matches": [], "total": 0})
    assert hits(trace) == [x + 1 for x in hits(trace[2:])] != []  # halted, one call later than without it


def test_a_long_listing_is_remembered_from_its_head() -> None:
    """Two lists of sixty rows, each with four strings: more values than LISTED, of which
    the head is kept (values once each, a country listed sixty times is one value), so a
    sweep from the first name is read; and a listing read again does not push out what
    was listed before it."""
    names = [f"Counterparty {word(i)} Holdings" for i in range(60)]
    rows = [{"cp_id": f"CP-{i}", "name": n, "country": "DE", "segment": "corporate"} for i, n in enumerate(names)]
    more = [{"cp_id": f"CP-9{i}", "name": f"Other {word(i)}", "country": "FR"} for i in range(60)]
    batch = {"counterparties": rows, "related": more}
    assert len(listed_values(batch)) == 4 * LISTED < 4 * (2 * 60 + 2 * 60 + 2)
    assert hits(screening(names[:30], batch)) == []
    # a first listing, then a second one read twice in a row: the first one's names stay
    first = {"counterparties": [{"name": n} for n in names[:20]]}
    second = {"items": [f"SKU-{i:05d}" for i in range(150)]}
    trace = step("get_batch", {"batch": "B-1"}, first)
    trace += step("list_items", {"page": 1}, second) + step("list_items", {"page": 1}, second)
    trace += screening(names[:20])
    assert hits(trace) == []


@pytest.mark.parametrize(("text", "absent"), [
    ("NoSuchLifecycleConfiguration: does not exist", True),
    ("ResourceNotFoundException: Requested resource not found", True),
    ("An error occurred (NotFoundException)", True),
    ("Could not find a counterparty named X", True),
    ("HTTP 404 Not Found", True),
    ("The entity no longer exists", True),
    ("dial tcp: lookup api.internal: no such host", False),
    ("open /root/.aws/credentials: no such file or directory", False),
    ("Tool 'lookup_x' not found", False),
    ("404 page not found", False),
    ("bash: jq: command not found", False),
    ("SyntaxError at line 404", False),
    ("Service Unavailable", False),
    ("Could not find a counterparty profile with that name", True),
    ('{"statusCode": 404, "body": "Not Found"}', True),
    ("ModuleNotFoundError: No module named 'boto3'", False),
    ("Error: API token not found", False),
    ("credentials not found", False),
    ('relation "orders" does not exist', False),
    ("ClusterNotFoundException: cluster prod-eu", False),
])
def test_what_says_an_item_is_absent(text: str, absent: bool) -> None:
    from streamguard.signals.result_stall import _says_absent

    view = ResultView(ToolResult(session="s", tool="t", error=text), True, 0, 0)
    assert _says_absent(view) is absent
    # told as output: the text itself, or a structured answer's JSON
    told = ResultView(ToolResult(session="s", tool="t", result=text), False, 1, len(text))
    assert _says_absent(told) is absent
    structured = ResultView(ToolResult(session="s", tool="t", result={"message": text}), False, 1, 0)
    structured.encoded = json.dumps({"message": text}).encode()
    assert _says_absent(structured) is absent
    # a size only declared (the watchdog made no JSON of it) is not read
    declared = ResultView(ToolResult(session="s", tool="t", result={"message": text}), False, 1, 10)
    assert _says_absent(declared) is False


def test_a_restored_listing_memory_is_kept_whole_and_bounded() -> None:
    from streamguard.signals.result_stall import ResultStallState

    state = ResultStallState(listed=bytearray(b"abc") + bytearray(4 * 10))
    assert len(state.listed) == 40
    state = ResultStallState(listed=bytearray(4 * LISTED * 3 + 2))
    assert len(state.listed) == 4 * LISTED


def test_listed_searches_in_parallel_find_their_own_names() -> None:
    """Names searched two at a time, twice over: each answer is its own name's, so the
    second pass is the same answers again (halted), and a listed search sent beside an
    unlisted one keeps its name."""
    batch = {"counterparties": [{"name": name} for name in COUNTERPARTIES]}

    def rounds(names: list[str], beside: bool = False) -> list[Any]:
        trace = step("onboarding_get_batch", {"batch_id": "OB-1207"}, batch)
        for i in range(0, len(names), 2):
            pair = names[i:i + 2] if not beside else [names[i], None]
            calls = [ToolCall(session="s", tool="screening_search", call_id=f"c{i}-{j}",
                              args={"query": n} if n else {"query": "*", "path": "archive"})
                     for j, n in enumerate(pair)]
            answers = [ToolResult(session="s", tool="screening_search", call_id=f"c{i}-{j}",
                                  result={"hits": [], "total": 0}) for j in range(len(pair))]
            trace += calls + answers
        return trace

    assert hits(rounds(COUNTERPARTIES[:14])) == []
    assert hits(rounds(COUNTERPARTIES[:14] * 2)) != []
    assert hits(rounds(COUNTERPARTIES[:14], beside=True), STALL_ONLY) == hits(
        [e for e in rounds(COUNTERPARTIES[:14], beside=True) if not (
            isinstance(e, (ToolCall, ToolResult)) and e.call_id and e.call_id.endswith("-0"))], STALL_ONLY)


def test_a_listed_search_answered_by_an_outage_told_as_output_is_no_names_answer() -> None:
    batch = {"counterparties": [{"name": name} for name in COUNTERPARTIES]}
    for outage in ("Rate limit exceeded, retry later", "Service temporarily unavailable",
                   {"message": "Too Many Requests"}, "Unauthorized", "Request timed out",
                   {"ok": False, "reason": "quota exhausted"}):
        trace = step("onboarding_get_batch", {"batch_id": "OB-1207"}, batch)
        for name in COUNTERPARTIES:
            trace += step("screening_search", {"query": name}, outage)
        assert hits(trace) == [10], outage


def test_a_search_term_is_read_from_any_of_its_name_arguments() -> None:
    batch = {"counterparties": [{"name": name} for name in COUNTERPARTIES]}
    for args in ({"entity": "organization", "name": "{}"}, {"subject": "KYC", "query": "{}"},
                 {"keyword": "{}"}, {"search_term": "{}"}, {"counterparty": "{}"}):
        trace = step("onboarding_get_batch", {"batch_id": "OB-1207"}, batch)
        for name in COUNTERPARTIES:
            trace += step("screening_search", {k: v.format(name) for k, v in args.items()}, {"hits": [], "total": 0})
        assert hits(trace) == [], args


def inbox_watch(asked: str | None, sleep_s: float, reads: int = 12) -> list[Any]:
    """An inbox searched for a message, a sleep between searches (none when ``sleep_s`` is
    0), every search answering nothing yet; ``asked``: the user's message first."""
    trace: list[Any] = []
    clock = 1_000.0
    if asked is not None:
        trace.append(Text(session="s", role="user", text=asked, ts=clock))
    for i in range(reads):
        clock += 2.0
        trace += [
            ToolCall(session="s", tool="gmail_search_messages", call_id=f"q{i}", ts=clock,
                     args={"query": "from:j.okafor@northwindlegal.com newer_than:1d", "max_results": 10}),
            ToolResult(session="s", tool="gmail_search_messages", call_id=f"q{i}", ts=clock + 1.0,
                       result='{"messages": [], "resultSizeEstimate": 0}'),
        ]
        clock += 2.0
        if sleep_s:
            trace += [
                ToolCall(session="s", tool="sleep", call_id=f"z{i}", ts=clock, args={"seconds": sleep_s}),
                ToolResult(session="s", tool="sleep", call_id=f"z{i}", ts=clock + sleep_s,
                           result=f"Slept for {sleep_s:g} seconds."),
            ]
            clock += sleep_s + 1.0
    return trace


MSA_WATCH = "Keep an eye on my inbox for the signed MSA from Northwind Legal and ping me when it lands."


def test_nothing_yet_searched_for_after_each_wait_of_a_watch_is_awaited() -> None:
    """Asked to keep an eye on an inbox, the agent searches it after each five-minute sleep
    and finds nothing until the message lands: nothing yet is the answer the watch awaits
    (two healthy watches of a blind batch were halted at the eighth search)."""
    assert hits(inbox_watch(MSA_WATCH, 300.0)) == []
    # nobody asked for a watch: the same searches are the agent waiting for what is not
    # coming, as before
    assert hits(inbox_watch(None, 300.0)) != []
    assert hits(inbox_watch("Find the signed MSA from Northwind Legal in my inbox.", 300.0)) != []
    # a watch asked, searched again and again without a wait: a loop as before (the same
    # call each time: repeated-tool-call's to halt)
    assert hits(inbox_watch(MSA_WATCH, 0.0), signal="repeated-tool-call") != []
    assert hits(inbox_watch(MSA_WATCH, 300.0), signal="repeated-tool-call") == []
    # the policy switch
    assert hits(inbox_watch(MSA_WATCH, 300.0), WARN + "[waits]\nasked_watches = false\n") != []


def test_another_sessions_answers_never_change_what_this_one_sees() -> None:
    """The template cache is the process's: its key holds all a template depends on.
    An answer identified by a digest is read by its payload and not cached (one
    session's text once stood for another's under the same digest); a write's answer
    is kept apart from a read's (a failure report is read as one only from a read)."""
    def ev(**fields: Any) -> Any:
        return decode_agent_event(msgspec.json.encode(fields))

    def digested(session: str, text: str, n: int = 10) -> list[Any]:
        out = []
        for i in range(n):
            plan = "".join("abcdefghij"[int(d)] for d in str(i))
            out += [ev(type="tool_call", session=session, tool="bash",
                       args={"command": f"DISCUSSION\nLet me try plan {plan}"}, ts=1.7e9 + 2 * i),
                    ev(type="tool_result", session=session, tool="bash", result=text,
                       result_digest="d41d8cd98f00", ts=1.7e9 + 2 * i + 1)]
        return out

    report = "FAIL src/a.test.ts\nTests: 1 failed, 3 passed\nStart at 10:14:07\nDuration 1.2s"

    def write(session: str) -> list[Any]:
        return [ev(type="tool_call", session=session, tool="write_file", args={"path": "a.ts", "content": "x"}, call_id="w"),
                ev(type="tool_result", session=session, tool="write_file", call_id="w", result=report)]

    def reads(session: str) -> list[Any]:
        out = []
        for i in range(12):
            out += [ev(type="tool_call", session=session, tool="get_report", args={"id": i}, call_id=f"r{i}"),
                    ev(type="tool_result", session=session, tool="get_report", call_id=f"r{i}",
                       result=report.replace("10:14:07", f"10:{14 + i}:07"))]
        return out

    def seen(before: list[Any], events: list[Any]) -> tuple[list[Any], bytes | None]:
        engine = Engine()
        for event in before:
            engine.process(event)
        outputs = [msgspec.json.encode(o) for event in events for o in engine.process(event)]
        return outputs, engine.snapshot(events[0].session)

    shell = digested("B", "bash: DISCUSSION: command not found")
    alone, after = seen([], shell), seen(digested("A", "card 4111-1111-1111-1111 belongs to alice", 1), shell)
    assert alone == after and not any(b"4111" in o for o in after[0])
    assert seen([], reads("B")) == seen(write("A"), reads("B"))


def written(tool: str, args: dict[str, Any], result: Any) -> list[Any]:
    """A call the runtime sends as a write (``kind: "write"``) and its answer."""
    return [ToolCall(session="s", tool=tool, args=args, kind="write"),
            ToolResult(session="s", tool=tool, result=result)]


def test_a_check_that_says_the_work_set_going_is_under_way_is_no_futile_write() -> None:
    """A tuning run started per function, its execution read after a sleep until it
    succeeds, then the function updated: "RUNNING" after each start is work under way,
    no verdict a write failed to move. The same checks answering an error each time are
    as futile as before."""
    def tuning(answer: str) -> list[Any]:
        trace: list[Any] = []
        arn = "arn:aws:states:us-east-1:2209:execution:tuner"
        for i in range(6):
            fn = f"fn-{word(i)}"
            trace += step("bash", {"command": f"aws lambda get-function-configuration --function-name {fn}"},
                          "2048\t30\tx86_64\n")
            trace += written("bash", {"command": "aws stepfunctions start-execution --state-machine-arn "
                                                 f"arn:aws:states:us-east-1:2209:stateMachine:tuner --input {fn}"},
                             f"{arn}:{fn}-{i}\n")
            for _ in range(2):
                trace += step("bash", {"command": f"sleep 30; aws stepfunctions describe-execution --execution-arn "
                                                  f"{arn}:{fn}-{i} --query status --output text"}, answer)
            trace += step("bash", {"command": f"sleep 30; aws stepfunctions describe-execution --execution-arn "
                                              f"{arn}:{fn}-{i} --query status --output text"}, "SUCCEEDED\n")
            trace += written("bash", {"command": f"aws lambda update-function-configuration --function-name {fn} "
                                                 "--memory-size 1024"}, f"{fn}\t1024\tInProgress\n")
        return trace
    assert hits(tuning("RUNNING\n")) == []
    assert hits(tuning("THROTTLED\n")) != []


def test_a_sweep_of_metrics_selected_by_name_and_value_pairs_is_one_answer_each() -> None:
    """Bucket sizes read for fourteen buckets, each selected by a CloudWatch dimension
    (`{"Name": "BucketName", "Value": ...}`), several of the same size: each bucket's
    answer is its own."""
    sizes = [989550000000.0, 219900000000.0, 3738300000000.0]
    def metric(bucket: str, i: int) -> list[Any]:
        return step("cloudwatch_get_metric_statistics",
                    {"Namespace": "AWS/S3", "MetricName": "BucketSizeBytes",
                     "Dimensions": [{"Name": "BucketName", "Value": bucket},
                                    {"Name": "StorageType", "Value": "StandardStorage"}]},
                    {"Datapoints": [{"Timestamp": "2024-10-06T00:00:00Z", "Average": sizes[i % 3]}]})
    sweep: list[Any] = []
    for i in range(14):
        sweep += metric(f"acme-{word(i)}-exports", i)
    assert hits(sweep) == []
    # one bucket asked under reworded metric names, the same answer each time: the same
    # place, the same answer
    hunt: list[Any] = []
    for i in range(14):
        hunt += step("cloudwatch_get_metric_statistics",
                     {"Namespace": "AWS/S3", "MetricName": f"BucketSize{word(i)}",
                      "Dimensions": [{"Name": "BucketName", "Value": "acme-tmp-exports"}]},
                     {"Datapoints": [{"Timestamp": "2024-10-06T00:00:00Z", "Average": 989550000000.0}]})
    assert hits(hunt) != []


def test_a_sweep_through_a_structured_filter_is_one_answer_per_account() -> None:
    """Untagged spend read per linked account through Cost Explorer's filter object,
    most accounts answering $0: each account's answer is its own."""
    def cost(account: str, amount: str) -> list[Any]:
        return step("ce_get_cost_and_usage", {
            "TimePeriod": {"Start": "2024-11-01", "End": "2024-12-01"}, "Granularity": "MONTHLY",
            "Filter": {"And": [{"Dimensions": {"Key": "LINKED_ACCOUNT", "Values": [account]}},
                               {"Tags": {"Key": "team", "MatchOptions": ["ABSENT"]}}]}},
            {"ResultsByTime": [{"Total": {"UnblendedCost": {"Amount": amount, "Unit": "USD"}}}]})
    sweep: list[Any] = []
    for i in range(14):
        sweep += cost(f"8178762{55759 + 7919 * i}", "0.0000000000" if i % 4 else "246.4603221706")
    assert hits(sweep) == []
    # a term looked for in the filter is no account: reworded, it is the same hunt
    hunt: list[Any] = []
    for i in range(14):
        hunt += step("ce_get_cost_and_usage", {"Filter": {"Tags": {"Key": "ProjectCode",
                                                                     "Values": [f"proj {word(i)}"]}}},
                     {"ResultsByTime": [{"Total": {"UnblendedCost": {"Amount": "0", "Unit": "USD"}}}]})
    assert hits(hunt) != []
    # ids under names that only contain the letters of a time word are ids
    from streamguard.signals.result_stall import _filter_ids

    assert _filter_ids({"And": [{"candidate_id": {"eq": 4571234}}, {"updated_by": "usr_88121"}]}) == [
        "4571234", "usr_88121"]
    assert _filter_ids({"customer": 1456789012, "range": {"ts": {"gte": 1718000000000}}}) == ["1456789012"]
    # nor is a window moved: the same search over a later moment is the same search
    window: list[Any] = []
    for i in range(14):
        window += step("search_events", {"query": {"range": {"ts": {"gte": 1718000000000 + 60_000 * i}},
                                                   "term": {"service": "checkout"}}},
                       {"hits": {"total": 3, "hits": [{"msg": "timeout calling payments"}]}})
    assert hits(window) != []


def test_a_command_naming_an_aws_resource_reads_that_resource() -> None:
    """CloudTrail searched for the last attachment of each of fourteen volumes, each
    answering a date or nothing: each volume's answer is its own."""
    trace: list[Any] = []
    for i in range(14):
        volume = f"vol-0{hashlib.sha1(str(i).encode()).hexdigest()[:16]}"
        trace += step("bash", {"command": "aws cloudtrail lookup-events --region eu-west-1 --lookup-attributes "
                                          f"AttributeKey=ResourceName,AttributeValue={volume} --query 'Events[0].EventTime'"},
                      f"2024-10-{1 + i % 3:02d}T17:32:54+00:00\n")
    assert hits(trace) == []


def _grasps(listed: bool, answer: dict[str, Any]) -> list[Any]:
    """Grasp candidates generated (their ids listed, or not), then a plan asked for each."""
    ids = [f"g{n:02d}" for n in range(16)]
    trace = step("grasp_generate", {"object": "tote_6428", "slot": "C4", "n": 16},
                 {"candidates": 16, "ids": ids if listed else []})
    for grasp in ids:
        trace += step("plan_to_grasp", {"grasp_id": grasp, "planner": "RRTConnect"}, answer)
    return trace


def test_a_named_read_of_each_listed_item_is_that_items_answer_a_failure_included() -> None:
    """Sixteen generated grasp candidates planned one by one, most answered
    `NO_IK_SOLUTION`: each candidate's answer, since the generator handed the ids over.
    The same ids guessed (listed nowhere), or an outage answering every one alike, are
    one answer again and again."""
    no_ik = {"ik": "FAILURE", "error_code": "NO_IK_SOLUTION", "plan": "NOT_ATTEMPTED"}
    assert hits(_grasps(True, no_ik)) == []
    assert hits(_grasps(False, no_ik)) != []
    assert hits(_grasps(True, {"error": "rate limit exceeded, retry later"})) != []


def test_a_sweep_of_users_each_answered_alike_is_one_answer_per_user() -> None:
    """One password tried against fourteen users (an authorised spray), nearly all
    refused alike: each user's answer is that user's. A user guessed under one spelling
    after another, each "not found", is the same hunt."""
    spray: list[Any] = []
    for i in range(14):
        spray += step("kerberos_preauth", {"domain": "corp.local", "user": f"u.{word(i)}", "password": "Summer2025!"},
                      {"authenticated": False, "result": "KDC_ERR_PREAUTH_FAILED"})
    assert hits(spray) == []
    hunt: list[Any] = []
    for i in range(14):
        hunt += step("get_user", {"username": f"jsmith{word(i)}"}, {"error": "user not found"})
    assert hits(hunt) != []


def test_a_build_that_finishes_alike_after_each_edit_is_no_futile_write() -> None:
    """A parameter edited, the package rebuilt ("1 package finished"), edited again: a
    success said again is the answer hoped for, not a verdict the edits failed to move.
    A build that reports the same failure after each edit is still futile."""
    def tuning(answer: str) -> list[Any]:
        trace: list[Any] = []
        for i in range(8):
            trace += step("edit_file", {"path": "config/nav2_params.yaml", "text": f"cost_weight: {word(i)}"},
                          f"edited nav2_params.yaml: {word(i)}")
            trace += step("bash", {"command": "colcon build --packages-select amr_nav_config 2>&1 | tail -1"}, answer)
        return trace
    assert hits(tuning("Summary: 1 package finished [1.2s]\n")) == []
    assert hits(tuning("Summary: 0 packages finished, 1 package failed: amr_nav_config\n")) != []


def test_a_named_tool_given_a_command_reads_what_the_command_names() -> None:
    """Topics audited one by one through an ssh tool (`ssh_exec(host=..., command="ros2
    topic info -v /amr05/scan")`), many answering alike: each topic's answer is its own,
    and so is each host's. The same topic read again is the same answer."""
    info = "Type: auto\nPublisher count: 1\nSubscription count: 2\nQoS (publisher): RELIABLE / VOLATILE\n"
    topics: list[Any] = []
    for i in range(14):
        topics += step("ssh_exec", {"host": "amr-05", "command": f"ros2 topic info -v /amr05/{word(i)}/costmap"}, info)
    assert hits(topics) == []
    hosts: list[Any] = []
    for i in range(14):
        hosts += step("ssh_exec", {"host": f"amr-{i:02d}", "command": "ros2 topic info -v /scan"}, info)
    assert hits(hosts) == []
    again: list[Any] = []
    for i in range(14):
        again += step("ssh_exec", {"host": "amr-05", "command": f"ros2 topic info -v /scan  # try {word(i)}"}, info)
    assert hits(again) != []


def test_a_probe_of_each_endpoint_by_host_and_port_is_that_endpoints_answer() -> None:
    """Certificate expiry read for fourteen endpoints through `openssl s_client -connect
    host:443`, most answering the same wildcard certificate: one answer per endpoint."""
    wildcard = "subject=CN=*.example.net\nissuer=Sectigo RSA\nnotAfter=Mar 14 23:59:59 2026 GMT"
    trace: list[Any] = []
    for i in range(14):
        host = f"csms-{word(i)}.example.net:443"
        trace += step("run_command", {"cmd": f"echo | timeout 8 openssl s_client -connect {host} 2>/dev/null"
                                             " | openssl x509 -noout -subject -issuer -enddate"}, wildcard)
    assert hits(trace) == []


def test_a_sweep_of_contracts_through_a_shell_is_one_answer_per_contract() -> None:
    """Symbol and decimals read for each of fourteen token contracts with `cast call`,
    most answering `"XYZ"` and 18 (a quoted symbol is masked): each contract's answer.
    The same contract read again and again is one answer again and again."""
    sweep: list[Any] = []
    for i in range(14):
        address = "0x" + hashlib.sha1(str(i).encode()).hexdigest()
        sweep += step("shell", {"command": f"cast call {address} 'symbol()(string)' && cast call {address} "
                                           "'decimals()(uint8)'"}, f'"T{word(i).upper()}"\n18')
    assert hits(sweep) == []
    address = "0x" + hashlib.sha1(b"0").hexdigest()
    again: list[Any] = []
    for i in range(14):
        again += step("shell", {"command": f"cast call {address} 'symbol()(string)' && cast call {address} "
                                           f"'decimals()(uint8)' # try {i}"}, f'"T{word(i).upper()}"\n18')
    assert hits(again) != []


def test_a_retry_storm_that_keeps_the_back_off_asked_is_neither_news_nor_stale() -> None:
    """Ten documents submitted to a rate-limited extraction API, most refused twice with
    a 429 asking for 6 s and each retried 6.5 s later until accepted: backing off. The
    same refusals retried at once are one answer again and again."""
    def submissions(gap: float) -> list[Any]:
        trace: list[Any] = [TurnStart(session="s", ts=1000.0)]
        at = 1001.0
        for doc in range(10):
            args = {"file": f"batches/MILTON/POL-MIL-{doc:05d}.pdf", "model": "proof-of-loss-v3"}
            for attempt in range(3 if doc % 3 else 1):
                accepted = attempt == (2 if doc % 3 else 0)
                trace += [ToolCall(session="s", tool="docuread_submit", args=args, ts=at),
                          ToolResult(session="s", tool="docuread_submit", ts=at + 0.4,
                                     result={"request_id": f"dr_{doc}", "status": "accepted"} if accepted else None,
                                     error=None if accepted else
                                     'HTTP 429 Too Many Requests: {"error":"rate_limited","retry_after":6}')]
                at += 0.4 + gap
        return trace

    def stalled(trace: list[Any]) -> bool:
        engine = Engine(parse_policy_set(WARN))
        return any(isinstance(o, Alert) and o.signal == "result-stall" for e in trace for o in engine.process(e, e.ts))

    assert not stalled(submissions(6.5))
    assert stalled(submissions(1.0))


def test_a_filter_by_pattern_is_a_search_and_its_rewordings_a_hunt() -> None:
    """A supplier searched through OData's `substringof` under twenty spellings, each
    answering an empty result set: a hunt. Twenty suppliers read by their ids, each
    answering the same empty set of open orders, are twenty answers."""
    from streamguard.signals.facts import CallFacts, argument_facts

    plain = CallFacts("sap_odata_call", False, False)
    looked = argument_facts("sap_odata_call", {"entity": "A_Supplier", "filter": "substringof('Nordvik', SupplierName)"},
                            plain)
    assert looked.search and not looked.write
    assert argument_facts("sap_odata_call", {"filter": "SupplierName like 'NORDVIK%'"}, plain).search
    assert not argument_facts("sap_odata_call", {"filter": "SupplierName eq 'NORDVIK'"}, plain).search
    assert not argument_facts("run_sql", {"query": "SELECT 1 FROM t WHERE a LIKE 'abc'"}, plain).search
    assert argument_facts("db2_query", {"sql": "SELECT * FROM SYSIBM.SYSTABLES WHERE NAME LIKE '%PREFS%'"},
                          plain).search
    assert not argument_facts("post_update", {"filter": "contains(Name, 'x')"}, CallFacts("post_update", True, False)).search
    hunt: list[Any] = []
    for i in range(20):
        hunt += step("sap_odata_call", {"service": "API_BUSINESS_PARTNER", "entity": "A_Supplier",
                                        "filter": f"substringof('Nordvik {word(i)}', SupplierName)", "top": 20},
                     {"d": {"results": []}})
    assert hits(hunt) != []
    # a runtime that says the calls only read: their filter still says they search
    read: list[Any] = []
    for i in range(20):
        read += [ToolCall(session="s", tool="db2_query", kind="read",
                          args={"sql": f"SELECT * FROM SYSIBM.SYSTABLES WHERE NAME LIKE '%PREF{word(i).upper()}%'"}),
                 ToolResult(session="s", tool="db2_query", result={"rows": [], "rowcount": 0})]
    assert hits(read) != []
    orders: list[Any] = []
    for i in range(20):
        orders += step("sap_odata_call", {"service": "API_PURCHASEORDER_PROCESS_SRV", "entity": "A_PurchaseOrder",
                                          "filter": f"Supplier eq '00002{i:05d}' and Status eq 'OPEN'"},
                       {"d": {"results": []}})
    assert hits(orders) == []


def test_a_clis_tool_given_its_arguments_as_one_line_reads_what_the_line_names() -> None:
    """`aws(args="rds list-tags-for-resource --resource-name arn:...")` for each of fourteen
    instances, most tagged alike: each instance's answer, as through a shell. The same
    instance asked again and again is one answer again and again."""
    tags = {"TagList": [{"Key": "env", "Value": "prod"}, {"Key": "team", "Value": "platform"}]}
    sweep: list[Any] = []
    for i in range(14):
        sweep += step("aws", {"args": "rds list-tags-for-resource --resource-name "
                                      f"arn:aws:rds:us-east-1:418220117703:db:prod-{word(i)}-pg --region us-east-1"}, tags)
    assert hits(sweep) == []
    again: list[Any] = []
    for i in range(14):
        again += step("aws", {"args": "rds list-tags-for-resource --resource-name "
                                      f"arn:aws:rds:us-east-1:418220117703:db:prod-orders-pg --region us-east-1 --debug={i}"},
                      tags)
    assert hits(again) != []


def test_an_address_whose_query_names_a_listed_item_reads_that_item() -> None:
    """Eighteen received lots listed by a report, each then looked up in a recall
    database by an address whose query names it, most answering "No matches found!":
    each lot's answer. Lots listed nowhere, guessed one after another, are one hunt."""
    lots = [f"TV25{n:05d}" for n in range(18)]
    def lookups(listed: bool) -> list[Any]:
        rows = [{"ndc": "00093-7214", "description": "atorvastatin 40 mg", "lot": lot} for lot in lots]
        trace = step("wms_query", {"facility": "CFF-OH-01", "report": "receipts_by_lot"},
                     {"count": 18, "rows": rows if listed else []})
        for lot in lots:
            trace += step("http_get", {"url": "https://api.fda.gov/drug/enforcement.json?search=code_info:"
                                              f'"{lot}"&limit=5'},
                          {"status": 404, "json": {"error": {"code": "NOT_FOUND", "message": "No matches found!"}}})
        return trace

    assert hits(lookups(True)) == []
    assert hits(lookups(False)) != []


def test_an_address_names_a_listed_item_as_its_server_reads_it() -> None:
    """A patient's medicines listed one a line in a file (some of two words), then each
    looked up in a label database by an address whose query names it URL-encoded
    (``%22amlodipine%22+AND+...``), most answering 404 "No matches found!"; and each DOI
    of a list checked for retractions through a query that names it whole
    (``filter=updates:10.1016/j.clnu.2019.06.011``), most answering none: each item's
    answer. The same addresses with no listing before them are one hunt."""
    medicines = ["amlodipine", "atorvastatin", "diltiazem", "metoprolol", "furosemide", "spironolactone",
                 "ramipril", "levothyroxine", "omeprazole", "sertraline", "paracetamol", "ibuprofen",
                 "metformin", "gliclazide", "donepezil", "tamsulosin", "alendronic acid", "calcium carbonate"]
    def medicine_checks(listed: bool) -> list[Any]:
        trace = step("read_file", {"path": "meds_pt0417.txt"}, "\n".join(medicines) if listed else "(empty)")
        for name in medicines:
            trace += step("fetch_url", {"url": "https://api.fda.gov/drug/label.json?search=openfda.generic_name:"
                                               f"%22{name.replace(' ', '+')}%22+AND+(drug_interactions:apixaban)"
                                               "&limit=1"},
                          '{"error": {"code": "NOT_FOUND", "message": "No matches found!"}}', error="HTTP 404")
        return trace

    assert hits(medicine_checks(True)) == []
    assert hits(medicine_checks(False)) != []
    dois = [f"10.1016/j.clnu.2019.{n:02d}.0{n + 10}" for n in range(16)]
    none = {"status": "ok", "message-type": "work-list", "message": {"total-results": 0, "items": []}}
    def retraction_checks(listed: bool) -> list[Any]:
        trace = step("read_file", {"path": "included.txt"}, "\n".join(dois) if listed else "(empty)")
        for doi in dois:
            trace += step("fetch_url", {"url": f"https://api.crossref.org/works?filter=updates:{doi}&select=DOI"}, none)
        return trace

    assert hits(retraction_checks(True)) == []
    assert hits(retraction_checks(False)) != []


@pytest.mark.parametrize(("text", "names"), [
    ("amlodipine\natorvastatin\nramipril\nalendronic acid\ncalcium carbonate\n", 5),
    ("a-1\nb-2\nc 3 d\n", 3),
    ("amlodipine\nalendronic acid\ncalcium carbonate\n", 0),  # mostly spaced: a table's rows
    ("amlodipine\natorvastatin\n", 0),  # fewer than three
    ("amlodipine\nTake one tablet twice a day with food\nramipril", 0),  # a sentence
    ("name: amlodipine\nname: ramipril\nname: sertraline", 0),  # keys and values
    ("NAME   READY   STATUS\nweb-1  1/1     Running\napi-2  1/1     Running", 0),  # a table
])
def test_names_listed_one_a_line_with_spaces_in_some(text: str, names: int) -> None:
    assert len(listed_values(text)) == 4 * names


def _bill(codes: list[str]) -> dict[str, Any]:
    return {"bill_id": "BILL-558120", "form": "CMS-1500",
            "lines": [{"line": n, "dos": f"2025-02-{1 + n % 27:02d}", "code": code, "units": 1}
                      for n, code in enumerate(codes, 1)]}


FEES = {f"97{n:03d}": round(30 + 17.5 * n, 2) for n in range(20)}


def _lookups(codes: list[str]) -> list[Any]:
    trace: list[Any] = []
    for code in codes:
        trace += step("fee_schedule_lookup", {"state": "CO", "schedule": "WCRP Rule 18 2025", "code": code},
                      {"code": code, "found": True, "max_allowed": FEES[code]})
    return trace


def test_a_listings_rows_gone_through_in_order_are_each_rows_answer() -> None:
    """A bill's thirty-six lines, the last sixteen naming procedure codes earlier lines
    named, each looked up in the lines' order: each line's answer, though the same code answers the
    same. The same lookups made again after the last line (the bill read again, or not)
    are answers the agent already had."""
    codes = list(FEES)
    lines = codes + [codes[n] for n in (4, 7, 4, 11, 7, 4, 2, 11, 7, 2, 4, 11, 2, 7, 4, 11)]
    bill = step("get_bill", {"claim_id": "WC-25-0071842", "bill_id": "BILL-558120"}, _bill(lines))

    def criticals(trace: list[Any]) -> list[str]:
        return [a.signal for a in alerts(trace) if a.severity == "critical"]

    assert criticals([*bill, *_lookups(lines)]) == []
    assert criticals([*bill, *_lookups(lines), *bill, *_lookups(lines)]) != []
    # asked again where the bill names each code once, the answers are stale
    once = step("get_bill", {"claim_id": "WC-25-0071842", "bill_id": "BILL-558120"}, _bill(codes))
    assert "result-stall" in criticals([*once, *_lookups(lines)])


def test_listed_rows_keep_each_rows_place_and_are_bounded() -> None:
    from streamguard.signals.result_stall import _next_row, listed_rows

    rows = listed_rows(_bill(["99204", "97110", "99204", "97112", "97140"]))
    assert len(rows) == 30
    code = listed_code("99204")
    assert _next_row(rows, 0, code) == 0 and _next_row(rows, 1, code) == 2 and _next_row(rows, 3, code) == -1
    # a value most rows share names no row
    assert _next_row(listed_rows(_bill(["99204", "97110", "99204"])), 0, code) == -1
    assert len(listed_rows(_bill(["99204"] * 500))) == 6 * LISTED_ITEMS
    assert listed_rows(json.dumps(_bill(["99204", "97110", "99204", "97112", "97140"]))) == rows
    assert listed_rows({"lines": [1, 2]}) == listed_rows("not json") == b""
    # a restored state whose rows are not whole, or too many, keeps none
    from streamguard.signals.result_stall import ResultStallState

    assert ResultStallState(rows=b"\x01" * 7, row_at=3).rows == b""
    assert ResultStallState(rows=b"\x01" * (6 * LISTED_ITEMS + 6)).rows == b""
    assert ResultStallState(rows=rows, row_at=1).rows == rows


def test_a_named_read_of_each_listed_name_is_that_names_answer() -> None:
    """Twenty-two data sets listed in a file, each then looked up by name, most answering
    "NOT IN CATALOG": each data set's answer, though no name is shaped as an id. The same
    names never listed, guessed one after another, are one hunt."""
    names = [f"PROD.FX.{word(n).upper()}.DAILY" for n in range(22)]
    def lookups(listed: bool) -> list[Any]:
        trace = step("read_file", {"path": "/decom/fx_datasets.txt"}, "\n".join(names) if listed else "(empty)")
        for name in names:
            trace += step("dataset_info", {"dataset": name}, None, f"IKJ58503I DATA SET '{name}' NOT IN CATALOG")
        return trace

    assert hits(lookups(True)) == []
    assert hits(lookups(False)) != []


def test_a_write_refused_because_its_item_exists_is_that_items_answer() -> None:
    """A chart of accounts set up from a list, most of the defaults' codes refused as "not
    unique": each code's answer. The same account created again and again is the same
    refusal again."""
    def creates(code_of: Callable[[int], str]) -> list[Any]:
        trace: list[Any] = []
        for n in range(14):
            trace += [ToolCall(session="s", tool="xero_create_account", kind="write",
                               args={"Code": code_of(n), "Name": f"Account {word(n)}", "Type": "EXPENSE"}),
                      ToolResult(session="s", tool="xero_create_account",
                                 error="ValidationException: Please enter a unique Code.")]
        return trace

    assert hits(creates(lambda n: str(400 + 4 * n))) == []
    assert hits(creates(lambda n: "400")) != []


def test_a_label_selector_in_a_command_names_what_it_reads() -> None:
    """`amtool config routes test service=<name>` for each of fourteen services, most
    routed to the same receiver: each service's answer. The same service tested again and
    again is the same answer."""
    sweep: list[Any] = []
    for n in range(14):
        sweep += step("bash", {"command": "amtool config routes test --config.file=alertmanager.yml "
                                          f"service=svc-{word(n)} severity=critical"}, "pd-payments\n")
    assert hits(sweep) == []
    again: list[Any] = []
    for n in range(14):
        again += step("bash", {"command": "amtool config routes test --config.file=alertmanager.yml "
                                          f"service=ledger severity={word(n)}"}, "pd-payments\n")
    assert hits(again) != []


def test_a_short_nested_value_the_error_sets_off_is_the_calls_echo() -> None:
    """Reworded Jira transitions (`transition={"name": "Done"}`, `{"name": "Close"}`, ...),
    each refused with an error naming the transition in brackets: one refusal again and
    again. Errors that differ in what they say beside are still news."""
    names = ["Done", "Close", "Closed", "Resolve", "Finish", "Complete", "Mark Done", "Ship", "End", "Stop",
             "Shut", "Wrap"]
    refused: list[Any] = []
    for name in names:
        refused += step("jira_transition", {"key": "DIGI-2231", "transition": {"name": name}}, None,
                        f'400 Bad Request: workflow operation ({name}) is not valid for the current state of DIGI-2231')
    assert hits(refused) != []
    varied: list[Any] = []
    for name in names:
        varied += step("jira_transition", {"key": "DIGI-2231", "transition": {"name": name}}, None,
                       f"400 Bad Request: field {name.lower().replace(' ', '_')}_reason is required")
    assert hits(varied) == []


def test_a_regression_over_random_seeds_runs_one_test_per_seed() -> None:
    """One random test run with fourteen seeds (`+ntb_random_seed=N`), each passing alike:
    a seed sweep. The same seed run again and again is one answer again and again."""
    sweep: list[Any] = []
    for n in range(14):
        seed = 60656407 + 7919 * n
        sweep += step("run_command", {"command": f"cd sim && ./simv +UVM_TESTNAME=dma_rand +ntb_random_seed={seed} "
                                                 f"| tail -3"}, "UVM_ERROR :    0\nUVM_FATAL :    0\nTEST PASSED\n")
    assert hits(sweep) == []
    again: list[Any] = []
    for n in range(14):
        again += step("run_command", {"command": f"cd sim && ./simv +UVM_TESTNAME=dma_rand +ntb_random_seed=1 "
                                                 f"| tail -{3 + n}"}, "UVM_ERROR :    0\nUVM_FATAL :    0\nTEST PASSED\n")
    assert hits(again) != []


def test_review_cases_of_the_sweep_readings_stay_loops() -> None:
    """A CLI's `args` that is no line reads nothing and raises nothing; a refusal naming
    the value the call never changes is about that value, whatever ids change; a value
    every row of a listing shares names no row; a restored cursor out of range starts
    again."""
    from streamguard.signals.result_stall import ResultStallState, listed_rows

    odd = [ToolCall(session="s", tool="run", args={"command": None, "args": ["status"]}),
           ToolResult(session="s", tool="run", result="ok"),
           ToolCall(session="s", tool="run", args={"command": 1.5, "args": float("nan")}),
           ToolResult(session="s", tool="run", result="ok")]
    assert hits(odd) == []
    duplicate: list[Any] = []
    for n in range(14):
        duplicate += [ToolCall(session="s", tool="xero_create_invoice", kind="write",
                               args={"InvoiceNumber": f"INV-{1000 + n}", "Reference": "PO-4411", "Amount": 120}),
                      ToolResult(session="s", tool="xero_create_invoice",
                                 error="ValidationException: Duplicate reference: PO-4411 is already assigned to "
                                       "invoice INV-0999")]
    assert hits(duplicate) != []
    invoices = {"invoices": [{"invoice_id": f"in_{n:04d}", "customer": "cus_A1B2C3", "currency": "usd"}
                             for n in range(64)]}
    assert all(struct.unpack_from("<H", listed_rows(invoices), 6 * n + 2)[0] == 0 for n in range(64))
    ridden = step("list_invoices", {"status": "open"}, invoices)
    for n in range(20):
        ridden += step("get_customer", {"customer_id": "cus_A1B2C3", "note": f"check {word(n)}"},
                       {"id": "cus_A1B2C3", "delinquent": False})
    assert hits(ridden) and hits(ridden)[0] <= 12
    rows = listed_rows(invoices)
    assert ResultStallState(rows=rows, row_at=-100).row_at == 0
    assert ResultStallState(rows=rows, row_at=65).row_at == 0
    assert ResultStallState(rows=rows, row_at=64).row_at == 64


def test_a_list_a_script_prints_hands_its_items_over_to_an_interpreters_calls() -> None:
    """A bibliography's keys printed by a script (`print([e['ID'] for e in bib.entries])`),
    then each key checked through the interpreter (`print(check('wei2022cot'))`), most
    answering "NO MATCH": each key's answer. Keys never printed, guessed one after another,
    are one hunt."""
    keys = [f"{word(n)}20{n:02d}" for n in range(16)]
    def checks(printed: bool) -> list[Any]:
        listing = f"{len(keys)}\n{keys!r}\n" if printed else f"{len(keys)}\n"
        trace = step("execute_python", {"code": "print([e['ID'] for e in bib.entries])"}, listing)
        for key in keys:
            trace += step("execute_python", {"code": f"print(check('{key}'))"}, "NO MATCH\n")
        return trace

    assert hits(checks(True)) == []
    assert hits(checks(False)) != []
    assert listed_values("18\n['vaswani2017', 'devlin2019', 'brown2020']") == listed_values(
        ["vaswani2017", "devlin2019", "brown2020"])
    assert listed_values("['only', 'two']") == b"" and listed_values("see ['a b c', 'x']") == b""


def test_the_tests_pytest_selects_by_name_are_what_a_run_reads() -> None:
    """Functional tests run one by one (`pytest tests/test_functional.py -k '<name>'`),
    each answering "1 passed": each test's answer. The same test run again and again is
    one answer again and again."""
    sweep: list[Any] = []
    for n in range(14):
        sweep += step("bash", {"command": f"cd /testbed && python -m pytest tests/test_functional.py -q -k "
                                          f"'used_before_assignment_{word(n)}]' | tail -4"},
                      ".    [100%]\n1 passed, 1021 deselected in 1.05s\n")
    assert hits(sweep) == []
    again: list[Any] = []
    for n in range(14):
        again += step("bash", {"command": "cd /testbed && python -m pytest tests/test_functional.py -q -k "
                                          f"'used_before_assignment_a]' | tail -{4 + n}"},
                      ".    [100%]\n1 passed, 1021 deselected in 1.05s\n")
    assert hits(again) != []


def _float_sweep(values: list[str], outputs: dict[str, str]) -> list[Any]:
    """`python -c "... print(repr(_format_float(v)))"` for each value: one pass."""
    trace: list[Any] = []
    for value in values:
        command = f'cd /testbed && python -c "from card import _format_float; print(repr(_format_float({value})))"'
        trace += step("bash", {"command": command}, outputs[value])
    return trace


SWEPT = ["0.009125", "0.1", "1.0", "1e-10", "-0.0", "3.141592653589793", "123456789.123456789",
         "1e300", "2.5e-05", "1/3", "6.02214076e23", "100.0"]


def test_a_sweep_before_and_after_a_fix_is_the_fix_checked() -> None:
    """Twelve values printed before a fix and again after it, ten unchanged: the second
    pass checks what the write did, and its unchanged answers are no stall. The same pass
    a third time with no write between, or the edit re-applied and the pass re-run again
    and again, is judged as before."""
    before = {v: repr(f"{v}-before") for v in SWEPT}
    after = dict(before, **{"0.009125": "'0.009125'", "1e-10": "'1E-10'"})
    edit = step("bash", {"command": "cd /testbed && sed -i 's/.16G/repr/' card.py"}, "")
    fixed = _float_sweep(SWEPT, before) + edit + _float_sweep(SWEPT, after)
    assert hits(fixed) == []
    # the pass again with nothing written between: the same answers, stale
    assert hits(fixed + _float_sweep(SWEPT, after)) != []
    # edits that change nothing, each followed by the same pass: a re-check once, stale
    # after (reported by long-loop, the same calls again, which result-stall defers to)
    futile = _float_sweep(SWEPT, before)
    for n in range(4):
        futile += step("bash", {"command": f"cd /testbed && sed -i 's/x{n}/y{n}/' card.py"}, "")
        futile += _float_sweep(SWEPT, before)
    assert any(a.severity == "critical" and a.signal in ("result-stall", "long-loop") for a in alerts(futile))
    # one pass after the edit, then edits changing nothing between single checks of one value
    one = _float_sweep(SWEPT, before) + edit + _float_sweep(SWEPT, before)
    for n in range(6):
        one += step("bash", {"command": f"cd /testbed && sed -i 's/z{n}/w{n}/' card.py"}, "")
        one += _float_sweep(SWEPT[:1], before)
    assert any(a.severity == "critical" for a in alerts(one))


def test_a_stuck_cursor_fetched_into_new_scratch_files_is_a_stall() -> None:
    """The same page fetched again and again with the cursor it hands back, each fetch into
    a new scratch file read back by the same line: the file is the line's own answer on its
    way out, not a new place read, so the answers are stale. Fetched into files kept for
    later, each page is a write."""
    cursor = "eyJvZmZzZXQiOjEwMDB9"

    def fetches(scratch: str) -> list[Any]:
        trace: list[Any] = []
        for n in range(2, 16):
            line = f"cx-api get '/v1/transcripts?limit=500&cursor={cursor}' > {scratch}{n}.json"
            trace += step("run_command", {"command": f"{line} && jq '{{n: .n, next: .next}}' {scratch}{n}.json"},
                          {"returncode": 0, "output": f'{{"n": 500, "next": "{cursor}"}}'})
        return trace

    assert hits(fetches("/tmp/p"))
    assert hits(fetches("exports/page-")) == []


def test_writes_over_items_between_the_same_search_are_a_batch_not_futile() -> None:
    """A rebooking batch: each reservation read, the same flight search, that reservation
    moved. The search checks none of the writes, so its answer alike after each is no
    verdict on them. The same reservation moved again and again, the search alike after
    each, is futile."""
    flights = [{"flight_number": "HAT206", "date": "2024-05-21", "available_seats": {"economy": 9}}]

    def batch(ids: list[str]) -> list[Any]:
        trace: list[Any] = []
        for n, rid in enumerate(ids):
            trace += step("get_reservation_details", {"reservation_id": rid},
                          {"reservation_id": rid, "user_id": f"user_{rid}", "flights": [{"flight_number": "HAT243"}]})
            trace += step("search_direct_flight", {"origin": "DEN", "destination": "SFO", "date": "2024-05-21"},
                          flights)
            trace += step("update_reservation_flights",
                          {"reservation_id": rid, "cabin": "economy", "flights": [{"flight_number": "HAT206"}]},
                          {"reservation_id": rid, "flights": [{"flight_number": "HAT206"}], "n": n})
        return trace

    assert hits(batch([f"R{n:05d}" for n in range(12)])) == []
    # (the cycle signal halts that loop first; without it, result-stall does)
    alone = 'mode = "warn"\ndisabled_signals = ["tools-without-text", "near-duplicate-calls", "alternating-tool-cycle"]\n'
    assert hits(batch(["R00001"] * 12), alone)
    assert hits(batch([f"R{n:05d}" for n in range(12)]), alone) == []
    # two or three items alternated are no batch: the same check failing after each
    assert hits(batch(["R00001", "R00002"] * 8), alone)
    assert hits(batch(["R00001", "R00002", "R00003"] * 6), alone)


def test_a_search_that_hits_in_another_file_is_that_files_answer() -> None:
    """One pattern swept over named headers, each hit the same line of a shared template
    (`74: fmt::format_to(formatted, "{}", msg.payload);`), each fixed by an edit: every hit
    is news of its file. Nothing found in one more file is nothing found again, and the
    same hit in the same file asked again is the same answer."""
    line = '        fmt::format_to(formatted, "{}", msg.payload);'

    def grep(path: str, hit: bool) -> list[Any]:
        return step("bash", {"command": f"grep -n 'fmt::format_to(' include/sinks/{path}"},
                    f"{70 + len(path)}:{line}" if hit else "")

    sweep: list[Any] = []
    for n in range(16):
        sweep += grep(f"sink_{word(n)}.h", True)
        sweep += step("bash", {"command": f"sed -i 's/fmt::format_to(/fmt_lib::format_to(/' include/sinks/sink_{word(n)}.h"
                                          f" && grep -c 'fmt::format_to(' include/sinks/sink_{word(n)}.h"}, "0")
    assert hits(sweep) == []
    hunt: list[Any] = []
    for n in range(12):
        hunt += grep(f"sink_{word(n)}.h", False)
    assert hits(hunt)
    # (the same search re-sent as it was is repeated-tool-call's; reworded, this signal's)
    again: list[Any] = []
    for n in range(12):
        again += step("bash", {"command": f"grep -n{' -w' * (n % 2)} -m {n + 1} 'fmt::format_to(' include/sinks/sink_b.h"},
                      f"74:{line}")
    assert hits(again)


@pytest.mark.parametrize("nothing", [{"returncode": 1, "output": ""}, "Exit code: 1", "(no output)"])
def test_a_search_that_finds_nothing_in_directory_after_directory_is_stale(nothing: Any) -> None:
    """Nothing found, however the runtime wraps it, is no hit of the place searched: one
    absent handler hunted through sixty directories is one answer again and again."""
    trace: list[Any] = []
    for n in range(20):
        trace += step("run_command", {"command": f"grep -rn 'legacyHandler' src/module_{word(n)}/"}, nothing)
    assert hits(trace)


def test_a_reworded_search_whose_words_look_like_paths_finds_no_new_place() -> None:
    """What a search looks for is no place, even when it looks like one: the same line
    found for eighteen rewordings of a route is the same answer."""
    terms = ["/api/v2/orders", "v2/orders/:id", "routes/orders", "api/v2/orders/", "/v2/orders", "orders/:id",
             "/orders/:id", "v2/orders/", "api/v2/orders/:id", "/api/v2/orders/:id", "routes/orders.ts",
             "src/routes/orders", "/api/v2/", "api/v2/", "v2/orders/:orderId", "/orders/:orderId",
             "orders/:orderId", "/api/v2/orders/:orderId"]
    trace: list[Any] = []
    for term in terms:
        trace += step("run_command", {"command": f'grep -rn "{term}" src/'},
                      "src/routes/orders.ts:42:  router.get('/api/v2/orders/:id', getOrder);")
    assert hits(trace)
