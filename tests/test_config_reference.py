"""docs/configuration.md is generated from the settings models: it lists every setting, and a stale page fails."""

from __future__ import annotations

from gke_tpu_priority.components.config.platform import PlatformConfig
from gke_tpu_priority.hotswap.config import HotswapConfig
from tools import config_reference


def test_the_committed_page_is_what_the_models_produce() -> None:
    committed = config_reference.PAGE.read_text() if config_reference.PAGE.exists() else ""
    assert committed == config_reference.generate(), (
        f"docs/configuration.md is stale: run `{config_reference.COMMAND}` and commit the result"
    )


def test_every_top_level_platform_setting_has_a_row_with_its_description() -> None:
    page = config_reference.generate()
    platform = page.split("### `platform`\n", 1)[1].split("\n### ", 1)[0]
    for name, info in PlatformConfig.model_fields.items():
        key = info.alias or name
        row = next(line for line in platform.splitlines() if line.startswith(f"| `{key}` |"))
        assert " ".join((info.description or "").split()).replace("|", "\\|") in row, key


def test_settings_the_package_derives_are_left_out_of_the_reconciler_table() -> None:
    page = config_reference.generate()
    table = page.split("### `platform.hotswap.settings`\n", 1)[1].split("\n### ", 1)[0]
    assert "| `maxHold` | duration | `6h` |" in table
    assert "| `evictionDelay` | duration | `1m` |" in table
    for derived in ("leaderElection", "preemptorMinPriority", "mode", "dryRun"):
        assert f"| `{derived}` |" not in table, derived
    assert set(HotswapConfig.model_fields) >= {"max_hold", "leader_election", "mode"}


def test_durations_read_as_a_stack_writes_them() -> None:
    from datetime import timedelta

    assert config_reference._duration(timedelta(seconds=90)) == "90s"
    assert config_reference._duration(timedelta(minutes=20)) == "20m"
    assert config_reference._duration(timedelta(hours=24)) == "1d"
    assert config_reference._duration(timedelta(milliseconds=500)) == "500ms"
    assert config_reference._duration(timedelta(0)) == "0s"
