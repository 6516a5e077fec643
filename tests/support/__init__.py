"""Test-support helpers: offline validation of emitted Kubernetes objects (CRDs and built-in kinds)."""
