"""Structural checks of the Dockerfile, the compose file and the Kubernetes manifests.

Nothing here needs Docker or a cluster: the files are parsed (PyYAML) and
checked against each other and against the processor's own settings, so a
renamed setting, a port that differs between two files or a replica count above
the partition count fails here rather than at deployment.
"""

from __future__ import annotations

import http.server
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest

from streamguard.kafka.config import ProcessorConfig
from streamguard.policy import load_policy_set
from tests.deploy.promql import COMPOSE, DEPLOY, K8S, PROMETHEUS_CONFIG, load_yaml, load_yaml_all

pytestmark = pytest.mark.usefixtures("yaml_module")

SETTINGS = {ProcessorConfig.env_name(f.name): f.name for f in msgspec.structs.fields(ProcessorConfig)}
SECRET_SETTINGS = {"STREAMGUARD_SASL_USERNAME", "STREAMGUARD_SASL_PASSWORD", "STREAMGUARD_SSL_KEY_PASSWORD"}
DOCKERFILE = DEPLOY / "Dockerfile"


def validated(env: dict[str, str], tmp_path: Path) -> ProcessorConfig:
    """The settings as `streamguard run` would read them (file paths replaced by readable files)."""
    env = dict(env)
    if "STREAMGUARD_POLICY" in env:
        policy = tmp_path / "policy.toml"
        policy.write_text((DEPLOY / "policy.toml").read_text())
        env["STREAMGUARD_POLICY"] = str(policy)
    return ProcessorConfig.from_env_and_args([], env)


# ====================================================================== Dockerfile


