"""GKE maintenance-policy arithmetic: how much availability a recurring window gives in the worst 32 days.

GKE refuses a policy that "would go longer than 32d without 48h maintenance availability", and counts only
contiguous availability of at least 4 h (GKE docs, "Configure maintenance windows and exclusions").
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache

from dateutil.rrule import rrule, rrulestr

ROLLING_WINDOW = timedelta(days=32)
REQUIRED = timedelta(hours=48)
MIN_CONTIGUOUS = timedelta(hours=4)
# A year plus one rolling window covers every weekly/daily period and the month lengths of monthly rules.
HORIZON = timedelta(days=366) + ROLLING_WINDOW
WEEKDAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
# GKE API, RecurringTimeWindow.recurrence: "The FREQ values of HOURLY, MINUTELY, and SECONDLY are not supported."
UNSUPPORTED_FREQ = frozenset({"HOURLY", "MINUTELY", "SECONDLY"})


def parse_rfc3339(value: str) -> datetime:
    """An RFC 3339 timestamp with an explicit offset, normalised to UTC (GKE stores and compares in UTC)."""
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(f"{value!r} is not an RFC 3339 timestamp (expected e.g. `2026-01-03T02:00:00Z`)") from None
    if parsed.tzinfo is None:
        raise ValueError(f"{value!r} has no UTC offset; write it in UTC, e.g. `2026-01-03T02:00:00Z`")
    return parsed.astimezone(UTC)


def parse_rule(recurrence: str, start: datetime) -> rrule:
    freq = re.search(r"FREQ=([A-Z]+)", recurrence.upper())
    if freq is not None and freq.group(1) in UNSUPPORTED_FREQ:
        raise ValueError(
            f"{recurrence!r}: GKE does not support FREQ={freq.group(1)} (use DAILY, WEEKLY or MONTHLY); "
            "e.g. `FREQ=WEEKLY;BYDAY=SA,SU`"
        )
    try:
        rule = rrulestr(recurrence, dtstart=start)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{recurrence!r} is not an RFC 5545 RRULE ({exc}); e.g. `FREQ=WEEKLY;BYDAY=SA,SU`") from None
    if not isinstance(rule, rrule):
        raise ValueError(f"{recurrence!r} must be a single RRULE, e.g. `FREQ=WEEKLY;BYDAY=SA,SU`")
    return rule


@dataclass(frozen=True)
class Availability:
    """What a recurring window gives: hours in the worst rolling 32 days, counting only 4 h+ contiguous blocks."""

    worst_hours: float
    window_hours: float

    @property
    def enough(self) -> bool:
        return self.worst_hours >= REQUIRED.total_seconds() / 3600


def _merged(starts: list[datetime], length: timedelta) -> list[tuple[datetime, datetime]]:
    blocks: list[tuple[datetime, datetime]] = []
    for start in starts:
        end = start + length
        if blocks and start <= blocks[-1][1]:
            blocks[-1] = (blocks[-1][0], max(blocks[-1][1], end))
        else:
            blocks.append((start, end))
    return blocks


def _usable(blocks: list[tuple[datetime, datetime]], ends: list[datetime], since: datetime) -> timedelta:
    until = since + ROLLING_WINDOW
    total = timedelta(0)
    for start, end in blocks[bisect_right(ends, since) :]:
        if start >= until:
            break
        part = min(end, until) - max(start, since)
        if part >= MIN_CONTIGUOUS:
            total += part
    return total


def worst_availability(window_start: datetime, window_end: datetime, recurrence: str) -> Availability:
    """Expand the window over a year and find the rolling 32 days with the least usable maintenance time.

    A block cut by the span's edge counts only for the part inside, and only if that part is 4 h or more. The
    usable time is piecewise linear in the span's start, so its minimum lies at (or just beside) a breakpoint:
    where a block enters or leaves the span or its inside part crosses 4 h.
    """
    length = window_end - window_start
    if length <= timedelta(0):
        raise ValueError("windowEnd must be after windowStart")
    rule = parse_rule(recurrence, window_start)
    horizon_end = window_start + HORIZON
    starts = list(rule.between(window_start - length, horizon_end, inc=True))
    blocks = [b for b in _merged(starts, length) if b[1] - b[0] >= MIN_CONTIGUOUS]
    last = horizon_end - ROLLING_WINDOW
    breakpoints = {window_start, last}
    for start, end in blocks:
        breakpoints |= {start, end - MIN_CONTIGUOUS, start + MIN_CONTIGUOUS - ROLLING_WINDOW, end - ROLLING_WINDOW}
    epsilon = timedelta(seconds=1)
    candidates = {t + d for t in breakpoints for d in (-epsilon, timedelta(0), epsilon)}
    ends = [b[1] for b in blocks]
    worst = min(_usable(blocks, ends, t) for t in candidates if window_start <= t <= last)
    return Availability(worst.total_seconds() / 3600, length.total_seconds() / 3600)


def _hours(value: float) -> str:
    return f"{value:g} h"


def _longer_window(window_start: datetime, recurrence: str, current: timedelta) -> int | None:
    for hours in range(max(4, int(current.total_seconds() // 3600) + 1), 25):
        if worst_availability(window_start, window_start + timedelta(hours=hours), recurrence).enough:
            return hours
    return None


def _more_days(window_start: datetime, window_end: datetime, recurrence: str) -> str | None:
    parts = dict(p.split("=", 1) for p in recurrence.upper().split(";") if "=" in p)
    if parts.get("FREQ") != "WEEKLY":
        return None
    days = [d for d in parts.get("BYDAY", WEEKDAYS[window_start.weekday()]).split(",") if d in WEEKDAYS]
    if not days:
        return None
    # Add the days that follow the last chosen one, so a weekend window grows into a longer weekend.
    last = max(WEEKDAYS.index(d) for d in days)
    for extra in range(1, 7):
        wanted = set(days) | {WEEKDAYS[(last + i) % 7] for i in range(1, extra + 1)}
        byday = ",".join(d for d in WEEKDAYS if d in wanted)
        parts["BYDAY"] = byday
        rule = ";".join(f"{k}={v}" for k, v in parts.items())
        if worst_availability(window_start, window_end, rule).enough:
            return byday
    return None


@lru_cache(maxsize=256)
def availability_problem(window_start: str, window_end: str, recurrence: str) -> str | None:
    """None when GKE would accept the recurring window; otherwise what it gives and what would do."""
    start, end = parse_rfc3339(window_start), parse_rfc3339(window_end)
    got = worst_availability(start, end, recurrence)
    if got.enough:
        return None
    required = _hours(REQUIRED.total_seconds() / 3600)
    what = f"a {_hours(got.window_hours)} window on `{recurrence}`"
    if end - start < MIN_CONTIGUOUS:
        what += " (GKE ignores blocks shorter than 4 h)"
    fixes = []
    hours = _longer_window(start, recurrence, end - start)
    if hours is not None:
        new_end = (start + timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ")
        fixes.append(f"a {hours} h window (windowEnd {new_end})")
    byday = _more_days(start, max(end, start + MIN_CONTIGUOUS), recurrence)
    if byday is not None:
        fixes.append(f"more days, e.g. BYDAY={byday}")
    fix = " or ".join(fixes) if fixes else "a longer or more frequent window, e.g. `FREQ=WEEKLY;BYDAY=SA,SU` of 6 h"
    return (
        f"{what} gives {_hours(got.worst_hours)} in the worst 32 days; GKE needs {required} "
        f"(counting only blocks of 4 h or more): use {fix}"
    )
