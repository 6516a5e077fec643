"""What the Job controller and the JobSet controller do with a failed pod: restated for tests.

Why it stays beside `make e2e`: the actuator's tests run on the fake API server, where no Job or JobSet controller
runs; e2e/test_hotswap.py checks the real controllers restart a disrupted JobSet outside its `maxRestarts`.

Sources (read, not vendored):

* Kubernetes `pkg/controller/job/pod_failure_policy.go` (`matchPodFailurePolicy`, `matchOnPodConditions`): rules
  are tried in order; an `onPodConditions` rule matches when the failed pod has a condition of the pattern's type
  and status. A `FailJob` match fails the Job with reason `PodFailurePolicy` (`batch.JobReasonPodFailurePolicy`);
  no match counts the failure against `backoffLimit`, and `backoffLimit: 0` then fails the Job with reason
  `BackoffLimitExceeded`.
* JobSet v0.12.0 `pkg/controllers/failure_policy.go` (`ruleIsApplicable`, `findFirstFailedPolicyRuleAndJob`): the
  first rule whose `onJobFailureReasons` is empty or contains the failed Job's reason (and whose
  `targetReplicatedJobs` is empty or names the Job's parent) applies; with no applicable rule the default action is
  `RestartJobSet`, which counts against `maxRestarts`.

Only the `onPodConditions` half of the pod failure policy is restated: the package's templates use no exit-code rule.
"""

from __future__ import annotations

from typing import Any

JOB_REASON_POD_FAILURE_POLICY = "PodFailurePolicy"
JOB_REASON_BACKOFF_LIMIT_EXCEEDED = "BackoffLimitExceeded"
DEFAULT_JOBSET_ACTION = "RestartJobSet"


def job_failure_reason(job_spec: dict[str, Any], failed_pod: dict[str, Any]) -> str | None:
    """The reason the Job controller fails a Job for `failed_pod` (None: the Job keeps running)."""
    conditions = (failed_pod.get("status") or {}).get("conditions") or []
    for rule in (job_spec.get("podFailurePolicy") or {}).get("rules") or []:
        patterns = rule.get("onPodConditions")
        if patterns is None:
            continue
        matched = any(
            c.get("type") == p.get("type") and c.get("status") == p.get("status") for c in conditions for p in patterns
        )
        if not matched:
            continue
        if rule["action"] == "FailJob":
            return JOB_REASON_POD_FAILURE_POLICY
        if rule["action"] == "Ignore":
            return None
        break  # Count: counted against backoffLimit below
    failures = 1
    return JOB_REASON_BACKOFF_LIMIT_EXCEEDED if failures > int(job_spec.get("backoffLimit", 6)) else None


def jobset_action(jobset: dict[str, Any], replicated_job: str, job_reason: str) -> str:
    """The failure-policy action the JobSet controller takes when one of its Jobs fails with `job_reason`."""
    for rule in (jobset["spec"].get("failurePolicy") or {}).get("rules") or []:
        reasons = rule.get("onJobFailureReasons") or []
        targets = rule.get("targetReplicatedJobs") or []
        if (not reasons or job_reason in reasons) and (not targets or replicated_job in targets):
            return str(rule["action"])
    return DEFAULT_JOBSET_ACTION
