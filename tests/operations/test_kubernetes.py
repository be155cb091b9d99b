"""deploy/kubernetes/ (issue 35 §5): valid against Kubernetes' own schemas and true to the platform.

kubernetes-validate bundles the API's OpenAPI schemas, so this runs offline; strict: a misspelt field
fails instead of being dropped by the API server.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "deploy" / "kubernetes"
VERSION = "1.33.0"


def documents() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(FOLDER.glob("*.yaml")):
        found += [(path.name, doc) for doc in yaml.safe_load_all(path.read_text()) if doc]
    return found


def of_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for _, doc in documents() if doc["kind"] == kind}


@pytest.mark.parametrize(("name", "doc"), documents(), ids=lambda v: v if isinstance(v, str) else v["kind"])
def test_every_manifest_is_valid_against_the_kubernetes_schema(name: str, doc: dict[str, Any]) -> None:
    kubernetes_validate.validate(doc, VERSION, strict=True)


def test_a_misspelt_field_is_refused() -> None:
    deployment = of_kind("Deployment")["mcp-web"]
    broken = {**deployment, "spec": {**deployment["spec"], "replica": 2}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSION, strict=True)


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def test_the_web_probes_are_the_platforms_and_the_grace_outlasts_the_drain() -> None:
    web = of_kind("Deployment")["mcp-web"]
    main = container(web)
    port = main["ports"][0]["containerPort"]
    assert main["livenessProbe"]["httpGet"] == {"path": "/health/live", "port": port}
    assert main["startupProbe"]["httpGet"] == {"path": "/health/live", "port": port}
    assert main["readinessProbe"]["httpGet"] == {"path": "/health/ready", "port": port}
    pause = main["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert (
        web["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        > pause + settings.MCP_SHUTDOWN_GRACE_SECONDS
    )
    assert main["args"] == ["web"] and container(of_kind("Deployment")["mcp-worker"])["args"] == ["worker"]
    assert container(of_kind("Job")["mcp-release"])["args"] == ["release"]


def test_each_budget_and_the_autoscaler_point_at_a_deployment_that_exists() -> None:
    deployments = of_kind("Deployment")
    labels = {name: d["spec"]["template"]["metadata"]["labels"] for name, d in deployments.items()}
    budgets = of_kind("PodDisruptionBudget")
    assert set(budgets) == set(deployments)
    for name, budget in budgets.items():
        assert budget["spec"]["selector"]["matchLabels"].items() <= labels[name].items()
        assert budget["spec"]["minAvailable"] < deployments[name]["spec"]["replicas"]
    (hpa,) = of_kind("HorizontalPodAutoscaler").values()
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "mcp-web"}
    assert [m["resource"]["name"] for m in hpa["spec"]["metrics"]] == ["cpu"]
    (service,) = of_kind("Service").values()
    assert service["spec"]["selector"].items() <= labels["mcp-web"].items()


def test_every_role_reads_the_secret_and_the_secret_names_only_documented_settings() -> None:
    (secret,) = of_kind("Secret").values()
    for workload in [*of_kind("Deployment").values(), *of_kind("Job").values()]:
        assert container(workload)["envFrom"] == [{"secretRef": {"name": secret["metadata"]["name"]}}]
    documented = set(re.findall(r"^\| `([A-Z_]+)` \|", (ROOT / "docs" / "operations.md").read_text(), re.M))
    assert set(secret["stringData"]) <= documented, set(secret["stringData"]) - documented
    assert {"SECRET_KEY", "MCP_SECRETS_KEY", "DATABASE_URL", "REDIS_URL"} <= set(secret["stringData"])
