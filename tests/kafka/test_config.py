"""Settings of ``streamguard run``: precedence, coercion, errors that name the setting.

Pure tests: no broker.
"""

from __future__ import annotations

import pytest

from streamguard.kafka.config import ConfigError, ProcessorConfig
from streamguard.kafka.metrics import AgentLabels


def test_defaults() -> None:
    config = ProcessorConfig.from_env_and_args([], env={})
    assert config.events_topic == "agent.events"
    assert config.control_topic == "streamguard.control"
    assert config.alerts_topic == "streamguard.alerts"
    assert config.dlq_topic == "streamguard.dlq"
    assert config.changelog_topic == "streamguard.changelog"
    assert config.create_topics is False
    assert config.halted_session_ttl_s > config.session_idle_ttl_s


def test_flags_win_over_environment_over_defaults() -> None:
    env = {
        "STREAMGUARD_BOOTSTRAP_SERVERS": "kafka-a:9092,kafka-b:9092",
        "STREAMGUARD_METRICS_PORT": "9100",
        "STREAMGUARD_GROUP_ID": "from-env",
        "STREAMGUARD_CREATE_TOPICS": "yes",
        "STREAMGUARD_METRICS_AGENTS": "coder, ops,",
        "STREAMGUARD_SESSION_IDLE_TTL_S": "60.5",
    }
    config = ProcessorConfig.from_env_and_args(["--group-id", "from-flag"], env=env)
    assert config.bootstrap_servers == "kafka-a:9092,kafka-b:9092"
    assert config.metrics_port == 9100
    assert config.group_id == "from-flag"
    assert config.create_topics is True
    assert config.metrics_agents == ["coder", "ops"]
    assert config.session_idle_ttl_s == 60.5
    config = ProcessorConfig.from_env_and_args(["--no-create-topics"], env=env)
    assert config.create_topics is False


def test_empty_environment_values_are_unset() -> None:
    config = ProcessorConfig.from_env_and_args([], env={"STREAMGUARD_POLICY": ""})
    assert config.policy is None


@pytest.mark.parametrize(
    ("argv", "env", "names"),
    [
        (["--metrics-port", "70000"], {}, "--metrics-port / STREAMGUARD_METRICS_PORT"),
        ([], {"STREAMGUARD_METRICS_PORT": "http"}, "--metrics-port / STREAMGUARD_METRICS_PORT"),
        (["--partitions", "0"], {}, "--partitions"),
        (["--events-topic", "bad topic"], {}, "--events-topic"),
        (["--security-protocol", "TLS"], {}, "--security-protocol"),
        ([], {"STREAMGUARD_CREATE_TOPICS": "maybe"}, "STREAMGUARD_CREATE_TOPICS"),
        (["--bootstrap-servers", "kafka"], {}, "--bootstrap-servers"),
        (["--heartbeat-interval-ms", "20000"], {}, "--heartbeat-interval-ms"),
        (["--halted-session-ttl-s", "10"], {}, "--halted-session-ttl-s"),
        (["--dlq-topic", "agent.events"], {}, "--dlq-topic"),
        (["--security-protocol", "SASL_SSL"], {}, "--sasl-username"),
        (["--ssl-certfile", "/nonexistent/cert.pem"], {}, "--ssl-certfile"),
        (["--policy", "/nonexistent/policy.toml"], {}, "--policy"),
    ],
)
def test_invalid_values_name_the_setting(argv: list[str], env: dict[str, str], names: str) -> None:
    with pytest.raises(ConfigError) as error:
        ProcessorConfig.from_env_and_args(argv, env=env)
    assert names in str(error.value)


def test_invalid_policy_content_is_a_config_error(tmp_path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('mode = "loud"\n')
    with pytest.raises(ConfigError, match="--policy"):
        ProcessorConfig.from_env_and_args(["--policy", str(policy)], env={})


def test_sasl_options_reach_the_clients() -> None:
    config = ProcessorConfig.from_env_and_args(
        ["--security-protocol", "SASL_PLAINTEXT", "--sasl-mechanism", "SCRAM-SHA-512"],
        env={"STREAMGUARD_SASL_USERNAME": "sg", "STREAMGUARD_SASL_PASSWORD": "secret"},
    )
    options = config.client_options()
    assert options["sasl_mechanism"] == "SCRAM-SHA-512"
    assert options["sasl_plain_username"] == "sg"
    assert options["sasl_plain_password"] == "secret"
    assert "ssl_context" not in options


def test_help_lists_every_setting_with_its_environment_variable() -> None:
    text = ProcessorConfig.parser().format_help()
    for name in ProcessorConfig.__struct_fields__:
        assert ProcessorConfig.flag(name) in text
    assert "STREAMGUARD_BOOTSTRAP_SERVERS" in text
    assert "secret" not in text


def test_agent_labels_are_bounded() -> None:
    labels = AgentLabels(limit=2)
    assert [labels(a) for a in ("a", "b", "c", "a", None)] == ["a", "b", "other", "a", "none"]
    for i in range(10_000):
        labels(f"agent-{i}")
    assert len(labels._seen) < 2 * 4 + 1024 + 3
    allow = AgentLabels(["coder"])
    assert [allow(a) for a in ("coder", "ops")] == ["coder", "other"]


def test_fetch_max_wait_is_configurable_and_validated() -> None:
    assert ProcessorConfig.from_env_and_args([], env={}).fetch_max_wait_ms == 500
    env = {"STREAMGUARD_FETCH_MAX_WAIT_MS": "20"}
    assert ProcessorConfig.from_env_and_args([], env=env).fetch_max_wait_ms == 20
    assert ProcessorConfig.from_env_and_args(["--fetch-max-wait-ms", "5"], env=env).fetch_max_wait_ms == 5
    with pytest.raises(ConfigError, match="fetch-max-wait-ms"):
        ProcessorConfig.from_env_and_args(["--fetch-max-wait-ms", "0"], env={})
