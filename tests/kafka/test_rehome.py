"""`streamguard rehome` on a real broker: after the partition count was raised, a halted
session's snapshot is moved to its new home, and the processor holds it halted there."""

from __future__ import annotations

import pytest

from streamguard.events import Alert, ToolCall
from streamguard.kafka.changelog import decode_entry, encode_entry
from streamguard.kafka.inspect import home_partition
from tests.kafka.conftest import metric_value, poll_until
from tests.kafka.scenarios import T0, repeat_loop
from tests.kafka.test_bridge import start_bridge  # noqa: F401 (a fixture)
from tests.kafka.test_cli_ops import kafka_args, run_main

pytestmark = pytest.mark.kafka

OLD_COUNT = 2  # the topics have 4 partitions: the count was raised from 2


def moved_by_the_change(partitions: int) -> str:
    """A session whose home among ``partitions`` is not its home among OLD_COUNT."""
    return next(
        f"s-moved-{n}" for n in range(1000)
        if home_partition(f"s-moved-{n}", partitions) != home_partition(f"s-moved-{n}", OLD_COUNT)
    )


async def latest_records(topics, topic: str) -> dict[int, dict[str, bytes | None]]:
    """Each partition's latest record per key of ``topic`` (None: a tombstone)."""
    out: dict[int, dict[str, bytes | None]] = {p: {} for p in range(topics.partitions)}
    for record in sorted(await topics.read_all(topic), key=lambda r: (r.partition, r.offset)):
        out[record.partition][record.key.decode()] = record.value
    return out


async def latest_snapshots(topics) -> dict[int, dict[str, bytes | None]]:
    return await latest_records(topics, topics.changelog)


def rehome_args(topics, *extra: str) -> list[str]:
    return ["rehome", *extra, *kafka_args(topics, "events", "control", "changelog"), "--group-id", topics.group]


async def test_a_halt_survives_a_partition_count_change_once_rehomed(topics, start_processor, capsys) -> None:
    session = moved_by_the_change(topics.partitions)
    home, old = home_partition(session, topics.partitions), home_partition(session, OLD_COUNT)
    first = await start_processor()
    await topics.send_events(repeat_loop(session))
    await poll_until(lambda: first.processor.engine.is_halted(session), 20, "the halt")
    await first.stop()
    # The changelog as the old count left it: the snapshot on the session's old home,
    # its offsets those of that partition (further on than the new home's records).
    [written] = [v for v in (await latest_snapshots(topics))[home].values() if v is not None]
    entry = decode_entry(written)
    value = encode_entry(1000, 1000, entry.last_seen, entry.state)
    await topics.send(topics.changelog, value, key=session, partition=old)
    await topics.send(topics.changelog, None, key=session, partition=home)

    # Started as it is, the processor says the session is not where its events go.
    unaware = await start_processor()
    assert metric_value(await unaware.metrics_text(), "streamguard_misplaced_sessions_total") == 1.0
    # ... and the command refuses to move anything while it runs.
    assert await run_main(rehome_args(topics)) == 3
    assert f"consumer group {topics.group!r} has 1 member(s)" in capsys.readouterr().err
    await unaware.stop()

    assert await run_main(rehome_args(topics, "--dry-run")) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [f"{session} (halted) p{old} -> p{home}"]
    assert "would move 1 (1 halted)" in captured.err
    assert (await latest_snapshots(topics))[old][session] == value  # nothing written

    assert await run_main(rehome_args(topics)) == 0
    assert "moved 1 (1 halted)" in capsys.readouterr().err
    after = await latest_snapshots(topics)
    assert after[old][session] is None  # tombstoned where it was
    moved = after[home][session]
    assert moved is not None
    entry = decode_entry(moved)
    assert entry.state == decode_entry(value).state
    assert (entry.events_offset, entry.control_offset) == (-1, -1)

    second = await start_processor()
    assert second.processor.engine.is_halted(session)
    assert second.processor.sessions.meta[session].partition == home
    assert metric_value(await second.metrics_text(), "streamguard_misplaced_sessions_total") == 0.0
    # The halt is live at the new home: the next call is flagged, nothing dead-lettered.
    extra = ToolCall(session=session, agent="coder", tool="ls", args={}, ts=T0 + 50)
    await topics.send(topics.events, extra)
    await topics.read_until(topics.alerts, lambda records: len(records) >= 3, what="the halt-ignored alert")
    outputs = await topics.outputs()
    assert [type(o).__name__ for o in outputs] == ["Alert", "GuardrailTrip", "Alert"]
    assert isinstance(outputs[-1], Alert) and outputs[-1].signal == "halt-ignored"
    assert await topics.read_all(topics.dlq) == []

    # A second run finds nothing to do.
    await second.stop()
    assert await run_main(rehome_args(topics)) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and "moved 0 (0 halted)" in captured.err


