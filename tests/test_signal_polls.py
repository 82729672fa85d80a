"""Polls: a status that says the work is still under way, asked again after a pause.

The loop detectors that read answers (repeated-tool-call, alternating-tool-cycle,
result-stall) halt nothing for such a poll; the same status asked again and again with
no pause, or a status that says the work has ended, is judged as before.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamguard.engine import Engine
from streamguard.events import Alert, Text, ToolCall, ToolResult, TurnStart
from streamguard.policy import PolicyError, parse_policy_set
from streamguard.signals.base import (
    ACTS_SHIFT,
    REQUESTS_MASK,
    REQUESTS_SHIFT,
    WAITS_SHIFT,
    ResultView,
    add_request,
    asked_between,
    paused_between,
    poll_answer,
    says_bare_value,
    says_in_progress,
    waited_between,
)
from streamguard.signals.base import NOTHING_YET as NOTHING_YET_SAID
from streamguard.signals.facts import (
    FLAG_READ,
    FLAG_WRITE,
    asked_interval,
    asks_watch,
    commands_restart,
    names_no_act,
    names_restart,
    names_write,
    plain_facts,
)

QUIET = 'mode = "warn"\ndisabled_signals = ["tools-without-text", "near-duplicate-calls"]\n'
LOOP_SIGNALS = ("repeated-tool-call", "alternating-tool-cycle", "result-stall", "long-loop")


def view(result: Any = None, error: str | None = None) -> ResultView:
    event = ToolResult(session="s", tool="t", result=result, error=error)
    return ResultView(event, bool(error), 1, len(str(result)))


UNDER_WAY = [
    # a CDN's cache invalidation under way: "invalidation" names the job, no failure
    {"Invalidation": {"Id": "I3P0Q7ZK2M1WXR", "Status": "InProgress", "CreateTime": "2025-12-09T06:30:53Z"}},
    {"Invalidation": {"Id": "I3P0", "Status": "InProgress", "InvalidationBatch": {"Paths": {"Quantity": 1}}}},
    {"invalidation_id": "I3P0", "status": "InProgress"},
    '{"booking_id": "BK-1", "status": "pending_payment"}',
    {"job_id": "exp_1", "status": "processing"},
    '{"s": "RUNNING", "t": 60}',
    "State: RUNNING",
    "phase=Provisioning",
    "The export is still queued.",
    # an API's sentence naming the work in progress (Snowflake's SQL API, code 333334)
    {"code": "333334", "message": "Asynchronous execution in progress. Use provided query id to "
     "perform query monitoring and management.", "statementHandle": "01b8a3f2-0305-9e4a"},
    "Backup is still in progress",
    # an end or a step on its way: a Kafka group rebalancing, a job finishing
    "group=inplay-pricer state=CompletingRebalance members=0 total_lag=9874 max_partition_lag=1402\n",
    "group=inplay-pricer state=PreparingRebalance members=11", {"status": "finishing"}, {"state": "Preparing"},
    # data rewritten in place: a schema converted, a table rebuilt, a replica recovering
    "slurmdbd: converting job table for titan", {"index": "idx_a", "state": "rebuilding"}, "state: recovering",
    # the AWS CLI's text output of an update under way
    "InProgress\tConfigUpdate\t",
    # a mainframe job executing (z/OSMF: INPUT, ACTIVE, OUTPUT)
    {"jobid": "JOB04821", "jobname": "GLMEXT01", "subsystem": "JES2", "status": "ACTIVE", "type": "JOB"},
    # a submission, a send, a publication or a DNS change on its way
    {"payroll_uuid": "pr_9b2e41c7", "processed": False, "processing_request": {"status": "submitting", "errors": []}},
    {"campaign": "c-118", "state": "sending"}, "status: propagating", {"status": "settling"},
    "Deployment status: in_progress",
    "NAME      READY   STATUS              RESTARTS   AGE\nweb-1     0/1     ContainerCreating   0   9s",
    "NAME   READY   STATUS    RESTARTS   AGE\nweb-2   0/1     Pending   0          41s",
    # a run's tasks, each row closing with its state (`airflow tasks states-for-dag-run` |
    # awk): the tasks done are parts of the run still going
    "extract_paid_losses success\nbuild_triangles success\nchain_ladder running\nbf queued\npublish none\n",
    "| load | success |\n| transform | running |",
    # a batch scheduler's queue with the job still waiting (Slurm's squeue, LSF's bjobs)
    "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n"
    "           6402130       cpu   lj_N64   bsilva PD       0:00     64 (Resources)\n",
    "JOBID   USER    STAT  QUEUE      FROM_HOST   EXEC_HOST   JOB_NAME   SUBMIT_TIME\n"
    "4821    ana     PEND  normal     login01                 relax_7    Dec  6 10:02\n",
    "JOBID ST\n6402130 PD",
    {"carrier": "FedEx", "status": "in_transit", "eta": "today"},
    # a booking the property confirms by hand (Amadeus)
    {"data": {"id": "XD_8944", "status": "ON_REQUEST", "providerConfirmationId": None}},
    # a review or a check another party runs; data moved while it runs
    {"entry_number": "EJ3-0412876-5", "status": "UNDER_REVIEW", "pga_holds": [], "last_update": "2025-12-01T15:00:21Z"},
    {"document": "lease.pdf", "state": "in_review"}, '{"scan": "s-4", "status": "scanning"}',
    {"export": "x-2", "status": "Validating"}, "Index status: indexing", {"sync": "s-1", "state": "syncing"},
    # a download, an install, a copy or a transcode under way
    {"ingest_id": "ing_44", "state": "downloading", "bytes_received": None},
    {"FleetId": "fleet-2010", "Status": "DOWNLOADING"}, {"app": "Slack", "install_state": "installing"},
    {"job": "t-9", "status": "transcoding"}, "replicating",
    # a resource between two states
    {"FleetId": "fleet-2010", "Status": "ACTIVATING"}, {"InstanceId": "i-0a1", "State": {"Name": "stopping"}},
    # a status printed alone (`aws rds describe-db-instances --query ... --output text`)
    "creating\n", "PENDING", '"IN_PROGRESS"', "  provisioning...  ",
    # ...or beside fields a template printed that are no words (`kubectl get postgresql
    # -o jsonpath='{.spec.postgresql.version} {.status.PostgresClusterStatus}'`), as a
    # runner's envelope carries it too
    # a status in words, quoted (tau2-bench's bill after its payment was approved)
    {"bill_id": "B3802", "total_due": 71.4, "status": "Payment Pending"}, '{"state": "Awaiting Carrier Pickup"}',
    # a page or a feed with more coming
    {"tiles": [], "status": "Loading more products..."}, '{"status": "loading"}',
    "16 Updating", "Pending 0/3", "v2.4.1 Progressing\n",
    # parts done beside a status under way: a CI run whose lint job completed
    {"status": "in_progress", "jobs": [{"name": "lint", "status": "completed", "conclusion": "success"},
                                       {"name": "test", "status": "in_progress", "conclusion": ""}]},
    # counts named by words of an end: how many, not that it ended
    {"column_id": "col_lev", "status": "running", "cells_complete": 0, "cells_total": 22},
    {"status": "running", "failed": 0, "succeeded": 3, "active": 2},
    # the parts done, listed under a word of an end
    {"order_id": "SCR-a81f22", "status": "in_progress", "completed_checks": ["credit"]},
    '{"state": "RUNNING", "errors": 0}',
    # a value that names the step under way; a time of an end not come yet
    {"id": "dep-d0r8", "status": "build_in_progress", "finishedAt": None},
    {"StackName": "api", "StackStatus": "UPDATE_IN_PROGRESS"},
    '{"state": "processing", "completed": false}',
    # an end named as what is awaited
    {"health": {"status": "Progressing"},
     "operationState": {"phase": "Running", "message": "waiting for rollout to finish: 6 of 12 available"}},
    {"status": "waiting", "message": "polling until the build completes"},
    {"status": "running", "message": "polling until job 42 completes"},
    # an ISO 20022 payment status report, pending
    {"originalMessageId": "PAYROLL-10", "groupStatus": "PDNG", "txStatusCounts": {"ACSC": 0, "PDNG": 142}},
    # a status element (Claude Code's BashOutput of a background shell)
    "<status>running</status>\n\n<timestamp>2025-11-01T15:22:32.093Z</timestamp>",
    # ... whatever words of a good end the output so far holds, and however long
    "<status>running</status>\n\n<stdout>\n" + "[I 2025-08-20 13:24:21,104] Trial 25 finished with value: 0.843385"
    " and parameters: {'num_leaves': 47}. Best is trial 17\n" * 60 + "</stdout>",
    # a value of progress under a key of status or progress, unquoted, or on the next line
    {"job_id": "j-17", "progress": "Running step 3 of 5"},
    {"export_id": "e-9", "status_text": "Waiting for approval"},
    "deploy: 'processing...'",
    "status:\n  running",
    # a bill, an approval awaited (tau2-bench's telecom bills read "Awaiting Payment")
    {"bill_id": "B4248", "total_due": 60.0, "status": "Awaiting Payment"},
    '{"request": "CR-7", "state": "AWAITING_APPROVAL"}',
    # a count of things under way above zero, keyed by the word alone (a quiz being sat)
    {"quiz_id": 9, "submissions": {"complete": 62, "in_progress": 1, "not_started": 1}},
    {"queue": "renders", "queued": 4, "done": 12}, '{"inProgress": 2, "succeeded": 7}',
    # when the invitation will expire says nothing of an end (Checkr's "expires_at")
    {"id": "a1b2", "object": "invitation", "status": "pending", "report_id": None,
     "expires_at": "2025-12-09T14:00:00Z"}, {"status": "pending", "expiresIn": 3600},
    # an empty time of an end or error is nothing yet (Mailchimp's batch operations)
    {"id": "dcb673aed7", "status": "pending", "finished_operations": 0, "errored_operations": 0,
     "completed_at": "", "response_body_url": ""}, {"status": "running", "error": ""},
    # ...nor when it is expected to end (AWS' "EstimatedCompletionTime")
    '{"GenerationSummaryList": [{"RecommendationId": "1c10", "GenerationStatus": "PROCESSING", '
    '"EstimatedCompletionTime": "2025-12-11T19:35:05Z"}]}',
    # a data-quality scan's states (Soda Cloud's "queuing", "executing")
    {"scanId": "scn_4b", "state": "queuing", "started": None}, {"scanId": "scn_4b", "state": "executing"},
    # a flag named by work under way, true (a podcast host transcoding an upload)
    {"id": "1877420", "audio_processing": True, "duration": None, "media_url": None},
    '{"upload": "u-7", "isPending": true}', {"index": "docs", "reindexing": True},
    {"id": "n-4", "notification_pending": True},
    # a test clock moving on to its frozen time (Stripe's "advancing")
    {"id": "clock_1Qk", "status": "advancing", "frozen_time": 1766883600}, {"user_pending": True}, {"canvas_rendering": True},
    {"status": "in_progress", "failover_target": "db-2"}, {"status": "running", "failback_id": "fb-1"},
    # a failover is no failure: a standby promoted while the incident is open
    {"incident": "db-1", "status": "in_progress", "update": "database failover in progress"},
    # ...nor is a failover told in words ("Failing over reads to replica-1 now.")
    {"incident": "db-1", "status": "in_progress", "update": "Failing over reads to replica-1 now."},
    {"state": "pending", "note": "primary failed over to the standby"},
    # a worker at work: a Jupyter kernel while a cell runs
    {"id": "3c1f9a2e", "name": "python3", "last_activity": "2025-12-29T09:19:44.310Z",
     "execution_state": "busy", "connections": 2},
    # a flag of a failure that is false says none (Databricks' run state)
    # ...and a flag of the failure's absence left null, or a fail-safe's, says nothing
    {"state": "RUNNING", "failsafe": None}, {"state": "RUNNING", "fail_safe": False, "error_free": None},
    {"state": {"life_cycle_state": "RUNNING", "state_message": "In run", "user_cancelled_or_timedout": False},
     "tasks": [{"k": "extract_events", "s": "RUNNING"}, {"k": "sessionize", "s": "BLOCKED"}]},
    # a step done and the next awaited in one sentence (ChangeMan's package before its
    # install window): the step is a part, the whole under way
    {"package": "CLMS000871", "status": "DIS", "sites": [
        {"site": "PRD1", "status": "DIS", "msg": "CMN8700I - Distribution complete, awaiting install job"}]},
    "Upload finished; pending review by the store", "build done, now waiting for approval",
    # fewer parts done than all: the whole under way
    "2025-12-04 13:50:32.590 | INFO | tau2.run:run_tasks:214 - Progress: 109/114 simulations done (avg reward 0.413)",
    "Shards: 3/10 complete",
    # a run's jobs as `gh run view --jq` prints them, status/conclusion: the done jobs are
    # parts of the run under way
    {"status": "in_progress", "jobs": ["build-image: completed/success", "migrate: completed/success",
                                       "canary-bake: in_progress/", "promote: queued/"]},
]
NOT_UNDER_WAY = [
    # a status alone that says an end, or more than a status
    "created\n", "FAILED", "pending approval was rejected: the batch failed",
    '{"status": "failed", "reason": "OOM"}',
    {"status": "running", "last_error": "disk full"},
    '{"state": "processing", "completed": true}',
    {"status": "running", "failed": 2},  # failures counted: something went wrong
    # a count of ended work above zero is an end
    "Pods Statuses:  0 Active (0 Ready) / 0 Succeeded / 1 Failed", "0 active, 0 succeeded, 2 failed",
    # "busy" elsewhere is no work under way: a call's end (the line was busy), a server
    # refusing
    {"sid": "CA42", "status": "busy", "duration": "0"}, "The server is currently busy. Please try again later.",
    # ...true, it says one
    {"state": {"life_cycle_state": "RUNNING", "user_cancelled_or_timedout": True}},
    # ...and a flag that says the failure's absence, false, says one
    {"state": {"life_cycle_state": "RUNNING", "error_free": False}}, '{"status": "running", "errorFree": false}',
    {"state": "RUNNING", "failure_free": False}, '{"status": "running", "errorFreeRun": false}',
    # the next step is the agent's or its user's to give: the work itself is over
    "Task complete, awaiting your next instruction", {"status": "done", "msg": "Completed, waiting for user input"},
    # a failure in words that only begin like a failover's
    {"status": "running", "note": "Nightly backup failed over the weekend"},
    {"status": "running", "note": "tests failed back to back"},
    # an end, then what the agent awaits next, or a label of counts
    "Task complete. Waiting for the user to respond.", "Completed, awaiting new tasks",
    "All migrations complete. Pending migrations: none", "Backup completed; pending jobs: 0",
    # a step done and the next awaited, beside a failure
    "Distribution complete, awaiting install job; install job failed",
    {"status": "not_running"}, {"status": "non_running"}, {"status": "no_longer_running"},
    {"status": "build_in_progress", "finishedAt": "2025-12-01T08:03:00Z"},
    # awaiting what the agent itself must give
    {"status": "awaiting_input"}, "State: AWAITING_USER_ACTION", {"status": "awaiting your reply"},
    # a name that opens with the word is no status (a product in a delivered order)
    {"order_id": "#W9099505", "items": [{"name": "Running Shoes", "price": 143.56}], "status": "delivered"},
    {"ticket": "T-9", "title": "Pending invoices export", "state": "closed"},
    # a name with the word in it is no status
    {"service": "order-processing", "version": "1.4.2"}, {"pipeline": "nightly-building"},
    {"topic": "orders_pending", "partitions": 12}, {"title": "Re-running the suite is not needed"},
    # a draft's label, and no work in progress
    {"title": "Work in progress: new billing page", "state": "open"}, "No operation in progress.",
    "No backup operation in progress.", "There is no active deployment in progress.",
    "Nothing pending. No rollout or upgrade in progress.", "Update in-progress flag cleared.",
    # the answer's own status says it ended, whatever its parts say
    {"status": "done", "children": [{"status": "pending"}]},
    '{"status": "completed", "conclusion": "success", "deployments": [{"state": "waiting"}]}',
    # a part failed: the run is over, whatever else runs
    {"status": "in_progress", "jobs": [{"name": "lint", "status": "completed", "conclusion": "failure"},
                                       {"name": "test", "status": "in_progress"}]},
    "State: SUCCEEDED",
    "job 42 done",
    # all of them done: an end
    "Progress: 114/114 simulations done", "Shards: 10/10 complete",
    {"status": "completed", "jobs": ["build-image: completed/success", "promote: completed/success"]},
    {"status": "running", "message": "the rollout finished"},  # an end said, beside it
    {"state": "RUNNING", "note": "Driver exited; job status changed to SUCCEEDED"},
    {"state": "RUNNING", "message": "Unable to complete: quota exceeded"},
    "Status: Pending\nError: image pull backoff",
    "<status>failed</status>\n\n<exit_code>137</exit_code>", "<status>completed</status>",
    # a background process still running that prints a failure again and again
    "<status>running</status>\n\n<stdout>\nERROR: could not connect to redis:6379: Connection refused\n"
    "Retrying in 5s...\n</stdout>\n\n<timestamp>2025-11-01T15:22:32.093Z</timestamp>",
    "<name>running</name>",
    # a pod's Running is where it stays, not a step on the way
    "NAME   READY   STATUS    RESTARTS   AGE\nweb-2   1/1     Running   0          41s",
    # a queue whose job runs (its time moves), a job id without a queue, "PD" elsewhere
    "  JOBID PARTITION  NAME  USER ST  TIME NODES NODELIST(REASON)\n  6402112 cpu lj_N1 bs  R 25:07 1 c0311\n",
    "JOBID 6402130 submitted; PD controller notified",
    # a waiting job that will not run as it stands, or a job of the listing that failed
    "JOBID PARTITION NAME USER ST TIME NODES NODELIST(REASON)\n"
    "   77 cpu a bs PD 0:00 1 (DependencyNeverSatisfied)\n",
    "JOBID PARTITION NAME USER ST TIME NODES NODELIST(REASON)\n"
    "   77 cpu a bs PD 0:00 64 (ReqNodeNotAvail, UnavailableNodes:c[01-64])\n",
    "JOBID   USER  STAT  QUEUE   JOB_NAME\n4821    ana   EXIT  normal  relax_6\n"
    "4822    ana   PEND  normal  relax_7\n",
    "ST PD\nJOBID 12",
    # nothing under way counted, a cluster's running pods (where they stay), a key
    # that only opens with the word
    {"quiz_id": 9, "submissions": {"complete": 64, "in_progress": 0, "not_started": 0}},
    {"nodes": 3, "running": 3}, {"pending_invites": 2, "members": 40},
    # a flag that is false, negated, or says where a service stays
    {"id": "1877420", "audio_processing": False}, {"not_pending": True}, {"nonprocessing": True},
    {"service": "api", "running": True}, {"status": "in_progress", "failover_failed": True},
    # a setting named by the word, not a status
    {"include_pending": True, "items": []}, {"enable_syncing": True}, {"skip_processing": True},
    {"requires_building": True}, {"notPending": True},
    # failures said in words beside work under way ("fail over and over" is no failover)
    {"status": "running", "note": "tests fail over and over"}, {"status": "running", "note": "jobs fail overnight"},
    {"status": "failed", "queued": 3},
    # ...but that it expired does
    {"status": "pending", "expired_at": "2025-12-01T00:00:00Z"}, {"status": "pending", "note": "invitation expired"},
    {"status": "RUNNING", "completed_at": "2025-12-11T19:35:05Z"},
    {"status": "running", "error": "disk full", "completed_at": ""},
    # completing's end said beside it
    {"status": "completing", "completed_at": "2025-12-01T10:00:00Z"}, "state=Stable; rebalance completed",
    # "active" where a resource stays, or a job active and already ended
    {"cluster": "prod-eks", "status": "ACTIVE"}, {"subscription_id": "sub_1", "status": "active"},
    {"jobid": "JOB04821", "status": "ACTIVE", "retcode": "CC 0000", "phase": "completed"},
    # a list of errors that holds one (an empty one says none)
    {"status": "submitting", "errors": ["bank account unverified"]}, {"status": "sending", "errors": {"code": 7}},
    # a session's token invalidated is an end; a cache invalidation is a noun (above)
    '{"Invalidation": {"Id": "I3P0", "Status": "InProgress"}, "note": "token invalidated"}',
    # running as a word of prose, not a status
    "Running 12 tests\n12 passed",
    # every task of the run done, one failed beside one running, a row of services
    # "running" with a job's success (a service stays running), a done word not at a
    # row's end
    "extract success\nbuild success\npublish success\n",
    "extract success\nbuild failed\npublish running\n",
    "nginx running\npostgres running",
    # a name beside the word (where a service stays), more words than fields, an envelope
    # whose output is more than a line of fields or whose error says a failure
    "nginx running", "16 Updating now", "the 16 jobs pending review were rejected",
    # a pod's or a process's running beside its name or pid (where it stays), a field
    # that is a key and a word, and a failed command's output
    "Loading config from /etc/app.yaml", "Loaded 3 plugins; loading finished",
    {"status": "Not Pending"}, {"status": "No Longer Pending"},
    "web-1 running", "4321 running", "redis-0 Running", "reason=Unschedulable Pending",
    "status=stuck_forever pending", "job-7 Pending deadline=exceeded", "attempt=5/5 waiting",
    "acid-billing Updating",
    "deploy finished in 12s\nworkers running",
    "\n".join(f"task_{n} success" for n in range(70)) + "\nlast running",
    "",
    None,
    "x" * 5000 + ' "status": "processing"',
    # a run of listing headers with no row after them
    "STATUS " * 585,
]


@pytest.mark.parametrize(("answer", "under_way"),
                         [(a, True) for a in UNDER_WAY] + [(a, False) for a in NOT_UNDER_WAY])
def test_statuses_of_work_under_way(answer: Any, under_way: bool) -> None:
    assert says_in_progress(view(answer)) is under_way


@pytest.mark.parametrize(("record", "under_way"), [
    ('{"exit_code": 0, "stdout": "16 Updating", "stderr": ""}', True),
    ('{"exit_code": 0, "stdout": "16 Updating\\n"}', True),
    ('{"exit_code": 0, "stdout": "nginx running", "stderr": ""}', False),
    ('{"exit_code": 0, "stdout": "16 Updating", "stderr": "error: connection refused"}', False),
    ('{"exit_code": 1, "stdout": "0/3 Pending", "stderr": ""}', False),
    ({"exit_code": 137, "stdout": "0/3 Pending"}, False),
])
def test_a_runners_run_record_is_read_as_what_it_printed(record: Any, under_way: bool) -> None:
    """A command runner's run record, as an object or as its JSON text, is read by the
    watchdog as what the run printed and how it exited (facts.runner_answer): one line of
    fields with a word of work under way, from a run that exited 0, is a status under way;
    a run that failed printed no status."""
    from streamguard.signals.facts import runner_answer

    answer = runner_answer(record)
    assert answer is not None
    output, error = answer
    assert says_in_progress(view(output, error=error)) is under_way


def test_a_failure_is_never_work_under_way() -> None:
    assert not says_in_progress(view(error='{"status": "processing"}'))


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=30),
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=10), inner, max_size=4),
                    max_leaves=20))
def test_any_payload_is_read_without_raising_and_once(payload: Any) -> None:
    result = view(payload)
    first = says_in_progress(result)
    assert result.progress in (1, 2, 3, NOTHING_YET_SAID)
    assert says_in_progress(result) is first


def alerts(trace: list[Any], policy: str = QUIET) -> list[Alert]:
    engine = Engine(parse_policy_set(policy))
    out: list[Alert] = []
    for event in trace:
        out += [o for o in engine.process(event) if isinstance(o, Alert)]
    return out


def loop_alerts(trace: list[Any], policy: str = QUIET) -> list[tuple[str, str]]:
    return [(a.signal, a.severity) for a in alerts(trace, policy) if a.signal in LOOP_SIGNALS]


def status_poll(answers: list[Any], gap: float | None, tool: str = "get_booking_status",
                user_between: bool = False) -> list[Any]:
    """One status call asked again and again; ``gap`` seconds from an answer to the next
    ask (None: the events carry no time)."""
    trace: list[Any] = [TurnStart(session="p")]
    clock = 1_000.0
    for n, answer in enumerate(answers):
        if user_between and n:
            trace.append(Text(session="p", role="user", text="Can you check again?",
                              ts=None if gap is None else clock))
        trace.append(ToolCall(session="p", tool=tool, args={"booking_id": "BK-88"},
                              call_id=f"c{n}", ts=None if gap is None else clock))
        clock += 2.0
        trace.append(ToolResult(session="p", tool=tool, call_id=f"c{n}", result=answer,
                                ts=None if gap is None else clock))
        clock += gap or 0.0
    return trace


PENDING = '{"booking_id": "BK-88", "status": "pending_payment"}'
FAILED = '{"booking_id": "BK-88", "status": "payment_failed"}'


def test_a_status_under_way_asked_after_pauses_is_a_poll() -> None:
    assert loop_alerts(status_poll([PENDING] * 8, gap=16.0)) == []


def test_the_same_status_asked_without_a_pause_is_still_a_loop() -> None:
    # list_agents → check_agent "pending" as fast as the agent can ask: a busy loop.
    assert ("repeated-tool-call", "critical") in loop_alerts(status_poll([PENDING] * 8, gap=1.5))
    assert ("repeated-tool-call", "critical") in loop_alerts(status_poll([PENDING] * 8, gap=None))


def test_a_status_that_says_the_work_ended_is_no_poll_however_paced() -> None:
    got = loop_alerts(status_poll([PENDING] * 2 + [FAILED] * 6, gap=30.0))
    assert ("repeated-tool-call", "critical") in got


def test_a_user_asking_again_is_a_pause() -> None:
    # "can you check again?" each turn: the agent checks because its user asks.
    assert loop_alerts(status_poll([PENDING] * 8, gap=None, user_between=True)) == []


def test_a_bill_awaiting_payment_checked_each_time_its_user_reports_is_a_poll() -> None:
    # The customer pays through a bank app and reports back; the agent checks the bill
    # after each message until the payment posts. Halted at the fourth check before
    # "awaiting" was read as a status under way.
    bill = {"bill_id": "B4248", "customer_id": "C1357", "total_due": 60.0,
            "status": "Awaiting Payment"}
    trace = status_poll([json.dumps(bill)] * 5, gap=150.0, tool="get_details_by_id",
                        user_between=True)
    assert loop_alerts(trace) == []
    # The same bill asked as fast as the agent can ask is still a loop.
    fast = status_poll([json.dumps(bill)] * 6, gap=1.0, tool="get_details_by_id")
    assert ("repeated-tool-call", "critical") in loop_alerts(fast)


def test_a_poll_that_never_moves_is_warned_after_polling_warn_after() -> None:
    # get_booking_status is a polling tool (*status*), which polls without a warning
    # while its answers move; one that never moves gets the warning, never a halt.
    got = [a for a in alerts(status_poll([PENDING] * 24, gap=20.0))
           if a.signal == "repeated-tool-call"]
    assert [(a.severity, a.detail["rule"]) for a in got] == [("warn", "polling")]
    assert "still under way" in got[0].reason


def test_a_poll_that_never_moves_trips_at_polling_halt_after() -> None:
    # Still "pending" at the twenty-fifth answer in a row, asked after pauses: what the
    # poll waits for has not moved in twenty-five checks.
    got = [(a.severity, a.detail["rule"], a.detail["count"])
           for a in alerts(status_poll([PENDING] * 30, gap=20.0)) if a.signal == "repeated-tool-call"]
    assert got == [("warn", "polling", 20), ("critical", "stuck_poll", 25)]
    # one answer that moves starts the count again
    moved = [PENDING] * 20 + ['{"booking_id": "BK-88", "status": "pending_review"}'] * 20
    assert [a.severity for a in alerts(status_poll(moved, gap=20.0))
            if a.signal == "repeated-tool-call"] == ["warn"]
    # only an answer that says the work is under way: an address read every few minutes
    # while DNS propagates is a value, never a stuck poll
    dig = [a for a in alerts(status_poll(["198.51.100.7"] * 30, gap=150.0, tool="dig_lookup"))
           if a.signal == "repeated-tool-call"]
    assert all(a.detail.get("rule") != "stuck_poll" for a in dig)
    off = QUIET + "[signals.repeated-tool-call]\npolling_halt_after = 0\n"
    assert [a.severity for a in alerts(status_poll([PENDING] * 30, gap=20.0), off)
            if a.signal == "repeated-tool-call"] == ["warn"]


def paced_poll(answers: list[Any], wait: float = 60.0, tool: str = "get_booking_status",
               answer_after_wait: bool = False) -> list[Any]:
    """A wait call, then the status, once per answer: the poll paced by waits of its own
    (``answer_after_wait``: the status asked, then the wait, then the status answered)."""
    trace: list[Any] = [TurnStart(session="p")]
    clock = 1_000.0
    for n, answer in enumerate(answers):
        sleep = [ToolCall(session="p", tool="sleep", args={"seconds": wait}, call_id=f"w{n}", ts=clock),
                 ToolResult(session="p", tool="sleep", call_id=f"w{n}", result="slept", ts=clock + wait)]
        clock += wait + 1
        ask = ToolCall(session="p", tool=tool, args={"booking_id": "BK-88"}, call_id=f"c{n}", ts=clock)
        told = ToolResult(session="p", tool=tool, call_id=f"c{n}", result=answer, ts=clock + 1)
        trace += [ask, *sleep, told] if answer_after_wait else [*sleep, ask, told]
        clock += 2
    return trace


def test_a_poll_paced_by_waits_of_its_own_trips_when_it_never_moves() -> None:
    # sleep, the status, sleep, the status...: each ask starts a run of its own, but the
    # poll is followed across the waits, and its twenty-fifth identical answer trips.
    got = [(a.severity, a.detail["rule"], a.detail["count"])
           for a in alerts(paced_poll([PENDING] * 40)) if a.signal == "repeated-tool-call"
           and a.severity == "critical"]
    assert got == [("critical", "stuck_poll", 25)]  # once: the same poll asked again is latched
    # the status asked before its wait is answered (both calls sent together): the same,
    # once however long it goes on
    assert [a.detail["count"] for a in alerts(paced_poll([PENDING] * 60, answer_after_wait=True))
            if a.severity == "critical"] == [25]
    # and asked on without waits after it trips: the same run, latched
    more = paced_poll([PENDING] * 26)
    clock = more[-1].ts
    for n in range(6):
        clock += 60.0
        more += [ToolCall(session="p", tool="get_booking_status", args={"booking_id": "BK-88"},
                          call_id=f"m{n}", ts=clock),
                 ToolResult(session="p", tool="get_booking_status", call_id=f"m{n}", result=PENDING,
                            ts=clock + 1)]
    assert [a.detail.get("rule") for a in alerts(more) if a.severity == "critical"] == ["stuck_poll"]
    # a value read between waits (an address while DNS propagates, a download's size) is a
    # poll's answer; one that never moved, unasked, is not coming at its twenty-fifth
    # reading, as a read after a wait of its own in one command (`sleep 30; du -sh`)
    dig = "198.51.100.7"
    assert [a.detail["count"] for a in alerts(paced_poll([dig] * 40)) if a.severity == "critical"] == [25]
    assert all(a.severity != "critical" for a in alerts(paced_poll([dig] * 24)))
    # ...one that moved once may move again (a slow step): it waits twice as many reads
    # since it last moved, and a watch asked waits for it
    from streamguard.signals.repeat import MOVED_POLL_FACTOR

    moved_once = ["198.51.100.7"] * 3 + ["203.0.113.9"] * 37
    assert all(a.severity != "critical" for a in alerts(paced_poll(moved_once)))
    stalled = ["1.2G\t/data/hf", "1.5G\t/data/hf"] + ["1.9G\t/data/hf"] * 60
    assert [a.detail["count"] for a in alerts(paced_poll(stalled)) if a.severity == "critical"] == [
        25 * MOVED_POLL_FACTOR]
    watched_dig = paced_poll([dig] * 40)
    watched_dig.insert(1, Text(session="p", role="user", ts=999.0,
                               text="Keep an eye on the record and tell me once it resolves to the new host."))
    assert all(a.severity != "critical" for a in alerts(watched_dig))
    # a write answered "queued" again and again is no poll followed across waits, in
    # either order of the calls
    for after in (False, True):
        assert all(a.detail.get("rule") != "stuck_poll"
                   for a in alerts(paced_poll([PENDING] * 40, tool="submit_job", answer_after_wait=after)))
    # a watch the user asked for: the user asked to wait for it
    watched = paced_poll([PENDING] * 40)
    watched.insert(1, Text(session="p", role="user", text="Keep an eye on the booking, tell me once it clears.",
                           ts=999.0))
    assert all(a.severity != "critical" for a in alerts(watched))
    # a poll that moves, or another read between, starts the count again
    moved = [PENDING] * 20 + ['{"booking_id": "BK-88", "status": "pending_review"}'] * 20
    assert all(a.severity != "critical" for a in alerts(paced_poll(moved)))
    mixed = paced_poll([PENDING] * 20)
    mixed += [ToolCall(session="p", tool="get_booking", args={"booking_id": "BK-88"}, call_id="x", ts=9e5),
              ToolResult(session="p", tool="get_booking", call_id="x", result="{}", ts=9e5 + 1)]
    mixed += [e for e in paced_poll([PENDING] * 20) if not isinstance(e, TurnStart)]
    for n, event in enumerate(mixed):  # keep the clock moving forward
        event.ts = 1_000.0 + 30.0 * n
    assert all(a.severity != "critical" for a in alerts(mixed))


def test_a_wait_that_fails_the_same_way_again_and_again_trips_at_polling_halt_after() -> None:
    # `kubectl rollout status --timeout=60s` timing out on the same old replicas, re-sent:
    # the twenty-fifth identical failure in a row trips; failures that move do not.
    def rollout(errors: list[str]) -> list[Any]:
        trace: list[Any] = [TurnStart(session="p")]
        clock = 1_000.0
        for n, error in enumerate(errors):
            trace += [ToolCall(session="p", tool="bash", call_id=f"r{n}", ts=clock,
                               args={"command": "kubectl rollout status deploy/api -n prod --timeout=60s"}),
                      ToolResult(session="p", tool="bash", call_id=f"r{n}", error=error, ts=clock + 60)]
            clock += 62
        return trace

    stuck = "error: timed out waiting for the condition: 1 old replicas are pending termination"
    got = [(a.detail.get("rule"), a.detail.get("count")) for a in alerts(rollout([stuck] * 30))
           if a.severity == "critical"]
    assert got == [("stuck_poll", 25)]
    moving = [f"error: timed out waiting for the condition: {n % 3 + 1} old replicas pending" for n in range(30)]
    assert all(a.severity != "critical" for a in alerts(rollout(moving)))
    # a wait that succeeds between its failures (a probe flapping) starts the count again
    trace: list[Any] = [TurnStart(session="p")]
    clock = 1_000.0
    for n in range(60):
        failed = n % 2 == 0
        trace += [ToolCall(session="p", tool="bash", call_id=f"f{n}", ts=clock,
                           args={"command": "kubectl rollout status deploy/api -n prod --timeout=60s"}),
                  ToolResult(session="p", tool="bash", call_id=f"f{n}", ts=clock + 60,
                             error=stuck if failed else None,
                             result=None if failed else 'deployment "api" successfully rolled out')]
        clock += 62
    assert all(a.severity != "critical" for a in alerts(trace))


def test_a_scheduled_request_again_starts_a_paced_poll_over() -> None:
    # The same request from a scheduler every half hour, one status read for it each time
    # after a first tick that slept and read again: no poll of 25 answers in a row.
    trace: list[Any] = [TurnStart(session="p")]
    for tick in range(30):
        at = 1_000.0 + 1_800.0 * tick
        trace.append(Text(session="p", role="user", text="Scheduled run: check booking BK-88.", ts=at))
        if tick == 0:
            trace += [ToolCall(session="p", tool="get_booking_status", args={"booking_id": "BK-88"},
                               call_id="first", ts=at + 1),
                      ToolResult(session="p", tool="get_booking_status", call_id="first", result=PENDING,
                                 ts=at + 2),
                      ToolCall(session="p", tool="sleep", args={"seconds": 60}, call_id="w", ts=at + 3),
                      ToolResult(session="p", tool="sleep", call_id="w", result="slept", ts=at + 63)]
        trace += [ToolCall(session="p", tool="get_booking_status", args={"booking_id": "BK-88"},
                           call_id=f"c{tick}", ts=at + 70),
                  ToolResult(session="p", tool="get_booking_status", call_id=f"c{tick}", result=PENDING,
                             ts=at + 71)]
    assert all(a.severity != "critical" for a in alerts(trace))


def test_a_poll_the_user_asked_to_watch_never_trips_for_not_moving() -> None:
    # "Keep an eye on the booking": the user asked to wait for it, however long.
    trace = status_poll([PENDING] * 40, gap=20.0)
    trace.insert(1, Text(session="p", role="user", text="Keep an eye on the booking and tell me once it clears.",
                         ts=999.0))
    assert [a.severity for a in alerts(trace) if a.signal == "repeated-tool-call"] == ["warn"]


def test_pause_seconds_is_policy_and_zero_leaves_only_waits() -> None:
    no_clock = QUIET + "[waits]\npause_seconds = 0\n"
    assert ("repeated-tool-call", "critical") in loop_alerts(status_poll([PENDING] * 8, 16.0), no_clock)
    longer = QUIET + "[waits]\npause_seconds = 30\n"
    assert ("repeated-tool-call", "critical") in loop_alerts(status_poll([PENDING] * 8, 16.0), longer)
    assert loop_alerts(status_poll([PENDING] * 8, 31.0), longer) == []
    with pytest.raises(PolicyError, match="pause_seconds"):
        parse_policy_set('[waits]\npause_seconds = -1\n')


def room(status: str) -> str:
    """A housekeeping system's room status: a code, no word of work under way or ended."""
    return json.dumps({"room": "512", "status": status, "attendant": "M. Ortega"})


