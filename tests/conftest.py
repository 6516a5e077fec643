"""Shared fixtures over the test kit's stack runs (testkit.stacks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from testkit.mock_runtime import PROJECT_ROOT
from testkit.resources import ProgramRun
from testkit.stacks import STACKS, stack_run


@pytest.fixture(params=STACKS)
def any_stack_run(request: pytest.FixtureRequest) -> ProgramRun:
    return stack_run(request.param)


@pytest.fixture
def project_root() -> Path:
    return PROJECT_ROOT
