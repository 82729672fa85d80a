"""The local broker itself: it starts, answers, round-trips records and commits offsets."""

from __future__ import annotations

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from streamguard.kafka.broker import BrokerError, LocalBroker, probe_metadata

pytestmark = pytest.mark.kafka


def test_broker_answers_metadata(broker: LocalBroker) -> None:
    assert broker.running
    brokers = probe_metadata(broker.host, broker.port)
    assert [(host, port) for _, host, port in brokers] == [(broker.host, broker.port)]


def test_only_loopback_addresses() -> None:
    with pytest.raises(BrokerError, match="loopback"):
        LocalBroker(host="0.0.0.0")


async def test_produce_consume_headers_and_commit(topics) -> None:
    meta = await topics.send(
        topics.events, b"hello", key=b"s-1", partition=2, headers=[("type", b"x")]
    )
    assert meta.partition == 2
    records = await topics.read_until(topics.events, lambda rs: len(rs) == 1)
    assert records[0].key == b"s-1"
    assert records[0].value == b"hello"
    assert list(records[0].headers) == [("type", b"x")]

    consumer = AIOKafkaConsumer(
        bootstrap_servers=topics.bootstrap, group_id=topics.group, enable_auto_commit=False
    )
    await consumer.start()
    try:
        tp = TopicPartition(topics.events, 2)
        consumer.assign([tp])
        await consumer.commit({tp: 1})
        assert await consumer.committed(tp) == 1
    finally:
        await consumer.stop()
    assert (await topics.committed(topics.events))[2] == 1
