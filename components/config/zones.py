"""The zones where Google documents TPU v6e, and the check of a stack's TPU pool zones against them.

Source: "TPU regions and zones", https://cloud.google.com/tpu/docs/regions-zones (the v6e rows; read 2026-12-06).
The table lists what that page names for v6e without qualification. Not in it, on purpose:
- zones the page lists for v6e only as single-tenant capacity or as AI zones (a project with such capacity knows
  its zone and names it in `platform.additionalTpuZones`);
- the page's Asia Pacific and South America v6e rows. Looked for again on 2026-12-06 in the stored copies of the
  page (cloud.google.com/tpu/docs/regions-zones, .../regions, docs.cloud.google.com/tpu/docs/types-zones and
  .../regions-zones.md.txt, and the page's Japanese, German and Portuguese versions): every copy that was legible
  ends before those sections, and the one that reaches the Asia Pacific v6e row (the Japanese page) shows the row
  without its zones. No zone is guessed: a zone there that offers v6e is accepted once named in
  `platform.additionalTpuZones`. The newest copy's North America and Europe v6e rows are the table's, plus AI
  zones (`us-central1-ai1`, `us-south1-ai1b`), left out as said above.
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
