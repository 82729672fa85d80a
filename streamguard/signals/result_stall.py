"""``result-stall``: result after result, the agent learns nothing it did not already know.

What it catches
    The loop whose calls change while its answers do not. An agent searching
    for a file that does not exist rewords the name every time ("No matches
    found for <term>"); an agent writing prose instead of commands gets "command
    not found" back, each time from a different line number of the shell; an
    agent re-sending a rejected edit in three rotating variants gets the same
    linter complaint. No call-keyed detector sees these: every call is new. The
    answers are not, once the parts that always differ are masked.

    Each result is reduced to a *template*: its text (the payload of a success,
    the error of a failure; its first 2,048 characters) with quoted strings
    near its start and whitespace collapsed, then hashed. Digits are masked in
    the answers where they are noise: errors (``bash: line 27424``, a new
    line number for every failing command) and answers to searches ("No
    matches found ... (312 files searched)"). A success of any other call keeps
    them (only the shell's ``line N`` is masked): there the numbers are the
    answer (a metric per run, a count per column, a page of a log), and
    masking them would make every sweep a stall; there a quoted number is a figure,
    not a term (``Kenya ('2', '3', '0')``: thirteen medal tables read by one script
    were one answer thirteen times), and an answer that is one quoted string and nothing
    else is that value (``'http_response_code'``, a repr printed). A structured payload (a JSON object or array from an API tool) is
    not masked: its numbers and strings are its data, so it is compared exactly
    (its fingerprint, or the agent's ``result_digest``), and so is a string
    payload that is JSON text (how MCP servers and many frameworks deliver
    API answers: pages of a list, one route on several dates). One exception: a
    search's structured answer that found nothing (``[]``, ``{"query": "blue
    shoe", "results": []}``: ``found_nothing``; the strings the search was given,
    named back under any name, ``"supplier": "SNDSRC"``, are no hit either) is read
    like a search's empty output, since an API that echoes the query would make every
    rewording look new; so would one that stamps its own request on the answer (a
    ``request_id``, when it was made, how long it took: twenty flight searches
    reworded for a route nobody flies, each "no offers" under a new
    ``offer_request_id``, between the airport lookups, are halted at the session's twelfth
    call). So is a web search's answer that names only addresses the session's
    searches found before (``FOUND_URLS`` of them remembered; at least two in the
    answer; a knowledge base's answer names its documents instead, Onyx's and Vectara's
    ``document_id``, and a document with the passage it answered with is an address;
    the address of the results page itself, which carries the query, ``bing.com/search?q=...``,
    is none, and a results page's trail after an address, ``https://host › wiki › Page``,
    is part of it: Magentic-One's web surfer answers a search with the page it opened,
    so every rewording named a new address, and a trail cut to its host made new pages of
    one site look found before),
    when the search rewords a recent one (it shares at least two and a
    third of its words with one of the last ``QUERIES`` searches made since the
    session's searches first found an address): reworded searches
    for a standard that does not exist, each answered by the same five pages in
    another order, find nothing new, while a questionnaire answered question by
    question from the same few documents asks something new each time. A failure whose
    error says only ``exit code 1`` is read with the output it came with; a failure told
    as a success's text (an answer that opens with ``Error:``, ``ERROR:``, ``[ERROR:`` or
    ``FATAL:``, as SQL tools and MCP database servers send theirs) is read without its
    query or job id and without the call's own words it echoes, its numbers kept (a
    column reworded a dozen times, each error with a new Snowflake query id, was a new
    answer every time; a page of a log whose lines open with ``ERROR:`` is still a page).
    A step
    is *stale* when its template was already received in this session. The
    signal counts consecutive stale steps and trips at the threshold. A result
    with a template not seen before is news and resets the count; so is a write
    whose result is new (an edit that took). More rules keep ordinary work out:

    * a write tool's short acknowledgement (``is_write_acknowledgement``:
      "File written successfully.", ``{"ok": true}``) is news, however often
      it was received: each write changed something. Not so the *same* write
      acknowledged the same way again (the same rows appended after every
      fetch of a page that never changes, one file rewritten with the same
      text): that is stale, since the write is remembered by its acknowledgement
      mixed with its call's key (one more memory entry per distinct write). A
      command's output, or an editor showing the file after its edit, is read
      like any answer, but for one short line that names the act its
      sub-command did and says nothing of it having done nothing or failed
      (``git lfs track '*.wav'`` answering ``Tracking "*.wav"``, ``kubectl label``
      answering ``pod/web-1 labeled``; not ``"*.psd" already supported``): a
      blind batch's sweep of thirteen extensions put under Git LFS, answers
      alike once quoted text is masked, was halted at its fifteenth call;
    * the answer to a call that reads what it names is kept with those names
      (``read_names``: for a command runner, the paths, the URLs' scheme,
      host and path (the path's numbers masked), the places of cloud and cluster
      CLIs (``--region``,
      ``--namespace``, ``--bucket``, ``--resource-group``...), the host of an
      ``ssh``, the object a ``gh run view <id>`` reads and the one a ``kubectl exec``,
      ``logs``, ``get`` or ``describe`` names (``_kube_object``: twenty-four gateway pods
      each answering 200 to a readiness probe were halted as a stall in a blind batch),
      in the first
      ``TARGET_SPAN`` characters of its command, ``cat
      a/Dockerfile``, ``curl https://eu.example.net/...``, ``aws ec2
      describe-instances --region eu-west-1``, ``ssh api-03 "zgrep ..."``, an AWS
      resource's id or ARN, ``AttributeValue=vol-0617ec31494da09c7``; the address a
      named fetch is given (``requests_head(url=...)``), read as a command line's; the
      tables a SQL query reads (``sql_tables``: its ``sql``, ``query`` or
      ``statement`` argument, ``SELECT ... FROM t``), even through a tool named
      as a search; else, or when the command names none, its path-shaped
      arguments and a named tool's identifiers (``_ids``: arguments named as
      ids, ``account_code``, ``entity_id``, ``issueKey``, as places or as whom the
      call is about, ``host``, ``bucket``, ``user``, ``mailbox``; values shaped as ids
      under other names, ``workCenter="CNC-06"``, ``isin="XS2574039921"``, not
      under names of text, windows of time, paths or commands; the identifiers a
      structured filter selects, ``query="child.name=lnx-epic-app07^..."``, or, as
      an object, the ids and account numbers among its values, Cost Explorer's
      ``Filter: {"And": [{"Dimensions": {"Key": "LINKED_ACCOUNT", "Values":
      ["817876255759"]}}]}``; name and value pairs, CloudWatch's ``Dimensions:
      [{"Name": "BucketName", "Value": "acme-logs"}]``: a blind batch's sweeps of
      bucket sizes, of untagged spend per account and of CloudTrail's last
      attachment per volume, answers alike between items, were halted as stalls);
      never a write, and of a search only the tables its SQL reads and the ids its
      arguments name (``list_annotations(build_number=18899)``: a flaky test's failure
      found again in build after build is each build's answer; a reworded search's
      words are no place; the indicators its query looks for, ``_indicators``, are
      what it finds nothing for, below), or, for a command's search, the places its line
      names when it finds something (the same line found in another header is that
      header's news, as ``grep -n`` numbers it, ``_numbered_hits``; its quoted words are
      what it looks for, no place, ``_search_places``; nothing found is nothing found
      again);
      and not when the answer reports an error or that the place is not there,
      ``says_missing``, since one more guessed id or table without it is the
      hunt going on; but a failure saying the place did not answer, ``TIMEOUT: no
      response``, is that place's silence, kept with the ids its call names, a named
      write's too: a sweep of meters, a few of which time out, is each one's): eleven Dockerfiles of one
      shared template are eleven answers, and so are twelve regions answering
      one version, or ``[]``, eighteen buckets answering one configuration,
      twenty-two hosts whose logs do not hold a request id, and thirty tables
      counting no null; the same file read again
      unchanged is the same answer, and so is one listing paged as ``?page=2``,
      ``?page=3`` or ``/page/3``... (a URL's query and the numbers of its path are
      the page, not the place; the words of its path are: twenty-four pricing
      pages checked with ``curl -sI`` each answering ``cf-cache-status: MISS``
      are twenty-four answers). A
      call that names nothing (SWE-agent's ``goto 24`` in a file shorter than
      its window) is read by its text alone;
    * a name a listing handed over is no guess: the values a read's answer lists
      (``listed_values``: the strings of a list of three or more, at the top of a
      structured answer or JSON text or under its top-level object, and the first
      ``LISTED_FIELDS`` strings of each element object; or a command's output of three
      or more bare words and nothing else, one a line or tab-separated, as ``aws ...
      --output text`` or ``ls`` prints names, or of names one a line, a few of two or
      three words, ``_listed_lines``: a patient's medicines, "calcium carbonate" among
      them; each value once, the newest
      listing's first ``LISTED`` remembered) make a later search whose query or name
      argument (``_LISTED_TERM_KEYS``, never its scope) is one of them that item's (kept
      per call, ``terms``): any answer that is no error and tells of no outage is its
      answer ("no hits" too); and a read naming one (an argument string of six characters
      or more, as its echo is kept: the newest call's, so of parallel reads only the last
      one's; or an address whose query names one as its server reads it, percent-decoded,
      ``?search=openfda.generic_name:%22ramipril%22``, a DOI whole in
      ``?filter=updates:10.1016/j.clnu.2019.06.011``; or a shell command naming one among
      its words, ``aws s3api
      get-bucket-lifecycle-configuration --bucket <listed>``) answered that what was
      asked of the item is not there (``_says_absent``:
      ``NoSuchLifecycleConfiguration``, ``ResourceNotFoundException``, ``404 Not Found``,
      "could not find", as a failure or told in an answer of at most ``MISSING_ANSWER``
      bytes; not the host, a file, a module, a token, credentials, a table or the route
      the call went through) is that item's answer. News the first
      time, stale after. Fifteen counterparties of an onboarding batch screened one by
      one, each "no hits", or sixteen buckets of an account each without a lifecycle
      configuration, are a sweep; the same names never listed are still the hunt, one
      listed item asked again and again, or the listing swept a second time, are the same
      answers again, and an error that says nothing of the item (an outage, a rate limit,
      a refused token) answers every item alike;
    * a call that waits on purpose (``sleep 60``, ``kubectl rollout status``) is
      not read at all (signals/facts.py); a read after a wait of its own
      (``sleep 120; ray job status ...``: ``CallFacts.waits_first``) is read, its
      answer following a deliberate wait (``ResultView.waited``), so a status under
      way is a poll's answer and a job that says FAILED again and again is stale;
    * a bare answer (at most ``TINY_ANSWER`` characters: a number, ``true``,
      ``OK``) is neither stale nor news unless it answers a search: "200" for
      the eleventh endpoint says what the call asked, not that nothing is new;
    * an answer that only reports the interface act its call asked for
      (``reports_act``: "Clicked on Button 'OK' at (1018,712).", "Typed text into
      element 'Result'.", "Pressed key '{Enter}'", at most ``ACK_BYTES``) is news the
      first time and neither stale nor news after: it restates the call and shows
      nothing of the screen. Six mail rules set up through one dialog, or fifteen
      samples entered into one form, answer the same clicks the same way every time;
      what the agent sees (a screenshot's text, a tree of elements, a read-back) is
      read as any answer, so the same procedure whose screen never changes still
      stalls. (Two healthy desktop sessions of the twenty-fifth blind batch were
      halted on their clicks alone; no loop of any batch or of the corpus depended on
      them);
    * an empty result is stale only for a search (nothing found, again); an
      empty result of any other call (``mv``, ``mkdir``) is neither stale nor
      news, so a tidy-up of eleven silent moves does not count, and nor is an
      answer that says "none" in other words (``says_bare_value``: ``Listed 0
      items.``, ``(0 rows)``, ``[{"stuck": 0}]``, ``[]``, at most 64
      characters): a sweep of sixteen regions listing no stray machine, or of
      days counting no stuck payment, through calls that are no search; nor is a
      heading with nothing under it (``Restaurant in Soho: ``, one line ending in a
      colon, from a named tool: a runner's ``Password for user postgres: `` is a prompt,
      and ``Traceback (most recent call last):`` no heading; AgentDojo's listings name the place asked in their heading, so each empty one
      was news, and an agent re-reading London's restaurants between reworded districts
      was never halted), unless this very call had the same empty heading before (a
      city spelt seven ways, each spelling asked again lap after lap: stale); a silent write
      is news, except a line that only changes the shell (``export``, ``cd``):
      it is a write for the futile-write rule, but an agent setting variable
      after variable between the same failures has learnt nothing new;
    * a failed search is read without the absolute paths near its start: the
      scope it found nothing in ("No matches found for <term> in
      /repo/src/A.java") is the call's own, so a hunt through file after file
      for a phrase that is not there is one answer again and again, as a
      command runner's empty ``grep`` already is. In the real-session benchmark
      this catches one more judged loop (six files searched for one absent
      phrase, halted 30 calls before the budget ran out), halts three sooner
      (by 1 to 3 calls), and changes no normally ended session and no judged
      not-loop;
    * an HTTP response's ``Date`` header (``date: Wed, 29 Oct 2025 12:28:00 GMT``, as
      ``curl -i`` prints it) is not news: it says when the server answered. One health
      endpoint fetched under forty-eight reworded command lines, each 503 with its own
      date, was never stale in a blind batch;
    * a failure's opaque ids are not news: a UUID or a run of 16 to 64 lower-case hex
      digits (``correlationId: c2347299-f88c-...``, a trace id) in an error is masked,
      so a rejected request re-sent with cosmetic changes, answered each time by the
      same error under a new correlation id, is one failure again and again;
    * what a failure echoes of its call is not news: the newest call's longer
      argument strings (6 to 256 characters; arguments sent as a JSON object in
      a string are read as that object) are masked in its error, longest first
      (``ECHO_MIN``, ``ECHO_MAX``). SQL reworded
      eight times, each error quoting the query back ("no such column: x [SQL:
      SELECT ...]"), is one failure eight times. Only the answer to the newest
      call is read so (parallel calls keep their echoes); a command runner's
      output quoting its command is a transcript, and a success is read as it
      is: "Order 12345 shipped" for the tenth order id is ten answers, and
      "Executed: INSERT ..." for the eighth statement is eight. Except a search's
      answer that says in words it found nothing (``_FOUND_NO``: "Could not find
      method get_site_pages in the codebase."): its term is its call's echo too;
    * the same call answered by an outcome that differs from the last one only
      in its numbers is a poll (a job's elapsed time, a queue length): neither
      stale nor news. Masking digits would otherwise turn every progress bar
      into a stall. Not when the numbers that moved are only the times stamped on
      it (``steady_answer``: timestamps, a run's duration, an age in an answer
      that says it ended), the same for two answers of the call with no other
      answer of it between, in an answer the
      comparison reads whole (``GIST_TEXT_LIMIT``): a background run that ended,
      read again between sleeps (Claude Code's ``BashOutput``,
      ``<status>completed</status>`` and a new ``<timestamp>`` each time), is
      asked again, not polled; so is a log's last line saying the same failure at
      a new time (a service retrying a database that never comes up, read after
      each sleep: halted at the eleventh reading). In the blind batches this halts
      three loops that were never halted (a run killed by the kernel, a build
      dead in the background, a finished end-to-end suite, each read for 20 to
      30 calls) and two sooner, and changes no healthy session's alerts nor any
      session of the real-session benchmark;
    * an answer already held that says the work is still under way
      (``says_in_progress``: ``"status": "processing"``), when the session
      paused since the same call was last answered (a wait, the user's message,
      ``[waits] pause_seconds`` of quiet: ``ResultView.paused``), is a poll's:
      not stale, and it ends a run of stale answers (the finished parts asked
      again beside it, CI checks polled one by one while the last one runs, are
      part of that wait). Four exports polled in turn between waits are waiting;
      the same statuses asked with no pause, a status never asked before (unless
      its call names a place of its own, above), or "failed" asked again, are
      stale as before;
    * nothing found, where the session's user asked the agent to watch for something
      to happen ("keep an eye on my inbox for the signed MSA": ``[waits]
      asked_watches``) and asked again after a deliberate wait (``poll_answer``), is
      the answer the watch awaits: a poll's, not stale. Two healthy inbox watches of
      one blind batch, searched after each five-minute sleep, were halted at the
      eighth empty search; the same searches with no watch asked, or with no wait
      between them, are stale as before;
    * a page past the end of a listing is nothing found: a call that asks for
      another page of the listing the latest call that asked for a page paged through (only its page
      argument changed: ``page``, ``pageNo``, ``offset``, ``skip``, ``start``...,
      ``PAGE_KEYS``, among its arguments or those of one object among them, an HTTP
      tool's ``params``) answered by a page with nothing on it (``empty_page``: its lists
      all empty, beside numbers and at most three short strings, ``{"people": [],
      "pagination": {"page": 7, "total_pages": 6}}``) is read like a search's empty
      answer, whatever page number and totals it repeats; Apollo's people asked for
      page 7, 8, 9... of six are halted at the eighth. The first page of twelve
      listings, each empty, is no walk past an end (each call changed more than its
      page); a page whose links or headers are not empty (a FHIR bundle's ``link``)
      is a page with something on it;
    * the answers to a round of parallel calls (sent together, before any of them
      was answered) are judged as one: a round with news in it moved, and its
      stale answers (the finished parts asked again beside the one that just
      finished: fourteen prescription files' processing polled in rounds, eleven
      "PROCESSED" again and three newly so) do not count; a trip reached inside a
      round waits for its last answer (or for the next call, when one of its calls
      is never answered), and a round without news trips then. An agent polling
      what has all finished, in parallel, is still halted, one round later at most.

Interleaved stalls: 9 stale of the last 12 (``window_threshold`` of ``window``)
    An agent hunting for something that is not there often does a little real
    work between the futile attempts (opens a file, lists a directory), which
    resets a consecutive count. Three quarters of a dozen answers already held
    is the same verdict with room for that (the long-loop detector uses the
    same share); a latch holds until half the window is news again.

A write's checks, before and after it
    A call answered once before a successful write and asked again after it, answered
    as then, is that write's check of what it did not touch: neither stale nor news,
    the first time (``rechecks``: the last ``RECHECKS`` calls' answers, 128 bytes). A
    fix's before-and-after sweep, twelve values printed before it and again after, ten
    unchanged, was halted in a blind batch at the ninth re-check; so were a combinations
    script re-run after a fix and a configuration matrix rebuilt after one. The same
    call asked a third time, or again with no write between, is stale as before, so a
    loop of edits that change nothing, each followed by the same checks, loses one
    lap to it (``futile_writes`` counts those writes apart). In the real-session
    benchmark two judged loops of re-applied edits are halted one and three calls later
    (24 and 2 calls before their budget ran out instead of 25 and 5); no other session
    changes, and the median calls saved stays 20.
    (Writes are read by ``futile_writes``' path, so ``futile_writes = 0`` switches
    this off too.)

Futile writes: 5 in a row (``futile_writes``; 0 switches the rule off)
    The period-2 loop "edit, run, same result": every edit is new (so its result
    is news), but the check after it - the same call - answers exactly as it
    did before the edit, because the edit does not reach what the check runs
    (the wrong file, a compiler that is not installed). For the last 8 checks
    (non-write calls, and failed writes such as a refused edit or a broken
    build, which changed nothing) the signal remembers their last answer,
    compared with only the shell's line numbers masked (``bash: line 27424``)
    and, in a failure (or an answer that reports one as output: jest's ``FAIL ...
    Time: 0.407 s`` through a runtime that sends no exit code), how long the run took
    and when (``1 failed in 0.29s``, ``Time elapsed: 0.123 s``, ``12:04:31``), so a test failing with other
    values after an edit counts as changed and one failing the same way more
    slowly does not. A command line counted as a write only by the generous
    guess of signals/facts.py (a build, a test script) whose successful output
    reports a failure (``compiled with 1 error in 8211 ms``: ``npm run build |
    tail`` loses the exit status) changed nothing either, and answers like a
    check, its run time masked as a failure's (an editor's write is no guess,
    whatever the code it shows says). When
    a check re-run after a successful write returns its previous answer five
    times in a row, the writes are futile. Four would also catch a normally
    finished session that recovered on the next call; five does not. Status
    reads and waits (``steady_checks``, the polling globs of
    ``repeated-tool-call``) are no such checks: "healthy" before a deploy and
    "healthy" after it is the answer hoped for, not a futile deploy. The first
    check after a write is also remembered under the write: the same write
    re-sent as it was, and the check after it answering as it did the last time,
    is futile whatever the check's own arguments (one create request re-sent,
    each time answered by a new request token whose status, a status read among
    them, says FAILED for the same reason: halted at the sixth create). A check that
    says the work is under way ("RUNNING" after each run started) or a success and no
    failure ("1 package finished" from the build between an edit and the trial that
    measures it) is no such verdict: in a blind batch, a tuning agent rebuilding after
    each parameter edit and a Lambda tuner reading each execution it started were
    halted so. Nor is a check after a named write to another item (``written``,
    ``to_new``: a rebooking batch, each reservation read, the same flight
    search, that reservation moved): the check reads nothing the writes changed, and a
    blind batch's 27 rebookings were halted so. An item is new when none of the last
    ``WRITTEN_ITEMS`` (8) written since the check last moved is it: the same item written
    again and again, or two or three alternated, is futile as before.

Threshold: 8 consecutive stale results (``threshold``, 3–100)
    In the judged development corpus (docs/detection.md) healthy sessions went
    at most 5 results in a row without news on a search streak and 6 on exact
    payloads; the loops ran 12 to 40. Eight clears the healthy maximum with
    margin and still fires a median of about twenty calls before the budgets
    ran out.

Memory: 128 templates (``memory``), first in, first out; 4 bytes each in one
``bytearray`` (512 bytes when full). A template pushed out reads as news once.
The newest call's echo until its answer comes: at most 4 values of at most 256
characters, with its key. The names of the last 8 calls that named what they read
(``READS``), 8 bytes each, so that the results of parallel reads find their own. The
current round of calls: three counters and two flags. The latest call that asked for a
page: two codes and its page. The words of the last ``QUERIES`` searches (32 bytes each)
and the call keys of the last ``REWORDED_KEPT`` reworded ones (4 bytes each). The newest
listing's rows in their order (``listed_rows``: 6 bytes a row, 384 bytes at most) and the
next row a sweep in that order would name.

Severity: critical, session scope
    Eight answers in a row that the agent already had, with nothing it wrote
    changing them: whatever it is trying, it is not moving. Under enforce the
    session is halted. ``no-new-state`` (warn, exact payloads, one turn) defers
    to this signal.

Known false positives
    A monitor that walks through many objects whose status lines differ only in
    quoted names ("pod 'web-1' Running"), since quoted strings near the start
    are masked; and a sweep of searches for *different* terms that all find
    nothing (a dead-code check over a dozen names), or for one term in a dozen
    places: a search that finds nothing is stale whatever it looked for and
    wherever, which is what makes reworded hunts for a missing symbol visible.
    Likewise a sweep of one place with other parameters whose answers are
    mostly "none": a count query per day on one table answering ``[{"stuck":
    0}]`` through an MCP ``query`` tool (a search, by its name) looks exactly
    like one page fetched again as ``?page=2, 3...``; the tables it reads are one.
    The same sweep through a read (``get_*``, a shell's ``gcloud ... list``) is
    no stall (``says_bare_value``, above), nor is a count per table. The
    converse is a missed loop: an agent guessing values for a count query
    through a read tool, answered ``0`` each time, is not counted here
    (``near-duplicate-calls`` warns on the reworded calls).
    Exempt the tool, or raise the threshold for that agent. A stream whose
    results carry no text gives this signal nothing to read.
"""