async def test_rehome_refuses_topics_of_different_partition_counts(topics, capsys) -> None:
    from streamguard.kafka.topics import create_processor_topics

    # a changelog of 2 partitions beside events and control of 4
    other = topics.config(changelog_topic=f"{topics.prefix}.changelog2", events_topic=f"{topics.prefix}.ev2")
    await create_processor_topics(other, 2)
    code = await run_main(["rehome", *kafka_args(topics, "events", "control"), "--changelog-topic", other.changelog_topic])
    assert code == 2
    err = capsys.readouterr().err
    assert "must have the same partition count" in err and f"{other.changelog_topic} 2" in err
    assert "Traceback" not in err  # one sentence


async def test_a_bridge_session_keeps_numbering_its_events_across_a_partition_count_change(
    topics, start_bridge, capsys, monkeypatch  # noqa: F811 (the fixture imported above)
) -> None:
    """The bridge's state of a moved session carries its ``seq``: left behind, the new
    owner would number the session's events from 1 again, and the processor would skip
    them as replays."""
    from tests.kafka.test_bridge import EVENTS_PER_RUN, SWEEP, sdk_spans, spans_proto, wait_events

    conversation = moved_by_the_change(topics.partitions)
    home, old = home_partition(conversation, topics.partitions), home_partition(conversation, OLD_COUNT)
    bridge = await start_bridge()
    config = bridge.config
    await topics.send(config.spans_topic, spans_proto(sdk_spans(conversation, SWEEP)), key=b"exporter-1")
    await wait_events(topics, {conversation: EVENTS_PER_RUN})
    bridge.request_stop()
    await poll_until(lambda: bridge._consumer is None, 30, "bridge stopped")

    changelog = config.bridge_changelog_topic
    [value] = [v for k, v in (await latest_records(topics, changelog))[home].items() if k == conversation]
    assert value is not None
    await topics.send(changelog, value, key=conversation, partition=old)
    await topics.send(changelog, None, key=conversation, partition=home)

    # every setting as the bridge itself reads it, from its own environment
    for name, setting in (
        ("BOOTSTRAP_SERVERS", topics.bootstrap), ("GROUP_ID", config.group_id),
        ("SESSIONS_TOPIC", config.sessions_topic), ("BRIDGE_CHANGELOG_TOPIC", changelog),
    ):
        monkeypatch.setenv(f"STREAMGUARD_BRIDGE_{name}", setting)
    monkeypatch.setenv("STREAMGUARD_BOOTSTRAP_SERVERS", "127.0.0.1:9")  # the processor's: not read
    # the test broker lists a stopped bridge in its group for good (it expires no
    # member); the refusal itself is the processor test's
    assert await run_main(["rehome", "--bridge", "--force"]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [f"{conversation} p{old} -> p{home}"]
    assert "moved 1 (0 halted)" in captured.err

    again = await start_bridge()
    await topics.send(again.config.spans_topic, spans_proto(sdk_spans(conversation, SWEEP[:1])), key=b"exporter-1")
    found = await wait_events(topics, {conversation: EVENTS_PER_RUN + 6})
    events = found[conversation]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))  # seq went on at the new home