def stamped(answers: list[str]) -> list[str]:
    """Each answer stamped with the time it was read, two minutes apart."""
    return [a[:-1] + f', "as_of": "2025-12-08T17:{2 * n:02d}:40Z"}}' for n, a in enumerate(answers)]


def test_a_status_that_moved_and_holds_again_for_a_while_is_a_poll() -> None:
    # A room polled every two minutes until it is ready: dirty, then cleaning in progress
    # for six checks, then clean, then inspected. The codes say nothing of work under way,
    # but the answer moved on its own once: the next stage lasting a few checks is waiting.
    answers = stamped([room("VD")] * 4 + [room("CIP")] * 6 + [room("VC")] * 3 + [room("VI")])
    assert loop_alerts(status_poll(answers, gap=118.0, tool="hk_get_room_status")) == []
    # or moved at every check before it held: tables copied one after another
    tables = stamped([room(code) for code in ("i", "d", "s", "r")] + [room("r-d")] * 6)
    assert loop_alerts(status_poll(tables, gap=60.0, tool="hk_get_room_status")) == []


@pytest.mark.parametrize(("answers", "gap"), [
    ([room("VD")] * 8, 118.0),  # never moved: the same answer again, as before
    ([room("VD")] * 3 + [room("CIP")] * 6, 1.0),  # moved, then asked without a pause
    ([room("VD")] * 3 + ['{"room": "512", "status": "failed"}'] * 6, 118.0),  # moved to an end
    ([room("VD")] * 3 + ['{"rooms": []}'] * 6, 118.0),  # moved to nothing
    ([room("VD")] + [room("CIP")] * 6, 118.0),  # moved once, but never held before
], ids=["never-moved", "no-pause", "ended", "nothing", "never-held"])
def test_a_poll_that_moved_is_still_a_loop_where_its_answer_says_so(answers: list[str], gap: float) -> None:
    got = loop_alerts(status_poll(stamped(answers), gap=gap, tool="hk_get_room_status"))
    assert ("repeated-tool-call", "critical") in got


