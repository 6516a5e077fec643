"""The hotswap model builders, under the name the planner tests import; they live in testkit.builders."""

from testkit.builders import *  # noqa: F403
