"""A small kustomize renderer for the features k3s/ uses, so the overlays can be checked offline.

Supported: `resources` (files and kustomization directories), `namespace`, `images`,
`configMapGenerator` / `secretGenerator` (envs, files, literals; behavior create, merge, replace)
with `generatorOptions.disableNameSuffixHash: true`, and `patches` given as inline JSON 6902 ops
with a `kind` / `name` target. Anything else raises `Unsupported` instead of being ignored, so a
kustomization that uses more than this fails the tests rather than rendering wrongly. Like
kustomize, files must lie inside the kustomization's own directory.

When pykustomize (kustomize itself, compiled) is installed, a test compares the two renderings.
"""

from __future__ import annotations

import base64
import copy
import re
from pathlib import Path
from typing import Any

import yaml

Resource = dict[str, Any]

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
SUPPORTED_FIELDS = {
    "apiVersion", "kind", "resources", "namespace", "images", "patches",
    "configMapGenerator", "secretGenerator", "generatorOptions",
}
GENERATOR_FIELDS = {"name", "behavior", "envs", "files", "literals", "type"}
IMAGE_FIELDS = {"name", "newName", "newTag", "digest"}
TARGET_FIELDS = {"kind", "name"}
# Kinds whose objects live outside any namespace; every other kind used here is namespaced.
CLUSTER_SCOPED = {
    "Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
    "PersistentVolume", "StorageClass", "RuntimeClass", "PriorityClass", "IngressClass",
}
NAMESPACED = {
    "ConfigMap", "Secret", "Service", "Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob",
    "PodDisruptionBudget", "HorizontalPodAutoscaler", "Ingress", "IngressRoute", "NetworkPolicy",
    "ServiceAccount", "Role", "RoleBinding", "PersistentVolumeClaim",
}
ENV_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_.-]*)=(.*)$")


class Unsupported(Exception):
    """The kustomization uses something this renderer does not implement."""


def render(directory: Path) -> list[Resource]:
    """Render the kustomization in `directory` like `kustomize build` (order aside)."""
    directory = directory.resolve()
    kustomization = _load_kustomization(directory)
    unknown = set(kustomization) - SUPPORTED_FIELDS
    if unknown:
        raise Unsupported(f"{directory}: fields {sorted(unknown)}")

    resources: list[Resource] = []
    for entry in kustomization.get("resources", []):
        path = _inside(directory, entry)
        if path.is_dir():
            resources.extend(render(path))
        else:
            resources.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc)

    generators = [("ConfigMap", g) for g in kustomization.get("configMapGenerator", [])]
    generators += [("Secret", g) for g in kustomization.get("secretGenerator", [])]
    if generators and not kustomization.get("generatorOptions", {}).get("disableNameSuffixHash"):
        raise Unsupported(f"{directory}: generators need generatorOptions.disableNameSuffixHash")
    for kind, generator in generators:
        _generate(directory, kind, generator, resources)

    for patch in kustomization.get("patches", []):
        _apply_patch(patch, resources)
    if "namespace" in kustomization:
        _set_namespace(kustomization["namespace"], resources)
    for image in kustomization.get("images", []):
        _set_image(image, resources)
    _check_unique(resources)
    return resources


def _load_kustomization(directory: Path) -> dict[str, Any]:
    for name in KUSTOMIZATION_FILES:
        if (directory / name).is_file():
            return yaml.safe_load((directory / name).read_text()) or {}
    raise FileNotFoundError(f"no kustomization file in {directory}")


def _inside(directory: Path, relative: str) -> Path:
    """`relative` under `directory`; kustomize's default load restriction for files."""
    path = (directory / relative).resolve()
    if path.is_file() and directory not in path.parents:
        raise Unsupported(f"{relative} is outside {directory}")
    if not path.exists():
        raise FileNotFoundError(path)
    return path


def _generate(directory: Path, kind: str, spec: dict[str, Any], resources: list[Resource]) -> None:
    unknown = set(spec) - GENERATOR_FIELDS
    if unknown:
        raise Unsupported(f"{kind} generator {spec.get('name')}: fields {sorted(unknown)}")
    data: dict[str, str] = {}
    for env_file in spec.get("envs", []):
        data.update(_read_env_file(_inside(directory, env_file)))
    for literal in spec.get("literals", []):
        key, sep, value = literal.partition("=")
        if not sep:
            raise ValueError(f"literal {literal!r} has no '='")
        data[key] = value
    for entry in spec.get("files", []):
        key, sep, relative = entry.partition("=")
        if not sep:
            key, relative = Path(entry).name, entry
        data[key] = _inside(directory, relative).read_text()

    behavior = spec.get("behavior", "create")
    existing = [r for r in resources if r["kind"] == kind and r["metadata"]["name"] == spec["name"]]
    if behavior == "create":
        if existing:
            raise ValueError(f"{kind} {spec['name']} exists already; use behavior merge or replace")
        resources.append(_generated(kind, spec, data))
    elif behavior in ("merge", "replace"):
        if len(existing) != 1:
            raise ValueError(f"{kind} {spec['name']}: {behavior} needs exactly one existing object")
        target = existing[0]
        field = "stringData" if kind == "Secret" else "data"
        merged = dict(_decoded_data(target)) if behavior == "merge" else {}
        merged.update(data)
        target.pop("data", None)
        target.pop(field, None)
        target.update(_generated(kind, spec, merged, metadata=target["metadata"]))
    else:
        raise Unsupported(f"generator behavior {behavior!r}")


