"""Production settings of `streamguard run` as an operator meets them: errors that name the
allowed values or the nearest key, client pass-through options, compression, OAUTHBEARER,
logging (levels, JSON, the Kafka client's repeated errors), runtime metrics."""

from __future__ import annotations

import io
import json
import logging

import pytest
from aiokafka.abc import AbstractTokenProvider
from prometheus_client import generate_latest

from streamguard import logsetup
from streamguard.cli import unknown_environment
from streamguard.kafka.config import ConfigError, ProcessorConfig
from streamguard.kafka.metrics import Metrics


def build(**raw):
    return ProcessorConfig.build(raw)


def test_an_enum_error_names_the_allowed_values():
    with pytest.raises(ConfigError) as caught:
        build(security_protocol="TLS")
    message = str(caught.value)
    assert "--security-protocol / STREAMGUARD_SECURITY_PROTOCOL" in message
    assert "expected one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL" in message
    with pytest.raises(ConfigError, match="expected one of text, json"):
        build(log_format="yaml")


def test_an_unknown_setting_suggests_the_nearest_one():
    with pytest.raises(ConfigError, match="did you mean --bootstrap-servers / STREAMGUARD_BOOTSTRAP_SERVERS"):
        build(bootstrap_server="k:9092")


def test_a_misspelt_environment_variable_is_named():
    env = {"STREAMGUARD_BOOTSTRAP_SERVER": "k:9092", "STREAMGUARD_GROUP_ID": "g", "STREAMGUARD_BROKER_BIN": "/x"}
    [warning] = unknown_environment(env)
    assert "STREAMGUARD_BOOTSTRAP_SERVER is not a setting" in warning
    assert "did you mean STREAMGUARD_BOOTSTRAP_SERVERS?" in warning


def test_client_properties_reach_the_clients_that_take_them():
    config = ProcessorConfig.from_env_and_args(
        ["--client-properties", "metadata_max_age_ms=60000,max_request_size=2097152,fetch_min_bytes=1024"],
        env={},
    )
    assert config.client_options()["metadata_max_age_ms"] == 60000  # every client takes it
    assert config.producer_options()["max_request_size"] == 2097152
    assert "max_request_size" not in config.consumer_options()
    assert config.consumer_options()["fetch_min_bytes"] == 1024
    assert "fetch_min_bytes" not in config.client_options()


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("metadata_max_age=5", "did you mean 'metadata_max_age_ms'?"),
        ("no-equals", "is not KEY=VALUE"),
        ("acks=1", "set by streamguard itself"),
        # keywords streamguard passes itself: the client would get them twice
        ("linger_ms=10", "use --linger-ms"),
        ("auto_offset_reset=latest", "set by streamguard itself"),
        ("max_batch_size=1000", "set by streamguard itself"),
        ("fetch_max_wait_ms=10", "use --fetch-max-wait-ms"),
        # a value of the wrong type would reach the client and fail there
        ("metadata_max_age_ms=abc", "expected a number"),
        ("check_crcs=3", "expected true or false"),
    ],
)
def test_bad_client_properties_are_refused_at_start(item, message):
    with pytest.raises(ConfigError, match=message):
        ProcessorConfig.from_env_and_args([], env={"STREAMGUARD_CLIENT_PROPERTIES": item})


def test_timeouts_past_the_protocols_int32_are_refused_at_start():
    with pytest.raises(ConfigError, match="--session-timeout-ms / STREAMGUARD_SESSION_TIMEOUT_MS"):
        build(session_timeout_ms=2**31)
    assert build(session_timeout_ms=2**31 - 1).session_timeout_ms == 2**31 - 1


def test_compression_goes_to_producers_and_needs_its_codec():
    from aiokafka import codec

    config = build(compression_type="gzip")
    assert config.producer_options()["compression_type"] == "gzip"
    assert "compression_type" not in config.consumer_options()
    if not codec.has_zstd():
        with pytest.raises(ConfigError, match="pip install cramjam"):
            build(compression_type="zstd")
    else:  # pragma: no cover - depends on the installation
        assert build(compression_type="zstd").producer_options()["compression_type"] == "zstd"


