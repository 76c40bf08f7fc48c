"""The deployment files: Kubernetes manifests (kustomize base and Redis overlay) validated
offline against the Kubernetes 1.37 schemas, the policies they carry checked by
`sluice check-config`, and the Prometheus alert rules checked (structure, metric names the
gateway registers, and `promtool` when installed)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from conftest import REPO_ROOT, sluice_bin

KUBE = REPO_ROOT / "deploy" / "kubernetes"
PROMETHEUS = REPO_ROOT / "deploy" / "prometheus"
KUBERNETES_VERSION = "1.37.0"
KUSTOMIZATIONS = [KUBE / "base", KUBE / "overlays" / "redis"]


def rendered(directory: Path) -> list[dict]:
    """The kustomization's resources: rendered by `kubectl kustomize` when kubectl is
    installed, else its resource files as written (patches not applied)."""
    if shutil.which("kubectl"):
        out = subprocess.run(["kubectl", "kustomize", str(directory)], check=True, capture_output=True, text=True)
        return [d for d in yaml.safe_load_all(out.stdout) if d]
    docs: list[dict] = []
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    for resource in kustomization.get("resources", []):
        path = (directory / resource).resolve()
        if path.is_dir():
            docs.extend(rendered(path))
        else:
            docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


def by_kind(docs: list[dict], kind: str, name: str) -> dict:
    matches = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(matches) == 1, f"{kind}/{name}: {len(matches)} found"
    return matches[0]


@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=lambda d: d.name)
def test_manifests_are_valid_kubernetes(directory: Path) -> None:
    docs = rendered(directory)
    kinds = {d["kind"] for d in docs}
    assert {"Deployment", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler", "ServiceMonitor",
            "NetworkPolicy"} <= kinds
    for doc in docs:
        if doc["kind"] == "ServiceMonitor":
            # A Prometheus Operator resource: no bundled schema; its shape is checked here.
            assert doc["apiVersion"] == "monitoring.coreos.com/v1"
            endpoint = doc["spec"]["endpoints"][0]
            assert (endpoint["port"], endpoint["path"]) == ("admin", "/metrics")
            continue
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_the_deployment_probes_drains_runs_unprivileged_and_takes_keys_from_a_secret() -> None:
    deployment = by_kind(rendered(KUBE / "base"), "Deployment", "sluice")
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    # Drain: a pause before SIGTERM, and room for the policy's shutdown_grace after it.
    pause = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    policy = tomllib.loads((KUBE / "base" / "sluice.toml").read_text())
    grace = int(policy["server"]["shutdown_grace"].removesuffix("s"))
    assert pod["terminationGracePeriodSeconds"] > pause + grace
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    env = {e["name"]: e for e in container["env"]}
    assert "secretKeyRef" in env["OPENAI_API_KEY"]["valueFrom"]
    # No provider key in the policy itself.
    assert "api_key =" not in (KUBE / "base" / "sluice.toml").read_text()
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert {"/etc/sluice", "/var/lib/sluice"} <= mounts


@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=lambda d: d.name)
def test_the_policies_pass_check_config_with_exactly_the_variables_the_pod_is_given(directory: Path) -> None:
    policy = directory / "sluice.toml"
    # Without the secrets, check-config names what the pod must be given ...
    bare = subprocess.run([str(sluice_bin()), "check-config", str(policy)], capture_output=True, text=True, env={})
    assert bare.returncode != 0 and "OPENAI_API_KEY" in bare.stderr, bare.stderr
    file_only = subprocess.run([str(sluice_bin()), "check-config", "--file-only", str(policy)],
                               capture_output=True, text=True, env={})
    assert file_only.returncode == 0, file_only.stderr
    # ... and the manifests give it every one of them (from Secrets, never the ConfigMap).
    if shutil.which("kubectl"):
        pod = by_kind(rendered(directory), "Deployment", "sluice")["spec"]["template"]["spec"]
        given = {e["name"]: "set-by-the-test" for e in pod["containers"][0].get("env", []) if "valueFrom" in e}
        out = subprocess.run([str(sluice_bin()), "check-config", str(policy)], capture_output=True, text=True,
                             env=given)
        assert out.returncode == 0, out.stderr


@pytest.mark.skipif(not shutil.which("kubectl"), reason="the overlay's patches need kubectl kustomize")
def test_the_redis_overlay_runs_replicas_on_one_redis_and_the_base_only_one() -> None:
    base = rendered(KUBE / "base")
    assert by_kind(base, "Deployment", "sluice")["spec"]["replicas"] == 1
    assert by_kind(base, "HorizontalPodAutoscaler", "sluice")["spec"]["maxReplicas"] == 1
    docs = rendered(KUBE / "overlays" / "redis")
    assert by_kind(docs, "Deployment", "sluice")["spec"]["replicas"] == 3
    by_kind(docs, "Service", "sluice-redis")
    config = next(d for d in docs if d["kind"] == "ConfigMap")
    policy = tomllib.loads(config["data"]["sluice.toml"])
    assert policy["store"]["kind"] == "redis" and "sluice-redis" in policy["store"]["url"]
    # fail_open_local divides limits by `instances`: never more replicas than that.
    assert by_kind(docs, "HorizontalPodAutoscaler", "sluice")["spec"]["maxReplicas"] <= policy["store"]["instances"]
    mounted = by_kind(docs, "Deployment", "sluice")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "config", "configMap": {"name": config["metadata"]["name"]}} in mounted


@pytest.mark.skipif(not shutil.which("kubectl"), reason="the overlay's patches need kubectl kustomize")
def test_a_drain_never_takes_the_only_pod_and_replicas_spread_and_go_one_at_a_time() -> None:
    base = rendered(KUBE / "base")
    # One replica: the budget keeps it (the drain waits for a rollout to move it).
    assert by_kind(base, "PodDisruptionBudget", "sluice")["spec"] == {
        "minAvailable": 1, "selector": {"matchLabels": {"app.kubernetes.io/name": "sluice"}}}
    docs = rendered(KUBE / "overlays" / "redis")
    pdb = by_kind(docs, "PodDisruptionBudget", "sluice")["spec"]
    replicas = by_kind(docs, "Deployment", "sluice")["spec"]["replicas"]
    assert "minAvailable" not in pdb and pdb["maxUnavailable"] == 1 < replicas
    spread = by_kind(docs, "Deployment", "sluice")["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert {c["topologyKey"] for c in spread} == {"kubernetes.io/hostname", "topology.kubernetes.io/zone"}
    # Scales on requests waiting per pod as well as on CPU.
    metrics = by_kind(docs, "HorizontalPodAutoscaler", "sluice")["spec"]["metrics"]
    assert {m["type"] for m in metrics} == {"Resource", "Pods"}
    assert any(m.get("pods", {}).get("metric", {}).get("name") == "sluice_queue_depth" for m in metrics)
    assert "sluice_queue_depth" in registered_metrics()


@pytest.mark.skipif(not shutil.which("kubectl"), reason="the overlay's patches need kubectl kustomize")
def test_redis_keeps_its_file_on_a_claim_runs_locked_down_and_only_sluice_reaches_it() -> None:
    docs = rendered(KUBE / "overlays" / "redis")
    redis = by_kind(docs, "StatefulSet", "sluice-redis")
    pod = redis["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert "--appendonly" in container["args"]
    claims = {c["metadata"]["name"] for c in redis["spec"]["volumeClaimTemplates"]}
    assert {m["name"] for m in container["volumeMounts"]} <= claims
    assert not [v for v in pod.get("volumes", []) if "emptyDir" in v], "no data on an emptyDir"
    assert container["livenessProbe"] and container["readinessProbe"]
    # A password from a Secret, shared with sluice's pods; none in any ConfigMap.
    assert "--requirepass" in container["args"] and "$(REDIS_PASSWORD)" in container["args"]
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"]}
    assert env["REDIS_PASSWORD"] == env["REDISCLI_AUTH"] == {"name": "sluice-redis", "key": "password"}
    sluice = by_kind(docs, "Deployment", "sluice")["spec"]["template"]["spec"]["containers"][0]
    sluice_env = {e["name"]: e.get("valueFrom", {}).get("secretKeyRef") for e in sluice["env"]}
    assert sluice_env["REDIS_PASSWORD"] == {"name": "sluice-redis", "key": "password"}
    config = next(d for d in docs if d["kind"] == "ConfigMap")
    policy = tomllib.loads(config["data"]["sluice.toml"])
    assert policy["store"]["password_env"] == "REDIS_PASSWORD" and "@" not in policy["store"]["url"]
    context = container["securityContext"]
    assert context["allowPrivilegeEscalation"] is False and context["readOnlyRootFilesystem"] is True
    assert context["capabilities"]["drop"] == ["ALL"] and pod["securityContext"]["runAsNonRoot"] is True
    policy = by_kind(docs, "NetworkPolicy", "sluice-redis")["spec"]
    assert policy["podSelector"]["matchLabels"] == {"app.kubernetes.io/component": "redis"}
    sources = [peer["podSelector"]["matchLabels"] for rule in policy["ingress"] for peer in rule["from"]]
    assert sources == [{"app.kubernetes.io/name": "sluice"}]
    # sluice's own policy lets it out to Redis, DNS and HTTPS only.
    egress = by_kind(docs, "NetworkPolicy", "sluice")["spec"]["egress"]
    ports = sorted({p["port"] for rule in egress for p in rule["ports"]})
    assert ports == [53, 443, 6379]


def test_the_admin_plane_has_a_port_of_its_own_reached_from_monitoring_only() -> None:
    docs = rendered(KUBE / "base")
    container = by_kind(docs, "Deployment", "sluice")["spec"]["template"]["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http": 8080, "admin": 9090}
    service = {p["name"]: (p["port"], p["targetPort"]) for p in by_kind(docs, "Service", "sluice")["spec"]["ports"]}
    assert service == {"http": (8080, "http"), "admin": (9090, "admin")}
    assert by_kind(docs, "ServiceMonitor", "sluice")["spec"]["endpoints"][0]["port"] == "admin"
    ingress = by_kind(docs, "NetworkPolicy", "sluice")["spec"]["ingress"]
    admin = [rule for rule in ingress if any(p["port"] == "admin" for p in rule["ports"])]
    assert len(admin) == 1, ingress
    # Only from the monitoring namespace: a namespaceSelector, no open rule.
    assert admin[0]["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    assert all("from" in rule for rule in ingress if any(p["port"] == "admin" for p in rule["ports"]))
    # The API port stays open to the cluster; nothing else is let in.
    assert sorted(p["port"] for rule in ingress for p in rule["ports"]) == ["admin", "http"]
    # The image listens on both, on every interface.
    dockerfile = (REPO_ROOT / "deploy" / "Dockerfile").read_text()
    assert "SLUICE_ADMIN_LISTEN=0.0.0.0:9090" in dockerfile and "EXPOSE 8080 9090" in dockerfile


def test_the_image_is_stripped_and_healthy_while_the_process_answers() -> None:
    dockerfile = (REPO_ROOT / "deploy" / "Dockerfile").read_text()
    healthcheck = dockerfile[dockerfile.index("HEALTHCHECK"):].split("\n\n")[0]
    assert "/healthz" in healthcheck and "/readyz" not in healthcheck
    assert "CARGO_PROFILE_RELEASE_STRIP=symbols" in dockerfile
    assert "CARGO_PROFILE_RELEASE_DEBUG=false" in dockerfile
    # Every base image comes through a build argument a release build pins by digest.
    froms = [line.split()[1] for line in dockerfile.splitlines() if line.startswith("FROM ")]
    assert froms == ["${BUILD_IMAGE}", "${RUNTIME_IMAGE}"]


def registered_metrics() -> set[str]:
    """Metric names the gateway registers (as written in its source)."""
    names: set[str] = set()
    for source in (REPO_ROOT / "crates" / "sluice-server" / "src").rglob("*.rs"):
        text = source.read_text()
        names.update(re.findall(r'"((?:llm|sluice)_[a-z0-9_]+)"', text))
        # The request path's metrics, registered by their short name under `sluice_`.
        names.update("sluice_" + n for n in re.findall(r'both\.register\(\s*registry,\s*"([a-z0-9_]+)"', text))
    return names


def test_alert_rules_are_well_formed_and_name_only_metrics_the_gateway_exports() -> None:
    rules = yaml.safe_load((PROMETHEUS / "alerts.yml").read_text())
    alerts = {r["alert"]: r for group in rules["groups"] for r in group["rules"]}
    assert {"SluiceStoreDegraded", "SluiceProviderRejectsAdmitted", "SluiceQueueWaitHigh"} <= set(alerts)
    known = registered_metrics()
    for name, rule in alerts.items():
        assert rule["labels"]["severity"] in {"warning", "critical"}, name
        assert rule["annotations"]["summary"] and rule["for"], name
        for metric in re.findall(r"\b((?:llm|sluice)_[a-z0-9_]+)", rule["expr"]):
            base = re.sub(r"_(total|bucket|sum|count)$", "", metric)
            assert base in known, f"{name}: {metric} is not a metric sluice exports"


@pytest.mark.skipif(not shutil.which("promtool"), reason="promtool is not installed")
def test_alert_rules_pass_promtool_and_their_unit_tests() -> None:
    check = subprocess.run(["promtool", "check", "rules", "alerts.yml"], cwd=PROMETHEUS, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    test = subprocess.run(
        ["promtool", "test", "rules", "alerts.test.yml"], cwd=PROMETHEUS, capture_output=True, text=True
    )
    assert test.returncode == 0, test.stdout + test.stderr