from __future__ import annotations

import re
import struct
import zlib
from itertools import islice
from typing import Annotated, Any, ClassVar
from urllib.parse import unquote_plus

import msgspec
from msgspec import Meta, Struct, field

from ..canonical import truncate_middle
from .base import (
    ACK_BYTES,
    AGO,
    GIST_TEXT_LIMIT,
    MASK_DIGITS,
    NO_OP_OUTCOME,
    NONE_ANSWER,
    RESPONSE_REFERENCE_TEXT,
    RUN_TIME,
    TIMESTAMP_ELEMENT,
    CallView,
    Finding,
    ResultView,
    Signal,
    SignalConfig,
    answer_gist,
    empty_page,
    failed_transiently,
    find_entry,
    found_nothing,
    has_response_reference,
    is_write_acknowledgement,
    json_value,
    mask_run_duration,
    named_back,
    poll_answer,
    reports_failure,
    says_bare_value,
    says_ended,
    says_in_progress,
    says_only_status,
    squeeze_marks,
    stamped_code,
    steady_answer,
)
from .facts import (
    COMPUTER_ACTS,
    EDITOR_COMMANDS,
    FLAG_READ,
    FLAG_RUNNER,
    FLAG_SEARCH,
    FLAG_SHELL,
    FLAG_WRITE,
    QUOTED_WORD,
    REDIRECT_TARGET,
    command_text,
    name_words,
    tool_glob_matcher,
)
from .repeat import DEFAULT_POLLING_TOOLS

SIGNAL_ID = "result-stall"
TEXT_LIMIT = 2048
MEMORY_LIMIT = 1024
_WIDTH = 4
ROUND_LIMIT = 64
"""Calls of one round counted at most (a runtime that never answers its calls)."""
_M32 = (1 << 32) - 1
_NOTHING = 0x4E4F4E45  # the template of "a search found nothing"
_EMPTY = 0x454D5054  # an empty answer, for the futile-write rule
TINY_ANSWER = 16
"""Longest bare answer (a number, ``true``, ``OK``: :data:`_BARE_ANSWER`), in characters,
that is neither stale nor news unless it answers a search."""
_BARE_ANSWER = re.compile(
    r"\s*(?:-?[0-9][0-9.]*|true|false|ok|yes|no|null|none|success|done"
    r"|on|off|open|closed|locked|unlocked|enabled|disabled)\s*",
    re.IGNORECASE,
)
_EMPTY_LISTING = re.compile(r"\s*[^\s:][^:\n]{0,62}:\s*")
"""A heading and nothing under it (``Restaurant in Soho: \\n``, ``Hotels in Rome:``): a
listing of nothing, one line ending in a colon."""
_PROMPT_WORDS = re.compile(r"(?i)pass(?:word|phrase|code)|\bpin\b|token|traceback|enter|press|continue")
"""A line ending in a colon that asks for something or begins a failure (``Password for
user postgres: ``, ``Traceback (most recent call last):``): no heading of a listing."""
FAILURE_HEAD = 256
"""Characters at the start of an answer read for a failure or an absence it reports,
where a place's answer is kept apart (an error sent as output says so first)."""
_MISSING_WORDS = re.compile("not found|no such|not exist|n't exist|404|invalid|unknown")
"""The place itself is not there (a guessed table, order or route): not "no results" in a
place that is, since a scan of a host that finds nothing has answered."""
_MISSING_FIELDS = ("detail", "message", "msg", "title", "status", "reason")
_FOUND_NO = re.compile(
    r"(?:could ?n[o']t|can ?n[o']t|unable to|did ?n[o']t|failed to) find|not found|no such|"
    r"(?:does ?n[o']t|did ?n[o']t) exist|there (?:is|are|was|were) no\b|\bno (?:\w+ )?(?:match|result)"
)
"""A search's answer that says in words it found nothing ("Could not find method x in the
codebase", "There is no method with name `x`", "No matches for x"): the terms it echoes
are its call's."""


_NUMBERED_HIT = re.compile(r"^(?:[^\s:]{1,256}:)?\d{1,9}[:-]", re.MULTILINE)
"""A line a search found, numbered as ``grep -n`` prints it (``74:    fmt::format_to(...``,
``src/a.h:74:...``)."""


def _numbered_hits(result: ResultView) -> bool:
    """Whether a command's search answered with lines it found, numbered: positive
    evidence of a hit (an empty output, an exit status, "(no output)" are none)."""
    payload = result.event.result
    return type(payload) is str and _NUMBERED_HIT.search(payload, 0, FAILURE_HEAD) is not None


def _search_places(call: CallView) -> str:
    """The places a command's search names (:func:`read_names` of its line without its
    quoted words, which are what it looks for)."""
    command = command_text(call.args)
    if not command or ("'" not in command and '"' not in command):
        return read_names(call)
    head = QUOTED_WORD.sub("''", command[:TARGET_SPAN])
    targets = _TARGETS.findall(head)
    return "\0".join(targets) if targets else ""


def _says_found_no(text: str) -> bool:
    """Whether a search's text answer says in words that it found nothing (:data:`_FOUND_NO`;
    substring tests first: most answers hold none of its words)."""
    head = text[:FAILURE_HEAD].lower()
    return ("find" in head or "found" in head or "exist" in head or "no " in head) and (
        _FOUND_NO.search(head) is not None
    )


def says_missing(payload: Any) -> bool:
    """Whether an answer reports an error or an absence as output: its first
    :data:`FAILURE_HEAD` characters (``Error: relation "t" does not exist``, ``404 Not
    Found``), or a JSON object's ``error``/``errors`` field, or its ``detail``,
    ``message``, ``status``... saying so (``{"detail": "Not found."}``, ``{"status":
    404}``). A JSON-text list of records (how MCP servers deliver an API's rows) is read
    record by record, by these rules: ``[{"style": "error", "body_html": "1 failure
    ..."}]``, a build's annotations, says what the build reported, not that the read
    failed; ``[{"message": "Not Found"}]`` says so. JSON text is read as the object it
    is, the same as a structured answer."""
    if type(payload) is str:
        if not _missing_text(payload):
            return False
        if payload[:1] not in ("{", "[") or not is_json_text(payload):
            return True
        # JSON text is read as the object it is, as a structured answer is (decoded only
        # here, where its words said "error": most answers do not).
        payload = _json_decoder.decode(payload)
        if type(payload) is list:
            # Record by record: `[{"message": "Not Found"}]` says so; `[{"style": "error",
            # ...}]`, a build's annotation, does not.
            return any(_object_missing(item) for item in payload[:_LIST_ITEMS_READ] if type(item) is dict)
    return type(payload) is dict and _object_missing(payload)


def _object_missing(payload: dict[Any, Any], nested: bool = True) -> bool:
    """:func:`says_missing` for a JSON object: a truthy field named for an error
    (``error``, ``errors``, ``errorMessages``, ``error_message``), or a ``detail``,
    ``message``, ``status``... saying so; an object one level down likewise
    (``{"result": {"error": "Order not found"}}``)."""
    for key, value in islice(payload.items(), 64):
        if value and type(key) is str and "rror" in key and key[:5].lower() == "error":
            return True
        if nested and type(value) is dict and _object_missing(value, False):
            return True
    for name in _MISSING_FIELDS:
        value = payload.get(name)
        if type(value) is str:
            if _missing_text(value):
                return True
        elif type(value) is int and 400 <= value < 600:
            return True
    return False


def _missing_text(text: str) -> bool:
    """A text's head reports an absence or an error (C-level scans; the pattern of
    :func:`reports_failure` only where one of its words is there)."""
    head = text[:FAILURE_HEAD]
    if _MISSING_WORDS.search(head.lower()) is not None:
        return True
    return reports_failure(head.encode("utf-8", "surrogatepass"))
CHECKS = 8
"""Distinct checks (non-write calls, failed writes) whose last answer is remembered."""
WRITTEN_ITEMS = 8
"""Items a stretch of named writes is remembered by, for the futile-write rule: a write to
one of them again (a loop alternating two settings) is no new item."""
RECHECKS = 16
"""Calls whose last answer ``rechecks`` remembers, to know a re-check after a write."""
_PRE_WRITE = 1
"""``rechecks`` flag: the call was last answered before the session's latest write."""
_ASKED_AGAIN = 2
"""``rechecks`` flag: the call was answered more than once."""

QUOTE_SPAN = 256
"""Characters at the start of a result in which quoted strings are masked (where error
messages quote the term they could not find)."""
_QUOTED = re.compile(
    r"(\"[-+\d.,% ]*\"|'[-+\d.,% ]*')|\"[^\"\n]{0,200}\"|'[^'\n]{0,200}'|`[^`\n]{0,200}`"
)
"""A quoted term near an answer's start, the variable part of a message. A quoted number
(``Kenya ('2', '3', '0')``, a tuple of strings printed) is a figure where the digits are
the answer (a success that is no search's), and masked as a term where they are noise
(``No matches found for "805"``)."""
_FENCED_DATA = re.compile(r"```[A-Za-z]{0,12}[ \t]*\r?\n[ \t]*[\[{]")
"""A fenced block of data (```` ```json ```` then an object or an array) opening a text
answer after a short lead: browser-use's "Extracted from page: ```json {...}```"."""
FENCE_SPAN = 96
"""Characters at the start of a text answer in which such a block may open."""


def _masked_quote(match: re.Match[str]) -> str:
    """A quoted term masked, a quoted number kept (:data:`_QUOTED`)."""
    return match.group(1) or "Q"


def _prose_head(head: str) -> bool:
    """Whether quoted strings in ``head`` (an answer's first :data:`QUOTE_SPAN` characters)
    are prose's quoted terms, masked as the variable part of a message: not when it opens
    as data, an object or an array, or as a fenced block of one after a short lead (there
    the strings are the content: twenty pages of a catalogue extracted as JSON in a fence
    differ in their quoted titles and prices, and were one answer twenty times)."""
    if head[:1] in ("{", "[") or not ("\"" in head or "'" in head or "`" in head):
        return False
    if len(head) < QUOTE_SPAN:
        # An answer that is one quoted string and nothing else (a value printed with its
        # repr, 'http_response_code'): the string is what it says, no term in a message.
        whole = head.strip()
        if len(whole) >= 2 and whole[0] in "'\"" and whole[-1] == whole[0] and whole.count(whole[0]) == 2:
            return False
    return not ("```" in head and _FENCED_DATA.search(head, 0, FENCE_SPAN) is not None)
_SHELL_LINE = re.compile(r"\bline \d+")
_NO_RESPONSE = re.compile(
    r"(?i)\bno response\b|not responding|did ?n[o']t respond|deadline exceeded"
    r"|(?:connection|connect|request|read|device|host|endpoint) timed? ?out"
)
"""A failure that says what it asked did not answer (``TIMEOUT: no response from endpoint``,
``deadline exceeded``, ``connection timed out``), read in its first 256 characters: the
silence of the place the call names, not a place that is not there, nor work that took
too long (a warehouse's "statement timeout of 300 seconds" is the query's, whatever
table it reads) (:func:`_no_response`)."""
_OTHER_FAILURE = re.compile(r"(?i)unauthori[sz]|forbidden|denied|invalid|not found|\b40[134]\b")
"""Words of a failure other than silence: a time-out beside one is that failure's."""
SILENT_SWEEP = 8
"""Time-outs in a row, at most, read as the silence of each place their calls name
(``result-stall``'s threshold): past it, nothing answers at all."""
_NAMED_WRITE_MASK = FLAG_WRITE | FLAG_RUNNER
"""The flags whose value ``FLAG_WRITE`` alone marks a named tool's write."""


def _no_response(result: ResultView) -> bool:
    """Whether a failure says the call timed out (:data:`_NO_RESPONSE`): kept with the
    ids its call names, as a read's answer is with what it reads. A guessed id's "not
    found" is not: one more place without it is the hunt going on."""
    error = result.error
    return (
        type(error) is str and _NO_RESPONSE.search(error, 0, 256) is not None
        and _OTHER_FAILURE.search(error, 0, 256) is None
    )


_TOLD_FIRST = frozenset("EeFf[")
_TOLD_FAILURE = re.compile(r"\[?(?:error|fatal)\s*:", re.IGNORECASE)
"""An answer that opens by saying it failed (``Error: ...``, ``ERROR: ...``, ``[ERROR: ...]``,
``FATAL: ...``): a failure told as the answer's text."""


def _tells_failure(result: ResultView) -> bool:
    """Whether a success's text opens by saying it failed (:data:`_TOLD_FAILURE`: "Error:
    100051 (22012): 01be2b46-...: Division by zero" from an SQL tool that returns its errors
    as strings, a notebook's "[ERROR: ValueError: ...]"). Such an answer is read without its
    query or job id and without the call's own words (the query it echoes); its numbers
    stay: a page of a log whose lines open with "ERROR:" is a page, and the amounts a check
    reports are its answer. A function of the payload alone, so the codes' cache holds; read
    only where a template is built or an echo is at hand, never on every result."""
    payload = result.event.result
    return (
        not result.failed and type(payload) is str and payload[:1] in _TOLD_FIRST
        and _TOLD_FAILURE.match(payload) is not None
    )
_OPAQUE_ID = re.compile(
    r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
    r"|\b(?=[0-9a-f]{0,63}[a-f])(?=[0-9a-f]{0,63}[0-9])[0-9a-f]{16,64}\b"
)
"""Opaque ids in an error: a UUID, or a run of 16 to 64 lower-case hex digits with a
letter and a digit (a request, trace or correlation id)."""


def _recheck(rechecks: bytearray, key: int, code: int) -> bool:
    """Note that ``key``'s call answered ``code`` (``ResultStallState.rechecks``), and say
    whether that is the first answer after a write to a call answered exactly once before
    it, and alike then."""
    key32 = (key & _M32).to_bytes(4, "little")
    answer = (code & 0xFFFFFF).to_bytes(3, "little")
    at = find_entry(rechecks, key32, 8)
    if at < 0:
        if len(rechecks) >= 8 * RECHECKS:
            del rechecks[:8]
        rechecks += key32
        rechecks += answer
        rechecks.append(0)
        return False
    flags = rechecks[at + 7]
    same = rechecks[at + 4 : at + 7] == answer
    del rechecks[at : at + 8]
    rechecks += key32
    rechecks += answer
    rechecks.append(_ASKED_AGAIN)
    return same and flags == _PRE_WRITE


def _swap_check(checks: bytearray, key32: bytes, answer: bytes) -> int:
    """The answer last kept in ``checks`` under ``key32``, taken out (0: none; -1 for an
    answer of 0), and ``answer`` kept under it in its place, the oldest entry going past
    :data:`CHECKS`."""
    before = 0
    at = find_entry(checks, key32, 8)  # the entry whose key half is key32
    if at >= 0:
        before = int.from_bytes(checks[at + 4 : at + 8], "little") or -1
        del checks[at : at + 8]
    if len(checks) >= 8 * CHECKS:
        del checks[:8]
    checks += key32
    checks += answer
    return before


_LIST_ITEMS_READ = 16
"""Records of a JSON-text list read for whether one says an error (:func:`says_missing`)."""
_ICON = r"(?:[^\w\s\x00-\x7f]{1,4}\s*)?"
"""The pictograph browser-use opens its reports with ("🖱️  Clicked ...", "🔗  Navigated ...")."""
_REPORTS_ACT = re.compile(
    rf"\s*{_ICON}(?:successfully\s+)?(?:(?:left|right|middle|double|triple|long)[- ]?)?"
    r"(?:clicked|tapped|pressed|typed|entered|scrolled|swiped|hovered|dragged|dropped"
    r"|moved the mouse|selected|filled|released|sent keys)\b",
    re.IGNORECASE,
)
"""A short answer that only reports the interface act its call asked for ("Clicked on
Button 'Rules' at (1212,96).", "Typed text into element 'Result'.", "Pressed key
'{Enter}'"; after an emoji, as browser-use writes them: "🖱️  Clicked button with index
47: next", "🔍  Scrolled down the page by one page"): :func:`reports_act`."""
TARGET_SPAN = 512
"""Characters of a command line searched for the files and URLs it reads."""
READS = 8
"""Calls naming what they read whose names are remembered (for parallel reads' results)."""
_pack_read = struct.Struct("<II").pack
_TARGETS = re.compile(
    # A URL's scheme, host and path (its query is the page, not the place: the same page
    # fetched again as ?page=2, ?page=3 is the same place; the path's digits are masked
    # by read_names, so /page/3 is /page/# too), or a path with a slash. The look-behinds
    # let a match start only where a run of its characters starts, so a crafted run of
    # dots or letters is scanned once, not once from each position.
    r"(?<![a-z0-9+.-])[a-z][a-z0-9+.-]*://[^\s'\"|;&)?#]+"
    r"|(?<![\w.@+=/-])/?[\w.@+-]+(?:/[\w.@+-]+)+"
    # A cloud or cluster CLI's place: `aws ... --region eu-west-1`, `--namespace prod`,
    # `--bucket logs`, `--resource-group rg-eu`.
    r"|(?<![\w-])--(?:region|zone|location|namespace|context|cluster|project|profile|host"
    r"|hostname|server|endpoint-url|subscription|account|bucket|resource-group|tenant|shard"
    r"|schema|database|dbname)"
    r"(?:=|[ \t]+)[^\s'\"|;&)]+"
    # A tenant or a shard named as a setting (`alembic -x tenant=acme upgrade head`), or
    # what a label selector names (`amtool config routes test service=ledger`, `-l app=web`).
    # (in capitals too, as a make variable: `make -C data tokens SHARD=07`)
    r"|(?<![\w.-])(?i:tenant|shard|service|app|instance|job|pod|team|customer|account|project)(?i:_?id|_?name)?"
    r"=[^\s'\"|;&),]+"
    # A random seed a run is given (`./simv +ntb_random_seed=60656407`, `--seed=7`): a
    # regression over seeds runs one test per seed. And the tests pytest selects by name
    # (`pytest tests/test_functional.py -k 'used_before_assignment_issue2615]'`): one test
    # per run of a sweep over them.
    r"|(?<![\w.])(?:-{1,2}|\+)?\w{0,32}seed=\d{1,20}(?!\w)"
    r"|(?<![\w-])-k[ \t]+(?:'[^'\n]{1,200}'|\"[^\"\n]{1,200}\"|[^\s'\"|;&)]+)"
    # A data file named bare, as a query reads it (`duckdb -c "DESCRIBE SELECT * FROM
    # 'events_2025-06-02.parquet'"`, `csvstat sales_q3.csv`): which file's answer it is.
    r"|(?<![\w.@+/-])[\w-][\w.-]{0,255}\.(?:parquet|csv|tsv|jsonl|ndjson|feather|arrow|avro|orc|xlsx|xls"
    r"|sqlite|duckdb)\b"
    # Terraform's workspace and variables file (`terraform workspace select acme`,
    # `plan -var-file=tenants/acme.tfvars`): which tenant's stack a plan is of.
    r"|(?<![\w-])-var-file(?:=|[ \t]+)[^\s'\"|;&)]+"
    r"|\bworkspace[ \t]+(?:select|new)[ \t]+[^\s'\"|;&)-][^\s'\"|;&)]*"
    # An AWS resource named by its id or its ARN (`--lookup-attributes
    # AttributeKey=ResourceName,AttributeValue=vol-0617ec31494da09c7`, `--execution-arn
    # arn:aws:states:...`): which volume, instance or execution the answer is of.
    r"|(?<![\w-])(?:vol|i|snap|ami|sg|subnet|vpc|eni|igw|rtb|nat|eipalloc|fs|tgw|vpce|acl|pcx|lt)"
    r"-[0-9a-f]{8,17}(?![\w-])"
    r"|(?<![\w:/-])arn:aws[\w-]*:[^\s'\"|;&),]{3,512}"
    # A host and its port (`openssl s_client -connect csms-eu.example.net:443`, `nc -zv
    # db-3.internal:5432`): which endpoint a probe reaches.
    r"|(?<![\w.@/:-])[A-Za-z0-9][A-Za-z0-9-]{0,62}(?:\.[A-Za-z0-9-]{1,63}){1,8}:\d{2,5}(?![\w.])"
    # An EVM address or a transaction hash (`cast call 0xA0b8...eB48 'symbol()(string)'`,
    # `cast receipt 0x5f2c...`): which contract or transaction the answer is of.
    r"|(?<!\w)0x[0-9a-fA-F]{40}(?:[0-9a-fA-F]{24})?(?!\w)"
)
"""A URL's scheme, host and path, a path with at least one slash, a place flag and its
value (``--region``, ``--namespace``, ``--bucket``, ``--tenant``...), a tenant or a shard
named as a setting (``tenant=acme``) or what a label selector names (``service=ledger``,
``app=web``), a run's random seed (``+ntb_random_seed=60656407``) or the tests pytest
selects by name (``-k 'issue2615'``), a data file named bare (``events.parquet``),
Terraform's workspace and variables file, an AWS resource's id or ARN, a host and its
port, or an EVM address or transaction hash, in a command line."""
_KUBE_SEGMENT = re.compile(
    r"(?:^|(?<=[|;&(`\n]))[^|;&()`\n]*?(?<![\w.-])((?:kubectl|helm|oc)[ \t][^|;&()`\n]*)"
)
"""What a segment of a command line (up to the next pipe, ``;``, ``&``, parenthesis or line
end) gives ``kubectl``, ``helm`` or ``oc`` when one of them runs it, from the program on
(after ``sudo -E``, ``timeout 20``, ``KUBECONFIG=... ``, a path or ``microk8s``)."""
_KUBE_NAMESPACE = re.compile(r"(?<![\w-])-n(?:=|[ \t]+)[\"']?[^\s'\"|;&)-][^\s'\"|;&)]*")
"""``kubectl``'s, ``helm``'s and ``oc``'s namespace in its short form (``-n team-alpha``,
``-n "team-alpha"``), read only in a segment run by one of them (:data:`_KUBE_SEGMENT`:
``head -n 20`` names no place, nor does it after ``kubectl logs web |``)."""
_KUBE_VALUE_FLAGS = frozenset({
    "-n", "--namespace", "-c", "--container", "--context", "--cluster", "--kubeconfig", "-l",
    "--selector", "-o", "--output", "--tail", "--since", "--since-time", "--field-selector",
    "--sort-by", "--template", "-f", "--filename", "--request-timeout", "--as", "--user",
    "--limit-bytes", "--chunk-size", "-v", "--v", "--server", "-s", "--token", "--pod-running-timeout",
})
"""``kubectl``'s flags that take a value as the next word (``-n istio-ingress``)."""
_KUBE_NAMED_VERBS = frozenset({"exec", "logs", "port-forward"})
"""Sub-commands whose first word is the object itself (a pod, ``deploy/api``)."""
_KUBE_TYPED_VERBS = frozenset({"get", "describe", "top"})
"""Sub-commands whose words are a type, then the object (``get job migrate-7``), or
``type/name`` in one."""
_KUBE_OBJECT_VERB = re.compile(r"\b(?:" + "|".join(sorted(_KUBE_NAMED_VERBS | _KUBE_TYPED_VERBS)) + r")\b")
_KUBE_TYPES = {
    alias: kind
    for kind, aliases in (
        ("pod", ("po", "pod", "pods")), ("deployment", ("deploy", "deployment", "deployments")),
        ("service", ("svc", "service", "services")), ("job", ("job", "jobs")),
        ("statefulset", ("sts", "statefulset", "statefulsets")),
        ("daemonset", ("ds", "daemonset", "daemonsets")), ("replicaset", ("rs", "replicaset", "replicasets")),
        ("node", ("no", "node", "nodes")), ("namespace", ("ns", "namespace", "namespaces")),
        ("configmap", ("cm", "configmap", "configmaps")), ("secret", ("secret", "secrets")),
        ("ingress", ("ing", "ingress", "ingresses")), ("cronjob", ("cj", "cronjob", "cronjobs")),
        ("persistentvolumeclaim", ("pvc", "persistentvolumeclaim", "persistentvolumeclaims")),
    )
    for alias in aliases
}
"""kubectl's names of one resource type (``deploy``, ``deployment``, ``deployments.apps``):
one object however its type is spelt."""


