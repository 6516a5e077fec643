"""Discrete-event simulator of a TPU v6e fleet under the hotswap reconciler and its peers (`sim.runner.POLICIES`).

A sibling of the reconciler, not part of it: it imports the planner and the snapshot conversion as any client
would, and neither the reconciler image nor the wheel carries it. `python -m sim --help` lists its commands."""