def _generated(
    kind: str, spec: dict[str, Any], data: dict[str, str], metadata: dict[str, Any] | None = None
) -> Resource:
    resource: Resource = {"apiVersion": "v1", "kind": kind,
                          "metadata": metadata or {"name": spec["name"]}}
    if kind == "Secret":
        resource["type"] = spec.get("type", "Opaque")
        resource["data"] = {
            k: base64.b64encode(v.encode()).decode() for k, v in sorted(data.items())
        }
    else:
        resource["data"] = dict(sorted(data.items()))
    return resource


def _decoded_data(resource: Resource) -> dict[str, str]:
    data = resource.get("data") or {}
    if resource["kind"] == "Secret":
        return {k: base64.b64decode(v).decode() for k, v in data.items()}
    return dict(data)


def _read_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines; blank lines and # comments skipped; values taken verbatim."""
    data = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = ENV_LINE.match(stripped)
        if not match:
            # kustomize would read a bare KEY from its own environment: not wanted here.
            raise Unsupported(f"{path}:{number}: not KEY=VALUE")
        data[match.group(1)] = match.group(2)
    return data


def _apply_patch(patch: dict[str, Any], resources: list[Resource]) -> None:
    if set(patch) != {"target", "patch"}:
        raise Unsupported(f"patch fields {sorted(patch)}: only an inline patch with a target")
    target = patch["target"]
    if not set(target) <= TARGET_FIELDS:
        raise Unsupported(f"patch target fields {sorted(target)}")
    ops = yaml.safe_load(patch["patch"])
    if not isinstance(ops, list):
        raise Unsupported("only JSON 6902 patches (a list of operations)")
    matched = [r for r in resources if _matches(target, r)]
    if not matched:
        raise ValueError(f"patch target {target} matches nothing")
    for resource in matched:
        for op in ops:
            _json_patch(resource, op)


def _matches(target: dict[str, str], resource: Resource) -> bool:
    # kustomize anchors target names and kinds as regular expressions.
    return all(
        re.fullmatch(target[field], value)
        for field, value in (("kind", resource["kind"]), ("name", resource["metadata"]["name"]))
        if field in target
    )


def _json_patch(document: Resource, op: dict[str, Any]) -> None:
    """One RFC 6902 operation: add, replace, remove or test."""
    tokens = [t.replace("~1", "/").replace("~0", "~") for t in op["path"].split("/")[1:]]
    if not tokens:
        raise Unsupported("a patch of the whole document")
    parent: Any = document
    for token in tokens[:-1]:
        parent = parent[int(token)] if isinstance(parent, list) else parent[token]
    last = tokens[-1]
    kind = op["op"]
    if isinstance(parent, list):
        index = len(parent) if last == "-" else int(last)
        if kind == "add":
            parent.insert(index, copy.deepcopy(op["value"]))
        elif kind == "replace":
            parent[index] = copy.deepcopy(op["value"])
        elif kind == "remove":
            del parent[index]
        elif kind == "test":
            if parent[index] != op["value"]:
                raise ValueError(f"test failed at {op['path']}")
        else:
            raise Unsupported(f"patch op {kind!r}")
        return
    if kind == "add":
        parent[last] = copy.deepcopy(op["value"])
    elif kind == "replace":
        if last not in parent:
            raise ValueError(f"replace of missing {op['path']}")
        parent[last] = copy.deepcopy(op["value"])
    elif kind == "remove":
        del parent[last]
    elif kind == "test":
        if parent.get(last) != op["value"]:
            raise ValueError(f"test failed at {op['path']}")
    else:
        raise Unsupported(f"patch op {kind!r}")


def _set_namespace(namespace: str, resources: list[Resource]) -> None:
    for resource in resources:
        kind = resource["kind"]
        if kind in CLUSTER_SCOPED:
            continue
        if kind not in NAMESPACED:
            raise Unsupported(f"namespace of kind {kind}: add it to CLUSTER_SCOPED or NAMESPACED")
        resource["metadata"]["namespace"] = namespace


def _set_image(image: dict[str, str], resources: list[Resource]) -> None:
    if not set(image) <= IMAGE_FIELDS or "name" not in image:
        raise Unsupported(f"images entry {image}")
    for resource in resources:
        for container in _containers(resource):
            name, tag, digest = _split_image(container["image"])
            if name != image["name"]:
                continue
            name = image.get("newName", name)
            if "digest" in image:
                container["image"] = f"{name}@{image['digest']}"
            elif "newTag" in image:
                container["image"] = f"{name}:{image['newTag']}"
            else:
                container["image"] = name + (f"@{digest}" if digest else f":{tag}" if tag else "")


def _containers(resource: Resource) -> list[dict[str, Any]]:
    spec = resource.get("spec", {})
    pod = spec.get("template", {}).get("spec", {})
    if resource["kind"] == "CronJob":
        pod = spec.get("jobTemplate", {}).get("spec", {}).get("template", {}).get("spec", {})
    return list(pod.get("containers", [])) + list(pod.get("initContainers", []))


def _split_image(reference: str) -> tuple[str, str | None, str | None]:
    name, _, digest = reference.partition("@")
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:
        return name[:colon], name[colon + 1:], digest or None
    return name, None, digest or None


def _check_unique(resources: list[Resource]) -> None:
    seen = set()
    for resource in resources:
        metadata = resource["metadata"]
        key = (resource["kind"], metadata.get("namespace"), metadata["name"])
        if key in seen:
            raise ValueError(f"duplicate resource {key}")
        seen.add(key)