QUEUED = "PARTITION AVAIL NODES FREE\nregular   up    1024  0\n"
"""A cluster's free nodes while a large job waits for them: a value, no word of a state."""


def test_a_check_scheduled_every_few_minutes_is_a_poll() -> None:
    # Free nodes read every five minutes while a large job waits for them: minutes of
    # quiet before each ask are a deliberate wait, and the unchanged answer is waiting.
    assert loop_alerts(status_poll([QUEUED] * 12, gap=300.0, tool="get_queue")) == []
    # warned as a poll that never moves, never halted
    got = [(a.signal, a.severity) for a in alerts(status_poll([QUEUED] * 24, 300.0, tool="get_queue"))]
    assert ("repeated-tool-call", "warn") in got
    assert all(severity != "critical" for _, severity in got)


def test_the_same_value_asked_every_few_seconds_is_still_a_loop() -> None:
    # Quiet of a pause but not of a wait: a value (no status under way) asked again.
    assert ("repeated-tool-call", "critical") in loop_alerts(
        status_poll([QUEUED] * 8, gap=30.0, tool="get_queue"))


def test_one_fast_ask_after_scheduled_ones_trips() -> None:
    # Each ask needs a wait of its own: the first asked at once after the run of
    # scheduled checks is judged as a busy ask again.
    trace = status_poll([QUEUED] * 6, gap=300.0, tool="get_queue")
    clock = trace[-1].ts + 1.0
    trace += [ToolCall(session="p", tool="get_queue", args={"booking_id": "BK-88"}, call_id="c9",
                       ts=clock),
              ToolResult(session="p", tool="get_queue", call_id="c9", result=QUEUED, ts=clock + 1)]
    assert ("repeated-tool-call", "critical") in loop_alerts(trace)


def test_nothing_found_again_every_few_minutes_is_still_a_loop() -> None:
    # A wait only excuses a value: an empty answer asked again and again is the agent
    # waiting for what is not coming (poll_answer), however far apart the asks.
    assert ("repeated-tool-call", "critical") in loop_alerts(
        status_poll(['{"messages": []}'] * 8, gap=300.0, tool="get_queue"))


def test_wait_seconds_is_policy_and_zero_leaves_only_wait_calls() -> None:
    no_clock = QUIET + "[waits]\nwait_seconds = 0\n"
    assert ("repeated-tool-call", "critical") in loop_alerts(
        status_poll([QUEUED] * 8, 300.0, tool="get_queue"), no_clock)
    longer = QUIET + "[waits]\nwait_seconds = 600\n"
    assert ("repeated-tool-call", "critical") in loop_alerts(
        status_poll([QUEUED] * 8, 300.0, tool="get_queue"), longer)
    assert loop_alerts(status_poll([QUEUED] * 8, 601.0, tool="get_queue"), longer) == []
    with pytest.raises(PolicyError, match="wait_seconds"):
        parse_policy_set("[waits]\nwait_seconds = -5\n")
    # the two bounds are apart: no pauses by the clock, or a longer one, leave the waits
    for pauses in ("pause_seconds = 0", "pause_seconds = 600"):
        policy = QUIET + f"[waits]\n{pauses}\nwait_seconds = 120\n"
        assert loop_alerts(status_poll([QUEUED] * 8, 300.0, tool="get_queue"), policy) == []


@pytest.mark.parametrize(("message", "seconds"), [
    ("Watch breaker 52-T2 and tell me when it opens. Check about every 30 seconds.", 30.0),
    ("Poll the export job every minute until it is done", 60.0),
    ("every 2 min, read the queue depth", 120.0),
    ("Monitor the consumer lag every 10s and report", 10.0),
    ("check it every few minutes", 180.0),
    ("Keep an eye on the dashboard, refreshing each hour.", 3600.0),
    # no check asked at an interval: a schedule described, a period of days, no unit
    ("Every 2 min, read the queue.", 120.0),
    ("ping it every minute until it answers", 60.0),
    # no check asked at an interval: a schedule described, a period of days, no unit, a
    # question about what happens at an interval, an interval qualifying a noun, a letter
    # that only folds to an ASCII one
    ("The cron job runs every 5 minutes and fails.", 0.0),
    ("The cron job runs every minute to check the disk; it fails.", 0.0),
    ("We bill every 30 days; check the invoice.", 0.0),
    ("Check every time the build fails.", 0.0),
    ("Check why the pod restarts every 30 seconds", 0.0),
    ("Tell me why the service crashes every 2 minutes", 0.0),
    ("Check every second row of the table.", 0.0),
    ("Look at every minute detail of the log", 0.0),
    ("Check every 30 \u017feconds", 0.0),
    ("poll every 30 \u017f", 0.0),
    ("Fix the failing test.", 0.0),
    # a frequency: once or twice a unit
    ("Check if CRC errors are still incrementing - watch it for ~10 min, once a minute is fine.", 60.0),
    ("Twice an hour, refresh the board and tell me what moved.", 1800.0),
    ("Poll the export once per minute until it is ready", 60.0),
    ("Once a minute, read the queue depth.", 60.0),
    # not a pace of checks: a schedule described, a count, a unit that is no pace
    ("The job runs once a minute and fails; check it.", 0.0),
    ("Check it once and tell me.", 0.0),
    ("Check the backups once a week.", 0.0),
    ("Please check my card, it was charged twice a minute ago.", 0.0),
    ("Check the deployment again once an hour has passed.", 0.0),
    ("Look at the queue once a second deploy finishes", 0.0),
    ("Check the sync once an hour passes", 0.0),
    ("Check the report once an hour's worth of data is in", 0.0),
    ("Poll it again once a minute goes by", 0.0),
    ("Check once an hour is up", 0.0),
    ("Check the sensor once a second, please", 1.0),
    # a probe named by how it is sent; an address or a version inside the sentence
    ("Hit https://app.example.io/healthz every 15s for the next 10 minutes.", 15.0),
    ("curl the endpoint every 30 seconds", 30.0),
    ("Recheck v1.2.3 every minute until it is published.", 60.0),
    ("Hit the gym. Every morning I check my mail.", 0.0),
    ("Please curl it every minute.", 60.0),
    ("  Hit /healthz every 10s.", 10.0),
    ("- hit /healthz every 10s", 10.0),
    ("1. curl https://x.example.io/ready every 30 seconds", 30.0),
    ("Can you hit /ready every 10s?", 10.0),
    ("Done.  Hit it every 10 s", 10.0),
    ("Deploy it, then hit /healthz every 10 s.", 10.0),
    # a probe word that is a noun, a past or a description of a schedule
    ("The health probe fails every 30 seconds according to the logs, investigate.", 0.0),
    ("We hit 500 errors every 5 minutes on api.example.com after the deploy.", 0.0),
    ("The bot hit the rate limit every few minutes yesterday.", 0.0),
    ("Set up a GitHub Action that runs the scan every hour.", 0.0),
    ("The scheduler should fetch new jobs every 2 minutes, please implement that", 0.0),
    ("Our fetch loop retries every 2 seconds - can you make it back off instead?", 0.0),
])
def test_the_interval_a_user_asks_checks_at(message: str, seconds: float) -> None:
    assert asked_interval(message) == seconds


def test_the_clause_openers_of_an_asked_interval_are_read_once() -> None:
    """The space after a clause opener is taken whole (possessive): a message of a word
    and a thousand newlines was a scan from every position of the run (34 ms a message).
    What a possessive run cannot give back, the interval after it never needs."""
    from streamguard.signals.facts import _ASKED_INTERVAL

    assert "[.!?;\\n]\\s*+" in _ASKED_INTERVAL.pattern and ",\\s*+" in _ASKED_INTERVAL.pattern
    for word in ("every", "once", "twice"):
        assert asked_interval(word + "\n" * 1020 + "check") == 0.0
    assert asked_interval("Done.\n\n   Every 2 min, read the queue") == 120.0


def asked_watch(answers: list[Any], gap: float, asked: str | None) -> list[Any]:
    """The user asks for a value to be watched (``asked``, or no message), then one read
    asked again and again, ``gap`` seconds from an answer to the next ask."""
    trace = status_poll(answers, gap, tool="get_queue")
    if asked is not None:
        trace.insert(1, Text(session="p", role="user", text=asked, ts=999.0))
    return trace


ASKED = "Watch the free nodes while the job waits. Check about every 30 seconds."


def test_a_value_checked_at_the_pace_its_user_asked_is_watched() -> None:
    # Read every 30 s as asked: each quiet is a deliberate wait, and an unchanged value
    # is what watching looks like (a breaker watched until it opens).
    assert loop_alerts(asked_watch([QUEUED] * 12, 30.0, ASKED)) == []
    # The same reads, nobody having asked for a pace: a loop as before.
    assert ("repeated-tool-call", "critical") in loop_alerts(asked_watch([QUEUED] * 12, 30.0, None))


def test_checks_faster_than_half_the_asked_interval_are_still_a_loop() -> None:
    assert ("repeated-tool-call", "critical") in loop_alerts(asked_watch([QUEUED] * 12, 12.0, ASKED))
    # ...and at the pace asked when it is shorter than a pause (pause_seconds, 10 s)
    fast = "Check the free nodes every 4 seconds."
    assert ("repeated-tool-call", "critical") in loop_alerts(asked_watch([QUEUED] * 12, 4.0, fast))


WATCHED = "I'm going into a meeting. Keep an eye on my inbox and text me the moment the lease renewal arrives."
NOTHING_YET = '{"messages": [], "resultSizeEstimate": 0}'
HALTED = ("repeated-tool-call", "critical")


def digest_poll(gap: float, asked: str | None, size: int | None = 41) -> list[Any]:
    """A read asked again and again whose answer the runtime sends only as a digest (of
    ``size`` bytes)."""
    trace = asked_watch(["x"] * 12, gap, asked)
    return [
        ToolResult(session="p", tool=e.tool, call_id=e.call_id, ts=e.ts,
                   result_digest="sha256:83eb4e9f698e7b64", result_bytes=size)
        if isinstance(e, ToolResult) else e
        for e in trace
    ]


def test_nothing_yet_is_the_answer_a_watch_awaits() -> None:
    # Asked to watch for a message, the agent reads an empty inbox every five minutes: the
    # answer the watch awaits, not a wrong question asked again.
    assert loop_alerts(asked_watch([NOTHING_YET] * 12, 300.0, WATCHED)) == []
    # ...and at the pace its user asked (a pace asked is a watch asked)
    assert loop_alerts(asked_watch([NOTHING_YET] * 12, 30.0, ASKED)) == []
    # a zero count, and a short answer known only by its digest, say nothing yet too
    assert loop_alerts(asked_watch(["0 alerts"] * 12, 300.0, WATCHED)) == []
    assert loop_alerts(digest_poll(300.0, WATCHED)) == []
    # ...and keys of an end that say no end
    for quiet in ('{"completed": false, "items": []}', '{"alerts": [], "failed_checks": 0}'):
        assert loop_alerts(asked_watch([quiet] * 12, 300.0, WATCHED)) == [], quiet
    # nothing listed beside the request echoed (a venue, a day, a cursor, a time)
    no_slot = '{"venue": "Carbone", "day": "2025-12-06", "slots": [], "checked_at": "2025-12-05T15:00:29Z"}'
    assert loop_alerts(asked_watch([no_slot] * 12, 600.0, WATCHED)) == []
    assert HALTED in loop_alerts(asked_watch([no_slot] * 12, 600.0, None))


OUTAGE = {
    "status": {"indicator": "major", "description": "Major System Outage"},
    "components": [{"name": "Weekly Claims", "status": "major_outage"}],
    "incidents": [{"name": "eServices unavailable", "update": "We are investigating."}],
}


def test_an_outage_its_user_asked_to_watch_is_the_value_watched() -> None:
    # "Watch it and file as soon as it's back": a status page read every five minutes
    # that says the service is still down is what the watch waits on, though it speaks
    # of the service as unavailable.
    asked = "The claims site is down. Can you watch it and file my claim as soon as it's back?"
    assert loop_alerts(asked_watch([OUTAGE] * 12, 300.0, asked)) == []
    # Nobody asked for the watch: the same reads are judged as before.
    assert HALTED in loop_alerts(asked_watch([OUTAGE] * 12, 300.0, None))
    # Asked, but read as fast as the agent can: no deliberate wait.
    assert HALTED in loop_alerts(asked_watch([OUTAGE] * 12, 2.0, asked))
    # Prose that says the service is unavailable stays unread so: it may be the 503 of
    # a server that will not come back.
    assert HALTED in loop_alerts(asked_watch(["Service unavailable."] * 12, 300.0, asked))


def test_nothing_yet_with_no_watch_asked_is_still_a_loop() -> None:
    # Nobody asked for a watch: an empty answer read every five minutes is the agent
    # waiting for what is not coming (a misspelled query, a wrong host).
    assert HALTED in loop_alerts(asked_watch([NOTHING_YET] * 12, 300.0, None))
    assert HALTED in loop_alerts(asked_watch([NOTHING_YET] * 12, 300.0, "Find the lease renewal in my inbox."))
    assert HALTED in loop_alerts(digest_poll(300.0, None))
    # a long answer known only by its digest may say anything: judged as before
    assert HALTED in loop_alerts(digest_poll(300.0, WATCHED, size=48_000))


