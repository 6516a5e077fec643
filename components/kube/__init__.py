"""Small helpers for declaring Kubernetes objects from Pulumi components."""