def _kube_type(word: str) -> str:
    """A resource type as one name (``deployments.apps`` and ``deploy`` are ``deployment``)."""
    word = word.lower()
    return _KUBE_TYPES.get(word.split(".", 1)[0], word)


def _kube_object(segment: str) -> str:
    """The object one ``kubectl`` or ``oc`` segment reads by name (``exec web-7f9 -- ...``:
    ``exec pod web-7f9``; ``get job migrate-7 -o jsonpath=...``: ``get job migrate-7``; its
    type one name however spelt, ``deploy/api`` and ``deployment api`` alike), "" for a
    listing (``get pods -l app=web``) or any other sub-command."""
    words = segment.split(None, 24)[1:]
    verb = ""
    named: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        if word == "--":
            break
        if word[:1] == "-":
            # (`logs -f` follows; elsewhere `-f` names a file)
            skip = "=" not in word and word in _KUBE_VALUE_FLAGS and not (verb == "logs" and word == "-f")
            continue
        if not verb:
            if word not in _KUBE_NAMED_VERBS and word not in _KUBE_TYPED_VERBS:
                return ""
            verb = word
            continue
        named.append(word)
        if verb in _KUBE_NAMED_VERBS or "/" in word or len(named) == 2:
            break
    if not named or (verb in _KUBE_TYPED_VERBS and len(named) < 2 and "/" not in named[0]):
        return ""
    if "/" in named[0]:
        kind, _, name = named[0].partition("/")
        named = [kind, name]
    if len(named) == 2:
        named[0] = _kube_type(named[0])
    elif verb in _KUBE_NAMED_VERBS:
        named.insert(0, "pod")  # (`logs web-1` is the pod's, as `logs pod/web-1` is)
    return f"{verb} {' '.join(named)}"


_MASK_NUMBERS = str.maketrans("0123456789", "##########")
_SSH_HOST = re.compile(
    # `ssh` as the command of a segment, its options (those that take a value skipped with
    # it), then the host: `ssh -i key.pem -p 2222 deploy@web-3 "..."` is web-3's.
    r"(?:^|[;&|(]\s*)ssh(?:[ \t]+-[46AaCfGgKkMNnqsTtVvXxYy]+"
    r"|[ \t]+-[BbcDEeFIiJLlmOopQRSWw][ \t]*[^\s-][^\s]*)*[ \t]+([\w.@-]+)"
)
"""The machine a command runs on (searched for apart, only in a line that says ``ssh``:
one more alternative in :data:`_TARGETS` would be tried at every character of every
command)."""
_GH_OBJECT = re.compile(
    r"(?:^|[;&|(]\s*)gh[ \t]+(run|pr|issue|release|workflow)[ \t]+(view|checks|diff)[ \t]+"
    r"([^\s'\"|;&)-][^\s'\"|;&)]{0,63})"
)
"""The run, pull request, issue, release or workflow a ``gh ... view`` reads (``gh run view
18898679055 --json jobs``): the object its answer is of (searched for apart, only in a line
that says ``gh``, as :data:`_SSH_HOST` is)."""
_SQL_START = re.compile(r"(?is)\s*(?:select\b|with\s+\w+\s+as\s*\()")
_SQL_LITERAL = re.compile(r"'(?:[^']|'')*'")
_SQL_TABLES = re.compile(r"(?i)\b(?:from|join)\s+([\w.$\"`\[\]]+)")
"""The tables a SQL query reads (a count per table is that table's answer)."""
_SQL_KEYS = frozenset({"sql", "query", "statement"})


def sql_tables(args: Any) -> str:
    """The tables a SQL query in a call's arguments reads (its ``sql``, ``query``,
    ``statement`` argument, when it opens with ``SELECT`` or ``WITH``): "" for none."""
    if type(args) is not dict or _SQL_KEYS.isdisjoint(args):  # (one C-level test first)
        return ""
    for key, value in args.items():
        if key in _SQL_KEYS and value and type(value) is str:
            head = value[:TARGET_SPAN]
            if _SQL_START.match(head) is None:
                continue  # not SQL ("without sudo, install node from source")
            # Literals out ('login failed from 10.0.3.7'), then the tables read outside
            # any parenthesis (not `extract(year from created_at)` or a subquery's).
            head = _SQL_LITERAL.sub("''", head)
            tables = [
                match.group(1) for match in _SQL_TABLES.finditer(head)
                if head.count("(", 0, match.start()) == head.count(")", 0, match.start())
            ]
            return "\0".join(tables)
    return ""


def _url_paths_masked(targets: list[str]) -> str:
    """The targets joined, each URL's path with its numbers masked (not its host's: an
    address is a place): a page or an id is no new place, a page of another name is."""
    out = []
    for target in targets:
        at = target.find("://")
        if at >= 0:
            slash = target.find("/", at + 3)
            if slash >= 0:
                target = target[:slash] + target[slash:].translate(_MASK_NUMBERS)
        out.append(target)
    return "\0".join(out)


_BACK_CACHE: dict[str, bool] = {}


_BACK_STEPS = frozenset({"go", "navigate", "browser", "page", "history", "step", "nav", "press"})
"""Words before a closing "back" that make it a step back (``go_back``, ``browser_navigate_back``,
``press_back``); not ``play_back``, ``call_back``, ``fall_back``, ``roll_back``."""


def goes_back(tool: str) -> bool:
    """Whether a tool's name says it steps back to where the agent was: it opens with "back
    to" (``back_to_search``, ``back_to_results``), or is "back" or ends with "back" after a
    word of moving (:data:`_BACK_STEPS`: ``go_back``, ``goBack``, ``browser_navigate_back``);
    an MCP tool by its own name (``mcp__playwright__browser_navigate_back``). Not
    ``back_office_lookup``, ``roll_back_migration``, ``cash_back_balance``."""
    known = _BACK_CACHE.get(tool)
    if known is None:
        if len(_BACK_CACHE) >= 512:
            _BACK_CACHE.clear()
        own = tool.rsplit("__", 1)[-1]
        words = name_words(own) if len(own) <= 128 else []
        known = _BACK_CACHE[tool] = bool(words) and (
            words[:2] == ["back", "to"]
            or (words[-1] == "back" and (len(words) == 1 or words[-2] in _BACK_STEPS))
        )
    return known


def _written_failure(result: ResultView) -> bool:
    """Whether a command's output reports a failure (an error told as output, a failure in
    its text, an HTTP error status): such output is no file's own answer."""
    payload = result.event.result
    if type(payload) is not str:
        return False
    head = payload[:GIST_TEXT_LIMIT]
    return (
        _tells_failure(result)
        or _HTTP_ERROR.search(head) is not None
        or reports_failure(head.encode("utf-8", "surrogatepass"))
    )


_HTTP_ERROR = re.compile(r"\bHTTP(?:/\d(?:\.\d)?)? ?[45]\d\d\b|\b(?:429 Too Many Requests|rate limit exceeded)", re.I)
"""An HTTP error status in a command's output (``HTTP 503``, ``HTTP/1.1 429``)."""


_WRITTEN = REDIRECT_TARGET
"""A redirect's target file (``> genomes/batch_07.fa``, ``>> log.txt``; not ``2>&1``, not
``/dev/null``)."""


def written_names(call: CallView) -> str:
    """The files a command runner's call writes its output into, by redirection, in the
    first ``TARGET_SPAN`` characters of its command ("" when none)."""
    command = command_text(call.args)
    if not command or ">" not in command:
        return ""
    # (a `>` inside quotes is no redirect: `awk '$3 > 100'`, `python -c 'print(3 > 2)'`)
    return "\0".join(_WRITTEN.findall(QUOTED_WORD.sub("''", command[:TARGET_SPAN])))


def read_names(call: CallView) -> str:
    """What a call that reads names ("" when nothing): for a command runner, or a named
    tool given a ``command`` (``ssh_exec(host=..., command=...)``, with its identifiers)
    or its arguments as one line (``aws(args="rds list-tags-for-resource ...")``),
    what :data:`_TARGETS` finds in the head of its command line (paths, URLs' scheme, host
    and path with its numbers masked, place flags, data files named bare, Terraform's
    workspace and variables file) with its path-shaped arguments (a ``workdir``), else (or
    when its command names none: an editor's ``view`` with a ``path``) its path-shaped
    arguments, in the order of their keys."""
    command = None
    args = call.args
    if call.runner or (type(args) is dict and ("command" in args or type(args.get("args")) is str)):
        # (a named tool that runs a command line it is given, `ssh_exec(host=...,
        # command="ros2 topic info -v /amr05/scan")`: what the line names too; or a
        # CLI's tool given its arguments as one line, `aws(args="rds list-tags-for-resource
        # --resource-name arn:aws:rds:...")`)
        command = command_text(args)
        if command is None and type(args) is dict:
            # (a CLI's tool given its arguments as one line; an interpreter's cell,
            # `print(check('/data/rank_v7/train/part-00007.parquet'))`, names the paths and
            # data files it reads as a line does)
            line = args.get("code" if call.runner else "args")
            command = line if type(line) is str else None
        if command:
            head = command[:TARGET_SPAN]
            targets = _TARGETS.findall(head)
            if targets and head.find(">") >= 0:
                # not the files the line writes its own output to (`cx-api get ... >
                # /tmp/p7.json && jq ... /tmp/p7.json`): the line reads what it fetched, and
                # a new scratch file for each fetch of one stuck page made each a new place
                written = set(_WRITTEN.findall(QUOTED_WORD.sub("''", head)))
                if written:
                    targets = [target for target in targets if target not in written]
            if head.find("ssh") >= 0:
                targets += _SSH_HOST.findall(head)
            if head.find("gh ") >= 0:
                targets += [" ".join(found) for found in _GH_OBJECT.findall(head)]
            kube = head.find("kubectl") >= 0 or head.find("oc ") >= 0
            short_namespace = head.find(" -n") >= 0 and (kube or head.find("helm") >= 0)
            named_object = kube and _KUBE_OBJECT_VERB.search(head) is not None
            if short_namespace or named_object:
                for segment in _KUBE_SEGMENT.findall(head):
                    if short_namespace:
                        # a cluster CLI's namespace in its short form (`kubectl get secret x
                        # -n team-alpha`): one secret checked in twenty namespaces is twenty
                        # places. Only in that program's own segment (not `kubectl logs web |
                        # head -n 5`).
                        targets += _KUBE_NAMESPACE.findall(segment)
                    if named_object:
                        # and the object its sub-command reads (`kubectl -n istio-ingress
                        # exec istio-ingressgateway-7b9f8c6d5-8xpym -- curl ...`, `kubectl
                        # logs job/x`): twenty-four gateway pods each answering 200 are
                        # twenty-four answers
                        found = _kube_object(segment)
                        if found:
                            targets.append(found)
            if targets:
                names = "\0".join(targets)
                if "://" in names:
                    names = _url_paths_masked(targets)
                paths = call.canonical.paths
                if paths:
                    # and where it runs (`workdir`, `cwd`): `plan -var-file=prod.tfvars` in
                    # fourteen stacks' directories is fourteen places
                    names += "\0" + "\0".join(paths[name] for name in sorted(paths))
                if not call.runner:
                    ids = _ids(call.args)
                    if ids:
                        names += "\0" + ids  # and where it runs (`host="amr-05"`)
                return names
    if not call.runner or command is None:  # (a runner's `execute_sql(sql=...)` too)
        tables = sql_tables(call.args)
        if tables:
            return tables
    paths = call.canonical.paths
    ids = ""
    if not call.runner:
        ids = _ids(call.args)
        if type(args) is dict:
            address = args.get("url")
            if type(address) is str and "://" in address:
                # the address a named fetch reads (`requests_head(url=...)`), as a command
                # line's: its scheme, host and path, the path's numbers masked (a page or
                # an id is no new place; a page of another name is): thirty-four dataset
                # links checked one by one, most answering 200, were halted as a stall
                fetched = _TARGETS.match(address.strip()[:TARGET_SPAN])
                if fetched is not None and "://" in fetched[0]:
                    place = _url_paths_masked([fetched[0]])
                    ids = f"{ids}\0{place}" if ids else place
        if not ids and _is_calculation(call.tool):
            # A calculator's answer is its arguments' own: the same quotient for another
            # pair of numbers is a new question answered, the same pair asked again is not.
            return f"calc:{call.key}"
    if not paths:
        return ids
    if len(paths) == 1:
        for value in paths.values():
            # the file and what in it (`recon_match_trade(trade_id, source="bnym.fin")`)
            return f"{value}\0{ids}" if ids else value
    joined = "\0".join(paths[name] for name in sorted(paths))
    return f"{joined}\0{ids}" if ids else joined


_ID_KEY = re.compile(
    r"(?:^|_)(?:[Ii][Dd]|[Cc]ode|[Kk]ey|[Nn]umber|[Ee]ntity)$|[a-z0-9](?:Id|ID|Code|Key|Number)$"
)
"""Arguments that name the thing a call reads (``account_code``, ``entity_id``,
``issueKey``, ``order_number``): not ``paid``, ``grid``, ``hotkey``."""
_NOT_ID_KEY = re.compile(
    r"(?i)(?:page|line|request|trace|span|idempotency|nonce|offset|cursor|correlation|session)"
)
"""Arguments named like ids that name no thing read: a page, a line, a request's own id."""
_NOT_ID_WORDS = frozenset({
    "page", "line", "request", "trace", "span", "idempotency", "nonce", "offset", "cursor",
    "correlation", "session", "traceparent",
})
"""The same, as a word anywhere in the name (``X-Request-ID``, ``client_request_id``,
``x-correlation-id``: a fresh one on every call names no place)."""


def _names_no_thing(key: str) -> bool:
    """Whether an argument's name says its value is no thing read (:data:`_NOT_ID_KEY` at
    its start, or one of :data:`_NOT_ID_WORDS` among its words)."""
    return _NOT_ID_KEY.match(key) is not None or not _NOT_ID_WORDS.isdisjoint(name_words(key))
_ID_KEY_LIMIT = 64
_INT64 = 1 << 63


_ID_VALUE = re.compile(r"(?=[^\d\s]{0,63}\d)(?=[^A-Za-z\s]{0,63}[A-Za-z])[A-Za-z0-9][\w.:#@+/-]{1,63}")
"""A value shaped like an identifier whatever its argument's name: one token with a digit
and a letter in it (``CNC-06``, ``T2605111``, ``XS2574039921``, ``INC0012345``), no spaces
(not a search's words); not a bare number or a date (``100``, ``2025-01-05``)."""
_QUANTITY = re.compile(r"\d+(?:\.\d+)?[A-Za-z]{1,3}|.*(?:\d{4}-\d\d-\d\d|\d:\d\d).*")
"""A number with a unit (``15m``, ``500ms``, ``10GB``), or a date or a time of day
(``2025-01-05T10:00:00Z``): a window, a size or a moment, no identifier."""
_TERM_WORDS = frozenset({
    "term", "terms", "keyword", "keywords", "name", "symbol", "word", "words", "phrase",
    "identifier", "pattern", "string", "str", "value", "target", "item", "token", "expr",
})
"""Words of an argument a search looks for (``term``, ``keyword``, ``symbol``): its value
is the hunt's, no place of its own, however it is shaped (:func:`_ids`)."""
_TEXT_WORDS = frozenset({
    "query", "q", "search", "text", "message", "msg", "prompt", "content", "body", "question",
    "title", "note", "notes", "comment", "description", "summary", "date", "time", "from",
    "to", "since", "until", "start", "end", "after", "before", "day", "days", "window",
    "period", "range", "as", "of", "interval", "duration", "limit", "size", "count", "sort",
    "order", "filter", "path", "file", "dir", "directory", "url", "uri", "pattern", "glob",
    "needle", "regex", "sql", "command", "cmd", "code", "script", "timestamp", "ts", "month",
    "year", "week", "hour", "minute", "timezone", "tz",
})
"""Words of argument names whose value is what is asked or said, or a window of time, never
the thing read; and of those read as a place already (a path, a URL, a query's tables) or
never one (a command, a pattern searched for). Whole words of the name (``start_date``,
``fromDate``, ``as_of``), so ``account`` or ``notebook`` is none of them."""


def _is_id_value(value: str) -> bool:
    """Whether a string is shaped as an identifier (:data:`_ID_VALUE`), not a quantity or a
    moment (:data:`_QUANTITY`)."""
    return (
        len(value) <= 64 and _ID_VALUE.fullmatch(value) is not None
        and _QUANTITY.fullmatch(value) is None
    )


