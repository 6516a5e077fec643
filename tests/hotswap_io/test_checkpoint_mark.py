"""`kubectl-hotswap mark-checkpoint` against the fake API server: one merge patch of the JobSet's annotation."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gke_tpu_priority.hotswap.annotations import AnnotationKeys
from gke_tpu_priority.hotswap.cli import main
from gke_tpu_priority.hotswap.kube.checkpoint import CheckpointTargetError, mark_checkpoint, resolve_target
from testkit.apiserver import FakeApiServer

from .cluster import JOBSETS, NS
from .conftest import ClientFactory, write_kubeconfig

pytestmark = pytest.mark.timeout(30)

KEYS = AnnotationKeys("hotswap.gke-tpu-priority.io")
AT = datetime(2026, 12, 3, 10, 15, 0, tzinfo=UTC)


def _jobset(api: FakeApiServer, name: str = "train") -> None:
    api.put(JOBSETS, {"metadata": {"name": name, "namespace": NS, "annotations": {"keep": "me"}}, "spec": {}})


async def test_marking_sets_the_annotation_and_keeps_the_others(api: FakeApiServer, make_client: ClientFactory) -> None:
    _jobset(api)
    assert await mark_checkpoint(await make_client("trainer"), KEYS, NS, "train", AT)
    obj = api.get(JOBSETS, "train", NS)
    assert obj is not None
    assert obj["metadata"]["annotations"] == {"keep": "me", KEYS.last_checkpoint: "2026-12-03T10:15:00Z"}
    assert len(api.writes("trainer")) == 1


async def test_a_missing_jobset_is_reported_not_raised(api: FakeApiServer, make_client: ClientFactory) -> None:
    assert not await mark_checkpoint(await make_client("trainer"), KEYS, NS, "gone", AT)


def test_the_target_comes_from_flags_then_the_environment() -> None:
    env = {"JOBSET_NAME": "from-env", "POD_NAMESPACE": "env-ns"}
    assert resolve_target(None, None, env) == ("env-ns", "from-env")
    assert resolve_target("flag", "flag-ns", env) == ("flag-ns", "flag")


def test_the_service_account_namespace_is_the_last_resort(tmp_path: Path) -> None:
    sa = tmp_path / "namespace"
    sa.write_text("sa-ns\n", encoding="utf-8")
    assert resolve_target("train", None, {}, sa) == ("sa-ns", "train")


@pytest.mark.parametrize(
    ("jobset", "env", "message"),
    [(None, {"POD_NAMESPACE": "x"}, "JOBSET_NAME"), ("train", {}, "POD_NAMESPACE")],
)
def test_an_unknown_target_names_what_to_set(
    jobset: str | None, env: dict[str, str], message: str, tmp_path: Path
) -> None:
    with pytest.raises(CheckpointTargetError, match=message):
        resolve_target(jobset, None, env, tmp_path / "absent")


async def test_the_cli_marks_the_jobset(api: FakeApiServer, tmp_path: Path) -> None:
    _jobset(api)
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", api.url, "trainer")
    argv = ["mark-checkpoint", "--kubeconfig", str(kubeconfig), "--jobset", "train", "--namespace", NS]
    # The CLI runs its own event loop; run it in a thread so the fake server's loop keeps serving.
    code = await asyncio.to_thread(main, [*argv, "--at", "2026-12-03T10:15:00Z"])
    assert code == 0
    obj = api.get(JOBSETS, "train", NS)
    assert obj is not None and obj["metadata"]["annotations"][KEYS.last_checkpoint] == "2026-12-03T10:15:00Z"


def test_the_cli_rejects_a_bad_time(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["mark-checkpoint", "--jobset", "t", "--namespace", "n", "--at", "noon"])
    assert exit_info.value.code == 2
    assert "not an RFC 3339 time" in capsys.readouterr().err
