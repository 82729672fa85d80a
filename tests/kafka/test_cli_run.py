"""`streamguard run` start-up as an operator meets it, and `tail` on the bundled broker."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys

import pytest
from aiokafka import AIOKafkaProducer

from streamguard.events import encode
from streamguard.kafka.broker import free_port
from tests.kafka.conftest import REPO_ROOT
from tests.kafka.test_cli_ops import kafka_args, run_main
from tests.kafka.test_client import trip

kafka = pytest.mark.kafka


def run_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMGUARD_")}
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def topic_args(topics) -> list[str]:
    return [
        "--bootstrap-servers", topics.bootstrap, "--group-id", topics.group,
        "--events-topic", topics.events, "--control-topic", topics.control,
        "--alerts-topic", topics.alerts, "--dlq-topic", topics.dlq, "--changelog-topic", topics.changelog,
    ]


@kafka
def test_a_metrics_port_in_use_is_one_sentence_and_exit_1(topics) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "streamguard.cli", "run", *topic_args(topics),
             "--metrics-host", "127.0.0.1", "--metrics-port", str(port)],
            capture_output=True, text=True, timeout=60, env=run_env(),
        )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert f"the metrics port 127.0.0.1:{port} is in use" in last and "--metrics-port" in last


def test_an_unreachable_cluster_stops_run_with_exit_1_in_json_logs() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "streamguard.cli", "run", "--bootstrap-servers", f"127.0.0.1:{free_port()}",
         "--metrics-port", "0", "--request-timeout-ms", "3000", "--log-format", "json"],
        capture_output=True, text=True, timeout=90, env=run_env(),
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    docs = [json.loads(line) for line in proc.stderr.splitlines()]  # every line is one JSON object
    assert any(
        "cannot start: cannot reach the Kafka cluster at 127.0.0.1:" in d["message"] for d in docs
    )
    # aiokafka's repeated connection errors are collapsed, not printed per attempt
    kafka_errors = [d for d in docs if d["logger"].startswith("aiokafka") and d["level"] == "error"]
    assert len(kafka_errors) <= 5


def test_an_unreachable_cluster_stops_bridge_with_the_same_sentence_and_exit_1() -> None:
    # `bridge` runs under the same process frame as `run`: one sentence naming the cluster.
    address = f"127.0.0.1:{free_port()}"
    proc = subprocess.run(
        [sys.executable, "-m", "streamguard.cli", "bridge", "--bootstrap-servers", address,
         "--metrics-port", "0", "--request-timeout-ms", "3000"],
        capture_output=True, text=True, timeout=90, env=run_env(),
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"cannot start: cannot reach the Kafka cluster at {address}" in proc.stderr


@kafka
async def test_tail_does_not_reprint_the_end_of_the_last_batch(topics, capsys) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=topics.bootstrap, linger_ms=200, enable_idempotence=False)
    await producer.start()
    try:
        # Four old outputs of one session in one batch: one partition, one produce request.
        futures = [
            await producer.send(topics.alerts, encode(trip(f"old-{i}", session="s-old")), key=b"s-old")
            for i in range(4)
        ]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()

    task = asyncio.create_task(run_main(["tail", "--json", "-n", "1", *kafka_args(topics, "alerts")]))
    n = 0
    while not task.done():
        n += 1
        await topics.send(topics.alerts, encode(trip(f"new-{n}", session="s-old")), key="s-old")
        await asyncio.wait([task], timeout=0.5)
    assert await task == 0
    [line] = capsys.readouterr().out.splitlines()
    assert json.loads(line)["id"].startswith("new-"), line
