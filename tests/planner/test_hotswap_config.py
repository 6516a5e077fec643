"""HotswapConfig validation and load_config file + env handling."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from gke_tpu_priority.hotswap.config import ConfigError, HotswapConfig, Mode, Scope, load_config


def test_defaults_match_the_specification() -> None:
    config = load_config(None, {})
    assert config.mode is Mode.RECONCILER and config.scope is Scope.COHORT
    assert config.unhealthy_grace == timedelta(seconds=20)
    assert config.recovery_stabilization == timedelta(seconds=120)
    assert config.attribution_window == timedelta(minutes=10)
    assert config.max_hold == timedelta(hours=6) and config.max_holds_per_window == 3
    assert config.fast_fail.enabled is False and config.fast_fail.after == timedelta(seconds=60)


def test_file_then_env_overrides(tmp_path: Path) -> None:
    path = tmp_path / "hotswap.yaml"
    path.write_text("scope: Cluster\nunhealthyGrace: 45s\nleaderElection:\n  leaseName: from-file\n")
    env = {"HOTSWAP_UNHEALTHY_GRACE": "1m30s", "HOTSWAP_NAMESPACES": "b, a", "HOTSWAP_FAST_FAIL__ENABLED": "true"}
    config = load_config(path, env)
    assert config.scope is Scope.CLUSTER
    assert config.unhealthy_grace == timedelta(seconds=90)
    assert config.namespaces == ("a", "b")
    assert config.leader_election.lease_name == "from-file"
    assert config.fast_fail.enabled is True


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"HOTSWAP_MODE": "eager"}, "mode: Input should be 'reconciler' or 'scheduler-assisted' (got 'eager')"),
        ({"HOTSWAP_MAX_HOLDS_PER_WINDOW": "0"}, "maxHoldsPerWindow"),
        ({"HOTSWAP_LEADER_ELECTION__RENEW_DEADLINE": "20s"}, "leaseDuration > renewDeadline > retryPeriod"),
        ({"HOTSWAP_ANNOTATION_DOMAIN": "Not_A_Domain"}, "annotationDomain"),
        ({"HOTSWAP_HEALTH_PORT": "8080"}, "metricsPort and healthPort must differ"),
        ({"HOTSWAP_SURPRISE": "1"}, "surprise: Extra inputs are not permitted"),
    ],
)
def test_errors_name_the_field_the_value_and_what_is_allowed(env: dict[str, str], fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(None, env)
    assert fragment in str(caught.value)


def test_config_is_frozen() -> None:
    config = HotswapConfig()
    with pytest.raises(ValueError, match="frozen"):
        config.dry_run = True  # type: ignore[misc]
