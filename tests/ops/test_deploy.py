"""deploy/ checked offline (no container runtime here): the image installs the way the
Makefile does, and the Compose file and Kubernetes manifests are well formed and name only
settings, commands, ports, probes and files that exist."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import yaml

from engram.cli import build_parser
from server.app import create_app

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
SOURCES = ("engine", "server", "worker", "workflows", "activities", "engram")


def settings_read_by_the_code() -> set[str]:
    names: set[str] = set()
    for package in SOURCES:
        for path in (ROOT / package).rglob("*.py"):
            names |= set(re.findall(r'"(ENGRAM_[A-Z0-9_]+)"', path.read_text()))
    return names


def engram_variables(mapping: dict[str, Any]) -> set[str]:
    return {name for name in mapping if name.startswith("ENGRAM_")}


def served_paths() -> set[str]:
    app = create_app(lambda: None)  # type: ignore[arg-type, return-value]
    return {getattr(route, "path", "") for route in app.routes}


def check_command(command: list[str]) -> None:
    """Every process an orchestrator starts is one of ours."""
    if command[:2] == ["python", "-m"]:
        assert command[2] in ("server", "worker"), command
        assert (ROOT / command[2] / "__main__.py").exists()
    else:
        assert command[0] == "engram", command
        build_parser().parse_args(command[1:])


def test_the_image_installs_with_the_makefiles_install_step() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    runs = [line for line in dockerfile.splitlines() if line.startswith("RUN ")]
    installs = [line for line in runs if "install" in line and "apt-get" not in line]
    assert installs == ["RUN make install PYTHON=python3.11 VENV=/opt/engram/.venv"]
    assert "pip " not in dockerfile
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^install: \$\(VENV\)/\.installed$", makefile, re.M)
    copied = set(re.findall(r"^COPY (\w+) \1$", dockerfile, re.M))
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"
    ]["find"]["include"]
    assert copied == {name.rstrip("*") for name in packages}
    assert re.search(r"^USER engram$", dockerfile, re.M), "the image must not run as root"
    assert dockerfile.count("FROM ") == 2
    check_command(shlex.split(re.findall(r"^CMD \[(.*)\]$", dockerfile, re.M)[0].replace(",", "")))


def test_compose_wires_every_part_with_known_settings_and_files() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services: dict[str, Any] = compose["services"]
    expected = {"postgres", "temporal-db", "temporal", "temporal-ui", "migrate", "api"}
    assert expected | {"worker", "lb", "prometheus", "grafana"} <= services.keys()
    known = settings_read_by_the_code()
    for name, service in services.items():
        environment = service.get("environment", {})
        assert engram_variables(environment) <= known, (name, engram_variables(environment) - known)
        for dependency in service.get("depends_on", {}):
            assert dependency in services, (name, dependency)
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (DEPLOY / source).exists(), (name, source)
        if service.get("image") == "engram:latest":
            check_command(service["command"])
    assert services["api"]["environment"]["ENGRAM_API_HOST"] == "0.0.0.0"
    assert services["api"]["environment"]["ENGRAM_AUTH"] == "keys"
    prometheus = yaml.safe_load((DEPLOY / "compose" / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in prometheus["scrape_configs"]}
    assert jobs["engram-api"]["dns_sd_configs"][0]["names"] == ["api"]
    assert jobs["engram-worker"]["dns_sd_configs"][0]["port"] == 9091


def manifests() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((DEPLOY / "kubernetes" / "kustomization.yaml").read_text())
    documents: list[dict[str, Any]] = []
    for name in kustomization["resources"]:
        text = (DEPLOY / "kubernetes" / name).read_text()
        documents += [doc for doc in yaml.safe_load_all(text) if doc]
    return documents


def test_kubernetes_manifests_are_consistent() -> None:
    documents = manifests()
    kinds = {doc["kind"] for doc in documents}
    assert {"Deployment", "Service", "HorizontalPodAutoscaler", "Job", "ConfigMap"} <= kinds
    assert {"Secret", "ServiceMonitor", "ScaledObject", "Namespace"} <= kinds
    for doc in documents:
        assert doc["apiVersion"] and doc["metadata"]["name"], doc
    known = settings_read_by_the_code()
    config = next(doc for doc in documents if doc["kind"] == "ConfigMap")
    secret = next(doc for doc in documents if doc["kind"] == "Secret")
    assert engram_variables(config["data"]) | engram_variables(secret["stringData"]) <= known
    served = served_paths()
    named = {doc["metadata"]["name"] for doc in documents}
    port_names: set[str] = set()
    for doc in documents:
        if doc["kind"] not in ("Deployment", "Job"):
            continue
        pod = doc["spec"]["template"]
        if doc["kind"] == "Deployment":
            assert (
                doc["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
            )
        for container in pod["spec"]["containers"]:
            check_command(container["command"])
            assert container["resources"]["requests"], container["name"]
            refs = [next(iter(ref.values()))["name"] for ref in container["envFrom"]]
            assert set(refs) <= named
            ports = {port["name"] for port in container.get("ports", [])}
            port_names |= ports
            for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
                if probe in container and container["name"] == "api":
                    assert container[probe]["httpGet"]["path"] in served, probe
                    assert container[probe]["httpGet"]["port"] in ports
    services = [doc for doc in documents if doc["kind"] == "Service"]
    for service in services:
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in port_names, service["metadata"]["name"]
    monitor = next(doc for doc in documents if doc["kind"] == "ServiceMonitor")
    service_ports = {port["name"] for s in services for port in s["spec"]["ports"]}
    assert {endpoint["port"] for endpoint in monitor["spec"]["endpoints"]} <= service_ports
    for target in ("HorizontalPodAutoscaler", "ScaledObject"):
        scaled = next(doc for doc in documents if doc["kind"] == target)
        assert scaled["spec"]["scaleTargetRef"]["name"] in named