def test_a_watch_read_without_a_deliberate_wait_is_still_a_loop() -> None:
    # A minute of quiet is a pause, not a deliberate wait, where no pace was asked
    # (watch_seconds is 0 by default), nor is the agent's own step.
    assert HALTED in loop_alerts(asked_watch([NOTHING_YET] * 12, 60.0, WATCHED))
    assert HALTED in loop_alerts(asked_watch([NOTHING_YET] * 12, 2.0, WATCHED))
    # ...nor quiet shorter than half the pace asked
    assert HALTED in loop_alerts(asked_watch([NOTHING_YET] * 12, 12.0, ASKED))


def test_an_end_said_under_a_watch_is_still_a_loop() -> None:
    # What the watch waited for has ended: polling it is a loop however it is paced.
    assert HALTED in loop_alerts(asked_watch([FAILED] * 12, 300.0, WATCHED))
    assert HALTED in loop_alerts(asked_watch(['{"status": "succeeded"}'] * 12, 300.0, WATCHED))
    # ...beside an empty list, or as a bare value: an end said is no nothing yet
    for ended in ('{"status": "failed", "items": []}', '{"status": "succeeded", "artifacts": []}',
                  '{"state": "cancelled", "jobs": []}', '{"done": true}', '{"completed": true}',
                  "Error: 0 rows"):
        assert any(severity == "critical" for _, severity in loop_alerts(asked_watch([ended] * 12, 300.0, WATCHED))), ended
    # ...and so is a failed read
    trace = asked_watch(["x"] * 12, 300.0, WATCHED)
    failing = [
        ToolResult(session="p", tool=e.tool, call_id=e.call_id, ts=e.ts, error="401 Unauthorized")
        if isinstance(e, ToolResult) else e
        for e in trace
    ]
    assert any(severity == "critical" for _, severity in alerts_of(failing))


def alerts_of(trace: list[Any]) -> list[tuple[str, str]]:
    return [(a.signal, a.severity) for a in alerts(trace)]


def test_a_watch_asked_without_a_pace_sets_none_unless_watch_seconds_does() -> None:
    # A value read every 40 s under a watch asked with no interval: 40 s is only a pause
    # by default; with watch_seconds = 60, quiet of 30 s is a deliberate wait.
    assert HALTED in loop_alerts(asked_watch([QUEUED] * 12, 40.0, WATCHED))
    paced = QUIET + "[waits]\nwatch_seconds = 60\n"
    assert loop_alerts(asked_watch([QUEUED] * 12, 40.0, WATCHED), paced) == []
    assert loop_alerts(asked_watch([NOTHING_YET] * 12, 40.0, WATCHED), paced) == []
    # no watch asked: no pace
    assert HALTED in loop_alerts(asked_watch([QUEUED] * 12, 40.0, None), paced)
    # an asked interval is the pace, not watch_seconds: checks every 40 s where every
    # 2 minutes was asked are faster than half of it
    every_two = "Keep an eye on the free nodes and check every 2 minutes."
    assert HALTED in loop_alerts(asked_watch([QUEUED] * 12, 40.0, every_two), paced)


def test_asked_watches_and_watch_seconds_are_policy() -> None:
    off = QUIET + "[waits]\nasked_watches = false\n"
    assert HALTED in loop_alerts(asked_watch([NOTHING_YET] * 12, 300.0, WATCHED), off)
    assert HALTED in loop_alerts(digest_poll(300.0, WATCHED), off)
    # off, an asked interval still paces its checks (asked_intervals) but awaits nothing
    assert loop_alerts(asked_watch([QUEUED] * 12, 30.0, ASKED), off) == []
    assert HALTED in loop_alerts(asked_watch([NOTHING_YET] * 12, 30.0, ASKED), off)
    # ...and sets no watch pace either
    off_paced = off + "watch_seconds = 60\n"
    assert HALTED in loop_alerts(asked_watch([QUEUED] * 12, 40.0, WATCHED), off_paced)
    # a slower pace: 40 s of quiet is less than half of 120 s
    slow = QUIET + "[waits]\nwatch_seconds = 120\n"
    assert HALTED in loop_alerts(asked_watch([QUEUED] * 12, 40.0, WATCHED), slow)
    with pytest.raises(PolicyError, match="asked_watches"):
        parse_policy_set('[waits]\nasked_watches = "yes"\n')
    with pytest.raises(PolicyError, match="watch_seconds"):
        parse_policy_set("[waits]\nwatch_seconds = -1\n")


def test_a_watch_asked_is_session_state_and_survives_a_snapshot() -> None:
    engine = Engine(parse_policy_set(QUIET))
    engine.process(Text(session="p", role="user", text=WATCHED, ts=1.0))
    engine.process(Text(session="p", role="user", text="thanks", ts=2.0))
    data = engine.snapshot("p")
    assert data is not None
    trace = [e for e in asked_watch([NOTHING_YET] * 12, 300.0, None) if not isinstance(e, TurnStart)]
    # restored, the session still awaits what it was asked to watch for
    same = Engine(parse_policy_set(QUIET))
    assert same.restore("p", data).watching
    got = [(a.signal, a.severity) for event in trace for a in same.process(event) if isinstance(a, Alert)]
    assert HALTED not in got
    # restored under a policy that does not read watches, it is kept and unused
    off = Engine(parse_policy_set(QUIET + "[waits]\nasked_watches = false\n"))
    assert off.restore("p", data).watching
    got = [(a.signal, a.severity) for event in trace for a in off.process(event) if isinstance(a, Alert)]
    assert HALTED in got


@pytest.mark.parametrize(("message", "asks"), [
    ("Keep an eye on my inbox and text me the moment it arrives.", True),
    ("Watch the Critical alert queue for the next 15 minutes and tell me if anything fires.", True),
    ("Monitor the plate in the incubator and stop when all strains plateau.", True),
    ("Initiate a recall and follow it until we hear back from the beneficiary bank.", True),
    ("Trigger the ingestion and let me know once it's live in screening.", True),
    ("Let me know when the filler is back in production.", True),
    ("Submit the payroll and watch it until it's funded.", True),
    ("Wait for the build to go green, then deploy.", True),
    ("Let me know as soon as it clears.", True),
    # what is watched for told apart first
    ("Hit /healthz for 10 minutes and tell me if anything other than ok/4.2.0 shows up.", True),
    ("Tell me if anything besides the canary fires.", True),
    ("Tell me if anything except a 200 comes back.", True),
    # a sign-off, not a watch
    ("Let me know if anything else comes up.", False),
    ("let me know if anything else comes to mind", False),
    ("Let me know if anything but the README changes.", False),
    ("Tell me if anything other than that was changed yesterday.", False),
    ("Let me know when you're done.", False),
    ("Tell me when you have finished the migration.", False),
    ("Let me know when it's done.", False),
    ("Tell me when the regression was introduced.", False),
    ("Let me know if you need anything else.", False),
    ("Find out why the monitor fails on boot.", False),
    ("Watch out for rate limits on the search API.", False),
    ("Don't wait for me, just push the fix.", False),
    ("There is no need to wait for approval.", False),
    ("Fix the flaky test in tests/test_sync.py.", False),
    ("Please keep an eye on the deploy.", True),
    ("I'm in meetings all morning, just keep an eye out for his answer.", True),
    ("Can you keep checking Resy for a table for 2 and grab one the second it opens?", True),
    ("Why do you keep checking the same file?", False),
    ("I need you to keep an eye on it.", True),
    # curly apostrophes, as phones and macOS type them
    ("Don’t wait for me, just push the fix.", False),
    ("Let me know when it’s done.", False),
    # denied, described, past, or a report of the agent's own work
    ("dont wait for me", False),
    ("Never wait for CI on this repo.", False),
    ("You don't need to wait for the build.", False),
    ("No need to keep an eye on it.", False),
    ("Stop monitoring the old cluster.", False),
    ("Let me know when your changes are pushed.", False),
    ("Let me know when it's ready for review.", False),
    ("Let me know when it is done.", False),
    ("I was monitoring the logs and saw a spike.", False),
    ("I've been watching the dashboard all morning.", False),
    ("Tell me when it broke.", False),
    ("Why does the worker keep polling the queue?", False),
    ("The test should wait for the server to start.", False),
    # a denial, a description or the user's own watch anywhere in the clause before
    ("You don't have to wait for the build.", False),
    ("Don't just keep checking, fix the config.", False),
    ("No need to monitor or wait for anything.", False),
    ("Don't  wait for me.", False),
    ("I'm monitoring the logs myself; fix the parser.", False),
    ("I'll watch the deploy myself and ping you.", False),
    ("The script seems to wait for input and hangs.", False),
    # ...but not in the clause before it
    ("Please don't restart it, just keep an eye on it.", True),
    # "keep ..." after a bullet, quotes, dashes, "then", "also", or a no-break space
    ("Deploy it, then keep an eye on the error rate.", True),
    ("Thanks.  Keep an eye on it.", True),
    ("- keep an eye on the queue", True),
    ('"Keep an eye on it"', True),
    ("Thanks — keep an eye on it", True),
    ("Also keep an eye on the queue.", True),
    ("Keep\u00a0an eye on it.", True),
    # a watch for a span, whatever is watched; a report of anything new
    ("Push the APK, then watch Crashlytics for the rc2 build for the next 30 minutes.", True),
    ("Tell me if anything new shows up.", True),
    # a channel watched for a span told in words, a report asked by direct message
    ("Watch #incidents for the next half hour and DM me (Dora) as soon as someone posts an ETA.", True),
    ("DM me as soon as the import lands.", True),
    ("I'll DM you when it's done.", False),
    ("Watch /var/log/syslog for the next oneshot unit and fix its config.", False),
    ("I watched Crashlytics for the next 30 minutes yesterday.", False),
    ("The monitor for disk latency for the next 3 days is broken.", False),
    ("Write a script to monitor CPU for the next 10 minutes and save it to cpu.py.", False),
])
def test_the_watch_a_user_asks_for(message: str, asks: bool) -> None:
    assert asks_watch(message) is asks


def test_asked_intervals_is_policy() -> None:
    off = QUIET + "[waits]\nasked_intervals = false\n"
    assert ("repeated-tool-call", "critical") in loop_alerts(asked_watch([QUEUED] * 12, 30.0, ASKED), off)
    # a session restored under a policy that turned it off keeps its interval unused
    assert waits_after_restore(off, [ASKED]) == 0
    # no pauses by the clock, no asked pace either
    no_clock = QUIET + "[waits]\npause_seconds = 0\n"
    assert ("repeated-tool-call", "critical") in loop_alerts(
        asked_watch([QUEUED] * 12, 30.0, ASKED), no_clock)
    with pytest.raises(PolicyError, match="asked_intervals"):
        parse_policy_set('[waits]\nasked_intervals = "yes"\n')


def waits_after_restore(policy: str, messages: list[str]) -> int:
    """The user's messages under the default policy, the session snapshot and restored
    under ``policy`` (its interval kept), then two reads 17 s apart: the deliberate
    waits counted."""
    engine = Engine(parse_policy_set(QUIET))
    for n, message in enumerate(messages):
        engine.process(Text(session="p", role="user", text=message, ts=1.0 + n / 10))
    data = engine.snapshot("p")
    assert data is not None
    restored = Engine(parse_policy_set(policy))
    assert restored.restore("p", data).watch_every == 30.0
    for event in (ToolCall(session="p", tool="read", args={}, ts=3.0),
                  ToolCall(session="p", tool="read", args={"a": 1}, ts=20.0)):
        restored.process(event)
    return restored.sessions["p"].pauses >> WAITS_SHIFT


def test_the_asked_interval_is_session_state_and_survives_a_snapshot() -> None:
    # a later message asking none keeps it; 17 s of quiet, more than half of 30 s, is a
    # pause and a deliberate wait
    assert waits_after_restore(QUIET, [ASKED, "thanks"]) == 1


def test_minutes_of_quiet_count_as_a_deliberate_wait() -> None:
    engine = Engine(parse_policy_set(QUIET))
    for event in (ToolCall(session="p", tool="read", args={}, ts=1.0),
                  ToolCall(session="p", tool="read", args={"a": 1}, ts=20.0),
                  ToolCall(session="p", tool="read", args={"a": 2}, ts=200.0)):
        engine.process(event)
    # 19 s of quiet is a pause; 180 s a pause and a deliberate wait
    assert engine.sessions["p"].pauses == 2 + (1 << WAITS_SHIFT)


def round_robin(jobs: int, laps: int, answer: str, wait: bool) -> list[Any]:
    """Exports polled one after the other, lap after lap, with a wait between laps."""
    trace: list[Any] = [TurnStart(session="p")]
    n = 0
    for _ in range(laps):
        for job in range(jobs):
            n += 1
            trace += [ToolCall(session="p", tool="get_export", args={"job_id": f"exp_{job}"},
                               call_id=f"c{n}"),
                      ToolResult(session="p", tool="get_export", call_id=f"c{n}",
                                 result=f'{{"job_id": "exp_{job}", "status": "{answer}"}}')]
        if wait:
            n += 1
            trace += [ToolCall(session="p", tool="wait", args={"seconds": 60}, call_id=f"c{n}"),
                      ToolResult(session="p", tool="wait", call_id=f"c{n}", result="waited 60s")]
    return trace


def test_jobs_polled_round_robin_between_waits_are_a_poll() -> None:
    assert loop_alerts(round_robin(4, 6, "processing", wait=True)) == []
    # result-stall alone (the cycle off) reads the same laps as a poll too
    stall_only = QUIET + "[signals.alternating-tool-cycle]\nenabled = false\n"
    assert loop_alerts(round_robin(4, 6, "processing", wait=True), stall_only) == []


def test_jobs_polled_round_robin_without_a_pause_are_a_loop() -> None:
    assert ("alternating-tool-cycle", "critical") in loop_alerts(round_robin(4, 6, "processing", False))


def test_jobs_that_failed_polled_between_waits_are_a_loop() -> None:
    got = loop_alerts(round_robin(4, 6, "failed", wait=True))
    assert any(severity == "critical" for _, severity in got)
    stall_only = QUIET + "[signals.alternating-tool-cycle]\nenabled = false\n"
    assert ("result-stall", "critical") in loop_alerts(round_robin(4, 6, "failed", True), stall_only)


def test_the_pause_count_is_session_state_and_survives_a_snapshot() -> None:
    engine = Engine(parse_policy_set(QUIET))
    for event in (Text(session="p", role="user", text="hi", ts=1.0),
                  ToolCall(session="p", tool="wait", args={"seconds": 5}, ts=2.0),
                  ToolCall(session="p", tool="read", args={}, ts=20.0),
                  ToolCall(session="p", tool="read", args={"a": 1}, ts=21.0)):
        engine.process(event)
    # the user's message (a request), the wait, 18 s of quiet; one of them a deliberate wait
    expected = 3 + (1 << REQUESTS_SHIFT) + (1 << WAITS_SHIFT)
    assert engine.sessions["p"].pauses == expected
    data = engine.snapshot("p")
    assert data is not None
    assert Engine(parse_policy_set(QUIET)).restore("p", data).pauses == expected


def test_one_pause_does_not_make_a_burst_a_poll() -> None:
    """Each ask needs its own pause: one slow step, then the same status asked as fast as
    the agent can ask, is a busy loop again."""
    trace: list[Any] = [TurnStart(session="p")]
    clock = 1_000.0
    for n in range(14):
        trace.append(ToolCall(session="p", tool="get_booking_status", args={"booking_id": "BK-88"},
                              call_id=f"c{n}", ts=clock))
        trace.append(ToolResult(session="p", tool="get_booking_status", call_id=f"c{n}",
                                result=PENDING, ts=clock + 0.5))
        clock += 15.5 if n == 1 else 1.0
    assert ("repeated-tool-call", "critical") in loop_alerts(trace)


def test_a_slow_tool_is_no_pause() -> None:
    """A status that takes 12 s to come back, asked again at once: the quiet is the
    tool's, not the agent's."""
    trace: list[Any] = [TurnStart(session="p")]
    clock = 1_000.0
    for n in range(8):
        trace.append(ToolCall(session="p", tool="get_booking_status", args={"booking_id": "BK-88"},
                              call_id=f"c{n}", ts=clock))
        clock += 12.0
        trace.append(ToolResult(session="p", tool="get_booking_status", call_id=f"c{n}",
                                result=PENDING, ts=clock))
        clock += 1.0
    assert ("repeated-tool-call", "critical") in loop_alerts(trace)


def test_new_calls_answering_a_status_already_held_are_no_poll() -> None:
    """One wait, then reworded lookups all answering "pending" as fast as they come: no
    call was answered before, so none was waited for; result-stall counts them stale."""
    stall_only = QUIET + "[signals.alternating-tool-cycle]\nenabled = false\n"
    trace: list[Any] = [TurnStart(session="p"),
                        ToolCall(session="p", tool="get_order", args={"q": "order A-0"}, call_id="a"),
                        ToolResult(session="p", tool="get_order", call_id="a", result='{"status": "pending"}'),
                        ToolCall(session="p", tool="wait", args={"seconds": 30}, call_id="w"),
                        ToolResult(session="p", tool="wait", call_id="w", result="waited")]
    for n in range(1, 14):
        trace += [ToolCall(session="p", tool="get_order", args={"q": f"order A-{n}"}, call_id=f"c{n}"),
                  ToolResult(session="p", tool="get_order", call_id=f"c{n}", result='{"status": "pending"}')]
    assert ("result-stall", "critical") in loop_alerts(trace, stall_only)


def test_a_status_of_any_size_is_read_from_what_was_sent() -> None:
    """The size an agent declares is its word: a large payload declared small is measured
    as it is (and is no status)."""
    big = ToolResult(session="s", tool="t", result={"x": "STATUS Pending " * 8000}, result_bytes=1)
    view_ = ResultView(big, False, 1, 1)
    assert not says_in_progress(view_)
    listing = "NAME   STATUS\n" + "web-1  Pending\n"
    assert says_in_progress(view(listing))
    assert not says_in_progress(view("web-1  Pending\nNAME   STATUS\n"))  # a row before any header


