"""Hotswap policies compared by the simulator."""
