"""Test support shared by tests/, e2e/ and tools/: model builders, stack-config builders, the fake API server and
the stack runs under Pulumi mocks. Repository-only, like those three: never in the wheel or the image."""
