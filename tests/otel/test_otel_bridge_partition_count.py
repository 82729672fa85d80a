"""The bridge hashes the keys it writes over a topic's partition count as the producer's
metadata lists it now: a count raised while it runs moves each session's records to its
new home, as a default-partitioner publisher's do (pure, with a stand-in producer)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from streamguard.kafka.inspect import home_partition
from streamguard.otel.bridge import Bridge
from streamguard.otel.config import BridgeConfig


class Batch:
    def __init__(self) -> None:
        self.records: list[bytes] = []

    def append(self, *, key: bytes, value: bytes, timestamp: Any) -> object:
        self.records.append(key)
        return object()


class Producer:
    def __init__(self, count: int) -> None:
        self.count = count
        self.client = SimpleNamespace(cluster=SimpleNamespace(partitions_for_topic=self.listed))

    def listed(self, topic: str) -> set[int]:
        return set(range(self.count))

    async def partitions_for(self, topic: str) -> set[int]:
        return self.listed(topic)

    def create_batch(self) -> Batch:
        return Batch()


async def test_keys_follow_a_raised_partition_count() -> None:
    session = next(f"s-{n}" for n in range(1000) if home_partition(f"s-{n}", 2) != home_partition(f"s-{n}", 4))
    bridge = Bridge(BridgeConfig.build({}))
    producer = Producer(2)
    bridge._producer = producer  # type: ignore[assignment]
    topic = bridge.config.events_topic
    await bridge._queue(topic, session.encode(), b"{}", None)
    assert set(bridge._batches) == {(topic, home_partition(session, 2))}

    producer.count = 4  # raised; the metadata refresh shows it
    bridge._batches = {}
    await bridge._queue(topic, session.encode(), b"{}", None)
    assert set(bridge._batches) == {(topic, home_partition(session, 2))}  # not yet followed
    bridge._follow_partition_counts()  # as every checkpoint does
    bridge._batches = {}
    await bridge._queue(topic, session.encode(), b"{}", None)
    assert set(bridge._batches) == {(topic, home_partition(session, 4))}