_ID_NAMES: dict[tuple[Any, ...], tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {}
"""Argument names of a call -> those that name ids, the others whose values may be ids, and
the structured filters (bounded; the calls of one tool share their names, so a call's names
are read once)."""
_FILTER_WORDS = frozenset({"query", "filter", "filters", "where", "jql", "sysparm", "criteria"})
"""Words of the names of arguments that may hold a structured filter (ServiceNow's
``sysparm_query``, JQL, a ``where`` clause)."""
_EQUALITY = re.compile(r"([\w.]{1,64})[ \t]*={1,2}[ \t]*[\"']?([\w.:#@/-]{2,64})")
"""One equality of a filter: the field and the value it selects."""


_PLACE_KEY_WORDS = frozenset({
    "host", "hostname", "server", "ip", "device", "node", "instance", "machine", "region",
    "zone", "cluster", "namespace", "bucket", "database", "site", "endpoint", "project",
    "account", "subscription", "workspace", "repository", "repo", "organization", "tenant",
    # whom the call is about: a user, a mailbox (a sweep of accounts checked one by one)
    "user", "username", "login", "principal", "mailbox",
})
"""Argument names that name a place a read reads (``host="10.40.2.21"``, ``device=30301``,
``region="eu-west-1"``, a cloud's ``project`` or ``subscription``, a ``repo``), as the place
flags of a command line do (``--host``, ``--region``, ``--project``)."""


def _is_id_key(key: Any) -> bool:
    return (
        type(key) is str and len(key) <= _ID_KEY_LIMIT
        and (
            _ID_KEY.search(key) is not None
            or not _PLACE_KEY_WORDS.isdisjoint(name_words(key))
        )
        and not _names_no_thing(key)
    )


NESTED_OBJECTS = 2
"""Arguments that are objects of arguments read for ids one level down (:func:`_ids`)."""


_CALCULATION_WORDS = frozenset({
    "calculate", "calculator", "calc", "compute", "math", "arithmetic", "add", "subtract",
    "multiply", "divide", "exponentiate", "power", "sqrt", "square", "root", "factorial",
    "is", "prime", "modulo", "evaluate", "expression", "tool", "tools",
})
"""The words of a calculator's name (Agno's ``CalculatorTools``: ``add``, ``subtract``,
``divide``...; LangChain's ``Calculator``; tau-bench's ``calculate``): a tool named by
these alone (:func:`_is_calculation`)."""
_CALCULATIONS: dict[str, bool] = {}


def _is_calculation(tool: str) -> bool:
    """Whether a tool is a calculator: every word of its name is one of
    :data:`_CALCULATION_WORDS` (``divide``, ``calculator_add``; not ``add_user``). Its answers
    are its arguments' own (a Gordon-growth grid's four cells sharing a denominator are one
    division asked four times, not a stall of sixteen calculations)."""
    known = _CALCULATIONS.get(tool)
    if known is None:
        words = name_words(tool)
        known = bool(words) and _CALCULATION_WORDS.issuperset(words) and not set(words) <= {"is", "tool", "tools"}
        if len(tool) <= _ID_KEY_LIMIT:
            if len(_CALCULATIONS) >= 1024:  # bounded: tool names come from untrusted input
                _CALCULATIONS.clear()
            _CALCULATIONS[tool] = known
    return known


def _ids(args: Any, search: bool = False, nested: bool = True) -> str:
    """The identifiers a named tool's call reads by, in the order of their names; "" for
    none: the short scalar values of arguments named as ids or places (:data:`_ID_KEY`,
    :data:`_PLACE_KEY_WORDS`); values
    shaped as ids (:data:`_ID_VALUE`, not a :data:`_QUANTITY`) of arguments whose names
    say no text, window, path or command (:data:`_TEXT_WORDS`; for a search, ``search``,
    nor a term it looks for, :data:`_TERM_WORDS`: ``search_dir(term="parseConfig3")``
    is a hunt, however the term is shaped); and the identifiers a structured filter's
    equalities select (:data:`_FILTER_WORDS`, :data:`_EQUALITY`). ``nested``: also those of
    an argument that is itself an object of arguments, one level down (Amazon Q's
    ``use_aws(service_name="s3api", parameters={"bucket": ...})``, an MCP gateway's
    ``arguments``), after the call's own."""
    if type(args) is not dict or len(args) > 8:
        return ""
    keys = tuple(args)
    cached = _ID_NAMES.get(keys)
    if cached is None:
        named = tuple(sorted(key for key in keys if _is_id_key(key)))
        others = tuple(sorted(
            key for key in keys
            if type(key) is str and len(key) <= _ID_KEY_LIMIT and key not in named
            and not _names_no_thing(key) and _TEXT_WORDS.isdisjoint(name_words(key))
        ))
        filters = tuple(sorted(
            key for key in keys
            if type(key) is str and len(key) <= _ID_KEY_LIMIT
            and not _FILTER_WORDS.isdisjoint(name_words(key))
        ))
        cached = (named, others, filters)
        if all(type(key) is str and len(key) <= _ID_KEY_LIMIT for key in keys):
            # (cached only for short names: a long one would pin its bytes)
            if len(_ID_NAMES) >= 1024:  # bounded: argument names come from untrusted input
                _ID_NAMES.clear()
            _ID_NAMES[keys] = cached
    names, others, filters = cached
    found: list[str] = []
    for key in names:
        value = args[key]
        if (type(value) is str and 0 < len(value) <= 64) or (
            type(value) is int and -_INT64 <= value < _INT64
        ):
            found.append(f"{key}={value}")
    for key in others:
        # `GetMachineStatus(workCenter="CNC-06")`, `ValidatePrice(isin="XS2574039921")`:
        # one item of a list the agent goes through, named by its identifier
        value = args[key]
        if type(value) is str and _is_id_value(value) and not (
            search and not _TERM_WORDS.isdisjoint(name_words(key))
        ):
            found.append(f"{key}={value}")
    for key in filters:
        # A structured filter's equalities (`child.name=lnx-epic-app01^type.name=Runs`, JQL's
        # `key = ENG-902`): the identifiers it selects by name the place, its words do not.
        value = args[key]
        if type(value) is str and "=" in value:
            found.extend(
                f"{field}={selected}"
                for field, selected in _EQUALITY.findall(value, 0, TARGET_SPAN)
                if _is_id_value(selected)
            )
        elif type(value) in (dict, list) and value:
            # A filter given as an object (Cost Explorer's `{"And": [{"Dimensions": {"Key":
            # "LINKED_ACCOUNT", "Values": ["817876255759"]}}, ...]}`): the identifiers among
            # its values, an account number among them, select what is read.
            found.extend(f"{key}~{leaf}" for leaf in _filter_ids(value))
    own = "\0".join(found)
    if not nested:
        return own
    inner = _nested_ids(args, search)
    return f"{own}\0{inner}" if own and inner else own or inner


def _nested_ids(args: dict[Any, Any], search: bool = False) -> str:
    """The identifiers of :func:`_ids` found one level down (an argument that is itself an
    object of arguments; name and value pairs), "" for none."""
    found: list[str] = []
    if len(args) <= 8:
        looked = 0
        for key, value in args.items():
            # (at most NESTED_OBJECTS of them; a request's headers name no place: a fresh
            # request id in each would make one read again and again a sweep)
            if type(value) is dict and value and type(key) is str and "header" not in key.lower():
                inner = _ids(value, search, nested=False)
                if inner:
                    found.append(f"{key}:{inner}")
                looked += 1
                if looked == NESTED_OBJECTS:
                    break
            elif type(value) is list and value and len(value) <= NESTED_OBJECTS and type(key) is str:
                # Name and value pairs (CloudWatch's `Dimensions: [{"Name": "BucketName",
                # "Value": "acme-logs"}]`, a tag's `Key` and `Value`): each selects what
                # the call reads, as a filter's equality does.
                for pair in value:
                    selected = _selected_pair(pair)
                    if selected:
                        found.append(f"{key}:{selected}")
    return "\0".join(found)


FILTER_NODES = 24
"""Values of a structured filter walked for the identifiers it selects (:func:`_filter_ids`)."""
_ACCOUNT_NUMBER = re.compile(r"\d{6,20}")
_TIME_WORDS = frozenset({"time", "date", "ts", "timestamp", "datetime", "range", "window", "period"})
"""Words of names under which a filter holds a moment or a window (``{"range": {"ts":
{"gte": ...}}}``, ``created_time``): the window a search moves, not what it selects."""
_BOUND_KEYS = frozenset({"gt", "gte", "lt", "lte", "since", "until", "before", "after"})
"""A window's bounds as whole names (not ``to`` or ``from``, a recipient as often)."""


def _names_time(name: str) -> bool:
    """Whether a filter's key names a moment, a window or a window's bound."""
    if name.lower() in _BOUND_KEYS:
        return True
    return not _TIME_WORDS.isdisjoint(word.lower() for word in name_words(name))


def _filter_ids(value: object) -> list[str]:
    """The identifiers a filter given as an object selects: its string values shaped as ids
    (:func:`_is_id_value`) or numbers of 6 to 20 digits (an account, a customer), and its
    integers from 100,000, in the order met, at most six levels deep and
    :data:`FILTER_NODES` values read. Words (a term looked for, ``ABSENT``) are not, nor
    anything under a name of time or of a window (:data:`_TIME_WORDS`: ``ts``,
    ``created_time``, ``range``) or of a window's bound (:data:`_BOUND_KEYS`: ``gte``):
    a window moved is no new item."""
    found: list[str] = []
    stack: list[tuple[object, int]] = [(value, 0)]
    read = 0
    while stack and read < FILTER_NODES:
        node, depth = stack.pop()
        read += 1
        if isinstance(node, str):
            if node and (_is_id_value(node) or _ACCOUNT_NUMBER.fullmatch(node)):
                found.append(node)
        elif type(node) is int:
            if 100_000 <= node < _INT64:
                found.append(str(node))
        elif depth < 6 and isinstance(node, dict):
            children = [
                child for name, child in islice(node.items(), FILTER_NODES)
                if not (type(name) is str and len(name) <= 32 and _names_time(name))
            ]
            stack.extend((child, depth + 1) for child in reversed(children))
        elif depth < 6 and isinstance(node, list):
            stack.extend((child, depth + 1) for child in reversed(node[:FILTER_NODES]))
    return found


def _selected_pair(pair: object) -> str:
    """``Name=Value`` of one name and value pair (``{"Name": "BucketName", "Value":
    "acme-logs"}``; ``Key`` for ``Name``, lower-case names too), the value a short string
    with no space; "" for anything else."""
    if type(pair) is not dict or len(pair) != 2:
        return ""
    name = pair.get("Name", pair.get("name", pair.get("Key", pair.get("key"))))
    value = pair.get("Value", pair.get("value"))
    if (
        type(name) is not str or type(value) is not str or not 0 < len(value) <= 64
        or not 0 < len(name) <= 64 or " " in value
    ):
        return ""
    return f"{name}={value}"


_RUNNER_WRITE = FLAG_RUNNER | FLAG_WRITE
_CHECK_FLAGS = FLAG_READ | FLAG_RUNNER | FLAG_SEARCH | FLAG_WRITE
_DONE = re.compile(r"(?i)\b(?:success\w*|succeeded|completed|done|ok|clicked|typed|accepted)\b")
_NOT_DONE = re.compile(r"(?i)\bfalse\b|fail|error|problem|warn|denied|invalid|reject|\d+ issue|nothing happened|\u26a0|\u274c")
"""What a bare "done" never says: a check's verdict reported as output (``{"ok": false}``,
"Lint completed: 2 problems"), or a warning sign before an act's report ("⚠️ Clicked ...,
nothing happened")."""


_SUCCEEDED = re.compile(
    r"(?i)\b(?:finished|succeeded|successful(?:ly)?|success|passed|build succeeded|completed)\b"
)
"""Words of a good end in a check's answer (a build's "1 package finished", "Build
succeeded", "12 passed")."""


def _reports_success(result: ResultView) -> bool:
    """Whether a successful short answer (:func:`_short_text`) says a good end and no
    failure, warning or problem (:data:`_NOT_DONE`): the answer a check is hoped to give."""
    if result.failed:
        return False
    text = _short_text(result)
    return bool(text) and _SUCCEEDED.search(text) is not None and _NOT_DONE.search(text) is None


_NAVIGATED = re.compile(
    rf"\s*{_ICON}(?:navigated|went|opened)\s+(?:back\s+)?(?:to\s+)?\S{{1,2048}}\s*",
    re.IGNORECASE,
)
"""A navigation's whole answer when it only names where it went (browser-use's "🔗  Navigated
to https://shop.example/wp-admin/edit.php?post_type=product")."""


def _reports_navigation(result: ResultView) -> bool:
    """Whether a short success only says the browser went where its call asked: no check
    of the page. An admin sweep that goes back to the same product list after each saved
    item is answered alike every time, and that is no write failing to move it (a sweep of
    a dozen stock updates was halted as futile). What the page shows is read elsewhere."""
    payload = result.event.result
    return (
        not result.failed and type(payload) is str and result.size <= ACK_BYTES
        and _NAVIGATED.fullmatch(payload) is not None
    )


_PAGE_ADDRESS = re.compile(r"[a-zA-Z][\w+.-]{0,15}://([^/\s?#]{1,255})([^\s?#]{0,2048})(\?[^\s#]{0,2048})?(#\S{0,512})?")
"""An address: its host, path, query and fragment."""
_FREE_QUERY_KEYS = frozenset({
    "q", "query", "search", "s", "k", "keyword", "keywords", "term", "terms", "text", "_nkw",
    "search_query", "searchterm", "phrase", "page", "p", "pg", "offset", "start", "cursor", "after",
    "before", "sort", "order", "limit", "per_page", "ts", "_", "utm_source", "utm_medium",
    "utm_campaign",
})
"""Query parameters that say how a page is looked for, paged or sorted, not which page it
is: a search's words, a page number, a cursor."""
_BROWSER_READ_WORDS = frozenset({
    "extract", "page", "browser", "screenshot", "snapshot", "dom", "content", "scrape",
    "text", "html", "markdown", "accessibility", "observe", "view",
})
"""Words of a tool's name that say it reads the page a browser is on (``extract_content``,
``browser_snapshot``, ``get_page_text``)."""


def _reads_page(tool: str) -> bool:
    """Whether ``tool``'s name says it reads the browser's page (:data:`_BROWSER_READ_WORDS`)."""
    return not _BROWSER_READ_WORDS.isdisjoint(name_words(tool))


def _page_code(report: str) -> int:
    """The code of the page a navigation's report names: its host (lower-cased), its path,
    its query without what says how the page was looked for, paged or sorted
    (:data:`_FREE_QUERY_KEYS`, and any value of words: a search reworded in the address is
    one results page), and a fragment that routes (``#/orders/42``); an order's id, in its
    path or its query (``?order_id=1042``), is that order's page. 1 when it names none."""
    address = _PAGE_ADDRESS.search(report)
    if address is None:
        return 1
    host, path, query, fragment = address.groups()
    kept = [host.lower(), path.rstrip("/")]
    if query:
        for pair in query[1:].split("&")[:32]:
            key, _, value = pair.partition("=")
            if (
                key.lower() not in _FREE_QUERY_KEYS and "+" not in value and "%20" not in value
            ):
                kept.append(pair)
    if fragment and fragment[1:2] == "/":
        kept.append(fragment)
    return zlib.crc32("\0".join(kept).encode("utf-8", "surrogatepass")) or 1


def _acknowledges(result: ResultView) -> bool:
    """Whether a successful answer is short and says only that something was done
    (``{"success": true, "message": "Action completed successfully"}``): a word of
    success and none of failure (:data:`_NOT_DONE`)."""
    if result.failed or result.size > ACK_BYTES:
        return False
    payload = result.event.result
    if type(payload) is str:
        text = payload
    else:
        try:
            text = msgspec.json.encode(payload).decode("utf-8", "replace")
        except (TypeError, ValueError, OverflowError, RecursionError):
            return False
    return _DONE.search(text, 0, ACK_BYTES) is not None and _NOT_DONE.search(text, 0, ACK_BYTES) is None
_GUESSED_MASK = FLAG_RUNNER | FLAG_WRITE | FLAG_SEARCH
_ABSOLUTE_PATH = re.compile(r"(?<![\w\"'])/[\w.@+-]+(?:/[\w.@+-]+)*")
"""An absolute path in prose (not inside a word or a quoted term)."""


_encoder = msgspec.json.Encoder(order="sorted")


def _mixed(code: int, other: int) -> int:
    """``code`` (32 bits) keyed by ``other`` (a call key, a code of names): the same answer
    to another call, or from another file, is another entry of the memory. Never 0."""
    return ((code ^ (other * 0x9E3779B1)) & _M32) or 1


def _crc(data: bytes) -> int:
    """A stable 32-bit code of a template (never 0)."""
    return zlib.crc32(data) or 1


FOUND_URLS = 64
"""Addresses a session's searches found that are remembered (4 bytes each)."""
_FOUND_URL = re.compile(
    r"https?://[^\s\"'<>()\[\]\\{}|^`]{3,512}(?: \u203a [^\s\u203a]{1,128}){0,12}"
)
"""A web address in a search's answer, with the path a results page shows after it as a
trail (Bing's ``https://en.wikipedia.org › wiki › Kinnickinnic_River``): the page found,
not only its site."""
_SEARCH_PAGE = re.compile(r"[?&](?:q|query|search_query|searchTerm|wd|text|keywords?)=")
"""An address that carries a query: the results page of the search itself (the browser
open at ``https://www.bing.com/search?q=...``), which names what was asked, not what was
found."""
_FOUND_DOC = re.compile(
    r"(?i)(?:\bdoc(?:ument)?_?id[\"']?|\"id\")\s*[:=]\s*[\"']?[^\s\"',}]{1,256}"
)
"""A document named in a knowledge base's answer (Onyx and Vectara ``document_id``,
LlamaIndex ``doc_id``, ``documentId``, a help center's article ``"id"``), key and value: an
address of its own kind."""


QUERIES = 4
"""Recent searches whose words are kept (``_query_words``)."""
REWORDED_KEPT = 8
"""Reworded searches remembered by their call keys, so parallel searches' answers find theirs."""
_QUERY_WORD = re.compile(r"[^\W_]{3,}")
_QUERY_KEYS = (
    "query", "q", "search_query", "searchQuery", "search", "input", "question", "keywords",
    "text", "term", "prompt",
)
_QUERY_STOP = frozenset({
    "the", "and", "for", "with", "from", "what", "how", "are", "does", "this", "that", "site",
})


def _query_text(args: Any) -> str:
    """A search's query: the argument named so (:data:`_QUERY_KEYS`), else its longest
    string; its options are no part of it (Tavily's `search_depth: "advanced"` and `topic:
    "general"` on every call would make every two searches share two words)."""
    text = ""
    if type(args) is dict:
        for key in _QUERY_KEYS:
            value = args.get(key)
            if type(value) is str:
                return value
        for value in islice(args.values(), ECHO_FIELDS):
            if type(value) is str and len(value) > len(text):
                text = value
    elif type(args) is str:
        text = args
    return text


_INDICATOR = re.compile(
    r"(?<![\w.@/-])(?:(?:\d{1,3}\.){3}\d{1,3}|CVE-\d{4}-\d{4,7}|[0-9a-fA-F]{16,128}"
    r"|(?:[A-Za-z0-9-]{1,63}\.)+(?:(com|org|biz|top|xyz|ru|cn|su|tk|ws|pw|icu|gov|edu|online)"
    r"|net|io|info|co|uk|de|fr|nl|eu|me|cc|site|club|app|dev|cloud|shop|live))(?![\w-])",
    re.IGNORECASE,
)
"""The indicators a search may look for, one distinct thing each: an IPv4 address, a CVE, a
hash or a prefix of one (16 hex digits or more, digits and letters), a domain under a
common top-level domain (``cdn-telemetry-sync.net``; under one that is also a word of code,
``.io``, ``.info``, ``.net``, ``.site``..., only with a hyphen or a digit in it:
``logger.info``, ``scipy.io`` and ``self.net`` are names, not domains)."""
_SCOPE = re.compile(r"(?i)(?:site|inurl|intitle|from|to|cc|bcc|in|host|domain)\s*:\s*$")
"""A search operator that scopes the search (``site:docs.acme.dev``, ``from:contoso.com``):
what follows it is where to look, not what is looked for (``destination.ip:1.2.3.4`` is)."""


_DIGIT_OR_DOT = re.compile(r"[\d.]").search


def _indicators(args: Any) -> str:
    """The indicators a search's query names (:data:`_INDICATOR`, in its first
    :data:`TARGET_SPAN` characters; not after a scope operator, :data:`_SCOPE`), "" for
    none: an IOC sweep's searches each look for another indicator, and each one's
    "nothing found" is that indicator's answer."""
    text = _query_text(args)[:TARGET_SPAN]
    if _DIGIT_OR_DOT(text) is None:
        return ""  # (most queries: words only; every indicator has a digit or a dot)
    found = []
    for match in _INDICATOR.finditer(text):
        token = match.group()
        if token.isalnum() and (token.isdigit() or token.isalpha()):
            continue  # a number or a word in hex letters, no hash
        if "." in token and not match.group(1) and not any(c == "-" or c.isdigit() for c in token):
            continue  # `logger.info`: a name of code under a domain that is also a word
        start = match.start()
        if start and text[start - 1] == ":" and _SCOPE.search(text, max(0, start - 10), start):
            continue
        found.append(token)
    return "\0".join(found)


LISTED = 192
"""Distinct values that the session's listing answers listed and that are remembered
(``listed_values``), 4 bytes each, the newest listing's first: a sweep works through one
listing at a time, from its head."""
LISTED_ITEMS = 64
"""Elements of a list read for the values it lists (the first ones)."""
LISTED_FIELDS = 3
"""String fields of an element object read (the first ones: an id, a name...)."""
LISTED_LISTS = 2
"""Lists of an answer's top-level object read."""
LISTED_CHARS = 128
"""Longest value remembered as listed; a value of fewer than 3 characters is none."""
MISSING_ANSWER = 512
"""Largest answer (bytes) read for whether it tells a listed item's absence as output (an
absence is told in a line; read only for calls naming such an item)."""


def listed_code(value: str) -> int:
    """The code a listed value is remembered by and looked up with: its CRC-32, after
    surrounding space and case (a name sent as ``acme`` was listed as ``ACME``)."""
    return zlib.crc32(value.strip().lower().encode("utf-8", "surrogatepass")) or 1


def listed_values(payload: Any) -> bytes:
    """The values a listing answer lists, as the codes of :func:`listed_code` (4 bytes
    each): the strings of a list of at least three elements, at the top or under the
    answer's top-level object (at most :data:`LISTED_LISTS` lists), and the first
    :data:`LISTED_FIELDS` strings of each element that is an object; the first
    :data:`LISTED_ITEMS` elements of each list; each value once, at most :data:`LISTED`;
    JSON text read as the object it is. ``b""`` for an answer that lists nothing.

    A name the agent sends afterwards that one of these named was handed to it (the
    counterparties of an onboarding batch, the buckets of an account), not guessed: a
    sweep through them, each answered "no hits" or "no such configuration", is each
    one's answer, not one more guess that does not exist."""
    if type(payload) is str:
        if payload[:1] not in ("{", "[") or len(payload) > JSON_TEXT_LIMIT:
            return _listed_words(payload)
        try:
            payload = _json_decoder.decode(payload)
        except (msgspec.DecodeError, RecursionError, UnicodeEncodeError):
            return b""
    out = bytearray()
    if type(payload) is dict:
        # (most answers: an object with no list in it, read in one pass)
        codes: set[int] = set()  # (each once: a country or a status listed 60 times is one)
        lists = 0
        for value in payload.values() if len(payload) <= 16 else islice(payload.values(), 16):
            if type(value) is list and len(value) >= 3:
                _listed_in(value, codes, out)
                lists += 1
                if lists == LISTED_LISTS:
                    break
    elif type(payload) is list and len(payload) >= 3:
        _listed_in(payload, set(), out)
    return bytes(out)


_ROW = 6
_ROW_TAG = 0x524F5753  # mixed with a row's index: the answer of the listing's row
"""Bytes of a row of :func:`listed_rows`: three 16-bit codes."""
ROW_LOOKAHEAD = 4
"""Rows past the next one a sweep in a listing's order may skip (rows already done)."""


def listed_rows(payload: Any) -> bytes:
    """A listing answer's rows in their order, duplicates kept (a bill whose lines name
    one procedure code four times): for each of the first :data:`LISTED_ITEMS` elements
    of the list :func:`listed_values` reads first, the low 16 bits of the
    :func:`listed_code` of each of its first :data:`LISTED_FIELDS` strings (0 where it has
    fewer), 6 bytes a row; ``b""`` for an answer that lists nothing."""
    if type(payload) is str:
        if payload[:1] not in ("{", "[") or len(payload) > JSON_TEXT_LIMIT:
            return b""
        try:
            payload = _json_decoder.decode(payload)
        except (msgspec.DecodeError, RecursionError, UnicodeEncodeError):
            return b""
    items: Any = None
    if type(payload) is dict:
        for value in payload.values() if len(payload) <= 16 else islice(payload.values(), 16):
            if type(value) is list and len(value) >= 3:
                items = value
                break
    elif type(payload) is list and len(payload) >= 3:
        items = payload
    if items is None:
        return b""
    out = bytearray()
    for item in items if len(items) <= LISTED_ITEMS else islice(items, LISTED_ITEMS):
        if type(item) is str:
            values: Any = (item,)
        elif type(item) is dict:
            fields = item.values() if len(item) <= 16 else islice(item.values(), 16)
            values = [value for value in fields if type(value) is str][:LISTED_FIELDS]
        else:
            values = ()
        row = [listed_code(value) & 0xFFFF if 3 <= len(value) <= LISTED_CHARS else 0 for value in values]
        row += [0] * (3 - len(row))
        out += struct.pack("<3H", *row)
    # A value most rows share (a customer, a currency, a status) names no row: a call naming
    # it would move the cursor on every call. Left out of every row.
    count = len(out) // _ROW
    codes = struct.unpack(f"<{3 * count}H", out)
    for column in range(3):
        seen: dict[int, int] = {}
        for code in codes[column::3]:
            if code:
                seen[code] = seen.get(code, 0) + 1
        common = {code for code, times in seen.items() if 2 * times > count}
        if common:
            for index in range(count):
                if codes[3 * index + column] in common:
                    struct.pack_into("<H", out, (3 * index + column) * 2, 0)
    return bytes(out)


def _next_row(rows: bytes, at: int, code: int) -> int:
    """The index of the first row from ``at`` (at most :data:`ROW_LOOKAHEAD` rows on)
    that names the item ``code`` (a :func:`listed_code`), -1 for none."""
    low = code & 0xFFFF
    if not low:
        return -1
    end = min(len(rows) // _ROW, at + 1 + ROW_LOOKAHEAD)
    for index in range(at, end):
        if low in struct.unpack_from("<3H", rows, index * _ROW):
            return index
    return -1


LISTED_TEXT_LIMIT = 16384
"""Longest command output read as a listing of names (:func:`_listed_words`)."""


_PRINTED_LIST = re.compile(
    r"\[(?=['\"])(?:'[^'\\\n]{1,128}'|\"[^\"\\\n]{1,128}\")(?:,[ \t]?(?:'[^'\\\n]{1,128}'|\"[^\"\\\n]{1,128}\")){2,}\]"
)
"""A list of at least three quoted strings as Python or JSON prints it."""
_PRINTED_ITEM = re.compile(r"'([^'\\\n]{1,128})'|\"([^\"\\\n]{1,128})\"")


def _listed_words(text: str) -> bytes:
    """The names a command's output lists: at least three words and nothing else,
    separated only by line ends and tabs (``aws s3api list-buckets --query
    'Buckets[].Name' --output text``, ``ls``, ``kubectl get pods -o name``); ``b""`` for
    any output with a space in it (a sentence, a table, a log), or longer than
    :data:`LISTED_TEXT_LIMIT`."""
    if len(text) > LISTED_TEXT_LIMIT:
        return b""
    if " " in text:
        # a list printed by a script (`print([e['ID'] for e in bib.entries])`: ['vaswani2017',
        # 'devlin2019', ...]): its quoted strings
        if "['" not in text and '["' not in text:
            # or a list of names one a line, some of two or three words (a patient's
            # medicines, "alendronic acid" among them): each line
            return _listed_lines(text) if "\n" in text else b""
        printed = _PRINTED_LIST.search(text)
        if printed is None:
            return b""
        out = bytearray()
        _listed_in([single or double for single, double in _PRINTED_ITEM.findall(printed[0])], set(), out)
        return bytes(out)
    if "\n" not in text and "\t" not in text:
        return b""
    words = text.split()
    if len(words) < 3:
        return b""
    out = bytearray()
    _listed_in(words, set(), out)
    return bytes(out)


_NAME_LINE = re.compile(r"[\w.@/+-]+(?: [\w.@/+-]+){0,2}")
"""A line that is a name of up to three words and nothing else (no sentence, no ``key: value``)."""
NAME_LINE_CHARS = 48
"""Longest line read as a name of a list of names one a line (:func:`_listed_lines`)."""


def _listed_lines(text: str) -> bytes:
    """The names a text lists one a line when some hold spaces (``atorvastatin``,
    ``alendronic acid``, ``calcium carbonate``...): at least three lines, each a name of up
    to three words and at most :data:`NAME_LINE_CHARS` characters (:data:`_NAME_LINE`), and
    nothing else (a log or prose fails at its first line), most of them one word (not a
    table's rows); ``b""`` otherwise."""
    text = text.strip()
    first = text.find("\n", 0, NAME_LINE_CHARS + 2)
    if first < 0 or _NAME_LINE.fullmatch(text[:first].strip()) is None:
        return b""  # (a log, a table, prose: no need to split it all)
    lines = text.split("\n")
    if len(lines) < 3:
        return b""
    names: list[str] = []
    spaced = 0
    for line in lines:
        name = line.strip()
        if len(name) > NAME_LINE_CHARS or _NAME_LINE.fullmatch(name) is None:
            return b""
        names.append(name)
        spaced += " " in name
    if 2 * spaced >= len(names):
        return b""  # a table's rows (`NAME READY`, `web-1 1/1`): names are mostly one word
    out = bytearray()
    _listed_in(names, set(), out)
    return bytes(out)


def _listed_in(items: list[Any], codes: set[int], out: bytearray) -> None:
    """The codes of what one list lists, each once, appended to ``out`` up to
    :data:`LISTED` in all (:func:`listed_values`)."""
    crc32 = zlib.crc32
    values: tuple[str, ...] | list[str]
    for item in items if len(items) <= LISTED_ITEMS else islice(items, LISTED_ITEMS):
        if type(item) is str:
            values = (item,)
        elif type(item) is dict:
            fields = item.values() if len(item) <= 16 else islice(item.values(), 16)
            values = [value for value in fields if type(value) is str][:LISTED_FIELDS]
        else:
            continue
        for value in values:
            if 3 <= len(value) <= LISTED_CHARS:
                # (listed_code inline: a call per value cost a third of a listing's reading)
                code = crc32(value.strip().lower().encode("utf-8", "surrogatepass")) or 1
                if code not in codes:
                    codes.add(code)
                    out += code.to_bytes(4, "little")
        if len(codes) >= LISTED:
            del out[4 * LISTED :]
            return


_ABSENCE = re.compile(
    r"(?i:\bnot[ _-]?found\b|\b(?:does|did)[ ]?n[o']t exist|\bno longer exists?\b|\bno[ _-]?such"
    r"|\bnot[ _-]exists?\b|\bcould(?: not|n't) find\b|\b(?:status|code|http)\D{0,3}404\b|\b404 not found\b"
    r"|^\W{0,3}no match(?:es)?(?: found)?\W{0,3}$"
    # z/OS' "DATA SET 'X' NOT IN CATALOG" (IKJ58503I), "not cataloged"
    r"|\bnot (?:in (?:the )?catalog|catalog(?:u)?ed)\b)"
    r"|NotFound|DoesNotExist"
).search
"""An answer that says what was asked of an item is not there (``NoSuchLifecycleConfiguration``,
``ResourceNotFoundException``, ``404 Not Found``, ``does not exist``, "could not find", a
data set "NOT IN CATALOG"), in its
first ``FAILURE_HEAD`` characters (:func:`_says_absent`)."""
_ABSENT_ELSEWHERE = re.compile(
    r"(?i)\bno such (?:host|file)\b|\bcommand not found\b|\bno module named\b"
    r"|\b(?:tool|route|endpoint|page|command|module|method|url|path|host|class|cluster|token|credentials?"
    r"|secret|column|field|relation|table|schema|parameter|certificate|role|region|function)\b"
    r"[^.\n]{0,40}?\b(?:not[ _-]?found|does not exist|doesn't exist)\b"
    r"|(?:Module|File|Class|Cluster|Token|Credentials?|Endpoint|Host|Function|Table)NotFound"
    # a cluster that lacks the resource type itself, answered alike in every namespace
    r"|could not find the requested resource"
).search
"""An absence that is not the item's: the host, a file, the tool, the route or the page the
call went through (``no such host``, ``Tool 'x' not found``, ``404 page not found``)."""


_ALREADY = re.compile(
    r"(?i)already (?:exists?|taken|in use|registered|defined|assigned)|\bunique\b|\bduplicate\b"
)
"""A write's refusal because what it would make is there already ("already exists", "Please
enter a unique Code", a duplicate key)."""


def _says_absent(result: ResultView) -> bool:
    """Whether an answer says that what its call asked of an item is not there
    (:data:`_ABSENCE`, not :data:`_ABSENT_ELSEWHERE`): a failure's error, or a success of at
    most :data:`MISSING_ANSWER` bytes (text, or the JSON the watchdog made of a structured
    answer for its fingerprint; none when the agent declared the size or a digest). An
    outage, a rate limit or a refused token says nothing of the item, and answers every
    item alike."""
    text = (result.error or "")[:FAILURE_HEAD] if result.failed else _short_text(result)
    if not text:
        return False
    # the words first, in C: most answers hold none, and the pattern is the cost
    lowered = text.lower()
    if not (
        "found" in lowered or "exist" in lowered or "such" in lowered or "could" in lowered
        or "404" in lowered or "catalog" in lowered or "match" in lowered
    ):
        return False
    return _ABSENCE(text) is not None and _ABSENT_ELSEWHERE(text) is None


_OUTAGE = re.compile(
    r"(?i)rate[ _-]?limit|too many requests|unavailable|unauthori[sz]ed|forbidden|timed? ?out"
    r"|quota|bad gateway|internal server error|try again later|retry later|\b5\d\d\b"
    # the caller's own access refused ("Invalid API token", "token expired"): every item
    # would be answered alike
    r"|invalid (?:api[ _-]?)?(?:token|key)|(?:token|credentials?|api[ _-]?key) (?:is )?(?:invalid|expired|missing)"
    r"|not authenticated|access denied"
).search
"""An answer that tells of an outage, a limit or a refusal, not of what was asked."""


def _says_outage(result: ResultView) -> bool:
    """Whether a short answer (:func:`_short_text`) tells of an outage, a limit or a
    refusal (:data:`_OUTAGE`)."""
    text = _short_text(result)
    return bool(text) and _OUTAGE(text) is not None


def _short_text(result: ResultView) -> str:
    """A successful answer's text when it is short, at most :data:`MISSING_ANSWER`: a
    string payload, or the JSON the watchdog made of a structured one for its fingerprint
    (none when the agent declared the size or a digest: a declared size is its word);
    "" otherwise."""
    payload = result.event.result
    if type(payload) is str:
        return payload if len(payload) <= MISSING_ANSWER else ""
    encoded = result.encoded
    if encoded is None or len(encoded) > MISSING_ANSWER:
        return ""
    return encoded.decode("utf-8", "replace")


def _note_term(terms: bytearray, key: int, term: int) -> None:
    """Remember that the call ``key`` names the listed item ``term``
    (``ResultStallState.terms``: the last ``READS`` such calls)."""
    if len(terms) >= READS * 8:
        del terms[:8]
    terms += _pack_read((key & _M32) or 1, term)


def _term_of(terms: bytearray, key: int) -> int:
    """The listed term the search ``key`` looked up (``ResultStallState.terms``), 0 for none."""
    at = find_entry(terms, ((key & _M32) or 1).to_bytes(4, "little"), 8)
    return int.from_bytes(terms[at + 4 : at + 8], "little") if at >= 0 else 0


LISTED_WORDS_READ = 512
"""Characters of a command read for a name a listing handed over (:func:`_listed_word`)."""


_COMMAND_WORDS = re.compile(r"[^\s=/\"'`,;()|&<>]+")
"""The words of a command line a listed name may be among (``--bucket=b``, ``s3://b/key``,
``"b"``: split at spaces, ``=``, slashes, quotes and the shell's punctuation)."""


def _listed_word(listed: bytearray, args: Any) -> int:
    """The listed names a command runner's command names (its first
    :data:`LISTED_WORDS_READ` characters), as one code (0 for none): every word a listing
    answer of the session listed, mixed in order, so a bucket named after a listed region
    (``--region us-east-1 --bucket b``) is still that bucket's."""
    command = command_text(args)
    if command is None and type(args) is dict:
        code = args.get("code")  # (an interpreter's cell: `print(check('wei2022cot'))`)
        command = code if type(code) is str else None
    return _listed_words_in(listed, command) if command else 0


_QUERY_WORDS = re.compile(r"[^\s=&?:\"'`,;()|<>+]+")
"""The words of an address's query a listed name may be among: split at its own punctuation
and the shell's, not at slashes (``?filter=updates:10.1016/j.clnu.2019.06.011``: a DOI)."""


def _listed_words_in(listed: bytearray, command: str, words: re.Pattern[str] = _COMMAND_WORDS) -> int:
    """:func:`_listed_word` of one line: a command, or an address whose query names the
    item (``...enforcement.json?search=code_info:"TV2504118"``, read by :data:`_QUERY_WORDS`:
    Crossref's ``?filter=updates:<DOI>`` for each DOI of a list)."""
    mixed = 0
    for word in words.findall(command, 0, LISTED_WORDS_READ):
        if 3 <= len(word) <= LISTED_CHARS and word[0] != "-":
            code = listed_code(word)
            if find_entry(listed, code.to_bytes(4, "little"), 4) >= 0:
                mixed = _mixed(mixed, code) if mixed else code
    return mixed


def _listed_phrase_in(listed: bytearray, query: str) -> int:
    """The :func:`listed_code` of the first quoted phrase of an address's decoded query that
    a listing answer of the session listed (``"alendronic acid"``: a name of two words,
    which its words alone do not match), 0 for none."""
    if '"' not in query and "'" not in query:
        return 0
    return _listed_item(listed, tuple(
        quoted[1:-1] for quoted in QUOTED_WORD.findall(query, 0, LISTED_WORDS_READ) if " " in quoted
    ))


def _listed_item(listed: bytearray, values: tuple[str, ...]) -> int:
    """The :func:`listed_code` of the first of ``values`` that a listing answer of the
    session listed, 0 for none."""
    for value in values:
        if 3 <= len(value) <= LISTED_CHARS:
            code = listed_code(value)
            if find_entry(listed, code.to_bytes(4, "little"), 4) >= 0:
                return code
    return 0


_LISTED_TERM_KEYS = frozenset({
    "query", "q", "search_query", "searchQuery", "search", "term", "keywords", "text", "name",
    "names", "legal_name", "full_name", "entity", "entity_name", "company", "company_name",
    "party", "party_name", "person", "subject", "keyword", "search_term", "searchTerm",
    "counterparty", "counterparty_name",
})
"""The arguments of a search read for the term it looks up among the listed values: its
query, or a name (never its longest string: a path or an index it searches in is its scope)."""


def _listed_term(listed: bytearray, args: Any) -> int:
    """The :func:`listed_code` of the term a search looks up, when a listing answer of the
    session listed it (:data:`_LISTED_TERM_KEYS`), else 0."""
    if type(args) is not dict:
        return 0
    # (the call's own few arguments, in order, against the set: most searches have two or three)
    items = args.items() if len(args) <= 16 else islice(args.items(), 16)
    return _listed_item(listed, tuple(v for k, v in items if type(v) is str and k in _LISTED_TERM_KEYS))


def _looked_for(reads: bytearray, key: int) -> int:
    """The code of the indicators the call ``key`` searched for (:func:`_indicators`: its
    entry in ``reads`` has the low bit set), 0 when it is no such search."""
    at = find_entry(reads, (key & _M32).to_bytes(_WIDTH, "little"), 8)
    return int.from_bytes(reads[at + 4 : at + 8], "little") if at >= 0 and reads[at + 4] & 1 else 0


def _query_words(args: Any) -> int:
    """A search's words as a 256-bit signature: one bit per word of at least three letters or digits
    of its query (:func:`_query_text`; the first 256 characters, lower-cased, common words
    left out), chosen by the word's CRC-32."""
    text = _query_text(args)
    signature = 0
    for word in _QUERY_WORD.findall(text[:256].lower()):
        if word not in _QUERY_STOP:
            signature |= 1 << (zlib.crc32(word.encode("utf-8", "surrogatepass")) & 255)
    return signature


def _reworded(words: int, queries: tuple[bytes, ...]) -> bool:
    """Whether a search shares most of its words (at least two, at least a third) with one
    of the recent searches (kept as 32-byte signatures): the same hunt in other words, not
    the next question."""
    if not words:
        return False
    need = max(2, (words.bit_count() + 2) // 3)
    return any((words & int.from_bytes(other, "little")).bit_count() >= need for other in queries)


def _found_only_known(state: Any, payload: Any) -> bool:
    """Whether a search's answer names at least two addresses and every one was found by
    the session's searches before; the new ones are remembered. Addresses are web
    addresses, or a knowledge base's documents (:data:`_FOUND_DOC`) each with the passage
    it answered with (the text up to the next document, its score left out: :data:`_SCORE`): the
    same documents answering the next question of a questionnaire with other passages found
    something; answering a reworded question with the same passages did not."""
    text = payload[:TEXT_LIMIT] if type(payload) is str else result_text(payload)
    if text.count("://") >= 2:
        addresses = [
            url.group().rstrip(".,;:/") for url in islice(_FOUND_URL.finditer(text), 16)
            if _SEARCH_PAGE.search(url.group()) is None
        ]
        if len(addresses) < 2:
            return False
    else:
        # (Substring tests first: most answers name no document.)
        doc_id = ("oc" in text or "OC" in text) and ("_id" in text or "Id" in text or "ID" in text)
        if not doc_id and '"id"' not in text:
            return False
        found = list(islice(_FOUND_DOC.finditer(text), 16))
        if len(found) < 2:
            return False
        ends = [match.start() for match in found[1:]]
        ends.append(len(text))
        addresses = [
            match.group() + _SCORE.sub("", text[match.end() : min(end, match.end() + PASSAGE_CHARS)])
            for match, end in zip(found, ends, strict=True)
        ]
    known = state.found_urls
    new = False
    for address in addresses:
        packed = (zlib.crc32(address.encode("utf-8", "surrogatepass")) or 1).to_bytes(4, "little")
        if find_entry(known, packed, 4) < 0:
            new = True
            if len(known) >= 4 * FOUND_URLS:
                del known[:4]
            known += packed
    return not new and known != b""


PASSAGE_CHARS = 1024
"""Characters of a knowledge base's answer read as one document's passage."""
_SCORE = re.compile(
    r"[\"']?(?:_?score|rank|relevance|distance|similarity)[\"']?\s*[:=]\s*-?[\d.]{1,24}(?:e-?\d{1,3})?",
    re.IGNORECASE,
)
"""A search result's score (what moves with every query), left out of its passage."""


def reports_act(result: ResultView) -> bool:
    """Whether a success of an interface act only reports the act its call asked for: a
    tool named by such an act (:func:`_ui_act_tool`: ``Click-Tool``, ``type_into_element``,
    ``click_at``, ``press_key``, ``browser_click``) or a computer-use action (a click, a
    keystroke), answered by at most :data:`ACK_BYTES` that open with the act done
    (:data:`_REPORTS_ACT`: "Clicked on Button 'OK'.", "Typed text into element 'Sample
    ID'.") or by a bare success in any shape (``{"status": "ok", "field": "Trip date"}``),
    with no word of a failure ("Clicked 'Save'. Dialog: Error - session expired" is what
    the screen said). It restates the call, as "200" for one more endpoint does, and
    shows nothing of the interface it acted on: a rule read from the same procedure gone
    through for the next mail rule, form line or sample (the same clicks answered the
    same way) can take it as no evidence either way. What the agent *sees* (a
    screenshot, a tree of elements, a page's text) is read as any answer."""
    if result.failed or not (
        (result.call_flags & _RUNNER_WRITE == _RUNNER_WRITE and result.action in COMPUTER_ACTS)
        or _ui_act_tool(result.tool)
    ):
        return False
    payload = result.event.result
    if type(payload) is str:
        if len(payload) > ACK_BYTES or (
            not payload.isascii() and len(payload.encode("utf-8", "surrogatepass")) > ACK_BYTES
        ):
            return False
        if _NOT_DONE.search(payload) is not None:
            return False
        if _REPORTS_ACT.match(payload) is not None:
            return True
    return _acknowledges(result)


_UI_ACT_WORDS = frozenset({
    "click", "clicks", "tap", "type", "press", "scroll", "swipe", "hover", "drag", "keyboard",
    "mouse", "keypress",
})
"""Words of an act in an interface, one of which a tool's name must hold (:func:`_ui_act_tool`)."""
_UI_WORDS = _UI_ACT_WORDS | frozenset({
    "double", "right", "left", "long", "key", "keys", "tool", "at", "on", "into", "in", "to",
    "element", "elements", "text", "input", "button", "field", "cell", "coordinates",
    "coordinate", "screen", "ui", "browser", "computer", "desktop", "page", "down", "up",
    "combination", "xy", "point", "node", "control", "window", "app", "move",
})
"""The words a tool named by an interface act may hold (``Click-Tool``, ``type_into_element``,
``click_at``, ``browser_click``, ``press_key``); ``type_check``, ``get_click_stats``,
``key_rotate`` hold others."""
UI_ACT_TOOLS: dict[str, bool] = {}
"""Tool name -> whether it names an interface act (the memo of :func:`_ui_act_tool`, read
by ``dominant-tool-call`` without a call for the names already judged)."""


def _ui_act_tool(tool: str) -> bool:
    """Whether ``tool``'s name says it acts on an interface (cached per name)."""
    act = UI_ACT_TOOLS.get(tool)
    if act is None:
        words = name_words(tool)
        act = (
            bool(words) and len(words) <= 5 and not _UI_ACT_WORDS.isdisjoint(words)
            and _UI_WORDS.issuperset(words)
        )
        if len(UI_ACT_TOOLS) >= 512:  # bounded: tool names are untrusted
            UI_ACT_TOOLS.clear()
        UI_ACT_TOOLS[tool] = act
    return act


def result_text(result: Any) -> str:
    """The text of a payload, cut to :data:`TEXT_LIMIT` characters ("" when empty)."""
    if result is None:
        return ""
    if isinstance(result, str):
        return result[:TEXT_LIMIT]
    try:
        return _encoder.encode(result)[: TEXT_LIMIT * 2].decode(errors="ignore")[:TEXT_LIMIT]
    except (TypeError, ValueError, OverflowError, RecursionError):
        return ""


JSON_TEXT_LIMIT = 65536
"""Longest string payload tried as JSON text (a longer one is compared as text)."""
_json_decoder = msgspec.json.Decoder()


def is_json_text(text: str) -> bool:
    """Whether a string payload is a JSON object or array (then compared exactly)."""
    if text[:1] not in ("{", "[") or len(text) > JSON_TEXT_LIMIT:
        return False
    if text.rstrip()[-1:] not in ("}", "]"):
        return False
    try:
        _json_decoder.decode(text)
    except (msgspec.DecodeError, RecursionError, UnicodeEncodeError):
        return False
    return True


_FOUND_NOTHING = (_NOTHING, _NOTHING, b"(nothing found)", False)
_STRUCTURED = b"(structured result)"
"""The sample of a structured answer (compared by its fingerprint, not a template)."""

_PAGE_KEY_ORDER = (
    "page", "Page", "pageNo", "page_no", "pageNumber", "page_number", "pageNum", "page_num",
    "pageIndex", "page_index", "offset", "Offset", "start", "startIndex", "start_index",
    "skip", "from", "pageOffset", "page_offset", "_getpagesoffset", "startAt", "start_at",
)
PAGE_KEYS = frozenset(_PAGE_KEY_ORDER)
"""Argument names under which a call asks for one page of a listing (its number or offset)."""
_PAGE_LIMIT = 1 << 62
"""Largest page or offset kept (state holds 64-bit integers; a bigger one is no page)."""


def page_number(args: dict[Any, Any]) -> int | None:
    """The page (or offset) a call asks for, when it names one by a :data:`PAGE_KEYS`
    argument holding a number (or a decimal string)."""
    for key in _PAGE_KEY_ORDER:  # (in one order: the same answer after a restore)
        value = args.get(key)
        if type(value) is int:
            return value if -_PAGE_LIMIT < value < _PAGE_LIMIT else None
        if type(value) is str and value.isdecimal() and len(value) <= 12:
            return int(value)
    return None


def page_args(args: dict[Any, Any]) -> dict[Any, Any] | None:
    """The arguments that name a page: the call's own, or those of one object among them
    (an HTTP tool's ``params`` or ``query``: ``{"url": ..., "params": {"page": 7}}``)."""
    if not PAGE_KEYS.isdisjoint(args):
        return args
    for value in islice(args.values(), ECHO_FIELDS):
        if type(value) is dict and not PAGE_KEYS.isdisjoint(value):
            return value
    return None


_PAGE_VALUE = re.compile(
    rb'"(?:' + b"|".join(re.escape(k.encode()) for k in _PAGE_KEY_ORDER)
    + rb')":\s*(?:-?\d{1,20}|"\d{1,12}")'
)


PAGE_SPAN = 16_384
"""Bytes of a call's canonical JSON searched for its page arguments (:func:`_page_base`)."""


def _page_base(tool: str, canonical: bytes) -> int:
    """A code of a call with its page arguments taken out (from its canonical JSON, one
    C-level pass): the listing it pages through."""
    head = _PAGE_VALUE.sub(b"", canonical[:PAGE_SPAN])
    # (Past PAGE_SPAN bytes the arguments are kept as they are: a page key that far into
    # sorted canonical JSON, behind a long filter, leaves that listing's pages unlinked,
    # which only costs the empty-page reading; a pass over megabytes of arguments cost
    # tens of milliseconds a call.)
    return zlib.crc32(canonical[PAGE_SPAN:], zlib.crc32(head, zlib.crc32(tool.encode("utf-8", "surrogatepass")))) or 1


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


ECHO_FIELDS, ECHO_VALUES = 8, 4
"""Top-level argument fields read for what an error may echo, and values kept of them."""
GIVEN_MAX = 64
"""Longest argument string of a search kept as what it was given (``ResultStallState.given``)."""
ECHO_MIN, ECHO_MAX = 6, 256
ECHO_SHORT = 3
"""Shortest value one level down in a call's arguments read as what its answer may echo
(shorter than ``ECHO_MIN``: only where the answer sets it off in brackets or quotes)."""
"""A string argument of this many characters, found in the call's error, is masked
there: a failure that repeats its question says nothing new. (Numbers need no echo:
a failure's template masks every digit.) The upper bound keeps the search of an error
for its echoes cheap whatever a crafted call holds (a substring search may cost the
product of the two lengths)."""


def template(text: str, digits: bool = True) -> bytes:
    """``text`` with quoted strings (near its start) and every digit run masked,
    whitespace collapsed. Done on bytes, where each step is one C-level pass."""
    text = _unmoved(text)
    head = text[:QUOTE_SPAN]
    if _prose_head(head):
        # Prose (an error message, a tool's sentence): the quoted term is the variable
        # part. Structured payloads keep their strings: there they are the content.
        text = _QUOTED.sub(_masked_quote if not digits else "Q", head) + text[QUOTE_SPAN:]
    if not digits:
        if "line " in text:
            text = _SHELL_LINE.sub("line #", text)
        return b" ".join(text.encode("utf-8", "surrogatepass").split())
    data = squeeze_marks(text.encode("utf-8", "surrogatepass").translate(MASK_DIGITS))
    return b" ".join(data.split())


_CLOCK = re.compile(r"(?<![\d:.])\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?![\d:])")
"""A time of day to the second (``09:21:03``, ``05:47:14.123``)."""
_LINE_CLOCK = re.compile(
    r"(?m)^([ \t]*\[?(?:(?:[A-Z]{1,8}|\d{2,4}[-/]\d\d(?:[-/]\d\d)?|\d\d \d\d \d{4})(?: +|T)){0,2})"
    r"\d\d:\d\d:\d\d(?:[.,]\d{1,9}(?!\d)|(?![\d:]))"
)
"""A time of day a line opens with, after a date or a level in capitals if any (``09:21:03
Done.``, ``INFO 11-03 05:21:14 ...``, ``2025-10-31T05:21:14Z ...``, karma's ``20 04 2025
10:58:03.821: WARN ...``, its fraction of a second with it), not one after words
(``next run 06:30:00``, ``Fri 2025-10-31 06:30:00``: what was asked). The separator after a
word or a date is spaces or one ``T``, never both kinds at once: a capital ``T`` may be a
word's letter or the separator, and a line of capital T's split every way took seconds."""
CLOCK_SPAN = 48
"""Characters at the start of a text answer in which a time of day marks a log's lines."""
SCRIPT_ECHO_SPAN = 1_024
"""Characters in which the echo of a package script (``> pkg@1.0.0 test``, ``> karma start
...``, then a blank line) ends, for the log after it to be looked at (:func:`_log_start`)."""


def _log_start(text: str) -> int:
    """Where the output of a package script opens, after the lines npm and pnpm echo
    before running it (``> chart.js@4.4.8 test-ci-karma /repo``, ``> cross-env ... karma
    start``, a blank line): the log's own first line, where its time of day is. 0 for an
    answer that opens with no such echo."""
    if not text.startswith(("> ", "\n> ")):
        return 0
    end = text.find("\n\n", 2, SCRIPT_ECHO_SPAN)
    return end + 2 if end >= 0 else 0


def templates(text: str, digits: bool = True) -> tuple[bytes, bytes]:
    """``template(text, digits)`` and the UTF-8 of ``light_template(text)``, with one
    encode of the text where both read the same bytes.

    They do unless quoted strings near the start are masked (the template's text then
    differs), or, for a template with its digits masked, the text holds ``line ``: the
    light text has its line numbers replaced before it is encoded, the template masks
    them in the bytes (the same result for ASCII digits only, so that case encodes twice).
    """
    start = _log_start(text) if text[:1] in (">", "\n") else 0
    if (
        text.count(":", start, start + CLOCK_SPAN) >= 2
        and _CLOCK.search(text, start, start + CLOCK_SPAN) is not None
    ):
        # A time of day a log opens with ("09:21:03  Database Error in model ...", "INFO
        # 11-03 05:21:14 [model_runner.py]"): when the run printed it, not what it found.
        # Masked where a line opens with it (a log's lines): a time further on in a line
        # may be what was asked (a timer's next run). (Looked for at the start only, or
        # after a package script's echo, behind a count of its colons: a search over
        # every answer cost 6 % a pair.)
        text = _LINE_CLOCK.sub(r"\1T", text)
    text = _unmoved(text)
    has_line = "line " in text
    light = (_SHELL_LINE.sub("line #", text) if has_line else text).encode(
        "utf-8", "surrogatepass"
    )
    if _prose_head(text[:QUOTE_SPAN]):
        return template(text, digits), light
    if not digits:
        return b" ".join(light.split()), light
    data = text.encode("utf-8", "surrogatepass") if has_line else light
    return b" ".join(squeeze_marks(data.translate(MASK_DIGITS)).split()), light


def light_template(text: str) -> str:
    """``text`` with only what differs between identical runs of one command masked: the
    shell's line numbers (``bash: line 27424:``) and objects' addresses (``<Foo object at
    0x7f1c2b3d5a10>``). A test that fails with other values after an edit has changed;
    this keeps it changed."""
    text = _unmoved(text)
    return _SHELL_LINE.sub("line #", text) if "line " in text else text


_OBJECT_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]{4,16}\b")
"""The address in an object's default representation (Python's ``<... object at
0x7f1c2b3d5a10>``): a new one every run of the same failing test, so the same failure
read with it was a new answer every time (a test rerun dozens of times between cache
clears was never halted)."""
_TIMESTAMP_ELEMENT = re.compile(TIMESTAMP_ELEMENT)
"""When an answer was written, as its own element (``<status>failed</status> ...
<timestamp>2025-09-17T17:21:38.548Z</timestamp>``): a dead background shell read after
each wait said the same thing with a new time."""


_NPM_LOG = re.compile(r"_logs[/\\]\d{4}-\d\d-\d\dT[\d_:.]{6,16}Z-debug(?:-\d{1,4})?\.log")
"""The log npm names at the end of every error (``/root/.npm/_logs/2024-08-14T13_53_52_800Z-
debug-0.log``): named by when the run failed, so the same failed install read as output
(a runtime that records no exit code) was a new answer every time."""


_FAILED_BUILD_RUN = re.compile(
    r"(?m)^\[INFO\] (?:Total time: {1,4}[\d.:,]{1,12} ?(?:s|min|h)\b[^\n]{0,20}|Finished at: [^\s]{1,40})$"
    r"|\bBUILD FAILED in (?:\d{1,6}[hms] ?){1,3}"
)
"""What a build tool says of its own run when the build failed: Maven's ``[INFO] Total
time:  46.442 s`` and ``[INFO] Finished at: 2025-04-11T08:54:53Z`` after ``BUILD
FAILURE``, Gradle's ``BUILD FAILED in 3s``. The same failing build run again took another
time and ended at another moment. (A build that succeeded keeps them: fifteen test
classes run one by one, each answered by the same quiet build but for its time, are a
sweep, not one answer fifteen times.)"""


def _unmoved(text: str) -> str:
    """``text`` without what moves between two identical answers by itself: an object's
    address (:data:`_OBJECT_ADDRESS`), a timestamp element (:data:`_TIMESTAMP_ELEMENT`),
    npm's log of a failed run (:data:`_NPM_LOG`), an age in an answer that says its work
    ended (:data:`AGO`: ``gh run view``'s "Triggered via push about 33 minutes ago"), a
    failed build's time (:data:`_FAILED_BUILD_RUN`), the reference an error page gives
    its response (:data:`RESPONSE_REFERENCE`: Akamai's, Cloudflare's), the terms a "No
    results for" names back (:data:`_NOTHING_FOUND_FOR`) and an HTTP response's date and
    expiry (:data:`_HTTP_DATE`), each behind a substring test."""
    if " at 0x" in text:
        # An object's address in its default repr: where this run put it, not what it is.
        text = _OBJECT_ADDRESS.sub(" at 0x#", text)
    if "<timestamp>" in text:
        text = _TIMESTAMP_ELEMENT.sub("<timestamp>T</timestamp>", text)
    if "-debug-" in text:
        text = _NPM_LOG.sub("_logs/T-debug.log", text)
    if " ago" in text and says_ended(text):
        text = AGO.sub("T ago", text)  # (in an answer still going, the age is its news)
    if "BUILD FAILED in" in text or ("BUILD FAILURE" in text and "[INFO] Total time:" in text):
        text = _FAILED_BUILD_RUN.sub(_build_run_masked, text)
    if has_response_reference(text):
        text = RESPONSE_REFERENCE_TEXT.sub("#", text)
    if "esults" in text or "atches" in text or "ESULTS" in text or "ATCHES" in text:
        # the terms a "nothing found" names back (browser-use's extraction of a results
        # page, `{"results": [], "message": "No results for \\"bosch vs miele\\"."}`): the
        # search's own words, not news (with the page a navigation went to, _judge:
        # thirty-two reworded forum searches, each page extracted, were never stale in a
        # blind batch)
        text = _NOTHING_FOUND_FOR.sub(r"\1 T", text)
    if " GMT" in text:
        status = text.find("HTTP/")
        if status >= 0:
            # (in a response's headers only: a mail's `Date:` names which mail it is)
            text = text[:status] + _HTTP_DATE.sub(_http_date_masked, text[status:])
    return text


_NOTHING_FOUND_FOR = re.compile(
    r"(?i)(\bno (?:results|matches) for:?)[ \t]{0,4}"
    r"(?:\\\"[^\"\\\n]{0,256}\\\"|\"[^\"\\\n]{0,256}\"|'[^'\\\n]{0,256}'|\u201c[^\u201d\n]{0,256}\u201d)"
)
""""No results for" and the quoted terms it names back (quoted plainly, in escaped JSON
text, or in curly quotes)."""


def _http_date_masked(match: re.Match[str]) -> str:
    """An HTTP date header, its name kept and its date masked (:data:`_HTTP_DATE`)."""
    return f"{match[1]}: T"


_HTTP_DATE = re.compile(
    r"(?i)\b(date|expires):[ \t]*(?:mon|tue|wed|thu|fri|sat|sun), \d\d (?:jan|feb|mar|apr|may|jun|jul|aug"
    r"|sep|oct|nov|dec) \d{4} \d\d:\d\d:\d\d GMT"
)
"""An HTTP response's ``Date`` header (``date: Wed, 29 Oct 2025 12:28:00 GMT``, as ``curl -i``
prints it), and its ``Expires``, which moves with it: when the server answered, never
what it said. The same 503 fetched forty-eight times, each with its own date, was a new
answer every time in a blind batch. Read only after a status line (``HTTP/2 503``), in
the headers of a response: a mail's ``Date:``, in the same form, names which mail it is."""


def _build_run_masked(match: re.Match[str]) -> str:
    """A failed build's time and end of run, masked (:data:`_FAILED_BUILD_RUN`)."""
    return "BUILD FAILED in T" if match[0].startswith("BUILD") else "[INFO] T"


_STARTED_AT = re.compile(rb"(?i)\bstart(?:ed)?(?: at)?:?[ \t]+\d{1,2}:\d\d:\d\d(?:[.,]\d+)?")
"""When a run started, as a runner reports it (vitest's ``Start at  10:14:07``)."""


class ResultStallConfig(SignalConfig, kw_only=True, forbid_unknown_fields=True):
    """Policy table of ``result-stall``."""

    threshold: Annotated[int, Meta(ge=3, le=100)] = 8
    """Consecutive results already received (masked) that trip the signal."""
    memory: Annotated[int, Meta(ge=8, le=MEMORY_LIMIT)] = 128
    """Distinct result templates remembered per session."""
    window: Annotated[int, Meta(ge=4, le=64)] = 12
    """Recent results considered by the interleaved rule."""
    window_threshold: Annotated[int, Meta(ge=0, le=64)] = 9
    """Stale results among the last ``window`` that trip the signal (0: rule off)."""
    futile_writes: Annotated[int, Meta(ge=0, le=100)] = 5
    """Writes in a row after which the same check returned the same answer (0: rule off)."""
    steady_checks: list[str] = field(default_factory=lambda: list(DEFAULT_POLLING_TOOLS))
    """Tools whose answer is expected to stay the same across writes (status reads, waits):
    never a check for the futile-write rule (globs, case-insensitive)."""

    at_most = (("window_threshold", "window"),)


class ResultStallState(Struct, tag=SIGNAL_ID, gc=False, omit_defaults=True):
    """Per-session state of ``result-stall``."""

    seen: bytearray = bytearray()
    """Templates received, 4 bytes each, oldest first."""
    silent: int = 0
    """Named calls that timed out in a row (``_no_response``), since the last answer."""
    answered: bool = False
    """A call of the session was answered without a failure: its places answer."""
    run: int = 0
    """Consecutive stale results."""
    mask: int = 0
    """One bit per recent result that was stale or news, newest lowest: stale."""
    steps: int = 0
    """Results that were stale or news, capped at the window."""
    latched: bool = False
    last_key: int = 0
    """Call key of the latest paired result's call (to recognise a poll)."""
    last_outcome: int = 0
    """That result's exact outcome."""
    last_steady: int = 0
    """What the latest answer judged as a poll said apart from when it was given
    (``steady_answer``, keyed by its call; 0: none yet)."""
    tools: tuple[str, ...] = ()
    """Distinct tools of the current run, at most 4 (alert text); a tuple, so the usual
    empty value costs nothing."""
    checks: bytearray = bytearray()
    """The last ``CHECKS`` checks' answers, 8 bytes each (key32, then light template32),
    least recent first."""
    wrote: bool = False
    """A write succeeded since the last check's answer."""
    write_key: int = 0
    """The call key (low 32 bits, never 0) of the one successful write since the last check
    (-1: several; 0: none): the next check is also remembered under it (the same write
    re-sent)."""
    futile: int = 0
    """Checks in a row whose answer the writes before them did not change."""
    write_ids: int = 0
    """The code of the ids the latest named write call names at its top level (``_ids``,
    not nested: the item it changes, not the values it sets; 0: none), until its answer."""
    written: bytes = b""
    """``write_ids`` of the successful named writes since the check's answer last changed,
    4 bytes each, at most ``WRITTEN_ITEMS``, oldest first."""
    to_new: bool = False
    """A successful named write since the last check named ids none of ``written`` holds:
    a sweep of writes over items, which a check that does not move is no verdict on."""
    futile_latched: bool = False
    """The futile-write rule reported the current stretch (until a check's answer changes)."""
    echo: tuple[str, ...] = ()
    """The newest call's argument strings and numbers its answer may echo (see ``ECHO_MIN``)."""
    echo_key: int = 0
    """That call's key."""
    given: tuple[str, ...] = ()
    """The newest search's short argument strings (at most ``ECHO_FIELDS``, of at most
    ``GIVEN_MAX`` characters): an answer naming them names what it was asked, no hit
    (``found_nothing``)."""
    given_key: int = 0
    """That search's key."""
    sample: str = ""
    """The latest stale template, cut to 160 bytes (alert text)."""
    page: int = 0
    """The code of the page the browser last navigated to (:func:`_page_code`; 0: no
    navigation yet): where a browser's read that names no place of its own reads."""
    reads: bytearray = bytearray()
    """The last ``READS`` calls that read files or URLs they name: 8 bytes each (key32,
    then a code of the names, its low bit set for the indicators a search looks for and
    clear otherwise), oldest first."""
    found_urls: bytearray = bytearray()
    """The addresses searches found, 4 bytes each (``FOUND_URLS`` at most), oldest first."""
    queries: tuple[bytes, ...] = ()
    """The words of the last ``QUERIES`` searches (``_query_words``, 32 bytes each), oldest
    first."""
    listed: bytearray = bytearray()
    """The values the session's listing answers listed (``listed_values``), 4 bytes each,
    ``LISTED`` at most: the newest listing's, after what is left of older ones."""
    terms: bytearray = bytearray()
    """The last ``READS`` searches whose term a listing listed: 8 bytes each (key32, then
    the term's ``listed_code``), oldest first (parallel searches find theirs)."""
    rows: bytes = b""
    """The newest listing's rows in their order (``listed_rows``: 6 bytes a row, at most
    ``LISTED_ITEMS`` rows)."""
    row_at: int = 0
    """The next row of ``rows`` a sweep in the listing's order would name."""
    in_order: int = 0
    """Call key (32 bits) of the latest call that named the listing's next row, until its
    answer: the same item asked for again because the listing names it again."""
    reworded: bytearray = bytearray()
    """Call keys (32 bits) of the last ``REWORDED_KEPT`` searches that share most of their
    words with one before them (``_reworded``): each answer is judged by its own call's."""
    page_base: int = 0
    """The listing the latest call that asked for a page pages through (``_page_base``)."""
    page_at: int = 0
    """The page (or offset) it asked for."""
    page_step: int = 0
    """Call key (32 bits) of the latest call that asked for another page of the same
    listing, until its answer: an empty page there is nothing found."""
    round_calls: int = 0
    """Calls of the current round: those sent since a result last came (``ROUND_LIMIT`` at most)."""
    round_left: int = 0
    """Calls of the current round not answered yet. Fewer than ``round_calls``: an answer
    came since the round's first call, so the next call starts a round."""
    round_steps: int = 0
    """Stale or news answers in the current round (its bits of ``mask``)."""
    round_news: bool = False
    """An answer of the current round was news."""
    held: bool = False
    """A trip reached inside an unfinished round of parallel calls, judged when it ends."""
    rechecks: bytearray = bytearray()
    """The last ``RECHECKS`` calls' answers, 8 bytes each (key32, the answer's code's low 24
    bits, flags: ``_PRE_WRITE``, ``_ASKED_AGAIN``), least recently answered first: the first
    time a call answered once before a write is asked again after it, the same answer is
    that write's check (a before-and-after sweep), neither stale nor news."""

    def __post_init__(self) -> None:
        # A restored ``listed`` is kept whole codes, within its bound: a value this module
        # did not write (a corrupt changelog) must not shift every later code off the
        # 4-byte grid, where no lookup would find it, nor hold megabytes.
        listed = self.listed
        if len(listed) % 4 or len(listed) > 4 * LISTED:
            del listed[: len(listed) - min(4 * LISTED, len(listed) - len(listed) % 4)]
        if len(self.rows) % _ROW or len(self.rows) > _ROW * LISTED_ITEMS:
            self.rows, self.row_at = b"", 0  # (likewise: rows are whole, and bounded)
        if not 0 <= self.row_at <= len(self.rows) // _ROW:
            self.row_at = 0
        rechecks = self.rechecks
        if len(rechecks) % 8 or len(rechecks) > 8 * RECHECKS:
            del rechecks[: len(rechecks) - min(8 * RECHECKS, len(rechecks) - len(rechecks) % 8)]


class ResultStall(Signal):
    """Critical after ``threshold`` consecutive results whose template was already seen."""

    id: ClassVar[str] = SIGNAL_ID
    severity = "critical"
    scope = "session"
    State = ResultStallState
    sees_waits = False  # a wait's answers are no loop evidence (signals/facts.py)
    Config = ResultStallConfig
    needs_pairing = True
    needs_result_size = True  # a write's bare acknowledgement is known by its size
    defers_to = ("repeated-tool-call", "alternating-tool-cycle", "dominant-tool-call",
                 "setup-detour", "failure-loop", "long-loop")

    config: ResultStallConfig

    def __init__(self, config: SignalConfig | None = None) -> None:
        super().__init__(config)
        cfg = self.config
        self.threshold, self.memory = cfg.threshold, cfg.memory
        self._keep = (cfg.memory - 1) * _WIDTH
        self.window = cfg.window
        self.window_threshold = cfg.window_threshold
        self._full = (1 << self.window) - 1
        # outcome -> (template code, light code, masked text): a pure function of the
        # result, cached per process so a payload seen again costs one lookup.
        self._codes: dict[Any, tuple[int, int, bytes, bool]] = {}
        self.futile_writes = cfg.futile_writes
        self._steady = tool_glob_matcher(cfg.steady_checks)
        self._steady_cache: dict[str, bool] = {}
        self._query_codes: dict[int, int] = {}  # call key -> its search's words (_query_words)
        # answer outcome -> listed_values and listed_rows of it
        self._listings: dict[int, tuple[bytes, bytes]] = {}

    def is_latched(self, state: Any) -> bool:
        return bool(state.latched)

    def on_call(self, state: Any, call: CallView) -> Finding | None:
        # Rounds: the calls sent together before any answer came (parallel calls) are
        # judged as one (_end_round). A call after an answer starts the next round.
        finding = None
        calls = state.round_calls
        if state.round_left < calls or not calls:
            if state.round_left and calls > 1:
                # Some of the last round's calls were never answered: it ends here.
                finding = self._end_round(state)
            if calls != 1:
                state.round_calls = 1
            state.round_left = 1
            if state.round_steps:
                state.round_steps = 0
            if state.round_news:
                state.round_news = False
        elif state.round_calls < ROUND_LIMIT:
            state.round_calls += 1
            state.round_left += 1
        # What a read names (files, URLs): the same content read from another file is
        # that file's answer, not the first one's again (on_result). Kept per call key
        # for the last READS such calls, so the results of parallel reads find theirs.
        if not call.write:
            # (A search's names are no place: nothing found in one more file is nothing
            # found again. A SQL query's tables are, even through a tool named as a
            # search: a count per table is that table's answer.)
            # So are the ids a search names (`list_annotations(build_number=18899)`):
            # that build's annotations, not the same answer again for the next build.)
            # And the indicators a search looks for (an IP, a domain, a hash: an IOC sweep),
            # marked by the low bit: each one's "nothing found" is that indicator's answer.
            items = ""
            listed = state.listed
            if call.search:
                names = sql_tables(call.args) or _ids(call.args, search=True)
                if not names:
                    names = items = _indicators(call.args)
                if not names and call.runner:
                    # The files a command's search looks in (not its quoted words: what
                    # it looks for is no place, `grep -rn "/api/v2/orders" src/`): kept
                    # for a numbered hit only (on_result), which is that file's; nothing
                    # found is nothing found
                    names = _search_places(call)
                term = _listed_term(listed, call.args) if listed else 0
                if term:
                    # A name a listing handed over, looked up (the next counterparty of
                    # an onboarding batch screened): its "no hits" is its own answer.
                    _note_term(state.terms, call.key, term)
            else:
                names = read_names(call)
                if not names and state.page and not call.runner and _reads_page(call.tool):
                    # a browser's read naming no place reads the page it went to last
                    # (`extract_content(goal=...)` after `go_to_url`)
                    names = f"page:{state.page}"
                if listed and not call.runner and type(call.args) is dict:
                    # A named read by an id a listing handed over (the next grasp candidate
                    # of a generator's `ids`, `plan_to_grasp(grasp_id="g22")`): its answer is
                    # that item's, a failure it reports for the item included (read on
                    # the result), not one more guessed id that is not there.
                    strings = tuple(
                        value for value in islice(call.args.values(), ECHO_FIELDS) if type(value) is str
                    )
                    named = _listed_item(listed, strings)
                    if not named:
                        # or an address whose query names one (openFDA's `?search=
                        # code_info:"TV2504118"` for each lot a receipt report listed)
                        for value in strings:
                            if "://" in value and "?" in value:
                                query = value[value.index("?"):][:LISTED_WORDS_READ]
                                if "%" in query or "+" in query:
                                    # as the server reads it (`%22amlodipine%22+AND+...`)
                                    query = unquote_plus(query)
                                named = _listed_words_in(listed, query, _QUERY_WORDS) or _listed_phrase_in(
                                    listed, query
                                )
                                if named:
                                    break
                    if named:
                        _note_term(state.terms, call.key, named)
                if listed and call.runner:
                    # A command naming a name a listing handed over (the next bucket of
                    # `aws s3api list-buckets`), for its answer saying the item lacks what
                    # was asked: kept as a search's term is, read only for that.
                    named = _listed_word(listed, call.args)
                    if named:
                        _note_term(state.terms, call.key, named)
                        if not names:
                            # And the place its answer is kept with, whatever it says (a
                            # hotfix found installed on the next host of the list): a
                            # sweep of the listed items, one answer each.
                            names = f"listed:{named}"
        elif call.runner:
            # A command that writes its output into a file (`curl ... > genomes/batch_07.fa;
            # tail -1 genomes/batch_07.fa`): what it prints is that file's, so twelve
            # batches fetched into twelve files, each printing "HTTP 200", are twelve
            # answers; the same file written again with the same output is the same one.
            items = ""
            # else the places it names (`eslint . --fix` in packages/auth, then in
            # packages/billing-ui...): a sweep of a fixer over twenty packages, most
            # answering "0 changed", is one answer per package
            names = written_names(call) or read_names(call)
        else:
            # A named write's ids (`request_on_demand_read(meter_id="MTR-4582086")`): read
            # only when it times out (on_result), a sweep's silence of each device its own.
            items = ""
            # (its own ids, then those one level down, each read once)
            own = _ids(call.args, nested=False)
            inner = _nested_ids(call.args) if type(call.args) is dict else ""
            names = f"{own}\0{inner}" if own and inner else own or inner
            if names:
                state.write_ids = zlib.crc32(own.encode("utf-8", "surrogatepass")) or 1 if own else 0
            elif state.write_ids:
                state.write_ids = 0
        if state.rows and not call.write and type(call.args) is dict:
            # The listing's next row, named (a bill's lines looked up one by one, in their
            # order): an item the listing names again is asked for again. (Not a path the
            # call reads in: a phrase searched for in file after file of a listing is
            # still the hunt.)
            paths = call.canonical.paths
            item = _listed_item(state.listed, tuple(
                value for name, value in islice(call.args.items(), ECHO_FIELDS)
                if type(value) is str and not (paths and name in paths)
            ))
            if item:
                index = _next_row(state.rows, state.row_at, item)
                if index >= 0:
                    state.row_at = index + 1
                    state.in_order = (call.key & _M32) or 1
        if names:
            reads = state.reads
            if len(reads) >= READS * 8:
                del reads[:8]
            named = zlib.crc32(names.encode("utf-8", "surrogatepass"))
            reads += _pack_read(call.key & _M32, named | 1 if items else (named & ~1) or 2)
        args = call.args  # (a JSON object sent as a string is read as that object)
        if call.search and state.found_urls:
            # Its words, for whether it rewords a recent search (_found_only_known's rule,
            # which needs addresses found before: until a search found one, nothing to keep).
            words = self._query_codes.get(call.key)
            if words is None:
                words = _query_words(args)  # a pure function of the call: cached
                if len(self._query_codes) >= 1024:
                    self._query_codes.clear()
                self._query_codes[call.key] = words
            queries = state.queries
            if _reworded(words, queries):
                kept = state.reworded
                if len(kept) >= 4 * REWORDED_KEPT:
                    del kept[:4]
                kept += ((call.key & _M32) or 1).to_bytes(4, "little")
            packed = words.to_bytes(32, "little")
            if packed not in queries:
                state.queries = (*queries[1 - QUERIES :], packed) if len(queries) >= QUERIES else (*queries, packed)
        paged = page_args(args) if type(args) is dict else None
        if paged is not None:
            # The next page of the same listing (only its page argument changed): a page
            # with nothing on it is nothing found (on_result), as a search's empty answer.
            page = page_number(paged)
            if page is not None:
                canonical = call.canonical
                raw = canonical.raw
                base = _page_base(
                    call.tool, raw if raw is not None else canonical.text.encode("utf-8", "surrogatepass")
                )
                step = base == state.page_base and page != state.page_at
                state.page_step = (call.key & _M32) or 1 if step else 0
                state.page_base, state.page_at = base, page
        # What the answer may echo back: the call's longer strings, kept for the newest
        # call only (the usual case: its answer comes next) until that answer comes.
        if type(args) is not dict or call.runner:
            # A command runner's output quoting its command is a transcript, not an echo.
            if state.echo:
                state.echo = ()
            return finding
        echo: list[str] = []
        # The values themselves when there are few (the usual call): nothing copied. (A
        # tuple otherwise: a search reads them twice.)
        values = args.values() if len(args) <= ECHO_FIELDS else tuple(islice(args.values(), ECHO_FIELDS))
        if call.search:
            # What a search was given, which its empty answer may name ("supplier": "SNDSRC").
            given = tuple(
                v for v in values if type(v) is str and 0 < len(v) <= GIVEN_MAX
                and (v.isascii() or _encodable(v))  # (a lone surrogate: no snapshot)
            )
            if given or state.given:
                state.given, state.given_key = given, call.key
        for value in values:
            if type(value) is dict and value:
                # One level down (`jira_transition(transition={"name": "Done"})`): a short
                # value there is echoed only as the error sets it off, "(Done)" (below).
                for inner in islice(value.values(), ECHO_FIELDS):
                    if (
                        type(inner) is str and ECHO_SHORT <= len(inner) <= ECHO_MAX
                        and (inner.isascii() or _encodable(inner))
                    ):
                        echo.append(inner)
                        if len(echo) == ECHO_VALUES:
                            break
            elif (
                type(value) is str and ECHO_MIN <= len(value) <= ECHO_MAX
                and (value.isascii() or _encodable(value))  # (a lone surrogate: no snapshot)
            ):
                echo.append(value)
            if len(echo) >= ECHO_VALUES:
                break
        if echo or state.echo:
            # Longest first: a short value inside a longer one (the database named in
            # the SQL) must not break the longer one before it is masked.
            echo.sort(key=len, reverse=True)
            state.echo = tuple(echo)
            state.echo_key = call.key
        return finding

    def on_result(self, state: Any, result: ResultView) -> Finding | None:
        if state.round_calls < 2:
            if state.round_left:
                state.round_left = 0
            return self._judge(state, result)  # a call answered before the next (the usual)
        # One of a round of parallel calls: a trip it reaches is held until the round's
        # last answer, which judges the round as one (_end_round).
        finding = self._judge(state, result)  # (round_left still counts this answer)
        if state.round_left > 1:
            state.round_left -= 1
            return finding
        state.round_left = 0
        return self._end_round(state) or finding

    def _end_round(self, state: Any) -> Finding | None:
        """The last answer of a round of parallel calls has come (or the next round began
        without it). A round with news in it made progress: its stale answers are the
        finished parts asked again beside what changed (fourteen files' processing polled
        in rounds, three of them done this time) and do not count. A round without news
        trips now if one of its answers reached the threshold."""
        held = state.held
        if held:
            state.held = False
        steps = state.round_steps
        if steps:
            state.round_steps = 0
        if state.round_news:
            state.round_news = False
            if state.run:
                state.run = 0
            if state.mask:
                state.mask &= ~((1 << min(steps, self.window)) - 1)
            self._settle(state)
            return None
        if not held or state.latched:
            return None
        state.latched = True
        return self._finding(state)

    def _judge(self, state: Any, result: ResultView) -> Finding | None:
        if self.exempt and result.tool in self.exempt:
            return None
        flags = result.call_flags
        if (
            not flags & FLAG_WRITE and not result.failed and goes_back(result.tool)
            and not _tells_failure(result) and not says_missing(result.event.result)
        ):
            # A step back (`back_to_search`, `go_back`, `browser_navigate_back`) shows a page
            # the agent saw before, by construction: neither stale nor news. Going from a
            # listing to each of its items and back is reading the items; going back and
            # forth over the same ones is seen in the forward steps, whose pages repeat.
            # (Nor the call before it for the next answer's poll test: the same page opened
            # again after a step back is no poll of it. An error page is read as any.)
            state.last_key = 0
            return None
        if _reports_navigation(result):
            # A navigation's report names where it went and nothing of the page
            # (browser-use's "🔗  Navigated to <url>"): neither stale nor news. The page is
            # what the next read of it shows, kept with the address (its query dropped: a
            # search reworded in the address is one results page, thirty-two of them, each
            # page extracted "No results", were never stale in a blind batch).
            page = _page_code(result.event.result)
            if state.page != page:
                state.page = page
            state.last_key = 0
            return None
        key = result.call_key
        outcome = result.outcome
        again = key and key == state.last_key
        polled = again and outcome != state.last_outcome
        if key:
            state.last_key, state.last_outcome = key, outcome
        if again and result.asked_runs:
            # The same call again while its user asked for runs ("run it 15 times"):
            # neither news nor stale; repeated-tool-call counts the run against the count.
            return None
        if result.paused and failed_transiently(result):
            # A retry after a pause of a failure that may pass by itself (a 429 retried
            # after the back-off it asked for, a 503): backing off, neither news nor stale,
            # as failure-loop reads it (the same call failing so for good is still its
            # across-writes rule's, at twice its count).
            return None
        if outcome == NO_OP_OUTCOME:
            return None  # the no-op streak reads these
        if outcome and not result.failed and not flags & FLAG_WRITE and (
            # (the JSON the watchdog made for the fingerprint: no list in it, nothing listed)
            result.encoded is None or b"[" in result.encoded
        ):
            self._note_listing(state, result.event.result, 0 if result.event.result_digest else outcome)
        # The cache key holds all the template depends on besides the payload: a failure's
        # template is the tool's ("exit code 1" from two tools is two answers), and a
        # search's answer has its digits masked where another call's keeps them.
        masks_digits = result.failed or flags & FLAG_SEARCH
        # A failed search's paths are masked too: the search flag is part of its key.
        # A command line written by guess (a build) may report its own failure: its
        # success is read for that (below), so its template is kept apart.
        # (Not a line that also searches: grep's lines say "error" for what they found.)
        guessed = flags & _GUESSED_MASK == _RUNNER_WRITE and not result.failed
        memo = (
            (outcome, result.tool, flags & FLAG_SEARCH) if result.failed
            else (outcome, 1) if guessed
            # a write's output is not read for a failure it reports (below): kept apart
            else (outcome, 2, bool(masks_digits)) if flags & FLAG_WRITE
            else -outcome if masks_digits else outcome
        )
        # The cache is the process's, shared by every session: its key must hold all the
        # template depends on. An answer with both a digest and a payload is identified
        # by the digest (the outcome) and read by its payload: not cached, or one
        # session's text would stand for another's under the same digest.
        cacheable = outcome and not (
            result.event.result_digest and result.event.result not in (None, "")
        )
        echo: tuple[str, ...] = ()
        # The call's own strings (its echo), for whether it names an item a listing handed
        # over: read only where its answer says the item lacks what was asked (below).
        offered: tuple[str, ...] = ()
        # The listed item a search, a command or a named read looked up (on_call), for its
        # answer being that item's.
        term_item = (
            _term_of(state.terms, key) if state.terms else 0
        )
        row = 0
        if state.in_order:
            if state.in_order == ((key & _M32) or 1):
                # The listing's next row, named (a procedure code on a bill's fourth line as
                # on its second): an answer the session had is that row's (below), at
                # most once a row (the rows are gone through in their order).
                row = _mixed(_ROW_TAG, state.row_at)
            state.in_order = 0
        if key and key == state.echo_key and state.echo:
            if state.listed and not flags & (FLAG_SEARCH | FLAG_WRITE):
                offered = state.echo
            if result.failed or _tells_failure(result) or (
                # A search's answer that says, in words, what it did not find ("Could not
                # find method get_site_pages in class Page"): the term is the call's.
                flags & FLAG_SEARCH and type(result.event.result) is str
                and _says_found_no(result.event.result)
            ):
                echo = state.echo
            # The echo is for the newest call's answer: once it came, it is done with.
            state.echo = ()
        cached = self._codes.get(memo) if cacheable and not echo else None
        if cached is None and outcome and not result.failed and (
            type(payload := result.event.result) is not str
            # is_json_text's first test inline: most text answers do not open like JSON.
            or (payload[:1] in ("{", "[") and is_json_text(payload))
        ):
            # A structured payload (an API's JSON, as an object or as the JSON text that
            # MCP servers and many frameworks deliver) is compared exactly: its numbers
            # and strings are its data (prices, ids, names, pages), not noise to mask.
            code = (outcome & _M32) or 1
            cached = (code, code, _STRUCTURED, False)
            if flags & FLAG_SEARCH:
                # (JSON text decoded once for the readings below)
                answer = json_value(result.event.result)
                if found_nothing(answer):
                    # {"query": "blue shoe", "results": []}: the echoed query differs on
                    # every rewording, the answer does not; like an empty output, nothing
                    # found.
                    cached = _FOUND_NOTHING
                elif key and key == state.given_key and found_nothing(answer, 0, state.given):
                    # {"store": "0315", "matches": []}: nothing found where the search was
                    # told to look. Nothing found in the same place again is stale (a memo
                    # hunted under twenty rewordings in one repository); in a place not
                    # looked in before, news (a recall swept store by store).
                    places = "\x1f".join(named_back(answer, state.given)).encode(
                        "utf-8", "surrogatepass"
                    )[:TEXT_LIMIT]
                    code = zlib.crc32(b"(nothing found in)" + places) or 1
                    cached = (code, code, b"(nothing found in) " + places, False)
        if state.page_step and key and (key & _M32 or 1) == state.page_step:
            state.page_step = 0
            if not result.failed and empty_page(result.event.result):
                # Page 21 of a listing that ended at page 19: nothing on it, whatever page
                # number and totals the answer repeats. (Not kept in the codes: it depends
                # on the call before.)
                cached = _FOUND_NOTHING
        if (
            flags & FLAG_SEARCH and outcome and not result.failed and cached is not _FOUND_NOTHING
            and _found_only_known(state, result.event.result) and state.reworded
            and find_entry(state.reworded, ((key & _M32) or 1).to_bytes(4, "little"), 4) >= 0
        ):
            # A web search reworded again and again that finds only pages it found before
            # (in another order): nothing found, like an empty answer. Not the next question
            # of a questionnaire answered from the same few documents: only a search that
            # shares most of its words with a recent one. (Not kept in the codes: it
            # depends on the session.)
            cached = _FOUND_NOTHING
        if cached is None:
            if result.failed:
                text = (result.error or "")[:TEXT_LIMIT]
                if says_only_status(text) and result.event.result:
                    # "exit code 1" says nothing of what failed: the output does.
                    payload = result.event.result
                    text += "\n" + (payload[:TEXT_LIMIT] if type(payload) is str else result_text(payload))
            else:
                payload = result.event.result
                # A string payload's text is its head (result_text, without the call).
                text = payload[:TEXT_LIMIT] if type(payload) is str else result_text(payload)
                # isspace, not strip(): the same test without copying up to 2 KB of text.
                if not text or text.isspace():
                    if not result.event.result_digest:
                        if self.futile_writes and key:
                            finding = self._futile(state, key, _EMPTY, flags, result, b"(no output)")
                            if finding is not None:
                                return finding
                        if flags & FLAG_WRITE:
                            if flags & FLAG_SHELL:
                                # `export X=...` answers nothing and changes no file: it
                                # is a write for the futile-write rule, but no news.
                                return None
                            # (before the search test: `grep -rl x | xargs sed -i ...`
                            # says nothing when it has rewritten what it found)
                            self._news(state)
                            return None
                        if flags & FLAG_SEARCH:
                            return self._found_nothing(state, key, result, b"(nothing found)", term_item, row)
                        return None  # silence from a move or a mkdir: neither
                    text = result.event.result_digest
            echoed = False
            for value in echo:
                if len(value) < ECHO_MIN:
                    # a short value, only where the answer sets it off: "a workflow operation
                    # (Done) that is not valid", "'Close' is not a transition"
                    for form in (f"({value})", f'"{value}"', f"'{value}'"):
                        if form in text:
                            text = text.replace(form, "(…)")
                            echoed = True
                elif value in text:
                    # "no such column: x [SQL: SELECT x ...]" for the eighth rewording, "the
                    # file is shorter than the offset (9001)": the call, not news.
                    text = text.replace(value, "…")
                    echoed = True
            if result.failed or _tells_failure(result):
                # A request's own id in its error ("correlationId: c2347299-f88c-..."),
                # new on every attempt, is no news of what failed. (After the echo: an id
                # inside an echoed argument is masked with the argument.)
                text = _OPAQUE_ID.sub("ID", text)
            if result.failed and flags & FLAG_SEARCH and "/" in text[:QUOTE_SPAN]:
                # "No matches found for <term> in /repo/src/A.java": the scope a search
                # found nothing in is its own echo, like the term. Nothing found in one
                # more file is nothing found again (as a command runner's empty grep is).
                text = _ABSOLUTE_PATH.sub("P", text[:QUOTE_SPAN]) + text[QUOTE_SPAN:]
            # The template and the light template from one encode of the text (templates).
            masked, light_bytes = templates(text, digits=bool(masks_digits))
            if result.failed:
                code = _crc(result.tool.encode("utf-8", "surrogatepass") + b"\0" + masked)
                # What differs between two runs of one failing check by itself: how long
                # it took, and when ("1 failed in 0.29s", then "in 0.31s").
                light_bytes = RUN_TIME.sub(b"#", light_bytes)
                reported = False
            else:
                reported = guessed and reports_failure(light_bytes)
                if reported or (not flags & FLAG_WRITE and reports_failure(light_bytes)):
                    # A failure reported as output ("compiled with 1 error in 8211 ms":
                    # `npm run build | tail` loses the exit status; a test runner's "FAIL
                    # ... Time: 0.407 s" through a runtime that sends no exit code) is
                    # read like one: how long it took, and when it started, is no change.
                    light_bytes = RUN_TIME.sub(b"#", light_bytes)
                    if not masks_digits:
                        # (how long it took and when it started; not any clock time: a job
                        # still running beside a failed one moves by its elapsed time)
                        masked = _STARTED_AT.sub(b"#", mask_run_duration(masked))
                code = zlib.crc32(masked) or 1
            light = zlib.crc32(light_bytes) or 1
            cached = (code, light, masked, reported)
            if cacheable and not echoed:
                if len(self._codes) >= 4096:
                    self._codes.clear()
                self._codes[memo] = cached
        code, light, masked, reported = cached
        if self.futile_writes and key:
            # (Only a command line's "write" is a guess that its output can overrule; an
            # editor showing the file it changed may show code that says "error".)
            if reported and result.action.partition(" ")[0] in EDITOR_COMMANDS:
                reported = False
            finding = self._futile(state, key, light, flags, result, masked, reported)
            if finding is not None:
                return finding
        if cached is _FOUND_NOTHING:
            if polled:
                return None  # the same search answered anew (a timestamp): a poll
            return self._found_nothing(state, key, result, masked, term_item, row)
        if not flags & FLAG_SEARCH and not result.failed:
            payload = result.event.result
            if type(payload) is str and len(payload) <= TINY_ANSWER and _BARE_ANSWER.fullmatch(payload):
                return None  # "200", "true", "OK": what it says is in the call; neither
            if (
                type(payload) is str and len(payload) <= NONE_ANSWER and not flags & FLAG_RUNNER
                and _EMPTY_LISTING.fullmatch(payload) is not None
                and _PROMPT_WORDS.search(payload) is None
            ):
                # "Restaurant in Soho: " - a listing with nothing under its heading, the
                # heading naming what the call asked for: an empty output in other words,
                # whatever place it names (a sweep of districts finding none is no stall,
                # and no news that would hide one). Unless this very call had it already:
                # "Nice, France" asked again between rewordings is the same hunt again.
                if key and self._answered_before(state.seen, code, key):
                    return self._stale(state, code, result, masked)
                return None
        if result.failed:
            # A named call that timed out: the silence of what it names (a sweep of meters
            # asked for a reading, a few of which do not answer, is each one's silence;
            # one meter asked again and again, whatever the time-out, gives the same).
            # Only where places answered before, and not past SILENT_SWEEP time-outs in a
            # row: else nothing answers at all (the service is down), and one more id is
            # the same silence again.
            if not flags & (FLAG_RUNNER | FLAG_SEARCH) and _no_response(result):
                silent = state.silent = state.silent + 1
                if key and state.reads and state.answered:
                    reads = state.reads
                    at = find_entry(reads, (key & _M32).to_bytes(_WIDTH, "little"), 8)
                    if at >= 0:
                        mixed = _mixed(code, int.from_bytes(reads[at + 4 : at + 8], "little"))
                        # (past the bound, a place's silence heard before is still that:
                        # one meter asked again and again stays stale across it)
                        if silent <= SILENT_SWEEP or find_entry(
                            state.seen, mixed.to_bytes(_WIDTH, "little"), _WIDTH
                        ) >= 0:
                            code = mixed
            elif (
                flags & _NAMED_WRITE_MASK == FLAG_WRITE and key and state.reads
                and _ALREADY.search(result.error or "", 0, FAILURE_HEAD) is not None
            ):
                # A named write refused because what it would make is there already (a
                # chart of accounts set up from a list, the defaults' codes "not unique"):
                # that item's answer, kept with the ids the write names; the same item
                # made again and again is the same refusal. When the refusal names values
                # of the call (the reference "PO-4411 is already assigned"), it is about
                # them, whatever ids the call changes: kept with those.
                error = result.error or ""
                named = [value for value in echo if value in error]
                if named:
                    code = _mixed(code, _crc("\0".join(named).encode("utf-8", "surrogatepass")))
                else:
                    reads = state.reads
                    at = find_entry(reads, (key & _M32).to_bytes(_WIDTH, "little"), 8)
                    if at >= 0:
                        code = _mixed(code, int.from_bytes(reads[at + 4 : at + 8], "little"))
        else:
            # an answer: places answer (again)
            if state.silent:
                state.silent = 0
            if not state.answered:
                state.answered = True
        item = 0
        if term_item and not flags & FLAG_SEARCH:
            # A command naming an item a listing handed over, answered that the item lacks
            # what was asked (the next bucket: "NoSuchLifecycleConfiguration"): that item's
            # answer. Any other answer is read as before. A named read by such an item's id
            # (on_call) reads a failure it reports for the item as that item's too
            # ({"ik": "FAILURE", "error_code": "NO_IK_SOLUTION"} for the next grasp), but
            # not an outage, which answers every item alike.
            if _says_absent(result) or (
                not flags & FLAG_RUNNER and not result.failed and not _says_outage(result)
            ):
                item = term_item
        elif term_item:
            # A search for a name a listing handed over: its answer is that name's, "no
            # hits" included, unless it is an error or an outage told as output (a rate
            # limit answers every name alike); an absence in words is the name's too.
            if (
                not result.failed and not says_missing(result.event.result) and not _tells_failure(result)
                and not _says_outage(result)
            ) or _says_absent(result):
                item = term_item
        elif offered and _says_absent(result):
            # An item a listing handed over that lacks what was asked of it (the next
            # bucket of the account: "NoSuchLifecycleConfiguration"; {"error": "Counterparty
            # not found"} for the next name of the batch): that item's answer, not one more
            # guess; the same item asked again is the same answer. (Not any failure: an
            # outage answers every item alike.)
            item = _listed_item(state.listed, offered)
        if item:
            code = _mixed(code, item)
        elif not result.failed and key and state.reads and (flags & _NAMED_WRITE_MASK) != FLAG_WRITE:
            # A read of what its call names: its answer is kept with those names, so eleven
            # files of one template are eleven answers, while the same file read again,
            # unchanged, is the same answer. (Not a named write's success: its ids are
            # kept for its time-outs only, above.)
            reads = state.reads
            at = find_entry(reads, (key & _M32).to_bytes(_WIDTH, "little"), 8)
            if at >= 0 and (
                # The indicators a search looked for (low bit set): any answer is theirs.
                reads[at + 4] & 1
                or not (
                    # Not an error or a "not found" sent as output ('relation "t" does not
                    # exist' for the twelfth guessed table, {"error": "Order not found"}
                    # for the twelfth guessed id), nor a search's "none": one more place
                    # that does not have it is the hunt going on.
                    says_missing(result.event.result)
                    or (flags & FLAG_SEARCH and (
                        says_bare_value(result.event.result, result.size)
                        # a command's search: only lines it found, numbered (`grep -n`)
                        or (flags & FLAG_RUNNER and not _numbered_hits(result))
                    ))
                    # nor a write's failure told as output: a retry into a new file each
                    # time, refused the same way, is the same refusal
                    or (flags & FLAG_WRITE and _written_failure(result))
                )
            ):
                code = _mixed(code, int.from_bytes(reads[at + 4 : at + 8], "little"))
        packed = code.to_bytes(_WIDTH, "little")
        seen = state.seen
        at = seen.find(packed)  # (find_entry, inline: every result's lookup)
        while at > 0 and at % _WIDTH:
            at = seen.find(packed, at + 1)
        if row and at >= 0 and not result.failed and not _says_outage(result):
            # The listing names the item again on this row: the answer it had for the item
            # is this row's now (not an outage's, which answers every row alike).
            code = _mixed(code, row)
            packed = code.to_bytes(_WIDTH, "little")
            at = find_entry(seen, packed, _WIDTH)
        # (The flag test first: most results are no write's, and the call costs more.)
        if flags & FLAG_WRITE and is_write_acknowledgement(result):
            # A write tool's short acknowledgement says only that it worked ("File
            # written successfully." for the twelfth new file): the write changed
            # something, so it is news, never stale. A command's output, or an editor
            # showing the file after the edit, says what happened: the same again is stale.
            # Unless the same write was already acknowledged so: the same rows appended
            # again, the same file rewritten with the same text, tell the agent nothing.
            # The write is remembered by its acknowledgement mixed with its call's key.
            if key and self._answered_before(seen, code, key):
                if reports_act(result):
                    # The same click for the fifth mail rule set up through one
                    # dialog: a procedure gone through again, not rows appended
                    # again. Neither (what the screen shows is read elsewhere).
                    return None
                return self._stale(state, code, result, masked)
            if at >= 0:
                self._news(state)
                return None
        if at >= 0:
            if polled and not self._restamped(state, key, result):
                return None  # the same call, new numbers: a poll
            if reports_act(result):
                # "Clicked on Button 'Rules'." for the fifth mail rule set up through the
                # same dialog: the act restated, not what the screen now shows. Neither
                # (the first such report is news, below).
                return None
            if (
                not flags & (FLAG_SEARCH | FLAG_WRITE)
                and not result.failed
                and result.size <= NONE_ANSWER
                and says_bare_value(result.event.result, result.size)
            ):
                # "Listed 0 items.", [{"stuck": 0}] for one more day or region: an empty
                # output in other words, read like one (neither), since the call was no
                # search. (Tested here, where it would be stale: the first is news.)
                return None
            if poll_answer(result):
                # "processing" again, the session having paused since this call was last
                # answered: the job is still running and the agent waits for it. News for
                # the run of stale answers: the finished parts asked again beside it (CI
                # checks polled one by one, lint "completed" while e2e is "in_progress")
                # are part of that wait.
                self._news(state)
                return None
            if key and _recheck(state.rechecks, key, code) and not result.failed:
                # The same call, answered once before the latest write, asked again after
                # it and answered as then: that write's check of what it did not touch (a
                # sweep of twelve values before a fix and again after it, ten unchanged).
                # Neither: once; asked again after that, or with no write between, stale.
                return None
            return self._stale(state, code, result, masked)
        excess = len(seen) - self._keep  # (_remember, inline: most results are news)
        if excess > 0:
            del seen[:excess]
        seen.extend(packed)
        if key and not flags & FLAG_WRITE:
            _recheck(state.rechecks, key, code)
        if polled and state.last_steady:
            state.last_steady = 0  # another answer between: "the same again" starts over
        self._news(state)
        return None

    @staticmethod
    def _restamped(state: Any, key: int, result: ResultView) -> bool:
        """Whether a call answered anew says what its last such answer said, apart from
        when it was given (``steady_answer``: its timestamps and run times out). A job's
        progress moves its numbers; a process that ended, read again and again between
        waits, moves only the time stamped on each reading, and is asked again, not
        polled. An answer longer than the gist reads (``GIST_TEXT_LIMIT``) may have moved
        further on: a poll, as before. (The rare path: only a known template with new
        numbers gets here.)"""
        payload = result.event.result if not result.failed else result.error
        if (len(payload) if type(payload) is str else result.size) > GIST_TEXT_LIMIT:
            return False  # its gist reads the head only: what moved further on is unknown
        steady = steady_answer(result)
        if not steady:
            return False
        steady = _mixed(steady, key)
        if steady == state.last_steady:
            return True
        state.last_steady = steady
        return False

    def on_repeated_prompt(self, state: Any) -> None:
        # The request repeated (a scheduler's tick every quarter hour: "check the batch
        # window"): the same reads answer it again, "nothing failed" again, and that is
        # the run asked for, not a stall of the agent's own. The run counts from here.
        if state.run:
            state.run = 0
        if state.mask:
            state.mask = 0

    def _found_nothing(
        self, state: Any, key: int, result: ResultView, masked: bytes, item: int = 0, row: int = 0
    ) -> Finding | None:
        """A search that found nothing: nothing found again, stale; unless it looked for
        indicators (an IOC sweep: the next IP, domain or hash) or for an item a listing
        handed over (``item``), when it is that indicator's or item's answer, news the
        first time and stale after, or for the item of the listing's next row (``row``:
        that row's answer, when the item's was had before)."""
        if result.watched and poll_answer(result):
            # Nothing yet, asked again after a deliberate wait where its user asked the
            # agent to watch for something ("keep an eye on my inbox"): the answer the watch
            # awaits, a poll's, as an unchanged status is (below).
            self._news(state)
            return None
        looked = item or (_looked_for(state.reads, key) if key and state.reads else 0)
        code = _mixed(_NOTHING, looked) if looked else _NOTHING
        packed = code.to_bytes(_WIDTH, "little")
        if (not looked or find_entry(state.seen, packed, _WIDTH) >= 0) and row:
            code = _mixed(code, row)  # the listing's next row names it again
            packed = code.to_bytes(_WIDTH, "little")
        elif not looked:
            return self._stale(state, _NOTHING, result, masked)
        if find_entry(state.seen, packed, _WIDTH) >= 0:
            return self._stale(state, code, result, masked)
        self._remember(state.seen, packed)
        self._news(state)
        return None

    def _note_listing(self, state: Any, payload: Any, outcome: int) -> None:
        """Remember the values a read's answer lists (:func:`listed_values`, cached per
        answer in the process), the oldest going past ``LISTED``."""
        if (
            type(payload) is str and payload[:1] not in ("{", "[") and " " in payload
            and "['" not in payload and '["' not in payload
            and payload.find("\n", 0, NAME_LINE_CHARS + 2) < 0
        ):
            return  # (most text answers: no JSON, no bare list of names, no printed list)
        # (outcome 0: not cached; the caller passes 0 for an answer whose outcome is a
        # digest of its own, since its payload, not the digest, is what is listed)
        cached = self._listings.get(outcome) if outcome else None
        if cached is None:
            found = listed_values(payload)
            cached = (found, listed_rows(payload) if found else b"")
            if outcome:
                if len(self._listings) >= 4096:
                    self._listings.clear()
                self._listings[outcome] = cached
        found = cached[0]
        if found:
            kept = state.listed
            if kept.endswith(found):
                return  # the same listing read again (its order's cursor where it was)
            state.rows = cached[1]
            state.row_at = 0
            kept += found  # (at most LISTED codes: the listing's head)
            excess = len(kept) - 4 * LISTED
            if excess > 0:
                del kept[:excess]

    def _answered_before(self, seen: bytearray, code: int, key: int) -> bool:
        """Whether this very call (``key``) had the answer ``code`` before; remembered (one
        memory entry, the answer mixed with the call's key) when it had not."""
        entry = _mixed(code, key).to_bytes(_WIDTH, "little")
        if find_entry(seen, entry, _WIDTH) >= 0:
            return True
        self._remember(seen, entry)
        return False

    def _remember(self, seen: bytearray, packed: bytes) -> None:
        """Append a code to the memory, the oldest going past ``memory`` entries."""
        excess = len(seen) - self._keep
        if excess > 0:
            del seen[:excess]
        seen.extend(packed)

    def _futile(
        self, state: Any, key: int, code: int, flags: int, result: ResultView, masked: bytes,
        reported: bool = False,
    ) -> Finding | None:
        """Writes that change nothing: the check after them answers as it did before."""
        if flags & FLAG_WRITE and not result.failed and not reported:
            # The write the next check answers for, when it is the only one since the last
            # check (an edit, then a deploy, then its status: the status answers for both,
            # and "SUCCEEDED" after each is no futile deploy): -1 for several.
            state.write_key = -1 if state.write_key else (key & _M32) or 1
            state.wrote = True
            target = state.write_ids
            if target and not flags & FLAG_RUNNER:
                # an item not written since the check last moved (ids from on_call)
                packed = target.to_bytes(4, "little")
                written = state.written
                if find_entry(written, packed, 4) < 0:
                    if written:
                        state.to_new = True
                    state.written = (written + packed)[-4 * WRITTEN_ITEMS :]
            rechecks = state.rechecks
            for at in range(7, len(rechecks), 8):
                rechecks[at] |= _PRE_WRITE  # answered before this write
            return None
        # Any other answer is a check: the write it answers for is taken (not the write
        # itself re-sent and failing, which is its own check, below).
        anchor = state.write_key
        if anchor:
            state.write_key = 0
            if anchor < 0 or anchor == ((key & _M32) or 1):
                anchor = 0
        # A failed write (a build that breaks, an edit refused) changed nothing and
        # answers like a check: the same failure after an edit is a futile edit. So does
        # a command runner's "write" (a build, by the generous guess of signals/facts.py)
        # whose output reports a failure its exit status did not.
        if not state.wrote and not state.checks:
            return None
        steady = self._steady_cache.get(result.tool)
        if steady is None:
            steady = self._is_steady(result.tool)
        if steady and not (state.wrote and anchor):
            # "healthy" before a deploy and "healthy" after it is the answer hoped for.
            # (After the same write re-sent it is compared, below.)
            return None
        if masked == _STRUCTURED and not result.failed and not result.paused:
            # A structured check compared but for its timestamps (answer_gist): a record
            # read back after each update, its `date_modified` new and its value reverted
            # by a sync every time, answers as before. Not one asked again after the user
            # spoke or the session paused (a service's health read for each colleague who
            # asks whether the VPN is down, its `updated_at` new each time): that answers
            # them, and is compared exactly, as before. (JSON text by the same rule, its
            # digits kept: a count that moves is news.)
            payload = result.event.result
            code = (stamped_code(payload) or code) if type(payload) is str else answer_gist(result)
        checks = state.checks
        answer = code.to_bytes(4, "little")
        before = 0 if steady else _swap_check(checks, (key & _M32).to_bytes(4, "little"), answer)
        if state.wrote and anchor:
            # The first check after a write is remembered under the write too: the same
            # write re-sent (one create request, answered each time by a new request
            # token) and checked through a call that names what it returned (the status
            # of that token) is the same check of the same write, whatever the token. A
            # status read counts here: the same failed create re-sent, its status FAILED
            # each time, is futile, whereas "healthy" after one deploy is not.
            after_write = _swap_check(checks, anchor.to_bytes(4, "little"), answer)
            if not before:
                before = after_write
        if not state.wrote or not before:
            return None
        if before == code and (
            (not flags & _CHECK_FLAGS and _acknowledges(result))
            # a click on the page (back to the listing after each row saved to a file) is
            # an act whose screen is where it went, no check of what was written (a
            # navigation's report never comes here: _judge reads it as neither)
            or (not flags & FLAG_RUNNER and _ui_act_tool(result.tool))
        ):
            # A call of a tool nobody classified, answered with a bare "done" ("click the
            # Search button": "Action completed successfully", alike each time), acted:
            # it is no check whose verdict a write failed to move; nor is a navigation that
            # names only where it went. (Read only here, where it would count: the rest of
            # the path is every check's.)
            return None
        state.wrote = False
        to_new = state.to_new
        if to_new:
            state.to_new = False
        if before != code:
            state.futile = 0
            state.futile_latched = False
            if state.written:
                state.written = b""
            return None
        if to_new:
            # The writes since went to another item than the one before (a rebooking
            # batch: each reservation read, the same flight search, the reservation
            # moved): the search does not check what they changed, and answers as before
            # because nothing it reads was touched. Neither futile nor news.
            return None
        if says_in_progress(result) or _reports_success(result):
            # "RUNNING" after each run started (a tuning run per function, its execution
            # read after a sleep): the write set work going that is still under way, no
            # verdict the write failed to move. Nor is a success said again after each
            # edit ("Summary: 1 package finished" from the build between a parameter's
            # edit and the trial that measures it): the answer hoped for, as "healthy"
            # after a deploy is. Neither futile nor news.
            return None
        state.futile += 1
        if state.futile < self.futile_writes or state.latched or state.futile_latched:
            return None
        state.latched = state.futile_latched = True
        state.sample = truncate_middle(masked[:480].decode(errors="replace"), 160)
        state.tools = (result.tool[:64],)
        return self._finding(state, rule="futile_writes", count=state.futile)

    def _is_steady(self, tool: str) -> bool:
        """Whether ``tool``'s answer is expected to survive writes (``steady_checks``)."""
        cached = self._steady_cache.get(tool)
        if cached is None:
            cached = self._steady is not None and self._steady(tool)
            if len(self._steady_cache) >= 512:  # bounded: tool names are untrusted
                self._steady_cache.clear()
            self._steady_cache[tool] = cached
        return cached

    def _news(self, state: Any) -> None:
        # Stores only where a value changes: a state field's store costs several times
        # the test, and most answers are news after news.
        if state.round_calls > 1:
            state.round_news = True
            state.round_steps += 1
        if state.run:
            state.run = 0
        if state.mask:
            state.mask = (state.mask << 1) & self._full
        if state.steps < self.window:
            state.steps += 1
        # (_settle, inline: every news answer)
        if state.latched and state.mask.bit_count() <= self.window // 2:
            state.latched = False
        if not state.latched and state.tools and not state.mask:
            state.tools = ()
        if state.sample:
            state.sample = ""

    def _settle(self, state: Any) -> None:
        """After stale answers were taken back: the latch lets go once half the window is
        news again, and the tools of a finished run are forgotten."""
        if state.latched and state.mask.bit_count() <= self.window // 2:
            state.latched = False
        if not state.latched and state.tools and not state.mask:
            state.tools = ()

    def _stale(self, state: Any, code: int, result: ResultView, masked: bytes) -> Finding | None:
        state.run += 1
        if state.round_calls > 1:
            state.round_steps += 1
        state.mask = ((state.mask << 1) | 1) & self._full
        if state.steps < self.window:
            state.steps += 1
        if state.latched:
            return None
        tools = state.tools
        name = result.tool if len(result.tool) <= 64 else result.tool[:64]
        if name not in tools:
            state.tools = (*tools[-3:], name)
        windowed = (
            self.window_threshold
            and state.steps >= self.window
            and state.mask.bit_count() >= self.window_threshold
        )
        if state.run < self.threshold and not windowed:
            return None
        state.sample = truncate_middle(masked[:480].decode(errors="replace"), 160)
        if state.round_left and state.round_calls > 1:
            state.held = True  # a later answer of this round may be news: _end_round
            return None
        state.latched = True
        return self._finding(state)

    def _finding(self, state: Any, rule: str = "stale", count: int = 0) -> Finding:
        tools = ", ".join(state.tools) or "unknown tools"
        if rule == "futile_writes":
            return Finding(
                signal=SIGNAL_ID,
                severity="critical",
                scope="session",
                reason=(
                    f"{count} times in a row the agent changed something and then re-ran the "
                    f"same check ({tools}), and the check answered exactly as before (latest: "
                    f"{state.sample!r}). Its changes do not reach what it is testing: it is "
                    "going round. Under enforce the halting controller stops the session."
                ),
                guidance=(
                    f"You have changed things {count} times and each time the same check gave "
                    "the same answer. Your changes are not affecting what that check runs. Stop "
                    "and work out why (the wrong file, a missing build step, a missing tool) "
                    "before changing anything else, or explain what is blocking you."
                ),
                detail={"count": count, "threshold": self.futile_writes, "rule": rule,
                        "tools": list(state.tools), "latest": state.sample},
            )
        if state.run >= self.threshold:
            count = state.run
            results, calls = f"{count} tool results in a row", f"last {count} tool calls"
        else:  # the interleaved rule: stale answers with news between them
            count = state.mask.bit_count()
            results = f"{count} of the last {self.window} tool results"
            calls = f"{count} of your last {self.window} tool calls"
        return Finding(
            signal=SIGNAL_ID,
            severity="critical",
            scope="session",
            reason=(
                f"{results} ({tools}) told the agent nothing it had not "
                "already been told in this session (compared with quoted text and numbers "
                f"masked; latest: {state.sample!r}). Its calls vary but its answers do not: "
                "it is going round. Under enforce the halting controller stops the session."
            ),
            guidance=(
                f"Your {calls} ({tools}) came back with answers you had "
                "already received. Rewording the request or trying a variation of it is not "
                "getting you anywhere. Stop, say what you were looking for and what you found, "
                "and choose a different approach or ask for what you are missing."
            ),
            detail={"count": count, "threshold": self.threshold, "rule": rule,
                    "window": self.window, "window_threshold": self.window_threshold,
                    "tools": list(state.tools), "latest": state.sample},
        )
