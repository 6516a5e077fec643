"""Entry point the Pulumi policy host runs: `pulumi preview --policy-pack policies/`.

Only builds the pack; the rules live in the rules/ package (rules/pack.py makes them policies) so tests can import
them (PolicyPack serves forever).
"""

import importlib

from pulumi_policy import EnforcementLevel, PolicyPack

# The policy host runs this file with policies/ first on sys.path, so rules/ is a top-level package (its modules
# import each other relatively, so a published pack works whatever its directory is called).
rules = importlib.import_module("rules")

PolicyPack(
    name="gke-tpu-priority",
    policies=rules.ALL,
    enforcement_level=EnforcementLevel.MANDATORY,
    description=(
        "Priority conventions (PriorityClass <-> WorkloadPriorityClass), Kueue v1beta2 and JobSet shape for "
        "TPU work, and GKE / reconciler hardening for the gke-tpu-priority platform."
    ),
)
