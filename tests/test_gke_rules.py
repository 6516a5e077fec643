"""GKE server-side rules the config model enforces: maintenance availability and exclusions, flex-start limits,
version floors and the Kubernetes provider's credential source."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gke_tpu_priority.components.config import ConfigError, parse_platform_config
from gke_tpu_priority.components.config.cluster import KubernetesAuth, gke_version_at_least
from gke_tpu_priority.components.config.maintenance import (
    MIN_CONTIGUOUS,
    ROLLING_WINDOW,
    WEEKDAYS,
    parse_rfc3339,
    parse_rule,
    worst_availability,
)
from gke_tpu_priority.policies.rules import evaluate_resources
from testkit.mock_runtime import load_stack_config, run_program
from testkit.platform import platform, stack_config, tpu_pool
from testkit.stacks import STACKS


def problems_of(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_platform_config(raw)
    return info.value.problems


def window(recurrence: str, start: str = "2026-01-03T02:00:00Z", end: str = "2026-01-03T08:00:00Z") -> dict[str, Any]:
    return {"cluster": {"maintenance": {"windowStart": start, "windowEnd": end, "recurrence": recurrence}}}


# --- maintenance window: 48 h in every 32 days, counting blocks of 4 h or more --------------------------------


def test_one_six_hour_saturday_window_is_refused_with_what_it_gives_and_what_would_do() -> None:
    assert problems_of(platform(**window("FREQ=WEEKLY;BYDAY=SA"))) == [
        "platform.cluster.maintenance.recurrence: a 6 h window on `FREQ=WEEKLY;BYDAY=SA` gives 24 h in the worst "
        "32 days; GKE needs 48 h (counting only blocks of 4 h or more): use a 12 h window "
        "(windowEnd 2026-01-03T14:00:00Z) or more days, e.g. BYDAY=SA,SU"
    ]


@pytest.mark.parametrize(
    ("recurrence", "start", "end"),
    [
        ("FREQ=WEEKLY;BYDAY=SA,SU", "2026-01-03T02:00:00Z", "2026-01-03T08:00:00Z"),  # 8 windows x 6 h = 48 h
        ("FREQ=WEEKLY;BYDAY=SA", "2026-01-03T02:00:00Z", "2026-01-03T14:00:00Z"),  # 4 x 12 h
        ("FREQ=DAILY", "2026-01-03T02:00:00Z", "2026-01-03T06:00:00Z"),  # 4 h blocks count
        ("FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR", "2026-01-05T20:00:00Z", "2026-01-06T00:00:00Z"),
        ("FREQ=WEEKLY;INTERVAL=2;BYDAY=SA,SU", "2026-01-03T00:00:00Z", "2026-01-04T00:00:00Z"),
        ("FREQ=MONTHLY;BYMONTHDAY=1,8,15,22,29", "2026-01-01T00:00:00Z", "2026-01-01T12:00:00Z"),
    ],
)
def test_windows_gke_accepts(recurrence: str, start: str, end: str) -> None:
    parse_platform_config(platform(**window(recurrence, start, end)))


@pytest.mark.parametrize(
    ("recurrence", "start", "end", "expected"),
    [
        (
            "FREQ=DAILY",
            "2026-01-03T02:00:00Z",
            "2026-01-03T05:00:00Z",
            "a 3 h window on `FREQ=DAILY` (GKE ignores blocks shorter than 4 h) gives 0 h",
        ),
        ("FREQ=WEEKLY;BYDAY=SA;COUNT=3", "2026-01-03T00:00:00Z", "2026-01-04T00:00:00Z", "gives 0 h"),
        ("FREQ=WEEKLY;INTERVAL=2;BYDAY=SA", "2026-01-03T00:00:00Z", "2026-01-03T12:00:00Z", "gives 24 h"),
        ("FREQ=SOMETIMES", "2026-01-03T00:00:00Z", "2026-01-03T12:00:00Z", "is not an RFC 5545 RRULE"),
        # GKE's API example (first weekend of every month): first Saturdays can be 35 days apart.
        ("FREQ=MONTHLY;BYSETPOS=1;BYDAY=SA", "2026-01-03T00:00:00Z", "2026-01-05T00:00:00Z", "gives 0 h"),
        ("FREQ=HOURLY", "2026-01-03T00:00:00Z", "2026-01-03T00:30:00Z", "GKE does not support FREQ=HOURLY"),
        ("FREQ=DAILY", "2026-01-03T08:00:00Z", "2026-01-03T02:00:00Z", "windowEnd must be after windowStart"),
    ],
)
def test_windows_gke_refuses(recurrence: str, start: str, end: str, expected: str) -> None:
    (problem,) = problems_of(platform(**window(recurrence, start, end)))
    assert problem.startswith("platform.cluster.maintenance.recurrence: ") and expected in problem, problem


def test_window_times_must_be_rfc3339_in_utc() -> None:
    problems = problems_of(platform(**window("FREQ=DAILY", start="2026-01-03 02:00", end="2026-01-03T08:00:00")))
    assert problems == [
        "platform.cluster.maintenance.windowStart: '2026-01-03 02:00' has no UTC offset; write it in UTC, "
        "e.g. `2026-01-03T02:00:00Z`",
        "platform.cluster.maintenance.windowEnd: '2026-01-03T08:00:00' has no UTC offset; write it in UTC, "
        "e.g. `2026-01-03T02:00:00Z`",
    ]


def test_every_stack_meets_the_availability_rule() -> None:
    for stack in STACKS:
        config = parse_platform_config(load_stack_config(stack)["gke-tpu-priority:platform"])
        m = config.cluster.maintenance
        got = worst_availability(parse_rfc3339(m.window_start), parse_rfc3339(m.window_end), m.recurrence)
        assert got.worst_hours >= 48, (stack, got)


def _brute_force_worst_hours(start: str, end: str, recurrence: str) -> float:
    """Slide the 32-day span hour by hour (and a second either side) over one week: no breakpoint reasoning."""
    begin, finish = parse_rfc3339(start), parse_rfc3339(end)
    length = finish - begin
    rule = parse_rule(recurrence, begin)
    blocks: list[list[Any]] = []
    for s in rule.between(begin - length, begin + timedelta(days=60), inc=True):
        if blocks and s <= blocks[-1][1]:
            blocks[-1][1] = max(blocks[-1][1], s + length)
        else:
            blocks.append([s, s + length])
    worst = None
    second = timedelta(seconds=1)
    for hour in range(7 * 24 + 1):
        for t in (begin + timedelta(hours=hour) + d for d in (-second, timedelta(0), second)):
            if t < begin:
                continue
            total = timedelta(0)
            for b_start, b_end in blocks:
                part = min(b_end, t + ROLLING_WINDOW) - max(b_start, t)
                if part >= MIN_CONTIGUOUS:
                    total += part
            worst = total if worst is None else min(worst, total)
    assert worst is not None
    return worst.total_seconds() / 3600


@settings(max_examples=40, deadline=None)
@given(
    st.sets(st.sampled_from(WEEKDAYS), min_size=1),
    st.integers(0, 23),
    st.integers(1, 30),
)
def test_worst_window_matches_a_brute_force_sweep(days: set[str], hour: int, length: int) -> None:
    byday = ",".join(d for d in WEEKDAYS if d in days)
    start = f"2026-01-05T{hour:02d}:00:00Z"
    end = (parse_rfc3339(start) + timedelta(hours=length)).strftime("%Y-%m-%dT%H:%M:%SZ")
    recurrence = f"FREQ=WEEKLY;BYDAY={byday}"
    got = worst_availability(parse_rfc3339(start), parse_rfc3339(end), recurrence).worst_hours
    assert got == pytest.approx(_brute_force_worst_hours(start, end, recurrence), abs=1e-3)


# --- maintenance exclusions ------------------------------------------------------------------------------------


def exclusion(name: str, start: str, end: str, scope: str = "NO_UPGRADES") -> dict[str, str]:
    return {"name": name, "startTime": start, "endTime": end, "scope": scope}


def with_exclusions(*items: dict[str, str]) -> dict[str, Any]:
    return {"cluster": {"maintenance": {"exclusions": list(items)}}}


def test_no_upgrades_exclusion_longer_than_30_days_is_refused() -> None:
    raw = platform(**with_exclusions(exclusion("freeze", "2027-01-01T00:00:00Z", "2027-02-15T00:00:00Z")))
    assert problems_of(raw) == [
        "platform.cluster.maintenance.exclusions[0].endTime: a NO_UPGRADES exclusion of 45 days exceeds GKE's 30; "
        "end it by 2027-01-31T00:00:00Z or use scope NO_MINOR_OR_NODE_UPGRADES, which may run longer"
    ]
    long_campaign = exclusion("campaign", "2027-01-01T00:00:00Z", "2027-03-15T00:00:00Z", "NO_MINOR_OR_NODE_UPGRADES")
    parse_platform_config(platform(**with_exclusions(long_campaign)))


def test_at_most_three_no_upgrades_exclusions() -> None:
    items = [exclusion(f"x{i}", f"2027-0{i + 1}-01T00:00:00Z", f"2027-0{i + 1}-05T00:00:00Z") for i in range(4)]
    assert problems_of(platform(**with_exclusions(*items))) == [
        "platform.cluster.maintenance.exclusions: 4 exclusions (indexes [0, 1, 2, 3]) have scope NO_UPGRADES; GKE "
        "allows 3: merge them or use NO_MINOR_OR_NODE_UPGRADES"
    ]
    parse_platform_config(platform(**with_exclusions(*items[:3])))


def test_at_most_twenty_exclusions_with_unique_names() -> None:
    items = [exclusion(f"x{i}", "2027-01-01T00:00:00Z", "2027-01-02T00:00:00Z", "NO_MINOR_UPGRADES") for i in range(21)]
    (problem,) = problems_of(platform(**with_exclusions(*items)))
    assert problem.startswith("platform.cluster.maintenance.exclusions: expected at most 20 items (got [")
    dup = [items[0], items[0]]
    assert problems_of(platform(**with_exclusions(*dup))) == [
        "platform.cluster.maintenance.exclusions[1].name: 'x0' is already used by exclusions[0]; "
        "GKE keys exclusions by name"
    ]


def test_exclusion_must_end_after_it_starts() -> None:
    raw = platform(**with_exclusions(exclusion("x", "2027-01-02T00:00:00Z", "2027-01-01T00:00:00Z")))
    assert problems_of(raw) == [
        "platform.cluster.maintenance.exclusions[0].endTime: '2027-01-01T00:00:00Z' is not after startTime "
        "'2027-01-02T00:00:00Z'"
    ]


# --- flex-start and GKE version floors -------------------------------------------------------------------------


def flex(**capacity: Any) -> dict[str, Any]:
    return tpu_pool("flex", capacity={"mode": "flex-start", **capacity})


def test_flex_start_runs_at_most_seven_days() -> None:
    parse_platform_config(platform(flex(maxRunDuration="604800s")))
    assert problems_of(platform(flex(maxRunDuration="604801s"))) == [
        "platform.tpuPools[0].capacity.maxRunDuration: '604801s' is outside flex-start's 1s..604800s; "
        "flex-start VMs run at most 7 days"
    ]
    assert any("outside flex-start" in p for p in problems_of(platform(flex(maxRunDuration="0s"))))


def test_flex_start_needs_gke_1_33_0_gke_1712000() -> None:
    assert problems_of(platform(flex(), cluster={"minMasterVersion": "1.33.0-gke.1711999"})) == [
        "platform.cluster.minMasterVersion: '1.33.0-gke.1711999' is older than 1.33.0-gke.1712000, which flex-start "
        "TPU capacity (tpuPools[0]) needs; set it to 1.33.0-gke.1712000 or newer (or leave it unset to get the "
        "release channel's default)"
    ]
    parse_platform_config(platform(flex(), cluster={"minMasterVersion": "1.33.0-gke.1712000"}))
    parse_platform_config(platform(flex()))  # unset: the release channel's default version
    # The same pin is fine without flex-start.
    parse_platform_config(platform(cluster={"minMasterVersion": "1.33.0-gke.1711999"}))


def test_jobset_monitoring_needs_gke_1_32_1_gke_1357001() -> None:
    (problem,) = problems_of(platform(cluster={"minMasterVersion": "1.32.1-gke.1357000"}))
    assert "is older than 1.32.1-gke.1357001, which the JOBSET monitoring component needs" in problem
    parse_platform_config(platform(cluster={"minMasterVersion": "1.32.1-gke.1357001"}))


@pytest.mark.parametrize(
    ("version", "floor", "expected"),
    [
        ("1.33.0-gke.1712000", "1.33.0-gke.1712000", True),
        ("1.33.0-gke.999999", "1.33.0-gke.1712000", False),  # numeric, not string, comparison
        ("1.33.10-gke.1", "1.33.9-gke.2000000", True),
        ("1.34", "1.33.0-gke.1712000", True),
        ("1.33", "1.33.0-gke.1712000", True),  # a prefix names GKE's newest 1.33 release
        ("1.32", "1.33.0-gke.1712000", False),
        ("2.0.0", "1.99.99-gke.1", True),
    ],
)
def test_gke_versions_compare_numerically(version: str, floor: str, expected: bool) -> None:
    assert gke_version_at_least(version, floor) is expected


# --- Kubernetes provider credentials ---------------------------------------------------------------------------


def test_kubernetes_auth_defaults_to_adc_and_accepts_gcloud() -> None:
    assert parse_platform_config(platform()).cluster.kubernetes_auth is KubernetesAuth.ADC
    cfg = parse_platform_config(platform(cluster={"kubernetesAuth": "gcloud"}))
    assert cfg.cluster.kubernetes_auth is KubernetesAuth.GCLOUD
    (problem,) = problems_of(platform(cluster={"kubernetesAuth": "token"}))
    assert problem.startswith("platform.cluster.kubernetesAuth: expected one of 'adc' or 'gcloud'")


def test_the_policy_pack_reads_flex_start_per_zone_limits() -> None:
    run = run_program(
        "flex", stack_config(platform(tpu_pool("flex", topology="4x8", slices=2, capacity={"mode": "flex-start"})))
    )
    resources = [
        {"urn": r.urn, "type": r.type, "name": r.name, "parent": r.parent, "inputs": r.inputs} for r in run.resources
    ]
    flex_pools = [r for r in resources if r["inputs"].get("name", "").startswith("flex-")]
    assert len(flex_pools) == 2 and all(p["inputs"]["autoscaling"]["maxNodeCount"] == 8 for p in flex_pools)
    blocking = [v for v in evaluate_resources(resources) if v.blocking and "flex-" in v.message]
    assert not blocking, [v.message for v in blocking]