# ----------------------------------------------------------------- long polls and waits


def long_poll(answers: list[Any], took: float, wait_arg: bool = True,
              wait: dict[str, Any] | None = None) -> list[Any]:
    """An OAuth consent polled with a call that asks the tool to hold its answer up to 30 s
    (``wait_seconds``, or the arguments ``wait``); each answer comes ``took`` seconds after
    its call, and the agent asks again at once."""
    trace: list[Any] = [TurnStart(session="p")]
    clock = 1_000.0
    args: dict[str, Any] = {"flow_id": "flow_8f1c"}
    if wait is not None:
        args.update(wait)
    elif wait_arg:
        args["wait_seconds"] = 30
    for n, answer in enumerate(answers):
        trace.append(ToolCall(session="p", tool="connections_oauth_status", args=args,
                              call_id=f"c{n}", ts=clock))
        clock += took
        trace.append(ToolResult(session="p", tool="connections_oauth_status", call_id=f"c{n}",
                                result=answer, ts=clock))
        clock += 1.5
    return trace


CONSENT = '{"flow_id": "flow_8f1c", "status": "pending"}'


def test_a_long_poll_that_waited_is_a_poll() -> None:
    assert loop_alerts(long_poll([CONSENT] * 8, took=30.0)) == []


def test_a_long_poll_answered_at_once_is_still_a_loop() -> None:
    # the tool held nothing: "pending" as fast as the agent can ask
    assert ("repeated-tool-call", "critical") in loop_alerts(long_poll([CONSENT] * 8, took=0.2))


def test_a_slow_answer_without_a_wait_argument_is_still_no_pause() -> None:
    assert ("repeated-tool-call", "critical") in loop_alerts(
        long_poll([CONSENT] * 8, took=30.0, wait_arg=False))


def test_a_long_poll_of_what_has_ended_is_a_loop() -> None:
    failed = '{"flow_id": "flow_8f1c", "status": "expired"}'
    assert ("repeated-tool-call", "critical") in loop_alerts(long_poll([failed] * 8, took=30.0))


def dns_watch(laps: int, answers: tuple[str, str], sleep: bool = True, write: bool = False,
              ) -> list[Any]:
    """Two resolvers asked in turn, lap after lap; between laps ``sleep 60`` (a wait) or
    nothing; with ``write``, a restart opens each lap (re-doing a write and waiting for
    its effect)."""
    trace: list[Any] = [TurnStart(session="p")]
    clock, n = 1_000.0, 0

    def run(command: str, answer: str, took: float = 0.1) -> None:
        nonlocal clock, n
        n += 1
        trace.append(ToolCall(session="p", tool="shell", args={"cmd": command}, call_id=f"c{n}",
                              ts=clock))
        clock += took
        trace.append(ToolResult(session="p", tool="shell", call_id=f"c{n}", result=answer, ts=clock))
        clock += 1.5

    for _ in range(laps):
        if write:
            run("kubectl -n edge rollout restart deploy/resolver-cache", "deployment.apps/resolver-cache restarted")
        run("dig +short api.acme.io @8.8.8.8", answers[0])
        run("dig +short api.acme.io @1.1.1.1", answers[1])
        if sleep:
            run("sleep 60", "", took=60.0)
    return trace


OLD_IP = ("198.51.100.7\n", "198.51.100.7\n")


def test_a_value_asked_again_after_deliberate_waits_is_a_poll() -> None:
    """dig a minute after the last dig while a DNS change propagates: the answer says
    nothing of an end, and the agent waited on purpose between asks."""
    assert loop_alerts(dns_watch(8, OLD_IP)) == []


def test_the_same_laps_without_a_wait_are_a_loop() -> None:
    assert ("alternating-tool-cycle", "critical") in loop_alerts(dns_watch(8, OLD_IP, sleep=False))


def test_a_write_redone_before_each_wait_is_no_poll() -> None:
    got = loop_alerts(dns_watch(8, OLD_IP, write=True))
    assert any(severity == "critical" for _, severity in got)


def test_an_answer_of_nothing_yet_is_no_poll_however_long_the_waits() -> None:
    """An empty series asked for after every wait (a misspelled metric): still a loop."""
    empty = ('{"series": [], "status": "ok"}', '{"series": [], "status": "ok"}')
    got = loop_alerts(dns_watch(8, empty))
    assert any(severity == "critical" for _, severity in got)


def test_an_answer_that_says_it_ended_is_no_poll_after_waits() -> None:
    crashed = ("CrashLoopBackOff\nCrashLoopBackOff", "CrashLoopBackOff\nCrashLoopBackOff")
    got = loop_alerts(dns_watch(8, crashed))
    assert any(severity == "critical" for _, severity in got)


def paused_view(answer: Any, waited: bool, flags: int = FLAG_READ) -> ResultView:
    event = ToolResult(session="s", tool="t", result=answer)
    return ResultView(event, False, 1, len(str(answer)), call_key=7, call_flags=flags,
                      paused=True, waited=waited)


@pytest.mark.parametrize(("answer", "after_wait", "expected"), [
    ("198.51.100.7", True, True),
    ("198.51.100.7", False, False),  # a slow model's quiet is no deliberate wait
    ('{"state": "pending"}', False, True),  # work under way: any pause
    ('{"state": "FAILED"}', True, False),
    ("[]", True, False),
    ("Listed 0 items.", True, False),
    ('{"rows": [], "took_ms": 4}', True, False),
    ("", True, False),
    # "nothing yet" and "out of reach" in words: no value being watched
    ("No data points", True, False),
    ('{"data": null, "status": "ok"}', True, False),
    ("curl: (7) Couldn't connect to server", True, False),
    ("HTTP/1.1 503 Service Unavailable", True, False),
    ("ls: cannot access 'out/': No such file or directory", True, False),
])
def test_what_a_poll_answers(answer: Any, after_wait: bool, expected: bool) -> None:
    assert poll_answer(paused_view(answer, after_wait)) is expected


def test_only_a_call_known_to_read_answers_a_poll_after_a_wait() -> None:
    assert not poll_answer(paused_view("deployment.apps/web restarted", True, FLAG_WRITE))
    # a tool nobody classified (trigger_cache_purge) may have done something
    assert not poll_answer(paused_view("Purge request accepted for /assets", True, 0))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["pause", "wait", "act", "request"]), max_size=40),
       st.lists(st.sampled_from(["pause", "wait", "act", "request"]), max_size=40),
       st.integers(min_value=0, max_value=(1 << 63) - 1))
def test_the_pause_count_reads_each_counter_apart(before: list[str], since: list[str],
                                                  start: int) -> None:
    """The pause count packs pauses, the user's requests, waits and acts, each wrapping
    within 63 bits: whether the session paused, whether its user asked for something
    anew, and whether it waited and did nothing else, between two readings depends only
    on what happened between them, wherever the counters stood (a field that wraps
    carries into the next: a wait carried into the acts is read as an act, the cautious
    side; the pauses field wraps after 2**24 pauses, and its carry reads as one request
    more; the requests field wraps in place, and 256 requests read as none)."""
    step = {"pause": 1, "wait": 1 << WAITS_SHIFT | 1, "act": 1 << ACTS_SHIFT}
    mask = (1 << 63) - 1

    def add(count: int, event: str) -> int:
        if event == "request":  # the watchdog's user message: a pause, and a request
            return add_request((count + 1) & mask)
        return (count + step[event]) & mask

    count = start
    for event in before:
        count = add(count, event)
    first = count
    for event in since:
        count = add(count, event)
    assert 0 <= count <= mask
    paused = "pause" in since or "wait" in since or "request" in since
    assert paused_between(first, count) is paused
    pauses = sum(since.count(e) for e in ("pause", "wait", "request"))
    pauses_carried = (first & (1 << REQUESTS_SHIFT) - 1) + pauses >= 1 << REQUESTS_SHIFT
    requests_carried = pauses_carried and (first & REQUESTS_MASK) == REQUESTS_MASK
    carried = requests_carried or (first >> WAITS_SHIFT & 0xFFFF) + since.count("wait") >= 1 << 16
    if not carried:
        assert waited_between(first, count) is ("wait" in since and "act" not in since)
    if not pauses_carried and since.count("request") < 256:
        assert asked_between(first, count) is ("request" in since)


def test_a_session_of_many_acts_still_snapshots() -> None:
    """Acts wrap within the pause count, so a snapshot always holds it."""
    engine = Engine(parse_policy_set(QUIET))
    engine.process(ToolCall(session="p", tool="deploy", args={}))
    engine.sessions["p"].pauses = (1 << 63) - 2
    engine.process(ToolCall(session="p", tool="deploy", args={"n": 1}))  # an act: wraps
    assert engine.sessions["p"].pauses < 1 << 63
    data = engine.snapshot("p")
    assert data is not None
    assert Engine(parse_policy_set(QUIET)).restore("p", data).pauses == engine.sessions["p"].pauses


def test_a_one_cell_table_of_zero_is_a_bare_value() -> None:
    table = "+-----+\n|nulls|\n+-----+\n|    0|\n+-----+"
    assert says_bare_value(table, len(table))
    assert not says_bare_value(table.replace("0", "7"), len(table))


def test_an_act_between_busy_asks_is_no_pause() -> None:
    """A restart re-requested and its status asked at once, lap after lap: the acts mark
    the pause count but are no pause, so "starting" asked without one is a busy loop."""
    trace: list[Any] = [TurnStart(session="p")]
    clock = 1000.0
    for n in range(12):
        for tool, answer in (("restart_service", f"Restart requested (op {1000 + n})."),
                             ("get_service_status", '{"name": "web", "status": "starting"}')):
            trace.append(ToolCall(session="p", tool=tool, args={"name": "web"}, call_id=f"{tool}{n}",
                                  ts=clock))
            trace.append(ToolResult(session="p", tool=tool, call_id=f"{tool}{n}", result=answer,
                                    ts=clock + 0.5))
            clock += 1.0
    assert any(severity == "critical" for _, severity in loop_alerts(trace))


def test_an_unclassified_act_before_each_wait_is_no_poll() -> None:
    """A purge re-triggered, a wait, the same version read: the purge may have done
    something, so the read after it is judged as before."""
    trace: list[Any] = [TurnStart(session="p")]
    n = 0
    for _ in range(12):
        for tool, args, answer in (
            ("trigger_cache_purge", {"zone": "acme.io"}, "Purge request accepted for acme.io"),
            ("wait", {"seconds": 60}, "waited 60s"),
            ("fetch_url", {"url": "https://acme.io/version.txt"}, "build 2024.11.3 (sha 9f1c2e7)"),
        ):
            n += 1
            trace += [ToolCall(session="p", tool=tool, args=args, call_id=f"c{n}"),
                      ToolResult(session="p", tool=tool, call_id=f"c{n}", result=answer)]
    assert ("alternating-tool-cycle", "critical") in loop_alerts(trace)
    # without the purge, the same reads between the same waits are a poll
    polls = [e for e in trace if getattr(e, "tool", "") != "trigger_cache_purge"]
    assert loop_alerts(polls) == []


def test_a_failed_answer_between_waits_ends_the_poll() -> None:
    """A wait for an element that times out each lap, then the page read: something was
    tried and failed, so the same page is no poll's answer."""
    trace: list[Any] = [TurnStart(session="p")]
    n = 0
    for _ in range(10):
        for tool, args, answer, error in (
            ("wait_for_element", {"selector": "text=Order confirmed"}, None, "TimeoutError: 10000ms exceeded"),
            ("fetch_url", {"url": "https://shop.example/checkout"}, "Checkout: 2 items, total 41.90", None),
        ):
            n += 1
            trace += [ToolCall(session="p", tool=tool, args=args, call_id=f"c{n}"),
                      ToolResult(session="p", tool=tool, call_id=f"c{n}", result=answer, error=error)]
    assert any(severity == "critical" for _, severity in loop_alerts(trace))


def test_a_watched_value_with_a_port_in_it_is_still_a_value() -> None:
    """`:443` is a port, not an HTTP failure; a TTL of 450 neither."""
    trace: list[Any] = [TurnStart(session="p")]
    for i in range(10):
        trace += [ToolCall(session="p", tool="get_dns_record", args={"name": "api.acme.io"}, call_id=f"r{i}"),
                  ToolResult(session="p", tool="get_dns_record", call_id=f"r{i}",
                             result="api.acme.io -> 198.51.100.7:443 ttl=450"),
                  ToolCall(session="p", tool="wait", args={"seconds": 60}, call_id=f"w{i}"),
                  ToolResult(session="p", tool="wait", call_id=f"w{i}", result="waited")]
    assert loop_alerts(trace) == []


def test_a_countdown_that_moves_is_news() -> None:
    """"next sync in 162 seconds" is a time to come, not how long a run took."""
    answers = [f"next sync in {180 - 18 * n} seconds" for n in range(10)]
    assert loop_alerts(asked_in_turn("get_sync_schedule", {"p": "nightly"}, answers, every=20.0)) == []


@pytest.mark.parametrize("wait", [False, 0, "0", "soon", None])
def test_a_wait_argument_that_asks_for_no_wait_is_no_long_poll(wait: Any) -> None:
    trace = long_poll([CONSENT] * 8, took=30.0, wait={"wait": wait})
    assert ("repeated-tool-call", "critical") in loop_alerts(trace)


def test_an_elapsed_time_that_moves_is_news() -> None:
    """`squeue`'s elapsed column is what moves while a job runs (a clock-like figure in a
    successful answer is not masked; only a reported duration is)."""
    answers = [f"4418027 RUNNING 1:{2 + n:02d}:17" for n in range(10)]
    trace = asked_in_turn("bash", {"command": "squeue -j 4418027 -h -o '%i %T %M'"}, answers, every=40.0)
    assert loop_alerts(trace) == []


def asked_in_turn(tool: str, args: dict[str, Any], answers: list[str], every: float) -> list[Any]:
    """One call asked once per answer, ``every`` seconds apart, each answered at once."""
    trace: list[Any] = [TurnStart(session="p")]
    for n, answer in enumerate(answers):
        at = 1000.0 + n * every
        trace += [ToolCall(session="p", tool=tool, args=args, call_id=f"c{n}", ts=at),
                  ToolResult(session="p", tool=tool, call_id=f"c{n}", result=answer, ts=at + 0.5)]
    return trace


def test_a_failure_with_one_zero_in_it_is_no_bare_value() -> None:
    for text in ("ERROR: rollout failed\nready replicas: 0", "Traceback (most recent call last):\nKeyError: 0"):
        assert not says_bare_value(text, len(text))


def test_a_queue_watched_at_the_pace_asked_is_watched_after_it_drains() -> None:
    """A queue's status read every 30 s as asked, through a tool whose name gets a queue
    (`swift_get_queue_status`: a look, though "queue" is a verb as often), answering the
    same idle queue for the last minutes of the watch: watched, not a loop."""
    idle = {"queue": "FIN_OUT", "depth": 0, "state": "IDLE"}
    trace = status_poll([idle] * 8, 30.0, tool="swift_get_queue_status")
    trace.insert(1, Text(session="p", role="user", text="Watch the FIN queue every 30 seconds.", ts=999.0))
    assert loop_alerts(trace) == []
    assert ("repeated-tool-call", "critical") in loop_alerts(status_poll([idle] * 8, 2.0, tool="swift_get_queue_status"))


def test_a_long_round_robin_poll_between_waits_is_no_long_loop() -> None:
    """Eight transcodes polled in turn for twelve rounds, a wait between rounds, several
    still "queued": each poll's answer is a step of its own, not a replay."""
    with_long_loop = QUIET + "[signals.alternating-tool-cycle]\nenabled = false\n"
    assert ("long-loop", "critical") not in loop_alerts(round_robin(8, 12, "queued", wait=True),
                                                        with_long_loop)
    # the same rounds with no wait between them are a replay
    assert ("long-loop", "critical") in loop_alerts(round_robin(8, 12, "queued", wait=False),
                                                    with_long_loop)


@pytest.mark.parametrize(("tool", "no_act"), [
    ("ais_position", True), ("weather_station", True), ("jira_issue", True), ("dnsRecord", True),
    ("trigger_cache_purge", False), ("camera_expose", False), ("stagehand_act", False),
    ("SubmitOrder", False), ("bacnet.write_property", False), ("runJob", False),
    # a look at the verb's place, whatever nouns follow that are verbs as often
    ("swift_get_queue_status", True), ("get_order", True), ("list_build_runs", True),
    ("mcp__bank__get_queue_status", True), ("describe_build", True),
    # ...but not a look followed by a verb that only writes, nor an act first
    ("get_and_delete_item", False), ("search_and_replace", False), ("queue_job", False),
    ("mcp__x__queue_job", False), ("start_run", False), ("run_query", False),
    ("start_list_jobs", False), ("stripe_get_and_pay_invoice", False),
    ("browser_find_and_click", False), ("shop_search_and_add_to_cart", False), ("get_then_run", False),
])
def test_a_tool_name_with_no_verb_of_an_act_reads(tool: str, no_act: bool) -> None:
    assert names_no_act(tool) is no_act