def dockerfile_lines() -> list[str]:
    """Instructions with continuation lines joined."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def final_stage() -> list[str]:
    lines = dockerfile_lines()
    last_from = max(i for i, line in enumerate(lines) if line.upper().startswith("FROM "))
    return lines[last_from:]


def instruction(lines: list[str], name: str) -> list[str]:
    return [line[len(name) :].strip() for line in lines if line.upper().startswith(name + " ")]


def test_dockerfile_uses_a_slim_python_311_plus_base() -> None:
    lines = dockerfile_lines()
    args = dict(a.split("=", 1) for a in instruction(lines, "ARG") if "=" in a)
    for base in instruction(lines, "FROM"):
        image = base.split()[0].replace("${PYTHON_VERSION}", args.get("PYTHON_VERSION", "?"))
        match = re.fullmatch(r"python:3\.(\d+)-slim", image)
        assert match, image
        assert int(match.group(1)) >= 11


def test_dockerfile_installs_the_package_and_runs_as_non_root() -> None:
    lines = dockerfile_lines()
    runs = " ".join(instruction(lines, "RUN"))
    assert "pip wheel" in runs and " ." in runs  # the project itself, as a wheel
    assert "pip install /wheels/" in " ".join(instruction(final_stage(), "RUN"))
    users = instruction(final_stage(), "USER")
    assert users, "the final stage sets no USER"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0, "numeric non-root uid (runAsNonRoot can verify it)"
    deployment = k8s_docs()["Deployment"]
    assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == int(uid)


def test_dockerfile_entrypoint_cmd_and_port() -> None:
    stage = final_stage()
    assert instruction(stage, "ENTRYPOINT") == ['["streamguard"]']
    assert instruction(stage, "CMD") == ['["run"]']
    assert instruction(stage, "EXPOSE") == [configmap_env()["STREAMGUARD_METRICS_PORT"]]


def test_dockerfile_copies_only_what_exists_and_is_not_ignored() -> None:
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().split()
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    assert "*" in ignore
    for copy in instruction(dockerfile_lines(), "COPY"):
        if copy.startswith("--from"):
            continue
        *sources, _dest = copy.split()
        for source in sources:
            assert (DEPLOY.parent / source).exists(), source
            assert source in allowed, f"{source} is excluded from the build context"


def healthcheck_code() -> str:
    health = instruction(final_stage(), "HEALTHCHECK")
    assert len(health) == 1
    exec_form = health[0].split(" CMD ", 1)[1]
    argv = msgspec.json.decode(exec_form.strip())
    assert argv[:2] == ["python", "-c"], "slim images have no curl: the check uses Python"
    return argv[2]


class _Probe(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        code = 200 if self.path == "/healthz" and type(self).status == 200 else 503
        self.send_response(code)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.parametrize(("status", "ok"), [(200, True), (503, False)])
def test_dockerfile_healthcheck_probes_healthz(status: int, ok: bool) -> None:
    handler = type("Handler", (_Probe,), {"status": status})
    server = http.server.HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        env = {**os.environ, "STREAMGUARD_METRICS_PORT": str(server.server_address[1])}
        result = subprocess.run(
            [sys.executable, "-c", healthcheck_code()], env=env, capture_output=True, timeout=20, check=False
        )
    finally:
        server.shutdown()
        server.server_close()
    assert (result.returncode == 0) is ok, result.stderr


# ====================================================================== compose


def compose() -> dict[str, Any]:
    return load_yaml(COMPOSE)


def streamguard_services() -> dict[str, dict[str, Any]]:
    services = compose()["services"]
    return {name: s for name, s in services.items() if s.get("image", "").startswith("streamguard")}


def test_compose_has_the_expected_services() -> None:
    services = compose()["services"]
    assert {"kafka", "topic-init", "prometheus", "grafana"} <= set(services)
    assert len(streamguard_services()) == 2


def test_compose_kafka_is_single_node_kraft() -> None:
    kafka = compose()["services"]["kafka"]
    assert kafka["image"].startswith("apache/kafka:")
    env = kafka["environment"]
    assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert "CONTROLLER" in env["KAFKA_CONTROLLER_LISTENER_NAMES"]
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"].startswith(f"{env['KAFKA_NODE_ID']}@kafka:")
    assert env["KAFKA_ADVERTISED_LISTENERS"] == "PLAINTEXT://kafka:9092"
    assert "ports" not in kafka, "the broker listens on the compose network only"
    assert not any("ZOOKEEPER" in key for key in env)
    assert "healthcheck" in kafka


def test_compose_topic_init_creates_every_topic_co_partitioned() -> None:
    init = compose()["services"]["topic-init"]
    assert init["depends_on"]["kafka"]["condition"] == "service_healthy"
    script = " ".join(init["command"]) if isinstance(init["command"], list) else init["command"]
    partitions = int(init["environment"]["PARTITIONS"])
    for name, service in streamguard_services().items():
        env = service["environment"]
        for key in ("EVENTS", "CONTROL", "ALERTS", "DLQ", "CHANGELOG"):
            assert env[f"STREAMGUARD_{key}_TOPIC"] in script, (name, key)
        assert service["depends_on"]["topic-init"]["condition"] == "service_completed_successfully"
    assert "cleanup.policy=compact" in script
    assert script.count('--partitions "$$PARTITIONS"') == 2  # one loop, plus the changelog
    assert len(streamguard_services()) <= partitions


def test_compose_streamguard_instances_form_one_group(tmp_path: Path) -> None:
    groups = set()
    for name, service in streamguard_services().items():
        env = {k: str(v) for k, v in service["environment"].items()}
        unknown = set(env) - set(SETTINGS)
        assert not unknown, f"{name}: not settings of streamguard run: {unknown}"
        config = validated(env, tmp_path)
        groups.add(config.group_id)
        assert config.group_instance_id is None
        assert service["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
        assert any(v.startswith("./policy.toml:" + env["STREAMGUARD_POLICY"]) for v in service["volumes"])
        grace = int(service["stop_grace_period"].rstrip("s"))
        assert grace >= config.shutdown_timeout_s + 30
    assert len(groups) == 1


def test_compose_prometheus_scrapes_every_instance() -> None:
    services = compose()["services"]
    mounts = services["prometheus"]["volumes"]
    assert "./prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in mounts
    assert "./prometheus/rules.yml:/etc/prometheus/rules.yml:ro" in mounts
    config = load_yaml(PROMETHEUS_CONFIG)
    assert config["rule_files"] == ["rules.yml"]  # resolved next to the config file
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    targets = {t for sc in jobs["streamguard"]["static_configs"] for t in sc["targets"]}
    expected = {
        f"{name}:{service['environment']['STREAMGUARD_METRICS_PORT']}"
        for name, service in streamguard_services().items()
    }
    assert targets == expected


def test_compose_grafana_provisioning_matches_the_mounts() -> None:
    grafana = compose()["services"]["grafana"]
    mounts = dict(v.rsplit(":", 1)[0].split(":", 1) for v in grafana["volumes"])
    for source in mounts:
        assert (DEPLOY / source).exists(), source
    provisioning = DEPLOY / "grafana" / "provisioning"
    assert mounts["./grafana/provisioning"] == "/etc/grafana/provisioning"
    providers = load_yaml(provisioning / "dashboards" / "streamguard.yml")["providers"]
    dashboard_dir = providers[0]["options"]["path"]
    assert mounts["./grafana/streamguard.json"] == f"{dashboard_dir}/streamguard.json"
    datasources = load_yaml(provisioning / "datasources" / "prometheus.yml")["datasources"]
    assert [d["type"] for d in datasources] == ["prometheus"]
    assert datasources[0]["url"] == "http://prometheus:9090"


# ====================================================================== Kubernetes


def k8s_docs() -> dict[str, Any]:
    """kind -> document (ConfigMaps by name)."""
    out: dict[str, Any] = {}
    for path in sorted(K8S.glob("*.yaml")):
        if path.name in ("kustomization.yaml",) or path.name.endswith(".example.yaml"):
            continue
        for doc in load_yaml_all(path):
            key = doc["metadata"]["name"] if doc["kind"] == "ConfigMap" else doc["kind"]
            assert key not in out, f"two {key} documents"
            out[key] = doc
    return out


def configmap_env() -> dict[str, str]:
    return k8s_docs()["streamguard-config"]["data"]


def partitions() -> int:
    return int(configmap_env()["STREAMGUARD_PARTITIONS"])


def container() -> dict[str, Any]:
    containers = k8s_docs()["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def test_kustomization_lists_every_manifest() -> None:
    kustomization = load_yaml(K8S / "kustomization.yaml")
    listed = set(kustomization["resources"])
    present = {
        p.name for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml" and not p.name.endswith(".example.yaml")
    }
    assert listed == present
    image = container()["image"].split(":")[0]
    assert image in {i["name"] for i in kustomization["images"]}


def test_configmap_settings_are_valid(tmp_path: Path) -> None:
    env = configmap_env()
    unknown = set(env) - set(SETTINGS)
    assert not unknown, f"not settings of streamguard run: {unknown}"
    assert not (set(env) & SECRET_SETTINGS), "secrets belong in the Secret"
    config = validated(env, tmp_path)
    assert config.replication_factor >= 3
    assert config.create_topics is False


def test_secret_example_holds_only_secret_settings() -> None:
    (secret,) = load_yaml_all(K8S / "secret.example.yaml")
    assert set(secret["stringData"]) <= SECRET_SETTINGS
    env_from = container()["envFrom"]
    refs = [e["secretRef"] for e in env_from if "secretRef" in e]
    assert refs == [{"name": secret["metadata"]["name"], "optional": True}]


def test_policy_configmap_is_the_shipped_policy(tmp_path: Path) -> None:
    text = k8s_docs()["streamguard-policy"]["data"]["policy.toml"]
    assert text == (DEPLOY / "policy.toml").read_text()
    path = tmp_path / "policy.toml"
    path.write_text(text)
    assert load_policy_set(str(path)).base.mode == "enforce"


def test_policy_is_mounted_where_the_setting_points() -> None:
    spec = k8s_docs()["Deployment"]["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    target = Path(configmap_env()["STREAMGUARD_POLICY"])
    (mount,) = [m for m in container()["volumeMounts"] if m["mountPath"] == str(target.parent)]
    assert mount["readOnly"] is True
    source = volumes[mount["name"]]["configMap"]
    assert source["name"] == "streamguard-policy"
    assert {"key": "policy.toml", "path": target.name} in source["items"]


def test_deployment_probes_hit_healthz_and_readyz_on_the_metrics_port() -> None:
    c = container()
    port = int(configmap_env()["STREAMGUARD_METRICS_PORT"])
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"metrics": port}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}


def test_deployment_runs_as_non_root_and_locked_down() -> None:
    spec = k8s_docs()["Deployment"]["spec"]["template"]["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] != 0
    assert spec["automountServiceAccountToken"] is False
    sc = container()["securityContext"]
    assert sc["runAsNonRoot"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"]["drop"] == ["ALL"]


def test_deployment_resources_and_grace_period() -> None:
    resources = container()["resources"]
    assert {"cpu", "memory"} <= set(resources["requests"])
    assert "memory" in resources["limits"]
    spec = k8s_docs()["Deployment"]["spec"]["template"]["spec"]
    shutdown = float(configmap_env()["STREAMGUARD_SHUTDOWN_TIMEOUT_S"])
    # the final flush, then closing three Kafka clients
    assert spec["terminationGracePeriodSeconds"] >= shutdown + 30


def test_deployment_reads_settings_from_configmap_and_secret() -> None:
    env_from = container()["envFrom"]
    assert {"configMapRef": {"name": "streamguard-config"}} in env_from
    names = {e["name"] for e in container().get("env", [])}
    assert names <= set(SETTINGS)
    assert "STREAMGUARD_GROUP_INSTANCE_ID" not in names | set(configmap_env())


def test_replicas_never_exceed_the_partition_count() -> None:
    docs = k8s_docs()
    replicas = docs["Deployment"]["spec"]["replicas"]
    scaled = docs["ScaledObject"]["spec"]
    assert 1 <= scaled["minReplicaCount"] <= scaled["maxReplicaCount"] <= partitions()
    assert replicas <= partitions()
    assert scaled["minReplicaCount"] <= replicas <= scaled["maxReplicaCount"]
    text = (K8S / "scaledobject.yaml").read_text()
    assert re.search(r"#[^\n]*[Nn]ever above the partition count", text)


def test_scaled_object_watches_the_group_and_topic() -> None:
    docs = k8s_docs()
    scaled = docs["ScaledObject"]
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"
    assert scaled["spec"]["scaleTargetRef"]["name"] == docs["Deployment"]["metadata"]["name"]
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "kafka"
    meta = trigger["metadata"]
    env = configmap_env()
    assert meta["bootstrapServers"] == env["STREAMGUARD_BOOTSTRAP_SERVERS"]
    assert meta["consumerGroup"] == env["STREAMGUARD_GROUP_ID"]
    assert meta["topic"] == env["STREAMGUARD_EVENTS_TOPIC"]
    assert int(meta["lagThreshold"]) > 0
    assert meta["allowIdleConsumers"] == "false"


def test_service_and_service_monitor_select_the_pods_and_port() -> None:
    docs = k8s_docs()
    pod_labels = docs["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert docs["Deployment"]["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    service = docs["Service"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] == "metrics"
    assert port["port"] == int(configmap_env()["STREAMGUARD_METRICS_PORT"])
    monitor = docs["ServiceMonitor"]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == port["name"]
    assert endpoint["path"] == "/metrics"
    # The alert rules select up{job="streamguard"}.
    assert service["metadata"]["labels"][monitor["spec"]["jobLabel"]] == "streamguard"


def test_pod_disruption_budget() -> None:
    docs = k8s_docs()
    pdb = docs["PodDisruptionBudget"]
    assert pdb["apiVersion"] == "policy/v1"
    pod_labels = docs["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert pdb["spec"].get("maxUnavailable") == 1


def test_kustomize_renders_when_kubectl_is_available() -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed (optional: renders deploy/k8s with kustomize)")
    result = subprocess.run(
        [kubectl, "kustomize", str(K8S)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    kinds = sorted(doc["kind"] for doc in load_yaml_all_text(result.stdout))
    assert kinds == sorted(
        ["ConfigMap", "ConfigMap", "Deployment", "Service", "PodDisruptionBudget", "ServiceMonitor", "ScaledObject"]
    )


def load_yaml_all_text(text: str) -> list[Any]:
    import yaml

    return [doc for doc in yaml.safe_load_all(text) if doc is not None]


def test_shell_snippets_in_compose_parse() -> None:
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash is not installed")
    script = compose()["services"]["topic-init"]["command"][0].replace("$$", "$")
    result = subprocess.run([bash, "-n", "-c", script], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert shlex.split(compose()["services"]["kafka"]["healthcheck"]["test"][1])
