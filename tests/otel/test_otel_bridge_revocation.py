"""A bridge whose checkpoint fails while its partitions are taken away.

aiokafka logs and swallows an exception raised by a rebalance listener and goes on
with the rebalance. A bridge that kept the revoked partitions would go on producing
events, and writing snapshots, for sessions another member now owns. The producer
and consumer here are stand-ins: the point is what the bridge does with a failure,
which a real broker cannot be made to produce on cue.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import TopicPartition
from aiokafka.errors import KafkaTimeoutError

from streamguard.otel.bridge import Bridge
from streamguard.otel.config import BridgeConfig
from streamguard.otel.records import grouped_records


class FailingProducer:
    """Every send is refused once it is awaited, as a broker that times out."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    async def send(self, topic: str, **_: Any) -> asyncio.Future[None]:
        self.sent.append(topic)
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        future.set_exception(KafkaTimeoutError())
        return future


class Consumer:
    def __init__(self, assigned: set[TopicPartition]) -> None:
        self.assigned = assigned

    def assignment(self) -> set[TopicPartition]:
        return set(self.assigned)

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        raise AssertionError("nothing may be committed after a failed acknowledgement")


class Record:
    def __init__(self, offset: int, key: bytes, value: bytes) -> None:
        self.offset, self.key, self.value, self.headers, self.timestamp = offset, key, value, [], 0


async def test_a_failed_checkpoint_on_revocation_fails_the_bridge_and_gives_the_partitions_up() -> None:
    config = BridgeConfig.build({})
    bridge = Bridge(config, clock=lambda: 1000.0)
    partition = TopicPartition(config.sessions_topic, 0)
    producer = FailingProducer()
    bridge._producer, bridge._consumer = producer, Consumer({partition})  # type: ignore[assignment]
    bridge.windows[0] = bridge._new_window()
    [(_, value)] = grouped_records({"S": [("t:1", [(1, 1, b'{"type":"turn_start","session":"S"}')])]})
    await bridge._process(partition, [Record(5, b"S", value)], (1000.0, 1000.0))
    assert bridge.windows[0].pending_count() == 1 and partition in bridge.positions
    # a send made before the rebalance: its acknowledgement fails inside the checkpoint
    bridge.in_flight.append(await producer.send(config.events_topic))

    await bridge.on_revoked({partition})

    assert isinstance(bridge.fatal, KafkaTimeoutError)  # the loop stops and the process restarts
    assert 0 not in bridge.windows and partition not in bridge.positions
