"""Discrete-event simulator of a TPU v6e fleet under three hotswap policies (issue 5)."""