async def test_rehome_refuses_while_records_wait_on_a_partition_sessions_move_away_from(topics, capsys) -> None:
    from tests.test_rehome import snapshot

    session = moved_by_the_change(topics.partitions)
    old = home_partition(session, OLD_COUNT)
    await topics.send(topics.changelog, snapshot(session), key=session, partition=old)
    # a record of the session written before the change, never processed
    call = ToolCall(session=session, agent="coder", tool="ls", args={}, ts=T0)
    await topics.send(topics.events, call, partition=old)

    assert await run_main(rehome_args(topics)) == 3
    err = capsys.readouterr().err
    assert f"records not yet processed on partitions sessions move away from ({topics.events}[{old}] 1)" in err
    assert (await latest_snapshots(topics))[old][session] is not None  # nothing moved

    assert await run_main(rehome_args(topics, "--force")) == 0
    assert "moved 1 (0 halted)" in capsys.readouterr().err


async def test_a_processor_stops_when_the_partition_count_changes_under_it(
    topics, start_processor, monkeypatch
) -> None:
    """Raised while it runs: every key's home moved, and the other topics' counts are
    checked only at start-up. It stops with the reason, and a restart reads the count."""
    from streamguard.kafka import processor as processor_module
    from streamguard.kafka.topics import PartitionCountChanged

    real = processor_module.prepare_topics

    async def counted_before_the_change(*args, **kwargs) -> int:
        await real(*args, **kwargs)
        return OLD_COUNT  # what the topics had when it started; they have 4 now

    monkeypatch.setattr(processor_module, "prepare_topics", counted_before_the_change)
    running = await start_processor(ready=False)
    exc = await running.crashed()
    assert isinstance(exc, PartitionCountChanged)
    assert f"changed from {OLD_COUNT} to {topics.partitions} while running" in str(exc)
    assert "streamguard rehome" in str(exc)

    monkeypatch.setattr(processor_module, "prepare_topics", real)
    again = await start_processor()  # restarted, it reads the count and runs
    assert again.processor.partition_count == topics.partitions


async def test_rehome_fleet_moves_a_scope_state_to_the_home_of_its_facts(
    topics, capsys, caplog, start_processor, tmp_path
) -> None:
    from streamguard.fleet_windows import Circuit, ScopeState, decode_scope, encode_scope
    from tests.kafka.test_fleet import policy_file

    scope = next(
        f"spend:agent=bot-{n}" for n in range(1000)
        if home_partition(f"spend:agent=bot-{n}", topics.partitions) != home_partition(f"spend:agent=bot-{n}", OLD_COUNT)
    )
    old, home = home_partition(scope, OLD_COUNT), home_partition(scope, topics.partitions)
    state = ScopeState(scope=scope, rule="spend", circuit=Circuit(state="open"), offset=40)
    await topics.send(topics.fleet_state, encode_scope(state), key=scope, partition=old)

    # Started as it is, the fleet stage says the scope's state is not where its facts go.
    running = await start_processor(policy=policy_file(tmp_path, 10.0))
    await poll_until(
        lambda: running.processor.fleet_stage is not None and running.processor.fleet_stage.assigned_once,
        30, "the fleet stage assigned",
    )
    assert "1 restored scope state(s) belong on other partitions of 4" in caplog.text
    await running.stop()

    args = [
        # (--force: the test broker may keep the stopped fleet stage listed in its group)
        "rehome", "--fleet", "--force", "--bootstrap-servers", topics.bootstrap, "--group-id", topics.group,
        "--fleet-facts-topic", topics.fleet_facts, "--fleet-state-topic", topics.fleet_state,
    ]
    assert await run_main(args) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [f"{scope} (circuit open) p{old} -> p{home}"]
    assert "1 scope(s) on 4 partitions" in captured.err and "moved 1 (1 with an open circuit)" in captured.err
    after = await latest_records(topics, topics.fleet_state)
    assert after[old][scope] is None
    moved = decode_scope(after[home][scope])  # type: ignore[arg-type]
    assert moved.offset == -1 and moved.circuit.state == "open"

    # flags of another changelog are refused, not ignored
    code = await run_main(["rehome", "--fleet", *kafka_args(topics, "changelog")])
    assert code == 2 and "--changelog-topic not with --fleet" in capsys.readouterr().err
