"""The wheel's one import package, `gke_tpu_priority`, mapped onto the folders the repository is laid out in.

The repository keeps `components/`, `hotswap/` and `policies/` at its root (the Pulumi program, the policy pack and
the component plugin are defined there); installed, they are `gke_tpu_priority.components`, `.hotswap` and
`.policies`, so a user's own `components` package never shadows this package's. The simulator (`sim/`), the test kit
(`testkit/`), `tools/`, `tests/` and `e2e/` are the repository's own and never in the wheel. Everything else is in
pyproject.toml.
"""

from setuptools import find_packages, setup

ROOTS = ("components", "hotswap", "policies")
NAMESPACE = "gke_tpu_priority"

setup(
    package_dir={f"{NAMESPACE}.{root}": root for root in ROOTS},
    packages=[f"{NAMESPACE}.{package}" for package in find_packages(include=[f"{root}*" for root in ROOTS])],
    package_data={f"{NAMESPACE}.components": ["py.typed"], f"{NAMESPACE}.hotswap": ["py.typed"]},
)
