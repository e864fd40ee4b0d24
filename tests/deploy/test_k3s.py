"""k3s/: every overlay renders, validates strictly, and its objects fit together."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from streamtts import routes
from tests.support.routetable import front_door_cases

from . import kustomize_lite
from .tools import K3S, REPO, assert_patched_redis, require_tool, run

OVERLAYS = ["jetson", "cpu", "cluster"]
# The Kubernetes versions checked: a k3s of JetPack 6's time and the newest schema at hand.
KUBERNETES_VERSIONS = ["1.31.0", "1.34.0"]
WORKLOADS = {"Deployment", "StatefulSet"}


@pytest.fixture(scope="module")
def k3s_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of k3s/ with the secrets.env an operator would create from the example."""
    tree = tmp_path_factory.mktemp("k3s") / "k3s"
    shutil.copytree(K3S, tree, ignore=shutil.ignore_patterns("secrets.env", "streamtts.env"))
    example = (tree / "base" / "secrets.env.example").read_text()
    (tree / "base" / "secrets.env").write_text(example.replace("replace-me", "test-value"))
    shutil.copy(tree / "base" / "streamtts.env.example", tree / "base" / "streamtts.env")
    return tree


@pytest.fixture(scope="module", params=OVERLAYS)
def overlay(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def rendered(k3s_tree: Path, overlay: str) -> list[dict[str, Any]]:
    return kustomize_lite.render(k3s_tree / "overlays" / overlay)


def find(resources: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    [match] = [r for r in resources if r["kind"] == kind and r["metadata"]["name"] == name]
    return match


def pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    return workload["spec"]["template"]["spec"]  # type: ignore[no-any-return]


def container(workload: dict[str, Any]) -> dict[str, Any]:
    return pod_spec(workload)["containers"][0]  # type: ignore[no-any-return]


def config_value(resources: list[dict[str, Any]], key: str) -> str:
    return str(find(resources, "ConfigMap", "streamtts-config")["data"][key])


def kubernetes_validate(path: Path) -> Any:
    validator = require_tool("kubernetes-validate", "pip install kubernetes-validate")
    versions = [arg for v in KUBERNETES_VERSIONS for arg in ("-k", v)]
    return run([validator, "--strict", "--quiet", *versions, str(path)])


def test_overlay_validates_strictly(rendered: list[dict[str, Any]], tmp_path: Path) -> None:
    path = tmp_path / "rendered.yaml"
    path.write_text(yaml.safe_dump_all(rendered))
    result = kubernetes_validate(path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_strict_validation_can_fail(rendered: list[dict[str, Any]], tmp_path: Path) -> None:
    broken = [dict(r) for r in rendered]
    synth = find(broken, "Deployment", "synth")
    synth["spec"] = {**synth["spec"], "terminationGracePeriod": 45}
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump_all(broken))
    assert kubernetes_validate(path).returncode != 0


def test_rendering_needs_the_operators_secrets_file(k3s_tree: Path, tmp_path: Path) -> None:
    tree = tmp_path / "k3s"
    shutil.copytree(k3s_tree, tree)
    (tree / "base" / "secrets.env").unlink()
    with pytest.raises(FileNotFoundError, match="secrets.env"):
        kustomize_lite.render(tree / "overlays" / "jetson")


def test_secret_values_in_the_repo_are_placeholders() -> None:
    for line in (K3S / "base" / "secrets.env.example").read_text().splitlines():
        if line and not line.startswith("#"):
            assert line.split("=", 1)[1].startswith("replace-me"), line
    tracked = run(["git", "-C", str(REPO), "ls-files", "k3s"]).stdout.split()
    assert "k3s/base/secrets.env" not in tracked
    assert "k3s/base/streamtts.env" not in tracked


def test_renderer_agrees_with_kustomize(k3s_tree: Path, overlay: str) -> None:
    """Only where pykustomize (kustomize compiled as a library) is installed."""
    pykustomize = pytest.importorskip("pykustomize")
    import asyncio

    built = asyncio.run(pykustomize.Kustomizer().build(str(k3s_tree / "overlays" / overlay)))

    def key(resource: dict[str, Any]) -> tuple[str, str]:
        return resource["kind"], resource["metadata"]["name"]

    theirs = sorted((r for r in yaml.safe_load_all(built.yaml) if r), key=key)
    ours = sorted(kustomize_lite.render(k3s_tree / "overlays" / overlay), key=key)
    assert ours == theirs


def test_everything_lives_in_the_namespace(rendered: list[dict[str, Any]]) -> None:
    namespace = find(rendered, "Namespace", "streamtts")
    assert namespace["metadata"]["name"] == "streamtts"
    for resource in rendered:
        if resource["kind"] != "Namespace":
            assert resource["metadata"]["namespace"] == "streamtts", resource["metadata"]["name"]


def test_redis_is_durable(rendered: list[dict[str, Any]]) -> None:
    redis = find(rendered, "StatefulSet", "redis")
    [claim] = redis["spec"]["volumeClaimTemplates"]
    mounts = {m["name"]: m["mountPath"] for m in container(redis)["volumeMounts"]}
    assert mounts[claim["metadata"]["name"]] == "/data"
    conf = find(rendered, "ConfigMap", "streamtts-redis")["data"]["redis.conf"]
    assert "\nappendonly yes\n" in conf
    assert config_value(rendered, "REDIS_APPENDFSYNC") == "always"
    maxmemory = config_value(rendered, "REDIS_MAXMEMORY")
    assert maxmemory.endswith("gb")
    limit = container(redis)["resources"]["limits"]["memory"]
    assert limit.endswith("Gi") and int(maxmemory[:-2]) < int(limit[:-2])
    for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container(redis)[kind]["exec"]["command"] == [
            "sh", "-c", 'REDISCLI_AUTH="$REDIS_PASSWORD_ADMIN" redis-cli --user admin ping | grep -qx PONG']
    assert container(redis)["startupProbe"]["failureThreshold"] * container(redis)["startupProbe"]["periodSeconds"] >= 300
    assert_patched_redis(container(redis)["image"])


def test_edge_is_highly_available(rendered: list[dict[str, Any]]) -> None:
    edge = find(rendered, "Deployment", "edge")
    labels = edge["spec"]["template"]["metadata"]["labels"]
    assert edge["spec"]["replicas"] >= 2
    pdb = find(rendered, "PodDisruptionBudget", "edge")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["spec"]["minAvailable"] >= 1
    hpa = find(rendered, "HorizontalPodAutoscaler", "edge")
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                             "name": "edge"}
    assert hpa["spec"]["minReplicas"] >= 2
    assert "cpu" in container(edge)["resources"]["requests"]  # what the HPA's target is relative to


@pytest.mark.parametrize("name", ["intake", "edge", "synth"])
def test_services_are_probed_on_healthz_and_readyz(rendered: list[dict[str, Any]], name: str) -> None:
    c = container(find(rendered, "Deployment", name))
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        assert c[probe]["httpGet"]["path"] == path
        assert c[probe]["httpGet"]["port"] in ports


def test_services_listen_beyond_their_loopback(rendered: list[dict[str, Any]]) -> None:
    for setting in ("INTAKE_HOST", "EDGE_HOST", "SYNTH_METRICS_HOST"):
        assert config_value(rendered, setting) == "0.0.0.0"
    for name, setting in (("intake", "INTAKE_PORT"), ("edge", "EDGE_PORT"),
                          ("synth", "SYNTH_METRICS_PORT")):
        ports = [p["containerPort"] for p in container(find(rendered, "Deployment", name))["ports"]]
        assert ports[0] == int(config_value(rendered, setting))
    edge_ports = {p["name"]: p["containerPort"] for p in container(find(rendered, "Deployment", "edge"))["ports"]}
    assert edge_ports["metrics"] == int(config_value(rendered, "EDGE_METRICS_PORT"))  # off the Ingress's port


@pytest.mark.parametrize("name", ["intake", "edge", "synth"])
def test_services_are_scraped(rendered: list[dict[str, Any]], name: str) -> None:
    workload = find(rendered, "Deployment", name)
    annotations = workload["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/path"] == "/metrics"
    ports = [p["containerPort"] for p in container(workload)["ports"]]
    assert int(annotations["prometheus.io/port"]) in ports


def test_synth_gets_longer_than_its_grace_to_stop(rendered: list[dict[str, Any]]) -> None:
    synth = find(rendered, "Deployment", "synth")
    grace = int(config_value(rendered, "SYNTH_GRACE_S"))
    assert pod_spec(synth)["terminationGracePeriodSeconds"] > grace


def test_synth_hardware(rendered: list[dict[str, Any]], overlay: str) -> None:
    synth = find(rendered, "Deployment", "synth")
    limits = container(synth)["resources"]["limits"]
    if overlay == "jetson":
        assert pod_spec(synth)["runtimeClassName"] == "nvidia"
        assert limits["nvidia.com/gpu"] == 1
        assert config_value(rendered, "SYNTH_BACKEND") == "torch"
        assert container(synth)["image"] == "streamtts/synth:dev-jetson"
    else:
        assert "runtimeClassName" not in pod_spec(synth)
        assert "nvidia.com/gpu" not in limits
        assert config_value(rendered, "SYNTH_BACKEND") == "onnx"
        assert container(synth)["image"] == "streamtts/synth:dev-cpu"


def test_model_weights_are_mounted_read_only(rendered: list[dict[str, Any]]) -> None:
    synth = find(rendered, "Deployment", "synth")
    [mount] = [m for m in container(synth)["volumeMounts"] if m["mountPath"] == "/models/kokoro"]
    assert mount["readOnly"] is True
    assert config_value(rendered, "KOKORO_MODEL_DIR") == "/models/kokoro"


@pytest.mark.parametrize("name", ["intake", "edge", "synth"])
def test_services_use_their_own_redis_user(rendered: list[dict[str, Any]], name: str) -> None:
    env = {e["name"]: e for e in container(find(rendered, "Deployment", name))["env"]}
    secret = env["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]
    assert secret["key"] == f"REDIS_PASSWORD_{name.upper()}"
    assert env["REDIS_URL"]["value"] == f"redis://{name}:$(REDIS_PASSWORD)@redis:6379/0"


def test_pods_run_unprivileged(rendered: list[dict[str, Any]]) -> None:
    for workload in (r for r in rendered if r["kind"] in WORKLOADS):
        spec = pod_spec(workload)
        assert spec["securityContext"]["runAsNonRoot"] is True
        for c in spec["containers"]:
            assert c["securityContext"]["allowPrivilegeEscalation"] is False
            assert c["securityContext"]["readOnlyRootFilesystem"] is True
            assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]


def _references(workload: dict[str, Any]) -> Iterator[tuple[str, str, str | None]]:
    """(kind, name, key or None) of every ConfigMap and Secret a workload uses."""
    spec = pod_spec(workload)
    for c in spec["containers"]:
        for source in c.get("envFrom", []):
            for field, kind in (("configMapRef", "ConfigMap"), ("secretRef", "Secret")):
                if field in source:
                    yield kind, source[field]["name"], None
        for env in c.get("env", []):
            for field, kind in (("configMapKeyRef", "ConfigMap"), ("secretKeyRef", "Secret")):
                ref = env.get("valueFrom", {}).get(field)
                if ref:
                    yield kind, ref["name"], ref["key"]
    for volume in spec.get("volumes", []):
        if "configMap" in volume:
            yield "ConfigMap", volume["configMap"]["name"], None


def test_every_reference_resolves(rendered: list[dict[str, Any]]) -> None:
    for workload in (r for r in rendered if r["kind"] in WORKLOADS):
        for kind, name, key in _references(workload):
            target = find(rendered, kind, name)
            if key:
                assert key in target["data"], (workload["metadata"]["name"], kind, name, key)
        names = {v["name"] for v in pod_spec(workload).get("volumes", [])}
        names |= {t["metadata"]["name"] for t in workload["spec"].get("volumeClaimTemplates", [])}
        for c in pod_spec(workload)["containers"]:
            assert {m["name"] for m in c.get("volumeMounts", [])} <= names


def test_every_service_selects_pods_with_its_port(rendered: list[dict[str, Any]]) -> None:
    workloads = [r for r in rendered if r["kind"] in WORKLOADS]
    for service in (r for r in rendered if r["kind"] == "Service"):
        selector = service["spec"]["selector"]
        [workload] = [w for w in workloads
                      if selector.items() <= w["spec"]["template"]["metadata"]["labels"].items()]
        ports = {p["name"] for c in pod_spec(workload)["containers"] for p in c["ports"]}
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in ports


# A Traefik rule's words: a matcher with its argument, an operator, a parenthesis.
RULE_TOKEN = re.compile(r"\s*(?:(Path|PathPrefix|Method)\(`([^`]*)`\)|(&&|\|\||!|\(|\)))")


def rule_matches(rule: str, method: str, path: str) -> bool:
    """Whether a Traefik rule of Path, PathPrefix, Method, !, && and || matches the request,
    read as Traefik v2 and v3 both read it (&& binds tighter than ||)."""
    tokens = []
    position = 0
    while position < len(rule.rstrip()):
        token = RULE_TOKEN.match(rule, position)
        assert token, f"a matcher this check does not read at {rule[position:]!r}: add it here or use these"
        tokens.append(token.groups())
        position = token.end()
    tokens.append((None, None, "end"))

    def chain(i: int, operator: str = "||") -> tuple[bool, int]:
        """Operands joined by ``operator``: ``||`` joins ``&&`` chains, ``&&`` joins single terms."""
        operand = (lambda at: chain(at, "&&")) if operator == "||" else one
        value, i = operand(i)
        while tokens[i][2] == operator:
            other, i = operand(i + 1)
            value = value or other if operator == "||" else value and other
        return value, i

    def one(i: int) -> tuple[bool, int]:
        name, argument, operator = tokens[i]
        if operator == "!":
            value, i = one(i + 1)
            return not value, i
        if operator == "(":
            value, i = chain(i + 1)
            assert tokens[i][2] == ")", rule
            return value, i + 1
        matched = {"Path": path == argument, "PathPrefix": path.startswith(argument or ""),
                   "Method": method == argument}[name or ""]
        return matched, i + 1

    value, end = chain(0)
    assert tokens[end][2] == "end", rule
    return value


def route_backend(ingress: dict[str, Any], method: str, path: str) -> tuple[str, str]:
    """The Service and port Traefik picks: the matching rule of the highest priority."""
    path = path.split("?")[0]
    matching = [r for r in ingress["spec"]["routes"] if rule_matches(r["match"], method, path)]
    assert matching, (method, path)
    [service] = max(matching, key=lambda r: r["priority"])["services"]
    return service["name"], service["port"]


@pytest.mark.rule("one-route-table")
@pytest.mark.parametrize(("method", "path", "service"), front_door_cases())
def test_ingress_routes_by_the_route_table(rendered: list[dict[str, Any]], method: str,
                                           path: str, service: str) -> None:
    """#34 item 8: the Ingress sent live text, close, cancel and the admin's DELETE to edge, and
    Durable Streams reads to intake. /metrics, which Traefik cannot refuse, reaches edge's public
    port, where edge serves none (test_edge_metrics_stay_private)."""
    ingress = find(rendered, "IngressRoute", "streamtts")
    priorities = [r["priority"] for r in ingress["spec"]["routes"]]
    assert len(set(priorities)) == len(priorities)  # no two rules left to Traefik's own order
    name, port = route_backend(ingress, method, path)
    assert name == (routes.EDGE if service == routes.HIDDEN else service)
    target = find(rendered, "Service", name)
    assert port in {p["name"] for p in target["spec"]["ports"]}


def test_podmonitor_option_scrapes_each_service_on_a_port_it_has(rendered: list[dict[str, Any]]) -> None:
    monitor = yaml.safe_load((K3S / "extras" / "podmonitors.yaml").read_text())
    assert monitor["kind"] == "PodMonitor" and monitor["metadata"]["namespace"] == "streamtts"
    [names] = [e["values"] for e in monitor["spec"]["selector"]["matchExpressions"]]
    endpoints = monitor["spec"]["podMetricsEndpoints"]
    for name in names:
        ports = {p["name"] for p in container(find(rendered, "Deployment", name))["ports"]}
        scraped = [e for e in endpoints if e["port"] in ports
                   and all(r.get("regex") == name for r in e.get("relabelings", []))]
        assert len(scraped) == 1, name  # once, and never edge's public port


def test_edge_metrics_stay_private(rendered: list[dict[str, Any]]) -> None:
    """The Ingress sends /metrics to edge's public port; config.env moves edge's metrics to a
    port of their own (edge answers 404 for /metrics elsewhere: tests/edge/test_edge_metrics_port.py),
    which the Service does not expose, so nothing outside the cluster reads them."""
    public = int(config_value(rendered, "EDGE_PORT"))
    metrics = int(config_value(rendered, "EDGE_METRICS_PORT"))
    assert metrics not in (0, public)
    name, port_name = route_backend(find(rendered, "IngressRoute", "streamtts"), "GET", "/metrics")
    [port] = [p for p in find(rendered, "Service", name)["spec"]["ports"] if p["name"] == port_name]
    ports = {p["name"]: p["containerPort"] for p in container(find(rendered, "Deployment", "edge"))["ports"]}
    assert ports[port["targetPort"]] == public
    exposed = {p["targetPort"] for p in find(rendered, "Service", "edge")["spec"]["ports"]}
    assert all(ports.get(p, p) != metrics for p in exposed)
    guide = (REPO / "docs" / "deploy.md").read_text() + (K3S / "base" / "ingress.yaml").read_text()
    assert "is reachable" not in guide.replace("\n", " ")


@pytest.mark.rule("webrtc-ports")
def test_intake_holds_its_webrtc_ports_on_the_node(rendered: list[dict[str, Any]]) -> None:
    """Every port of WEBRTC_UDP_PORTS is a UDP hostPort of the same number, and the candidates
    name the node's address (WEBRTC_PUBLIC_IP's fallback, so that streamtts.env may still set it)."""
    from intake.config import port_range

    first, last = port_range(config_value(rendered, "WEBRTC_UDP_PORTS"))
    intake = container(find(rendered, "Deployment", "intake"))
    udp = [p for p in intake["ports"] if p.get("protocol") == "UDP"]
    assert [(p["containerPort"], p["hostPort"]) for p in udp] == [(n, n) for n in range(first, last + 1)]
    env = {e["name"]: e for e in intake["env"]}
    assert env["WEBRTC_NODE_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.hostIP"


def test_the_base_schedules_on_stock_k3s(rendered: list[dict[str, Any]]) -> None:
    """k3s's local-path class serves only ReadWriteOnce: no claim of the base wants more, and the
    archive is the in-cluster S3 (SeaweedFS) that every service reaches by URL, not a volume."""
    claims = [r["spec"] for r in rendered if r["kind"] == "PersistentVolumeClaim"]
    claims += [t["spec"] for r in rendered if r["kind"] in WORKLOADS for t in r["spec"].get("volumeClaimTemplates", [])]
    assert claims and all(c["accessModes"] == ["ReadWriteOnce"] for c in claims)
    assert config_value(rendered, "ARCHIVE_URL").startswith("s3://")
    assert config_value(rendered, "ARCHIVE_S3_ENDPOINT") == "http://seaweedfs:8333"
    find(rendered, "StatefulSet", "seaweedfs")
    for name in ("intake", "edge", "synth"):
        mounts = {m["mountPath"] for m in container(find(rendered, "Deployment", name)).get("volumeMounts", [])}
        assert "/var/lib/streamtts/archive" not in mounts


def test_the_cluster_overlay_runs_a_redis_cluster(k3s_tree: Path) -> None:
    """Six Redis nodes in cluster mode (3 masters, 3 replicas, joined once by a Job), spread by
    anti-affinity, one down at a time at most; every service may learn the slots."""
    rendered = kustomize_lite.render(k3s_tree / "overlays" / "cluster")
    redis = find(rendered, "StatefulSet", "redis")
    assert redis["spec"]["replicas"] == 6
    args = container(redis)["args"]
    assert args[args.index("--cluster-enabled") + 1] == "yes" and "--masterauth" in args
    anti = pod_spec(redis)["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert anti[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    pdb = find(rendered, "PodDisruptionBudget", "redis")
    assert pdb["spec"]["maxUnavailable"] == 1
    job = find(rendered, "Job", "redis-cluster-create")
    script = job["spec"]["template"]["spec"]["containers"][0]["command"][-1]
    assert "--cluster create" in script and "--cluster-replicas 1" in script
    peers = find(rendered, "NetworkPolicy", "redis-cluster")["spec"]["ingress"][0]
    assert {p["port"] for p in peers["ports"]} == {6379, 16379}  # replication and the cluster bus
    acl = (k3s_tree / "base" / "redis" / "render-acl.sh").read_text()
    assert "+info +cluster|slots +cluster|shards" in acl  # what a cluster client asks on connect