@pytest.mark.parametrize(("tool", "write"), [
    ("bacnet_write_property", True), ("PushRates", True), ("jira_create_issue", True),
    ("book_reservation", True), ("hubspot.updateContact", True), ("slack__post_message", True),
    ("github_merge_pull_request", True), ("write_log", True), ("update_status", True),
    ("set_state", True), ("send_report", True), ("delete_logs", True),
    ("change_sonar_issue_status", True), ("rerun_workflow", True), ("revert_commit", True),
    ("restore_snapshot", True), ("Mark_entry_read", True), ("gmail_mark_as_spam", True),
    ("futures_mark_price", False), ("mark_price_klines", False),
    ("order_status", False), ("post_list", False), ("transfer_history", False),
    ("bacnet_read_property", False), ("ais_position", False), ("trigger_cache_purge", False),
    ("stagehand_act", False), ("runJob", False),
    # a verb that is as often a noun, last or beside a look
    ("address_book", False), ("team_schedule", False), ("blog_post", False), ("mouse_move", False),
    ("battery_charge", False), ("package_lock", False), ("add", False), ("merge_request_diff", False),
    ("place_autocomplete", False), ("chess_best_move", False),
    # the agent's own bookkeeping
    ("TodoWrite", False), ("todo_write", False), ("update_plan", False),
    # a write done in bulk
    ("sheets_batch_update", True), ("BatchWriteItem", True), ("bulk_create_users", True),
    ("batch_get", False), ("batchGet", False), ("batch", False),
    ("poll_bulk_update_status", False), ("sheets_batch_update_progress", False),
])
def test_a_tool_nobody_classified_is_a_write_by_the_verbs_of_its_name(tool: str, write: bool) -> None:
    assert names_write(tool) is write


@pytest.mark.parametrize("tool", ["github_merge_pull_request", "crm_upsert_contact", "iam_revoke_key"])
def test_a_tool_named_as_a_write_is_never_known_to_only_look(tool: str) -> None:
    facts = plain_facts(tool, None)
    assert facts.write and not facts.read


def setback_sweep(write_tool: str, same_device: bool = False) -> list[Any]:
    """Twelve VAV boxes: each one's mode read (all answer "Auto"), then set to unoccupied
    through a namespaced BACnet write acknowledged "SimpleACK"."""
    trace: list[Any] = [TurnStart(session="p")]
    for n in range(12):
        device = 30301 if same_device else 30301 + n
        obj = {"device": device, "object": "multi-state-value,3", "property": "present-value"}
        trace += [
            ToolCall(session="p", tool="bacnet_read_property", args=obj, call_id=f"r{n}"),
            ToolResult(session="p", tool="bacnet_read_property", call_id=f"r{n}",
                       result={"value": 1, "text": "Auto"}),
            ToolCall(session="p", tool=write_tool, args={**obj, "value": 2, "priority": 8},
                     call_id=f"w{n}"),
            ToolResult(session="p", tool=write_tool, call_id=f"w{n}", result="SimpleACK"),
        ]
    return trace


def test_a_namespaced_writes_acknowledgements_are_news_in_a_sweep() -> None:
    assert loop_alerts(setback_sweep("bacnet_write_property")) == []


def mark_read_sweep(distinct: bool) -> list[Any]:
    """An automation marks eighteen feed entries read, one call each, through an HTTP
    node that answers every one the same ``204 No Content``."""
    trace: list[Any] = [TurnStart(session="p")]
    ack = '{"statusCode": 204, "statusMessage": "No Content", "body": ""}'
    for n in range(18):
        entry = 91844 + (7 * n if distinct else 0)
        trace += [
            ToolCall(session="p", tool="Mark_entry_read", call_id=f"m{n}",
                     args={"entry_ids": [entry], "status": "read"}),
            ToolResult(session="p", tool="Mark_entry_read", call_id=f"m{n}", result=ack),
        ]
    return trace


def test_entries_marked_read_one_by_one_are_writes_not_a_stall() -> None:
    """`mark` changes what is stored: each entry marked is a write whose acknowledgement
    is news (read as a look, the eighteen identical answers were halted at the eighth)."""
    assert loop_alerts(mark_read_sweep(distinct=True)) == []


def test_one_entry_marked_read_again_and_again_is_still_a_loop() -> None:
    assert loop_alerts(mark_read_sweep(distinct=False)) == [("repeated-tool-call", "critical")]


def test_the_same_namespaced_write_acknowledged_again_is_still_a_loop() -> None:
    """One box read and set again and again: the same write, the same answer."""
    assert ("result-stall", "critical") in loop_alerts(
        setback_sweep("bacnet_write_property", same_device=True),
        QUIET + "[signals.repeated-tool-call]\nenabled = false\n"
        "[signals.alternating-tool-cycle]\nenabled = false\n",
    )


def test_positions_watched_between_sleeps_by_an_unclassified_noun_tool_are_a_poll() -> None:
    """Five vessels' AIS positions every fifteen minutes, `sleep 900` between rounds, ships
    at anchor answering alike: `ais_position` names no act, so it is read as a look."""
    trace: list[Any] = [TurnStart(session="p")]
    n = 0
    for _ in range(10):
        for imo in ("9839179", "9454448", "9778791", "9832729", "9708863"):
            n += 1
            trace += [ToolCall(session="p", tool="ais_position", args={"imo": imo}, call_id=f"c{n}"),
                      ToolResult(session="p", tool="ais_position", call_id=f"c{n}",
                                 result={"imo": imo, "status": "at anchor", "lat": 39.41, "lon": -0.25})]
        n += 1
        trace += [ToolCall(session="p", tool="sleep", args={"seconds": 900}, call_id=f"c{n}"),
                  ToolResult(session="p", tool="sleep", call_id=f"c{n}", result="ok")]
    assert loop_alerts(trace) == []


def job_polls(answer: Any, rounds: int = 14, wrap: bool = True) -> list[Any]:
    """A job polled with `sleep N; ray job status` through a shell, the sleep varied;
    ``wrap``: the runtime's ``{"output": ...}`` around the command's output."""
    trace: list[Any] = [TurnStart(session="p")]
    clock = 1_000.0
    for n in range(rounds):
        command = f"sleep {(120, 180, 300)[n % 3]}; ray job status raysubmit_Xq4fK2bN8pLzT1vA"
        trace += [ToolCall(session="p", tool="Bash", args={"cmd": command}, call_id=f"c{n}", ts=clock),
                  ToolResult(session="p", tool="Bash", call_id=f"c{n}", ts=clock + 121,
                             result={"output": answer} if wrap else answer)]
        clock += 130
    return trace


def test_a_job_polled_after_it_failed_through_sleeps_of_its_own_is_a_loop() -> None:
    """Each poll waits (`sleep 120; ray job status`) and reads: the answer that says the
    job FAILED, again and again, is a loop however long each sleep; one that says it is
    RUNNING is a poll."""
    failed = "Status for job 'raysubmit_Xq4fK2bN8pLzT1vA': FAILED\nJob entrypoint command failed"
    assert any(severity == "critical" for _, severity in loop_alerts(job_polls(failed)))
    running = "Status for job 'raysubmit_Xq4fK2bN8pLzT1vA': RUNNING"
    assert loop_alerts(job_polls(running)) == []
    ci = json.dumps({"status": "in_progress", "jobs": [
        {"name": "lint", "status": "completed", "conclusion": "success"},
        {"name": "test", "status": "in_progress", "conclusion": ""}]})
    assert alerts(job_polls(ci, wrap=False), QUIET.replace('"near-duplicate-calls"]', '"near-duplicate-calls", '
                                               '"repeated-tool-name"]')) == []


def test_a_server_polled_with_sleeps_of_its_own_while_it_starts_is_no_failure_loop() -> None:
    """`sleep 3 && curl -sf localhost:8080/health` failing with "connection refused" until
    the server is up: a read after a wait of its own fails as a wait does."""
    trace: list[Any] = [TurnStart(session="p")]
    for n in range(9):
        trace += [ToolCall(session="p", tool="bash", args={"command": "sleep 3 && curl -sf localhost:8080/health"},
                           call_id=f"c{n}"),
                  ToolResult(session="p", tool="bash", call_id=f"c{n}",
                             error="curl: (7) Failed to connect to localhost port 8080: Connection refused")]
    trace += [ToolCall(session="p", tool="bash", args={"command": "sleep 3 && curl -sf localhost:8080/health"},
                       call_id="ok"),
              ToolResult(session="p", tool="bash", call_id="ok", result='{"status": "ok"}')]
    assert [a for a in alerts(trace) if a.severity == "critical"] == []


def test_finished_checks_asked_again_beside_one_still_running_are_part_of_the_wait() -> None:
    """Three CI checks polled one by one every 90 seconds: lint and unit "completed" early,
    e2e "in_progress" for eight rounds. Re-asking the finished ones beside the running one
    is part of waiting for it; once nothing is under way, asking them again is a loop."""
    def rounds(e2e_status: str) -> list[Any]:
        trace: list[Any] = [TurnStart(session="p")]
        clock = 1000.0
        n = 0
        for _ in range(10):
            for name, status in (("lint", "completed"), ("unit", "completed"), ("e2e", e2e_status)):
                n += 1
                answer = {"name": name, "status": status,
                          "conclusion": "success" if status == "completed" else None}
                trace += [ToolCall(session="p", tool="get_check_run", args={"pr": 4133, "name": name},
                                   call_id=f"c{n}", ts=clock),
                          ToolResult(session="p", tool="get_check_run", call_id=f"c{n}", result=answer,
                                     ts=clock + 0.4)]
                clock += 1
            clock += 90
        return trace

    assert [a for a in loop_alerts(rounds("in_progress")) if a[1] == "critical"] == []
    assert [a for a in loop_alerts(rounds("completed")) if a[1] == "critical"] != []


@pytest.mark.parametrize(("tool", "wait"), [
    ("waitSeconds", True), ("WaitForJob", True), ("sleepMs", True), ("wait", True),
    ("mcp__ops__waitForJob", True), ("ops.waitSeconds", True), ("k8s/waitForRollout", True),
    ("waitlist_add", False), ("get_wait_time", False), ("awaitResult", False),
])
def test_a_tool_named_to_wait_in_any_style_waits(tool: str, wait: bool) -> None:
    from streamguard.signals.facts import DEFAULT_WAIT_TOOLS, ToolGlobs

    assert ToolGlobs(DEFAULT_WAIT_TOOLS, styled=True)(tool) is wait
    assert not ToolGlobs([], styled=True)(tool)  # the list is policy


def test_a_status_polled_between_calls_of_a_wait_tool_in_camel_case_is_a_poll() -> None:
    """`waitSeconds(120)` between reads of a payment batch still pending: deliberate waits,
    so the same "PDNG" again is what waiting looks like."""
    pending = {"groupStatus": "PDNG", "additionalInfo": "Batch queued for clearing"}
    trace: list[Any] = []
    for n in range(10):
        trace += [ToolCall(session="p", tool="getPaymentStatusReport", args={"messageId": "PAY-10"},
                           call_id=f"s{n}", ts=n * 130.0),
                  ToolResult(session="p", tool="getPaymentStatusReport", call_id=f"s{n}", result=pending,
                             ts=n * 130.0 + 1),
                  ToolCall(session="p", tool="waitSeconds", args={"seconds": 120}, call_id=f"w{n}", ts=n * 130.0 + 2),
                  ToolResult(session="p", tool="waitSeconds", call_id=f"w{n}", result=f"waited {120 + n}s",
                             ts=n * 130.0 + 122)]
    assert [a for a in loop_alerts(trace) if a[1] == "critical"] == []


def test_a_command_that_only_sleeps_is_a_wait_whatever_tool_runs_it() -> None:
    """A tool named after a CLI (`kubectl`) given `sleep 120` between metric reads after a
    rollback: the reads are a poll between deliberate waits, not a cycle (before, three
    laps of `aws` → `kubectl` were halted as a loop)."""
    from streamguard.signals.facts import sleep_facts

    assert sleep_facts({"command": "sleep 120"}) is not None
    assert sleep_facts({"command": "sleep 120 && kubectl get pods"}) is None
    assert sleep_facts({"command": "kubectl get pods"}) is None
    trace: list[Any] = [TurnStart(session="p")]
    clock = 1_000.0
    for n, rate in enumerate(("4.1", "1.2", "0.3", "0.08", "0.05", "0.04")):
        trace += [
            ToolCall(session="p", tool="aws", call_id=f"m{n}", ts=clock,
                     args={"command": "aws cloudwatch get-metric-data --region eu-west-1 --metric 5xx"}),
            ToolResult(session="p", tool="aws", call_id=f"m{n}", result=f"{rate}\n", ts=clock + 2),
            ToolCall(session="p", tool="kubectl", call_id=f"s{n}", ts=clock + 3,
                     args={"command": "sleep 120", "context": "prod-eu-1"}),
            ToolResult(session="p", tool="kubectl", call_id=f"s{n}", result="", ts=clock + 123),
        ]
        clock += 125
    assert loop_alerts(trace) == []
    # the same laps with a read instead of the sleep, the rate stuck, are a loop
    busy = [ToolCall(session="p", tool=e.tool, call_id=e.call_id, ts=e.ts, args={"command": "kubectl get pods"})
            if isinstance(e, ToolCall) and e.tool == "kubectl" else
            ToolResult(session="p", tool=e.tool, call_id=e.call_id, ts=e.ts,
                       result="api-0 Running" if e.tool == "kubectl" else "4.1\n")
            if isinstance(e, ToolResult) else e for e in trace]
    assert ("alternating-tool-cycle", "critical") in loop_alerts(busy)
def test_an_environments_action_that_only_waits_is_a_wait() -> None:
    """ScienceWorld lets time pass with `wait1`: water heated on a stove, its temperature read
    after each wait (13, 21, 31... degrees: the numbers are the news) was a two-call cycle
    halted at its third lap. The wait is a wait; the same laps with a look instead of the
    wait, the temperature stuck, are a loop."""
    from streamguard.signals.facts import sleep_facts

    for action in ("wait", "wait1", "wait 10", " wait5 "):
        assert sleep_facts({"action": action}) is not None, action
        assert sleep_facts({"command": action}) is not None, action
    for other in ("wait for the kettle", "waiter", "look", "wait1; look"):
        assert sleep_facts({"action": other}) is None, other
    read = "use thermometer in inventory on substance in metal pot"
    trace: list[Any] = [TurnStart(session="p")]
    for n, degrees in enumerate((13, 21, 31, 42, 54, 67, 80, 94)):
        trace += [
            ToolCall(session="p", tool="step_env", call_id=f"r{n}", args={"action": read}),
            ToolResult(session="p", tool="step_env", call_id=f"r{n}",
                       result=f"the thermometer measures a temperature of {degrees} degrees celsius"),
            ToolCall(session="p", tool="step_env", call_id=f"w{n}", args={"action": "wait1"}),
            ToolResult(session="p", tool="step_env", call_id=f"w{n}", result="You decide to wait for 1 iterations."),
        ]
    assert [a for a in loop_alerts(trace) if a[1] == "critical"] == []
    stuck = [ToolCall(session="p", tool="step_env", call_id=e.call_id, args={"action": "look at stove"})
             if isinstance(e, ToolCall) and e.args == {"action": "wait1"} else
             ToolResult(session="p", tool="step_env", call_id=e.call_id,
                        result="the thermometer measures a temperature of 13 degrees celsius")
             if isinstance(e, ToolResult) and e.call_id.startswith("r") else e for e in trace]
    assert ("alternating-tool-cycle", "critical") in loop_alerts(stuck)


def watch_between_sleeps(command: str, answer: str, laps: int = 6) -> list[Any]:
    """A job started in the background, then ``sleep N`` and one read of it, lap after lap."""
    trace: list[Any] = [TurnStart(session="p")]
    clock, n = 1_000.0, 0

    def bash(cmd: str, out: str, took: float) -> None:
        nonlocal clock, n
        n += 1
        trace.append(ToolCall(session="p", tool="bash", args={"command": cmd}, call_id=f"c{n}", ts=clock))
        clock += took
        trace.append(ToolResult(session="p", tool="bash", call_id=f"c{n}", result=out, ts=clock))
        clock += 2.0

    bash("nohup python train.py > train.log 2>&1 &", "", 0.1)
    for lap in range(laps):
        bash(f"sleep {(300, 240, 360)[lap % 3]}", "", 300.0)
        bash(command, answer, 0.2)
    return trace


@pytest.mark.parametrize(("command", "answer"), [
    ("tail -n 2 train.log", "Epoch 3/10 finished: loss=0.412 val_loss=0.455\nEpoch 4/10 step 200/1800\n"),
    ("ls results/DONE 2>/dev/null", ""),
    ("cat export.status", "export not finished yet\n"),
    ("sacct -j 8812 --format=JobID,State", "8812_0 COMPLETED\n8812_1 RUNNING\n8812_2 PENDING\n"),
])
def test_a_read_between_sleeps_is_no_run_of_repeats(command: str, answer: str) -> None:
    """A slow epoch's log read after each sleep answers the same, words of an end in it
    ("finished", "COMPLETED" for the tasks already done) and all: a sleep between two
    reads ends the run of the read, so the same answer between sleeps is waiting, and
    the repeat rules never see it (a rule that let sleeps through was tried and withdrawn:
    it halted these at their fourth read)."""
    got = loop_alerts(watch_between_sleeps(command, answer))
    assert ("repeated-tool-call", "critical") not in got
    # the same reads with nothing between them are a busy loop, as before
    busy: list[Any] = [TurnStart(session="p")]
    for n in range(6):
        busy += [ToolCall(session="p", tool="bash", args={"command": command}, call_id=f"b{n}"),
                 ToolResult(session="p", tool="bash", call_id=f"b{n}", result=answer)]
    assert ("repeated-tool-call", "critical") in loop_alerts(busy)



def test_a_count_of_work_under_way_watched_each_minute_is_a_poll() -> None:
    """A quiz watched each minute until its last student submits: the same counts again
    while one is still sitting it is waiting; the same counts with none left is a loop."""
    sitting = {"quiz_id": 9, "submissions": {"complete": 62, "in_progress": 1, "not_started": 1}}
    over = {"quiz_id": 9, "submissions": {"complete": 63, "in_progress": 0, "not_started": 1}}
    assert loop_alerts(status_poll([sitting] * 8, gap=58.0)) == []
    assert ("repeated-tool-call", "critical") in loop_alerts(status_poll([over] * 8, gap=58.0))


LOST = {"output": "5 packets transmitted, 0 received, 100% packet loss, time 4036ms", "exit_code": 1}
BACK = {"output": "5 packets transmitted, 5 received, 0% packet loss, time 4004ms", "exit_code": 0}


