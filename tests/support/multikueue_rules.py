"""Offline mirror of what Kueue v0.19.2's MultiKueue and admission-check controllers refuse: the objects are
accepted by the API server (none of these kinds has a webhook), but the controller leaves a check, a cluster or a
ClusterQueue inactive, so no workload is ever admitted or dispatched through it.

Why it stays beside `make e2e`: the e2e control plane runs one cluster, not a MultiKueue manager with workers, so
no real controller judges these objects yet. Mirrored, for the pinned release:

* ``pkg/util/admissioncheck/admissioncheck.go`` ``refValidForGK``: the parameters of a ProvisioningRequest or
  MultiKueue AdmissionCheck (:func:`admission_check_problems`);
* ``pkg/controller/admissionchecks/multikueue`` (ACReconciler.Reconcile, clustersReconciler.loadClientConfig,
  getKubeConfigFromSecret, validateKubeconfig/validateRestConfig): :func:`multikueue_cluster_problems`,
  :func:`kubeconfig_problems`;
* the scheduler cache's MultiKueue constraints on a ClusterQueue (``pkg/cache/scheduler/clusterqueue.go``
  updateWithAdmissionChecks), with the cross-object rules, over one manager cluster's objects:
  :func:`multikueue_problems`.

Each check names the upstream function it mirrors in ``Problem.rule``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import yaml

from tests.support.crd_validation import (
    dns1123_subdomain_problem,
)


@dataclass(frozen=True)
class Problem:
    """One refusal the real webhook would return."""

    rule: str
    path: str
    detail: str

    def __str__(self) -> str:
        return f"{self.path}: {self.detail} [{self.rule}]"


KUEUE_ADMISSIONCHECK_UTIL = "kueue v0.19.2 pkg/util/admissioncheck/admissioncheck.go"
KUEUE_MULTIKUEUE = "kueue v0.19.2 pkg/controller/admissionchecks/multikueue"
KUEUE_SCHEDULER_CACHE = "kueue v0.19.2 pkg/cache/scheduler/clusterqueue.go"
PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
# AdmissionCheck controller -> the kind its ConfigHelper reads parameters as (refValidForGK's GroupKind).
PARAMETER_KINDS = {PROVISIONING_CONTROLLER: "ProvisioningRequestConfig", MULTIKUEUE_CONTROLLER: "MultiKueueConfig"}
# apis/kueue/v1beta2/multikueue_types.go MultiKueueConfigSecretKey: the Secret key holding the kubeconfig.
MULTIKUEUE_SECRET_KEY = "kubeconfig"
# pkg/features/kube_features.go defaults at v0.19: MultiKueueClusterProfile (alpha, off since 0.15) and
# MultiKueueKubeConfigPathValidation (alpha, off since 0.19). The package enables neither (components/kueue).
MULTIKUEUE_FEATURE_GATES = {"MultiKueueClusterProfile": False, "MultiKueueKubeConfigPathValidation": False}


def _ref_problems(ref: Any, kind: str) -> list[Problem]:
    """refValidForGK: nil ref, empty name, wrong group, wrong kind (in that order; the first one fails)."""
    rule = f"{KUEUE_ADMISSIONCHECK_UTIL} refValidForGK"
    if ref is None:
        return [Problem(rule, "spec.parameters", "missing parameters reference")]
    out: list[Problem] = []
    if not ref.get("name"):
        out.append(Problem(rule, "spec.parameters.name", "empty name: bad parameters reference"))
    if ref.get("apiGroup") != "kueue.x-k8s.io":
        out.append(Problem(rule, "spec.parameters.apiGroup", f"wrong group {ref.get('apiGroup')!r}"))
    if ref.get("kind") != kind:
        out.append(Problem(rule, "spec.parameters.kind", f"wrong kind {ref.get('kind')!r}, expecting {kind!r}"))
    return out


def admission_check_problems(ac: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> list[Problem]:
    """AdmissionCheck has no webhook in v0.19.2 (pkg/webhooks/webhooks.go registers none), so the API server takes
    any schema-valid one; but the controller named by ``controllerName`` leaves a check whose parameters it cannot
    load inactive, and no workload is ever admitted through an inactive check:

    * ProvisioningRequest (pkg/controller/admissionchecks/provisioning admissioncheck_reconciler.go
      acReconciler.Reconcile): Active=False, reason BadParametersRef;
    * MultiKueue (pkg/controller/admissionchecks/multikueue/admissioncheck.go ACReconciler.Reconcile):
      Active=False, reason BadConfig;

    both when ConfigHelper.ConfigFromRef -> refValidForGK refuses the reference. This mirrors that refusal for
    both controllers' checks (the schema already makes controllerName immutable). Whether the referenced
    MultiKueueConfig and its clusters exist is a cross-object rule: :func:`multikueue_problems`."""
    del old
    spec = ac.get("spec") or {}
    kind = PARAMETER_KINDS.get(str(spec.get("controllerName")))
    if kind is None:
        return []
    return _ref_problems(spec.get("parameters"), kind)


def multikueue_cluster_problems(mkc: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> list[Problem]:
    """MultiKueueCluster has no webhook in v0.19.2; the multikueue clustersReconciler (multikueuecluster.go
    ``Reconcile`` -> ``loadClientConfig`` -> ``getKubeConfig``) sets Active=False and never connects when:

    * ``clusterProfileRef`` is set while the MultiKueueClusterProfile gate is off (reason
      MultiKueueClusterProfileFeatureDisabled);
    * ``kubeConfig`` is nil ("kubeconfig reference is nil", reason BadKubeConfig);
    * ``locationType: Path``: with MultiKueueKubeConfigPathValidation off the reconciler emits the
      DeprecatedPathUsage warning and reads the file from the Kueue controller's own filesystem
      (getKubeConfigFromPath), where the Kueue chart as the package installs it mounts no kubeconfig, so BadKubeConfig;
    * the Secret name is not a valid object name (getKubeConfigFromSecret's Get cannot find it: BadKubeConfig).

    The Secret's existence and content are checked across objects by :func:`multikueue_problems`."""
    del old
    rule = f"{KUEUE_MULTIKUEUE}/multikueuecluster.go clustersReconciler.loadClientConfig"
    source = (mkc.get("spec") or {}).get("clusterSource") or {}
    if source.get("clusterProfileRef") is not None and not MULTIKUEUE_FEATURE_GATES["MultiKueueClusterProfile"]:
        return [
            Problem(
                rule,
                "spec.clusterSource.clusterProfileRef",
                "MultiKueueClusterProfile feature gate is disabled (reason MultiKueueClusterProfileFeatureDisabled)",
            )
        ]
    ref = source.get("kubeConfig")
    if ref is None:
        return [Problem(f"{rule} getKubeConfig", "spec.clusterSource.kubeConfig", "kubeconfig reference is nil")]
    location = str(ref.get("location") or "")
    if ref.get("locationType", "Secret") == "Path":
        return [
            Problem(
                f"{KUEUE_MULTIKUEUE}/multikueuecluster.go clustersReconciler.getKubeConfigFromPath",
                "spec.clusterSource.kubeConfig.locationType",
                f"Path {location!r} is read from the Kueue controller's filesystem, where no kubeconfig is mounted "
                "(and with MultiKueueKubeConfigPathValidation off it is deprecated: DeprecatedPathUsage)",
            )
        ]
    if (detail := dns1123_subdomain_problem(location)) is not None:
        return [
            Problem(
                f"{KUEUE_MULTIKUEUE}/multikueuecluster.go clustersReconciler.getKubeConfigFromSecret",
                "spec.clusterSource.kubeConfig.location",
                f"{location!r} cannot name a Secret: {detail}",
            )
        ]
    return []


def _is_valid_hostname(server: str) -> bool:
    """multikueuecluster.go isValidHostname: the URL's host (port dropped) is an IP or a DNS-1123 subdomain."""
    try:
        netloc = urlsplit(server).netloc
    except ValueError:
        return False
    host = netloc.rsplit("@", 1)[-1]
    if host.startswith("["):
        host = host[1 : host.find("]")] if "]" in host else host
    elif host.count(":") == 1:
        host = host.split(":", 1)[0]
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return dns1123_subdomain_problem(host) is None


def kubeconfig_problems(text: str) -> list[Problem]:
    """multikueuecluster.go validateKubeconfig then validateRestConfig (exec not allowed): what a kubeconfig in a
    MultiKueueCluster's Secret must satisfy, or the cluster stays inactive with reason InsecureKubeConfig."""
    rule = f"{KUEUE_MULTIKUEUE}/multikueuecluster.go validateKubeconfig"
    rest_rule = f"{KUEUE_MULTIKUEUE}/multikueuecluster.go validateRestConfig"
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return [Problem(rule, "kubeconfig", f"failed to parse kubeconfig: {exc}")]
    if not isinstance(doc, Mapping):
        return [Problem(rule, "kubeconfig", "failed to parse kubeconfig: not an object")]
    out: list[Problem] = []
    users = doc.get("users") or []
    clusters = doc.get("clusters") or []
    for i, entry in enumerate(users):
        user = entry.get("user") or {}
        path = f"users[{i}].user"
        if user.get("tokenFile"):
            out.append(Problem(rule, f"{path}.tokenFile", "tokenFile is not allowed"))
        if user.get("username") or user.get("password"):
            out.append(Problem(rest_rule, path, "basic auth is not allowed"))
        if user.get("exec") is not None:
            out.append(Problem(rest_rule, f"{path}.exec", "exec plugins are not allowed"))
        if user.get("auth-provider") is not None:
            out.append(Problem(rest_rule, f"{path}.auth-provider", "auth providers are not allowed"))
    for i, entry in enumerate(clusters):
        cluster = entry.get("cluster") or {}
        path = f"clusters[{i}].cluster"
        if cluster.get("insecure-skip-tls-verify"):
            out.append(Problem(rule, f"{path}.insecure-skip-tls-verify", "insecure TLS verification is not allowed"))
        if cluster.get("certificate-authority"):
            out.append(
                Problem(
                    rule, f"{path}.certificate-authority", "file paths are not allowed, use certificate-authority-data"
                )
            )
        server = str(cluster.get("server") or "")
        if not server:
            out.append(Problem(rule, f"{path}.server", "server URL is required"))
        elif not _is_valid_hostname(server.lower()):
            out.append(Problem(rest_rule, f"{path}.server", f"untrusted server endpoint {server!r}"))
    # clientcmd.RESTConfigFromKubeConfig -> ClientConfig -> ConfirmUsable: the current context must exist and
    # name an existing cluster (an empty kubeconfig is "no configuration has been provided").
    contexts = {str(c.get("name")): c.get("context") or {} for c in doc.get("contexts") or []}
    current = doc.get("current-context")
    if not clusters:
        out.append(Problem(rule, "kubeconfig", "invalid configuration: no configuration has been provided"))
    elif current not in contexts:
        out.append(Problem(rule, "current-context", f"context {current!r} was not found"))
    elif contexts[current].get("cluster") not in {str(c.get("name")) for c in clusters}:
        out.append(Problem(rule, "current-context", f"cluster {contexts[current].get('cluster')!r} was not found"))
    return out


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _cq_flavors(cq: Mapping[str, Any]) -> set[str]:
    groups = (cq.get("spec") or {}).get("resourceGroups") or []
    return {str(f.get("name")) for g in groups for f in g.get("flavors") or []}


def multikueue_problems(objects: Iterable[Mapping[str, Any]], kueue_namespace: str = "kueue-system") -> list[str]:
    """The MultiKueue rules that span objects of one manager cluster (none has a webhook; each leaves something
    inactive, so no workload is ever dispatched):

    * multikueue/admissioncheck.go ACReconciler.Reconcile: the MultiKueueConfig a check names must exist
      (BadConfig) and every cluster it lists must be a MultiKueueCluster (Missing clusters: SomeActiveClusters
      or NoUsableClusters);
    * multikueue/multikueuecluster.go getKubeConfigFromSecret: the Secret is read from Kueue's namespace and
      must hold the key ``kubeconfig``; its content must pass validateKubeconfig (:func:`kubeconfig_problems`);
    * cache/scheduler/clusterqueue.go updateWithAdmissionChecks/updateQueueStatus: a ClusterQueue is inactive
      when an admission check it names is missing (AdmissionCheckNotFound), when it names more than one
      MultiKueue check (MultipleMultiKueueAdmissionChecks), a MultiKueue check on fewer than all its flavors
      (MultiKueueAdmissionCheckAppliedPerFlavor), or MultiKueue and ProvisioningRequest checks together
      (MultiKueueWithProvisioningRequest).
    """
    objs = list(objects)

    def of_kind(kind: str) -> dict[str, Mapping[str, Any]]:
        return {_name(o): o for o in objs if o.get("kind") == kind and str(o.get("apiVersion", "")).startswith("kueue")}

    checks, configs, clusters = of_kind("AdmissionCheck"), of_kind("MultiKueueConfig"), of_kind("MultiKueueCluster")
    secrets = {
        _name(o): o
        for o in objs
        if o.get("kind") == "Secret" and (o.get("metadata") or {}).get("namespace") == kueue_namespace
    }
    out: list[str] = []
    ac_rule = f"{KUEUE_MULTIKUEUE}/admissioncheck.go ACReconciler.Reconcile"
    for name, ac in checks.items():
        spec = ac.get("spec") or {}
        if spec.get("controllerName") != MULTIKUEUE_CONTROLLER:
            continue
        config_name = str((spec.get("parameters") or {}).get("name", ""))
        config = configs.get(config_name)
        if config is None:
            out.append(f"AdmissionCheck/{name}: MultiKueueConfig {config_name!r} not found: BadConfig [{ac_rule}]")
            continue
        missing = [c for c in (config.get("spec") or {}).get("clusters") or [] if c not in clusters]
        if missing:
            out.append(f"AdmissionCheck/{name}: Missing clusters: {missing} [{ac_rule}]")
    secret_rule = f"{KUEUE_MULTIKUEUE}/multikueuecluster.go clustersReconciler.getKubeConfigFromSecret"
    for name, mkc in clusters.items():
        ref = ((mkc.get("spec") or {}).get("clusterSource") or {}).get("kubeConfig") or {}
        if ref.get("locationType", "Secret") != "Secret":
            continue
        secret = secrets.get(str(ref.get("location")))
        if secret is None:
            out.append(
                f"MultiKueueCluster/{name}: Secret {kueue_namespace}/{ref.get('location')} not found [{secret_rule}]"
            )
            continue
        data = {**(secret.get("data") or {}), **(secret.get("stringData") or {})}
        if MULTIKUEUE_SECRET_KEY not in data:
            out.append(
                f"MultiKueueCluster/{name}: key {MULTIKUEUE_SECRET_KEY!r} not found in secret "
                f"{ref.get('location')!r} [{secret_rule}]"
            )
        elif "stringData" in secret and isinstance((secret.get("stringData") or {}).get(MULTIKUEUE_SECRET_KEY), str):
            for problem in kubeconfig_problems(secret["stringData"][MULTIKUEUE_SECRET_KEY]):
                out.append(f"Secret/{_name(secret)}: {problem}")
    for cq in of_kind("ClusterQueue").values():
        names = {
            str(c.get("name")): set(c.get("onFlavors") or []) or _cq_flavors(cq)
            for c in ((cq.get("spec") or {}).get("admissionChecksStrategy") or {}).get("admissionChecks") or []
        }
        cq_rule = f"{KUEUE_SCHEDULER_CACHE} clusterQueue.updateWithAdmissionChecks"
        controllers: dict[str, list[str]] = {}
        for check, flavors in sorted(names.items()):
            ac = checks.get(check)
            if ac is None:
                out.append(f"ClusterQueue/{_name(cq)}: references missing AdmissionCheck {check!r} [{cq_rule}]")
                continue
            controller = str((ac.get("spec") or {}).get("controllerName"))
            controllers.setdefault(controller, []).append(check)
            if controller == MULTIKUEUE_CONTROLLER and flavors != _cq_flavors(cq):
                out.append(
                    f"ClusterQueue/{_name(cq)}: Cannot specify MultiKueue AdmissionCheck per flavor, found: {check} "
                    f"(MultiKueueAdmissionCheckAppliedPerFlavor) [{cq_rule}]"
                )
        multikueue = controllers.get(MULTIKUEUE_CONTROLLER, [])
        if len(multikueue) > 1:
            out.append(
                f"ClusterQueue/{_name(cq)}: Cannot use multiple MultiKueue AdmissionChecks on the same ClusterQueue, "
                f"found: {','.join(multikueue)} (MultipleMultiKueueAdmissionChecks) [{cq_rule}]"
            )
        if multikueue and controllers.get(PROVISIONING_CONTROLLER):
            out.append(
                f"ClusterQueue/{_name(cq)}: Cannot use both MultiKueue and ProvisioningRequest AdmissionChecks "
                f"together (MultiKueueWithProvisioningRequest) [{cq_rule}]"
            )
    return out


def object_problems(objects: Iterable[Mapping[str, Any]]) -> list[str]:
    """The per-object checks over every AdmissionCheck and MultiKueueCluster among ``objects``."""
    checkers = {"AdmissionCheck": admission_check_problems, "MultiKueueCluster": multikueue_cluster_problems}
    out: list[str] = []
    for obj in objects:
        checker = checkers.get(str(obj.get("kind")))
        if checker is not None and str(obj.get("apiVersion", "")).startswith("kueue.x-k8s.io/"):
            out += [f"{obj['kind']}/{(obj.get('metadata') or {}).get('name')}: {p}" for p in checker(obj)]
    return out