class StaticToken(AbstractTokenProvider):
    async def token(self) -> str:
        return "t"


def test_oauthbearer_builds_the_named_token_provider():
    config = build(
        security_protocol="SASL_SSL",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=f"{__name__}:StaticToken",
    )
    options = config.client_options()
    assert options["sasl_mechanism"] == "OAUTHBEARER"
    assert isinstance(options["sasl_oauth_token_provider"], StaticToken)
    with pytest.raises(ConfigError, match="missing --sasl-oauth-token-provider"):
        build(security_protocol="SASL_SSL", sasl_mechanism="OAUTHBEARER")
    with pytest.raises(ConfigError, match="cannot import"):
        build(security_protocol="SASL_SSL", sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider="nowhere:X")


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_repeated_kafka_errors_collapse_into_one_line_per_window():
    clock = FakeClock()
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(name)s %(message)s"))
    handler.addFilter(logsetup.RepeatFilter(window_s=20, hint="is the cluster reachable?", clock=clock))
    kafka_log = logging.getLogger("aiokafka.conn.test")
    ours = logging.getLogger("streamguard.test")
    # Commands run in-process by other tests quiet "aiokafka" itself: set this
    # logger's own level so the test sees every record whatever ran before it.
    levels = {logger: logger.level for logger in (kafka_log, ours)}
    for logger in (kafka_log, ours):
        logger.addHandler(handler)
        logger.propagate = False
        logger.setLevel(logging.DEBUG)
    try:
        for i in range(3000):
            clock.now = i * 20 / 3000  # 3,000 errors in 20 s, each naming another attempt
            kafka_log.error("Unable connect to node with id %s: attempt %d", 1, i)
        ours.error("streamguard's own errors are never dropped")
        ours.error("streamguard's own errors are never dropped")
        clock.now = 20.5
        kafka_log.error("Unable connect to node with id %s: attempt %d", 1, 3000)
    finally:
        for logger in (kafka_log, ours):
            logger.removeHandler(handler)
            logger.propagate = True
            logger.setLevel(levels[logger])
    lines = stream.getvalue().splitlines()
    assert len(lines) == 4
    assert lines[0] == "aiokafka.conn.test Unable connect to node with id 1: attempt 0"
    assert lines[-1].startswith("aiokafka.conn.test Unable connect to node with id 1: attempt 3000")
    assert "[2999 similar message(s) suppressed in the last 20 s; is the cluster reachable?]" in lines[-1]


def test_json_log_lines_carry_the_extra_fields():
    stream = io.StringIO()
    handler = logsetup.configure("debug", "json", stream=stream)
    try:
        logging.getLogger("streamguard.kafka").warning(
            "skipped %d events", 3, extra={"session": "s-1", "partition": 2}
        )
    finally:
        logging.getLogger().removeHandler(handler)
    doc = json.loads(stream.getvalue().splitlines()[-1])
    assert doc["level"] == "warning" and doc["logger"] == "streamguard.kafka"
    assert doc["message"] == "skipped 3 events"
    assert doc["session"] == "s-1" and doc["partition"] == 2


def test_metrics_include_process_python_and_build_info_without_created_series():
    metrics = Metrics()
    metrics.events.labels("tool_call", "a").inc()
    text = generate_latest(metrics.registry).decode()
    names = {line.split("{")[0].split(" ")[0] for line in text.splitlines() if not line.startswith("#")}
    assert {"process_resident_memory_bytes", "process_cpu_seconds_total", "process_open_fds"} <= names
    assert "python_info" in names and "python_gc_collections_total" in names
    assert 'streamguard_build_info{implementation="' in text
    assert not any(name.endswith("_created") for name in names)


def test_gssapi_without_its_package_is_refused_at_start(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "gssapi" else real(name, *a))
    with pytest.raises(ConfigError, match=r"--sasl-mechanism / STREAMGUARD_SASL_MECHANISM: GSSAPI .* `gssapi` package"):
        build(security_protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI").validate()
