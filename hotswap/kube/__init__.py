"""Kubernetes I/O for the hotswap reconciler: client, watches and cache, snapshot, actuator, leases."""