def restart_then_probes(restart: ToolCall | None, answers: list[Any], gap: float = 46.0,
                        failed: bool = False, start: float = 1_000.0) -> list[Any]:
    """A restart (or nothing), then a ping asked again every ``gap`` seconds."""
    trace: list[Any] = [TurnStart(session="r")]
    clock = start
    if restart is not None:
        trace += [restart, ToolResult(session="r", tool=restart.tool, call_id="boot",
                                      result={"exit_status": 0, "output": "Reload scheduled"}, ts=clock + 1)]
        clock += 60.0
    for n, answer in enumerate(answers):
        trace.append(ToolCall(session="r", tool="ping", args={"target": "ar01"}, call_id=f"p{n}", ts=clock))
        clock += 5.0
        trace.append(ToolResult(session="r", tool="ping", call_id=f"p{n}", ts=clock,
                                result=None if failed else answer,
                                error="100% packet loss" if failed else None))
        clock += gap
    return trace


RELOAD = ToolCall(session="r", tool="ssh_exec", args={"host": "ar01", "command": "reload"}, call_id="boot",
                  ts=1_000.0)


def test_a_probe_after_a_restart_waits_for_what_was_restarted() -> None:
    """A router reloaded for an upgrade answers no ping for minutes: the same loss again,
    after pauses, is waiting for it to come back; with no restart before, it is a loop."""
    assert loop_alerts(restart_then_probes(RELOAD, [LOST] * 12 + [BACK])) == []
    assert ("repeated-tool-call", "critical") in loop_alerts(restart_then_probes(None, [LOST] * 12))
    # a tool named so restarts as well; so does a service manager through a shell
    reboot = ToolCall(session="r", tool="reboot_device", args={"device": "ar01"}, call_id="boot", ts=1_000.0)
    assert loop_alerts(restart_then_probes(reboot, [LOST] * 12 + [BACK])) == []


def test_a_failing_probe_after_a_restart_is_a_wait_not_a_failure_loop() -> None:
    restarted = restart_then_probes(RELOAD, [None] * 10, failed=True)
    assert [a for a in alerts(restarted, "") if a.severity == "critical"] == []
    alone = restart_then_probes(None, [None] * 10, failed=True)
    assert [a for a in alerts(alone, "") if a.severity == "critical"] != []
    # an upgrade that reloads the box (IOS-XE's install mode activating an image)
    upgrade = ToolCall(session="r", tool="ssh_exec", call_id="boot", ts=1_000.0, args={
        "host": "ar01", "command": "install add file flash:cat9k_iosxe.17.12.04.SPA.bin activate commit"})
    upgraded = restart_then_probes(upgrade, [None] * 10, failed=True)
    assert [a for a in alerts(upgraded, "") if a.severity == "critical"] == []


def test_a_probe_that_never_comes_back_trips_after_restart_seconds() -> None:
    # a ping every 46 s for 40 minutes: waiting for 20, then the same loss is a loop
    assert ("repeated-tool-call", "critical") in loop_alerts(restart_then_probes(RELOAD, [LOST] * 50))
    short = QUIET + "[waits]\nrestart_seconds = 300\n"
    assert ("repeated-tool-call", "critical") in loop_alerts(restart_then_probes(RELOAD, [LOST] * 12), short)
    off = QUIET + "[waits]\nrestart_seconds = 0\n"
    assert ("repeated-tool-call", "critical") in loop_alerts(restart_then_probes(RELOAD, [LOST] * 12), off)


def test_the_restart_itself_repeated_is_still_a_loop() -> None:
    """A shell's restart is a read to the command runner (it writes no file): the restart
    asked again after pauses is no probe of itself."""
    trace: list[Any] = [TurnStart(session="r")]
    for n in range(8):
        trace += [ToolCall(session="r", tool="bash", args={"command": "sudo systemctl restart nginx"},
                           call_id=f"b{n}", ts=1_000.0 + 30 * n),
                  ToolResult(session="r", tool="bash", call_id=f"b{n}", ts=1_002.0 + 30 * n,
                             result="nginx reloaded its configuration")]
    assert ("repeated-tool-call", "critical") in loop_alerts(trace)


def test_a_restart_without_any_time_excuses_nothing() -> None:
    """With no event time (nor a record's), no restart is timed: probes paused by the
    user's messages are judged as before."""
    trace: list[Any] = [TurnStart(session="r"), RELOAD.__class__(**{**{f: getattr(RELOAD, f) for f in
                                                                      RELOAD.__struct_fields__}, "ts": None}),
                        ToolResult(session="r", tool="ssh_exec", call_id="boot", result="Reload scheduled")]
    for n in range(10):
        trace += [Text(session="r", role="user", text="Is it back?"),
                  ToolCall(session="r", tool="ping", args={"target": "ar01"}, call_id=f"p{n}"),
                  ToolResult(session="r", tool="ping", call_id=f"p{n}", result=LOST)]
    assert ("repeated-tool-call", "critical") in loop_alerts(trace)


def test_a_restart_excuses_only_probes_that_say_no_end() -> None:
    """A job's "failed" polled after a restart is still a loop, and so is a file not found
    read again: a restart explains a probe going unanswered, not an answer of an end."""
    for failed in ({"job_id": "j-9", "status": "failed"},
                   '{"job_id": "j-9", "status": "failed", "reason": "connection timed out"}'):
        trace = restart_then_probes(RELOAD, [failed] * 8, gap=30.0)
        assert ("repeated-tool-call", "critical") in loop_alerts(trace)
    missing: list[Any] = restart_then_probes(RELOAD, [], gap=30.0)
    for n in range(8):
        missing += [ToolCall(session="r", tool="read_file", args={"path": "/etc/app.yml"}, call_id=f"f{n}",
                             ts=1_100.0 + 30 * n),
                    ToolResult(session="r", tool="read_file", call_id=f"f{n}", ts=1_101.0 + 30 * n,
                               error="ENOENT: no such file or directory, open '/etc/app.yml'")]
    assert [a for a in alerts(missing, "") if a.severity == "critical"] != []


def test_a_restart_that_failed_or_is_dated_ahead_starts_no_wait() -> None:
    refused = restart_then_probes(RELOAD, [LOST] * 12)
    refused[2] = ToolResult(session="r", tool="ssh_exec", call_id="boot", ts=1_001.0,
                            error="% Authorization failed: reload not permitted")
    assert ("repeated-tool-call", "critical") in loop_alerts(refused)
    ahead = restart_then_probes(None, [LOST] * 12)
    ahead[1:1] = [ToolCall(session="r", tool="ssh_exec", args={"host": "ar01", "command": "reload"},
                           call_id="boot", ts=90_000.0),
                  ToolResult(session="r", tool="ssh_exec", call_id="boot", ts=90_001.0, result="Reload scheduled")]
    assert ("repeated-tool-call", "critical") in loop_alerts(ahead)


def test_the_last_restart_is_session_state_and_survives_a_snapshot() -> None:
    engine = Engine(parse_policy_set(QUIET))
    for event in restart_then_probes(RELOAD, [LOST] * 2):
        engine.process(event)
    restarted = engine.sessions["r"].restarted
    assert restarted is not None and restarted[0] == 1_001.0  # when it went through
    data = engine.snapshot("r")
    assert data is not None
    assert Engine(parse_policy_set(QUIET)).restore("r", data).restarted == restarted


@pytest.mark.parametrize(("tool", "restarts"), [
    ("reboot_device", True), ("restart_service", True), ("RebootInstances", True),
    ("power_cycle_outlet", True), ("mcp__noc__reboot", True),
    ("list_restarts", False), ("reloaded_items", False), ("prestart_hook", False), ("ping", False),
])
def test_what_names_a_restart(tool: str, restarts: bool) -> None:
    assert names_restart(tool) is restarts


@pytest.mark.parametrize(("command", "restarts"), [
    ("reload", True), ("reload in 1 reason MW-12", True), ("sudo reboot", True),
    ("systemctl restart nginx", True), ("cd /srv && sudo systemctl reload nginx", True),
    ("docker compose restart web", True), ("kubectl rollout restart deploy/web", True),
    ("nginx -s reload", True), ("shutdown -r now", True),
    ("sudo -u root reboot", True), ("cd /srv\nreboot", True), ("ssh admin@host reboot", True),
    ("kubectl -n prod rollout restart deploy/web", True), ("request system reboot", True),
    ("execute reboot", True), ("/system reboot", True), ("request restart system", True),
    ("aws ec2 reboot-instances --instance-ids i-1", True), ("az vm restart -g rg -n vm", True),
    # a network OS upgrade that reloads the box
    ("install add file flash:cat9k_iosxe.17.12.04.SPA.bin activate commit prompt-level none", True),
    ("install activate", True), ("install all nxos bootflash:nxos64-cs.10.3.4a.M.bin", True),
    ("request system software add /var/tmp/junos-21.4R3.tgz no-validate reboot", True),
    ("install add file flash:x.bin", False), ("show install summary", False),
    ("  install all nxos bootflash:x.bin", True), ('ssh sw1 "install all nxos bootflash:x.bin"', True),
    ("npm install all-contributors-cli", False), ("make install all", False),
    ("request system software add /var/tmp/junos.tgz", False), ("pip install allure", False),
    ('git commit -m "restart"', False), ("grep -r reload src/", False), ("echo restart", False),
    ("kubectl rollout status deploy/web", False), ("show version", False),
    # the word as an option, a property read, a reload cancelled
    ("docker run -d --restart=always nginx", False), ("docker update --restart=no web", False),
    ("systemctl show -p Restart,NRestarts nginx", False), ("pm2 start app.js --restart-delay=3000", False),
    ("docker events --filter event=restart", False), ("reload cancel", False),
])
def test_what_commands_a_restart(command: str, restarts: bool) -> None:
    assert commands_restart(command) is restarts


LISTING = {"applications": [
    {"application_id": "APP-1", "applicant": "L. Foster", "status": "screening_complete"},
    {"application_id": "APP-2", "applicant": "W. Cho", "status": "withdrawn"}], "count": 2}


def test_a_listing_watched_every_few_minutes_is_a_poll_whatever_its_items_say() -> None:
    """An application queue re-read every three minutes until an application comes: its
    items' statuses ("screening_complete") are theirs, not the listing's end."""
    assert loop_alerts(status_poll([LISTING] * 8, gap=175.0, tool="list_applications")) == []
    # asked as fast as the agent can ask, it is a loop; and so is a listing whose own
    # status, or a top-level word, says it ended
    assert ("repeated-tool-call", "critical") in loop_alerts(
        status_poll([LISTING] * 8, gap=3.0, tool="list_applications"))
    for ended in ({**LISTING, "status": "closed"}, {**LISTING, "message": "sync finished"},
                  {**LISTING, "completed": True}):
        assert ("repeated-tool-call", "critical") in loop_alerts(
            status_poll([ended] * 8, gap=175.0, tool="list_applications"))


@pytest.mark.parametrize("ended", [
    {"total_count": 1, "workflow_runs": [{"status": "completed", "conclusion": "success"}]},  # one item
    [{"run_id": 7, "state": "completed"}],
    {"runs": [{"status": "completed"}, {"status": "failed"}]},  # every item says it ended
    {"job": {"status": "done"}, "artifacts": [{"name": "a"}, {"name": "b"}]},  # a status beside the list
    '[{"run_id": 7, "state": "completed"}]',
])
def test_a_listing_that_says_its_work_ended_is_no_value_watched(ended: Any) -> None:
    assert ("repeated-tool-call", "critical") in loop_alerts(
        status_poll([ended] * 8, gap=175.0, tool="list_runs"))


def test_a_listing_with_keys_that_are_no_text_is_read_without_raising() -> None:
    odd = {7: "seven", "items": [{"id": 1, "status": "completed"}, {"id": 2}]}
    # (a key that is no text makes it no listing: judged as any answer of an end)
    assert ("repeated-tool-call", "critical") in loop_alerts(status_poll([odd] * 6, gap=175.0, tool="list_items"))


def test_a_shell_probe_failing_while_a_service_restarts_is_a_wait() -> None:
    """`curl` through a shell, failed by its exit status, its output saying the connection
    was refused: while the service restarted comes back, a wait; a 404 is no such wait."""
    def trace(output: str) -> list[Any]:
        events: list[Any] = [TurnStart(session="r"),
                             ToolCall(session="r", tool="bash", args={"command": "sudo systemctl restart api"},
                                      call_id="boot", ts=1_000.0),
                             ToolResult(session="r", tool="bash", call_id="boot", ts=1_002.0, result="")]
        for n in range(10):
            events += [ToolCall(session="r", tool="bash", args={"command": "curl -sf http://127.0.0.1:8080/health"},
                                call_id=f"c{n}", ts=1_040.0 + 40 * n),
                       ToolResult(session="r", tool="bash", call_id=f"c{n}", ts=1_041.0 + 40 * n,
                                  result=output + "\nexit code: 7")]
        return events
    assert [a for a in alerts(trace("curl: (7) Failed to connect to 127.0.0.1 port 8080: Connection refused"), "")
            if a.severity == "critical"] == []
    assert [a for a in alerts(trace("curl: (22) The requested URL returned error: 404"), "")
            if a.severity == "critical"] != []


WATCH_FRAGMENTS = [
    "keep an eye on", "Keep", "let me know", "Let Me\tKnow", "tell me", "text me", "ping me",
    "when", "once", "the moment", "as soon as", "if anything fires", "you", "it's done", "was",
    "watch", "watching the", "monitor", "follow it until", "wait for", "don't", "no need to",
    "the", "queue", "\n", ".", "\u212aeep an eye on", "ME", "\u00a0", "can you", "could you",
    "out", "checking", "please", "and", "to", "just", ",", "I'm", "myself", "—", "-", '"',
    "DM me", "dm Me", "slack me", "(Dora)", "(", ")", "#incidents", "for the next", "half hour", "few",
]


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.lists(st.sampled_from(WATCH_FRAGMENTS), max_size=10).map(" ".join), st.text(max_size=120)))
def test_the_words_read_first_never_hide_a_watch(message: str) -> None:
    # asks_watch looks for its words in C before it tries the pattern: it must answer as
    # the reading alone would, whatever the case, the spaces or the letters around them.
    from streamguard.signals.facts import asked_watch_in

    assert asks_watch(message) is asked_watch_in(message)


def test_a_page_reloaded_between_the_browsers_own_waits_is_a_watch() -> None:
    """Playwright MCP's `browser_wait_for {"time": 300}` is a wait (its name says so):
    a sold-out event page reloaded every five minutes, as its user asked, is polled,
    not cycled; the same two calls with no wait between trip."""
    page = "- heading \"Japanese Breakfast\"\n- text: Sold out. No tickets available right now."

    def watch(waited: bool) -> list[tuple[str, str]]:
        trace: list[Any] = [TurnStart(session="s", ts=1000.0), Text(
            session="s", role="user", ts=1000.0,
            text="It's sold out. Keep checking the event page every 5 minutes and grab 2 tickets.")]
        at = 1001.0
        for _ in range(8):
            trace += [ToolCall(session="s", tool="browser_navigate", args={"url": "https://tm.example/e/1"}, ts=at),
                      ToolResult(session="s", tool="browser_navigate", result=page, ts=at + 1)]
            second = ("browser_wait_for", {"time": 300}, "Waited for 300 seconds") if waited else (
                "browser_snapshot", {}, page)
            trace += [ToolCall(session="s", tool=second[0], args=second[1], ts=at + 2),
                      ToolResult(session="s", tool=second[0], result=second[2], ts=at + (302 if waited else 3))]
            at += 303 if waited else 4
        return loop_alerts(trace)

    assert watch(waited=True) == []
    assert watch(waited=False)


ENVELOPE_SENT = {
    "envelopeId": "8f3c", "status": "sent",
    "recipients": {"signers": [{"name": "Dana", "status": "completed"}, {"name": "Marcus", "status": "sent"}]},
}


def test_a_whole_whose_own_status_waits_is_watched_whatever_its_parts_say() -> None:
    """An envelope "sent" while one of its two signers has "completed": checked every ten
    minutes, it is a value being watched, not an end polled again. A whole whose own
    status is over ("completed"), or no waiting word ("closed"), is judged as before."""
    assert loop_alerts(status_poll([ENVELOPE_SENT] * 8, gap=600.0, tool="docusign_get_envelope")) == []
    assert ("repeated-tool-call", "critical") in loop_alerts(
        status_poll([ENVELOPE_SENT] * 8, gap=3.0, tool="docusign_get_envelope"))
    for status in ("completed", "closed", "active", "open", "delivered"):
        ended = {**ENVELOPE_SENT, "status": status}
        assert ("repeated-tool-call", "critical") in loop_alerts(
            status_poll([ended] * 8, gap=600.0, tool="docusign_get_envelope")), status
    # nor when the whole says an end beside its waiting status
    concluded = {**ENVELOPE_SENT, "conclusion": "success"}
    assert ("repeated-tool-call", "critical") in loop_alerts(
        status_poll([concluded] * 8, gap=600.0, tool="docusign_get_envelope"))


@pytest.mark.parametrize("status", sorted(__import__("streamguard.signals.base", fromlist=["_AWAITING"])._AWAITING))
def test_every_waiting_status_of_a_whole_governs_its_parts(status: str) -> None:
    waiting = {**ENVELOPE_SENT, "status": status}
    assert loop_alerts(status_poll([waiting] * 8, gap=600.0, tool="docusign_get_envelope")) == [], status


