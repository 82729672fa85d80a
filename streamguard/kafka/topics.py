"""The processor's five topics: what they must look like, and making them.

``streamguard run`` checks them (or creates them with ``--create-topics``)
before it joins the group; the demo, the benchmarks and the tests create them
with :func:`create_processor_topics`. One place knows that the events, control
and changelog topics are co-partitioned and that the changelog is compacted.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from .config import ProcessorConfig

log = logging.getLogger("streamguard.kafka")

# Kafka's TOPIC_ALREADY_EXISTS: another instance created it meanwhile.
_ALREADY_EXISTS = 36


class StartupError(RuntimeError):
    """The cluster is not in a state the processor can run against (missing or mismatched topics)."""


class PartitionCountChanged(RuntimeError):
    """The events topic's partition count is not the one the processor started with."""


def co_partitioned(config: ProcessorConfig) -> list[str]:
    """The topics whose partition *p* belongs together: events, control, changelog."""
    return [config.events_topic, config.control_topic, config.changelog_topic]


def all_topics(config: ProcessorConfig) -> list[str]:
    return [*co_partitioned(config), config.alerts_topic, config.dlq_topic]


def fleet_co_partitioned(config: ProcessorConfig) -> list[str]:
    """The fleet facts and the fleet stage's snapshots: partition *p* belongs together."""
    return [config.fleet_facts_topic, config.fleet_state_topic]


def fleet_topics(config: ProcessorConfig) -> list[str]:
    """The topics of fleet guardrails (needed only when the policy has [[fleet]] rules)."""
    return [*fleet_co_partitioned(config), config.fleet_circuits_topic]


def compacted(config: ProcessorConfig) -> set[str]:
    return {config.changelog_topic, config.fleet_state_topic, config.fleet_circuits_topic}


def topic_configs(config: ProcessorConfig, topic: str, replication_factor: int) -> dict[str, str]:
    configs = {"cleanup.policy": "compact"} if topic in compacted(config) else {}
    if replication_factor >= 3:
        # acks=all only means "on two brokers" with this floor
        configs["min.insync.replicas"] = "2"
    return configs


def new_topics(
    config: ProcessorConfig, topics: list[str], partitions: int, replication_factor: int
) -> list[NewTopic]:
    return [
        NewTopic(
            topic,
            partitions,
            replication_factor,
            topic_configs=topic_configs(config, topic, replication_factor),
        )
        for topic in topics
    ]


async def create_processor_topics(
    config: ProcessorConfig, partitions: int, replication_factor: int = 1
) -> None:
    """Create every topic, the fleet's included (for the demo, benchmarks and tests);
    existing ones are kept."""
    admin = AIOKafkaAdminClient(**config.client_options())
    await admin.start()
    try:
        response = await admin.create_topics(
            new_topics(
                config, [*all_topics(config), *fleet_topics(config)], partitions, replication_factor
            )
        )
        _raise_errors(response)
    finally:
        await admin.close()


async def prepare_topics(config: ProcessorConfig, *, fleet: bool = False) -> int:
    """Check (or, with ``create_topics``, create) the topics; the shared partition count.

    ``fleet``: the policy has [[fleet]] rules, so the fleet topics are needed too
    (the facts and the fleet stage's snapshots co-partitioned, both compacted
    topics compacted). Raises :class:`StartupError` naming what is missing or
    mismatched.
    """
    admin = AIOKafkaAdminClient(**config.client_options())
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        wanted = all_topics(config) + (fleet_topics(config) if fleet else [])
        missing = [t for t in wanted if t not in existing]
        if missing and config.create_topics:
            replication = await _placeable_replication(admin, config.replication_factor)
            count = config.partitions
            present = [t for t in co_partitioned(config) if t in existing]
            if present:  # keep new co-partitioned topics aligned with existing ones
                described = await admin.describe_topics(present)
                count = len(described[0]["partitions"])
            fleet_count = count
            present_fleet = [t for t in fleet_co_partitioned(config) if t in existing]
            if fleet and present_fleet:
                described = await admin.describe_topics(present_fleet)
                fleet_count = len(described[0]["partitions"])
            sessions_side = [t for t in missing if t not in fleet_topics(config)]
            fleet_side = [t for t in missing if t in fleet_topics(config)]
            response = await admin.create_topics(
                new_topics(config, sessions_side, count, replication)
                + new_topics(config, fleet_side, fleet_count, replication)
            )
            _raise_errors(response)
            log.info("created topics %s", ", ".join(missing))
            missing = []
        if missing:
            raise StartupError(
                f"missing topics: {', '.join(missing)}; create them (the changelog, the "
                "fleet state and the fleet circuits with cleanup.policy=compact) or pass "
                "--create-topics"
            )
        counts = await _partition_counts(admin, co_partitioned(config))
        fleet_counts = (
            await _partition_counts(admin, fleet_co_partitioned(config)) if fleet else {}
        )
    finally:
        await admin.close()
    if len(set(fleet_counts.values())) > 1:
        listing = ", ".join(f"{t}={n}" for t, n in fleet_counts.items())
        raise StartupError(
            "the fleet facts and fleet state topics must have the same partition count "
            f"(co-partitioning by scope): {listing}"
        )
    if len(set(counts.values())) != 1:
        listing = ", ".join(f"{t}={n}" for t, n in counts.items())
        raise StartupError(
            "the events, control and changelog topics must have the same partition count "
            f"(co-partitioning by session): {listing}"
        )
    return counts[config.events_topic]


async def _placeable_replication(admin: AIOKafkaAdminClient, replication_factor: int) -> int:
    """The replication factor to create topics with: the configured one, or the
    cluster's broker count when it has fewer brokers (a development cluster), said
    in one warning. Production clusters have at least three brokers, so the
    default of 3 is what they get."""
    try:
        brokers = len((await admin.describe_cluster()).get("brokers") or ())
    except Exception as exc:  # an old broker without DescribeCluster: let create_topics say
        log.debug("cannot describe the cluster (%r); not checking the replication factor", exc)
        return replication_factor
    if 0 < brokers < replication_factor:
        log.warning(
            "--replication-factor %d needs %d brokers and the cluster has %d: creating the "
            "topics with replication factor %d (the guarantees then hold only while %s)",
            replication_factor,
            replication_factor,
            brokers,
            brokers,
            "that broker's disk does" if brokers == 1 else "those brokers' disks do",
        )
        return brokers
    return replication_factor


def _raise_errors(response: Any) -> None:
    for item in getattr(response, "topic_errors", []):
        topic, code = item[0], item[1]
        message = item[2] if len(item) > 2 else None
        if code not in (0, _ALREADY_EXISTS):
            raise StartupError(f"cannot create topic {topic!r}: {message} ({code})")


async def _partition_counts(admin: AIOKafkaAdminClient, topics: list[str]) -> dict[str, int]:
    # Metadata of a topic created a moment ago can lag on some brokers: retry briefly.
    deadline = time.monotonic() + 15
    while True:
        described = await admin.describe_topics(topics)
        counts = {
            d["topic"]: len(d["partitions"]) for d in described if d.get("error_code", 0) == 0
        }
        if all(counts.get(t, 0) > 0 for t in topics) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.1)
    missing = [t for t in topics if counts.get(t, 0) == 0]
    if missing:
        raise StartupError(f"topics without partitions (metadata): {', '.join(missing)}")
    return {t: counts[t] for t in topics}
