"""The zones where Google documents TPU v6e, and the check of a stack's TPU pool zones against them.

Source: "TPU regions and zones", https://cloud.google.com/tpu/docs/regions-zones (the v6e rows; read 2026-12-06).
The table lists what that page names for v6e without qualification. Not in it, on purpose:
- zones the page lists for v6e only as single-tenant capacity or as AI zones (a project with such capacity knows
  its zone and names it in `platform.additionalTpuZones`);
- the page's Asia Pacific and South America v6e rows, which the copy read for this table did not show legibly:
  a zone there that offers v6e is accepted once named in `platform.additionalTpuZones`.
A zone Google launches later is accepted the same way, without waiting for a release of this package; to check a
zone: `gcloud compute tpus accelerator-types list --zone=<zone> --filter='name~v6e'`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

DOCS_URL = "cloud.google.com/tpu/docs/regions-zones"
OVERRIDE_SETTING = "additionalTpuZones"

V6E_ZONES: tuple[str, ...] = (
    "europe-west4-a",
    "us-central1-b",
    "us-east1-d",
    "us-east5-a",
    "us-east5-b",
)


def region_of(zone: str) -> str:
    return zone.rsplit("-", 1)[0]


def v6e_zones(additional: Iterable[str] = ()) -> list[str]:
    return sorted({*V6E_ZONES, *additional})


def allowed_zones(region: str, additional: Sequence[str] = ()) -> str:
    """The zones a pool in `region` may use, as a user reads them (all documented ones when the region has none)."""
    known = v6e_zones(additional)
    in_region = [z for z in known if region_of(z) == region]
    if in_region:
        return f"the zones of region {region!r} with TPU v6e: {', '.join(in_region)}"
    return f"region {region!r} has no zone with TPU v6e in the table; the zones with it: {', '.join(known)}"


def zone_problem(field: str, zone: str, region: str, additional: Sequence[str] = ()) -> str | None:
    """None when `zone` offers v6e (documented or named in the override); otherwise the sentence a user needs."""
    if zone in v6e_zones(additional):
        return None
    return (
        f"{field}: {zone!r} is not a zone where Google documents TPU v6e ({DOCS_URL}); "
        f"{allowed_zones(region, additional)}. "
        f"If your project has v6e capacity in {zone!r} (a newly launched, single-tenant or AI zone), "
        f"add it to `platform.{OVERRIDE_SETTING}`"
    )
