"""Hotswap reconciler: frees healthy TPU slices for disrupted high-priority JobSets by holding lower-priority
Kueue Workloads (`spec.active=false`) and releasing them when capacity returns."""