def watched_reads(tool: str, args: dict[str, Any], answer: Any, request: str | None, *,
                  calls: int, answered_after: float, gap: float) -> list[Any]:
    """The same read ``calls`` times, each answered ``answered_after`` seconds after it is
    sent and the next sent ``gap`` seconds after that; ``request``, the user's message
    first (None: none)."""
    trace: list[Any] = [TurnStart(session="w", ts=1_000.0)]
    if request:
        trace.append(Text(session="w", role="user", text=request, ts=1_000.0))
    at = 1_001.0
    for n in range(calls):
        trace += [ToolCall(session="w", tool=tool, args=args, call_id=f"r{n}", ts=at),
                  ToolResult(session="w", tool=tool, call_id=f"r{n}", result=answer, ts=at + answered_after)]
        at += answered_after + gap
    return trace


def test_a_bounded_capture_watched_at_the_users_request_waits_for_what_comes() -> None:
    """`timeout 120 candump ...` listens for two minutes and answers nothing until the
    frame comes: under a watch the user asked for, each empty capture is the wait going
    on (the tool waited, as a long poll does). Unasked, the same empty captures are a
    loop; and `timeout` before a command that is no listener asks for no wait."""
    from streamguard.signals.facts import listens_bounded

    def captures(request: str | None) -> list[Any]:
        return watched_reads("shell", {"cmd": "timeout 120 candump -ta can0,3A1:7FF | tail -n 5"}, "", request,
                             calls=10, answered_after=120.0, gap=1.5)

    asked = "Please keep capturing can0 in 2-minute windows and tell me when one shows up. Don't stop until you catch one."
    assert loop_alerts(captures(asked)) == []
    assert ("repeated-tool-call", "critical") in loop_alerts(captures(None))
    for line in ("timeout 60 tail -f /var/log/app.log", "sudo timeout -s INT 300 tcpdump -i eth0 port 53",
                 "timeout 120 kubectl logs -f deploy/api", "timeout 30 kubectl get pods -w",
                 "timeout 60 cat /dev/ttyUSB0", "timeout --foreground 60 tail -f a", "timeout -v 60 candump can0",
                 "timeout 60 /usr/bin/tail -f a", "timeout 60 tail -n 5 -f a", "timeout 60 tail -F a",
                 "timeout 30 kubectl wait --for=condition=ready pod/x", "timeout --kill-after=5 60 journalctl -fu api",
                 "timeout 60 tail --follow=name a", "timeout 60 nc -lk 9000"):
        assert listens_bounded(line), line
    # a program that answers at once, bounded: no wait however slow; unbounded: no answer
    for line in ("timeout 600 make -j8", "timeout 5 tail -n 20 app.log | grep -c ERROR",
                 "timeout 30 kubectl get pods | wc -l", "timeout 10 cat /sys/class/thermal/temp",
                 "timeout 600 stdbuf -oL make", "timeout 300 kubectl apply -f x", "candump can0",
                 "timeout 60 journalctl -F _SYSTEMD_UNIT", "timeout 60 dmesg -f kern", "timeout 60 tail --follow=false a",
                 "timeout 60 kubectl describe pod wait-job", "timeout 60 kubectl logs job/x --tail=50 | grep -f p",
                 "timeout 60 journalctl -u x --no-pager", "timeout 9 nc -zv host 80", "timeout 60 tcpdump -r cap.pcap",
                 "timeout 5 cat /dev/null"):
        assert not listens_bounded(line), line


def test_a_bounded_listen_with_many_options_is_read_in_no_time() -> None:
    import time

    from streamguard.signals.facts import listens_bounded

    started = time.process_time()
    assert not listens_bounded("timeout " + "--x " * 200 + "z")
    assert not listens_bounded("timeout " + "-a=b " * 150 + "9 make")
    listens_bounded("timeout 60 tail -" + "f" * 30_000 + "1")  # (read in its first 400 characters)
    assert not listens_bounded("timeout 60 kubectl " + "logs get " * 5_000)
    assert time.process_time() - started < 0.5


def test_a_count_of_failures_is_the_value_a_watch_reads() -> None:
    """"Watch Crashlytics for the next 30 minutes, tell me if anything new shows up": after
    the first crash came, `"crashEvents": 1` read every three minutes is the count watched,
    nothing new yet. Unasked, the same count again is judged as before; and a status that
    says the work failed is an end, watched or not."""
    watch = "Watch Crashlytics for the rc2 build for the next 30 minutes. Tell me if anything new shows up."

    def crash_watch(answer: dict[str, Any], request: str | None) -> list[Any]:
        return watched_reads("crashlytics_query", {"versionName": "3.8.0-rc2"}, answer, request,
                             calls=8, answered_after=2.0, gap=188.0)

    counted = {"versionName": "3.8.0-rc2", "window": "since_release", "newIssues": 1, "crashEvents": 1}
    assert loop_alerts(crash_watch(counted, watch)) == []
    assert ("repeated-tool-call", "critical") in loop_alerts(crash_watch(counted, None))
    failed = {**counted, "status": "failed"}
    assert ("repeated-tool-call", "critical") in loop_alerts(crash_watch(failed, watch))
    nested = {**counted, "latest": {"error": "NullPointerException"}}
    assert ("repeated-tool-call", "critical") in loop_alerts(crash_watch(nested, watch))


RENDER_ID = "5a319e01-aed2-7278-0642-0c9d9b393b6f"


def own_render(empties: int, gap: float, handed: bool = True) -> list[Any]:
    """A render queued (its answer hands its id back, or not), then its history read by
    that id every ``gap`` seconds: ``{}`` ``empties`` times, then the finished render."""
    trace: list[Any] = [TurnStart(session="p")]
    clock = 1_000.0
    queued = {"prompt_id": RENDER_ID, "number": 312} if handed else {"number": 312}
    trace += [ToolCall(session="p", tool="http_post", call_id="q", ts=clock,
                       args={"url": "http://comfy.internal:8188/prompt", "json": {"prompt": "lead"}}),
              ToolResult(session="p", tool="http_post", call_id="q", result=queued, ts=clock + 1)]
    clock += 5.0
    answers: list[Any] = [{}] * empties + [{RENDER_ID: {"status": {"completed": True}}}]
    for n, answer in enumerate(answers):
        trace += [ToolCall(session="p", tool="http_get", call_id=f"h{n}", ts=clock,
                           args={"url": f"http://comfy.internal:8188/history/{RENDER_ID}"}),
                  ToolResult(session="p", tool="http_get", call_id=f"h{n}", result=answer, ts=clock + 1)]
        clock += 1 + gap
    return trace


def test_nothing_yet_from_what_the_session_set_going_is_work_under_way() -> None:
    """A render queued, its history read by the id the queueing handed back: `{}` until
    it is done is the render under way, as "pending" would say."""
    assert loop_alerts(own_render(8, gap=15.0)) == []


def test_nothing_yet_from_what_the_session_did_not_set_going_is_judged_as_before() -> None:
    # the id came from nowhere the session made: an empty answer asked again and again
    assert HALTED in loop_alerts(own_render(8, gap=15.0, handed=False))
    # asked as fast as the agent can: no pause, no poll
    assert HALTED in loop_alerts(own_render(8, gap=0.5))


def test_what_the_session_set_going_and_never_comes_is_halted_at_polling_halt_after() -> None:
    engine = Engine(parse_policy_set(""))
    reads, halted_at = 0, None
    for event in own_render(40, gap=15.0):
        reads += isinstance(event, ToolCall) and event.tool == "http_get"
        for out in engine.process(event):
            if isinstance(out, Alert) and out.severity == "critical" and halted_at is None:
                halted_at = (out.signal, reads)
    # still nothing at the twenty-fifth read in a row: what it waits for is not coming
    assert halted_at == ("repeated-tool-call", 25)


@pytest.mark.parametrize(("text", "count"), [
    ("test_localization_startup has been flaky in CI. Run it 15 times locally and tell me the failure rate.", 15),
    ("Repeat the request twenty times and give me the p95.", 20),
    ("run 25 iterations of the benchmark", 25), ("Ping the router 10 more times.", 10), ("run it 3x", 3),
    # denied, told, or fewer than three
    ("Don't run it 15 times, once is enough.", 0), ("I ran it 15 times already.", 0),
    ("The build failed 3 times today.", 0), ("Run the test twice.", 0), ("Call me in 5 minutes.", 0),
    ("", 0), ("run " + "x " * 600 + "15 times", 0),
    # a count of runs told, not asked; a verb that does not open its clause
    ("Check why the nightly job failed in the last 20 runs.", 0),
    ("Send me the top 50 results from the last 200 runs.", 0), ("Run it once, not 15 times.", 0),
    ("I've tried to call you 3 times.", 0), ("Please run it 10 times.", 10),
    # at most a hundred
    ("Run the benchmark 200 times.", 100), ("run it a hundred times", 100), ("Run the benchmark 1000 times.", 100),
    ("run it a\thundred times", 100),
    # a count given loosely: read at the most it may mean
    ("Rerun it a handful of times to confirm it is flaky.", 10), ("run it a few more times", 5),
    ("Please run it several times.", 10), ("I ran it a few times.", 0), ("run it a couple of times", 0),
    # so many more after a count asked before: both
    ("Run it 10 times locally to get a failure rate, find the cause, fix it, and then run it 10 more times"
     " to show it's stable.", 20),
    ("Run it 60 times, then run it 60 more times.", 100), ("I ran it 10 times; run it 5 more times.", 5),
    # a streak of passing runs asked for by its length ("at least": twice it, the least asked)
    ("Fix the race and demonstrate stability by running the test many times (at least 10 consecutive passes).", 20),
    ("Keep going until you get 5 green runs in a row.", 5), ("The last 20 consecutive runs failed.", 0),
    # a streak told, not asked
    ("The nightly job has been failing for 12 consecutive runs. Please fix it.", 0),
    ("This test has failed for at least 50 consecutive runs, fix it.", 0),
    ("It passed with 8 consecutive passes locally.", 0), ("The benchmark regressed for 5 straight runs.", 0),
])
def test_what_count_of_runs_a_message_asks_for(text: str, count: int) -> None:
    from streamguard.signals.facts import asked_repetitions

    assert asked_repetitions(text) == count


def asked_runs(asked: str | None, runs: int, failing: Collection[int] = ()) -> list[Any]:
    """The user asks (or not), then the same test run ``runs`` times, failing at ``failing``."""
    trace: list[Any] = [TurnStart(session="p")]
    if asked is not None:
        trace.append(Text(session="p", role="user", text=asked))
    for n in range(runs):
        trace.append(ToolCall(session="p", tool="shell", call_id=f"r{n}",
                              args={"command": "launch_test test/test_startup.py 2>&1 | tail -3"}))
        trace.append(ToolResult(session="p", tool="shell", call_id=f"r{n}",
                                result="test_pose_published ... FAIL" if n in failing else "test_pose_published ... ok",
                                error="exit status 1" if n in failing else None))
    return trace


def test_the_runs_its_user_asked_for_are_no_loop() -> None:
    asked = "It has been flaky in CI. Run it 15 times locally and tell me the failure rate."
    assert loop_alerts(asked_runs(asked, 15, failing={4, 9})) == []
    # ...failing every time, too: the count asked for, not a failure loop
    assert [a for a in alerts(asked_runs(asked, 15, failing=set(range(15))), "") if a.severity == "critical"] == []
    # past the count asked for, the same call again is a loop as before
    assert HALTED in loop_alerts(asked_runs(asked, 24))
    # nobody asked: the fourth identical answer trips as before
    assert HALTED in loop_alerts(asked_runs(None, 15))
    assert HALTED in loop_alerts(asked_runs("Find out why it is flaky in CI.", 15))


def test_the_runs_asked_for_are_the_asked_calls_only_and_until_the_next_message() -> None:
    asked = "Run it 15 times locally and tell me the failure rate."
    # another call failing again and again after the runs is judged as any
    trace = asked_runs(asked, 15)
    for n in range(8):
        trace += [ToolCall(session="p", tool="shell", call_id=f"t{n}", args={"command": "python train.py"}),
                  ToolResult(session="p", tool="shell", call_id=f"t{n}", error="exit status 1",
                             result="KeyError: 'lr'")]
    found = [a.signal for a in alerts(trace, "") if a.severity == "critical"]
    assert found[:1] == ["failure-loop"]
    # the user's next message asks for no count: the runs it asked for end with it
    later = [*asked_runs(asked, 3), Text(session="p", role="user", text="Thanks. Now look at the logs.")]
    later += asked_runs(None, 12)[1:]
    assert HALTED in loop_alerts(later)
    # a count of a hundred at most, however many are asked: failures past it are a loop
    many = asked_runs("Run the benchmark 200 times.", 140, failing=set(range(140)))
    assert [a.signal for a in alerts(many, "") if a.severity == "critical"][:1] == ["failure-loop"]


def test_asked_repetitions_is_policy() -> None:
    asked = "Run it 15 times locally and tell me the failure rate."
    off = QUIET + "[waits]\nasked_repetitions = false\n"
    assert HALTED in loop_alerts(asked_runs(asked, 15), off)


def test_only_ids_the_act_handed_back_are_its_own_work() -> None:
    """An act whose answer echoes what it was sent and a date: neither is work it set
    going, so an empty search naming them, read again and again, is judged as any; and an
    id is named only as a whole word (`job-123` is not in `job-1234`)."""
    trace: list[Any] = [TurnStart(session="p")]
    trace += [ToolCall(session="p", tool="update_incident", call_id="u", ts=1_000.0,
                       args={"ticket": "INC-0012345", "note": "escalated"}),
              ToolResult(session="p", tool="update_incident", call_id="u", ts=1_001.0,
                         result={"ticket": "INC-0012345", "updated": "2025-06-01T10:22:03Z", "date": "2025-06-01"})]
    clock = 1_010.0
    for n in range(8):
        trace += [ToolCall(session="p", tool="search_logs", call_id=f"s{n}", ts=clock,
                           args={"query": "INC-0012345", "since": "2025-06-01"}),
                  ToolResult(session="p", tool="search_logs", call_id=f"s{n}", result={}, ts=clock + 1)]
        clock += 16.0
    assert HALTED in loop_alerts(trace)
    from streamguard.watchdog import _names_any

    assert _names_any('{"job":"job-123"}', ("job-123",)) and not _names_any('{"job":"job-1234"}', ("job-123",))
    assert _names_any("x job-123 y job-1234", ("job-1234",))


def test_the_call_asked_for_is_the_one_run_again_not_a_read_before_it() -> None:
    """The test file read twice before the runs, or a read twice between them: the run
    sent again after that is the call asked for, not the read."""
    asked = "Run it 15 times locally and tell me the failure rate."
    read = [ToolCall(session="p", tool="shell", call_id="f", args={"command": "cat test/test_startup.py"}),
            ToolResult(session="p", tool="shell", call_id="f", result="def test_pose_published(): ...")]
    runs = asked_runs(asked, 15)
    before = [*runs[:2], *read, *read, *runs[2:]]
    assert loop_alerts(before) == []
    between = [*runs[:4], *read, *read, *runs[4:]]
    assert loop_alerts(between) == []


def test_a_run_sent_again_before_its_answer_keeps_its_allowance() -> None:
    """Runs sent two at a time, each answered after the next is sent: each result is read
    with its own call's allowance."""
    asked = "Run it 12 times and tell me how often it fails."
    trace: list[Any] = [TurnStart(session="p"), Text(session="p", role="user", text=asked)]
    calls = [ToolCall(session="p", tool="shell", call_id=f"r{n}", args={"command": "pytest -q tests/test_flaky.py"})
             for n in range(12)]
    results = [ToolResult(session="p", tool="shell", call_id=f"r{n}", result="1 passed") for n in range(12)]
    for n in range(0, 12, 2):
        trace += [calls[n], calls[n + 1], results[n], results[n + 1]]
    assert loop_alerts(trace) == []


def test_a_job_read_after_each_sleep_with_its_ended_counts_blank_is_a_poll() -> None:
    """`sleep 60; kubectl get job ... -o jsonpath='{.status.active} active, {.status.succeeded}
    succeeded, {.status.failed} failed'` prints the counts not set yet blank: "1 active,
    succeeded,  failed" says work active and nothing ended, a poll's answer, with the log
    read now and then between. Once a count of failures shows, it is an end read again."""
    status = ("sleep 60; kubectl -n ledgerly get job migrate-0047 -o jsonpath='{.status.active} active, "
              "{.status.succeeded} succeeded, {.status.failed} failed'")

    def watch(answer: str) -> list[Any]:
        trace: list[Any] = [TurnStart(session="k")]
        clock = 1_000.0
        for n in range(14):
            command, said = (("kubectl -n ledgerly logs job/migrate-0047 --tail=3", f"backfill: {n * 9000} rows")
                             if n % 4 == 3 else (status, answer))
            trace += [ToolCall(session="k", tool="bash", args={"command": command}, call_id=f"k{n}", ts=clock),
                      ToolResult(session="k", tool="bash", call_id=f"k{n}", result=said,
                                 ts=clock + (60.0 if command.startswith("sleep") else 1.0))]
            clock += 62.0
        return trace

    assert [a for a in alerts(watch("1 active,  succeeded,  failed")) if a.severity == "critical"] == []
    ended = [a.signal for a in alerts(watch("0 active,  succeeded, 1 failed")) if a.severity == "critical"]
    assert ended and set(ended) <= set(LOOP_SIGNALS) | {"dominant-tool-call", "halt-ignored"}


@pytest.mark.parametrize(("answer", "ended"), [
    # counts of ended work that are zero or blank say no end (`kubectl describe job`, a
    # jsonpath printing the counts not set yet blank)...
    ("Pods Statuses:  1 Active (0 Ready) / 0 Succeeded / 0 Failed", False),
    ("1 active,  succeeded,  failed", False),
    # ...a count above zero does
    ("Pods Statuses:  0 Active (0 Ready) / 0 Succeeded / 1 Failed", True),
    (" active, 1 succeeded,  failed", True),
    ("job failed", True),
])
def test_counts_of_ended_work_zero_or_blank_say_no_end(answer: str, ended: bool) -> None:
    result = view(answer)
    assert not says_in_progress(result)
    assert (result.progress == 1) is ended
