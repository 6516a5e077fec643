"""`python -m sim sweep`: one scenario over a grid of parameter values x seeds x policies.

How much do the policies' MTTR figures depend on timings nobody controls (termination grace, pod start, failure
rate...)? Each grid point is a copy of the scenario with some fields replaced; every point runs under the same
seeds as the bench (identical event streams across policies within a seed) and is pooled over them the same way.
Expanding the grid and pooling/tabulating are pure; only :func:`run_points` runs simulations.
"""

from __future__ import annotations

import itertools
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from sim.bench import (
    QUANTILES,
    fmt,
    mttr_ratios,
    restart_floor_s,
    run_many,
)
from sim.metrics import add_exchange_rates, pool
from sim.params import Scenario
from sim.runner import POLICIES

NOT_SWEPT = frozenset({"name", "seed"})
"""Scenario fields that are not grid axes: seeds are the --seeds axis and the name labels the report."""

PER_SEED_KEYS = ("incidents", "mttr_s", "mttr_lasting_s", "lost_victims", "partial_preemptions")


class SweepError(ValueError):
    """A --param that names no field or carries a value the field rejects."""


@dataclass(frozen=True)
class Point:
    """One grid point: the replaced values (in --param order) and the scenario they give."""

    values: dict[str, Any]
    scenario: Scenario


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _leaves(model: type[BaseModel], prefix: str) -> list[tuple[str, FieldInfo]]:
    out: list[tuple[str, FieldInfo]] = []
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        if _is_model(info.annotation):
            out.extend(_leaves(info.annotation, f"{path}."))  # type: ignore[arg-type]
        elif typing.get_origin(info.annotation) is not tuple:  # tuples of bands have no stable names
            out.append((path, info))
    return out


def sweepable_fields(base: Scenario) -> dict[str, FieldInfo]:
    """Dotted paths a --param may name: every scalar of the scenario's models, and `classes.<name>.<field>`
    for each job class of `base`."""
    fields = {path: info for path, info in _leaves(Scenario, "") if path not in NOT_SWEPT}
    for job_class in base.classes:  # by name, which therefore is not itself an axis
        prefix = f"classes.{job_class.name}."
        fields |= {path: info for path, info in _leaves(type(job_class), prefix) if path != f"{prefix}name"}
    return fields


def parse_param(text: str) -> tuple[str, list[str]]:
    """`FIELD=v1,v2,...` -> (FIELD, [v1, v2, ...]), values still text (the field's own validation parses them)."""
    field, sep, values = text.partition("=")
    items = [v.strip() for v in values.split(",")] if sep else []
    if not field.strip() or not items or any(not v for v in items):
        raise SweepError(f"--param {text!r}: expected FIELD=v1,v2,... (e.g. timing.pod_termination_grace_s=30,60)")
    return field.strip(), items


def _allowed(info: FieldInfo) -> str:
    annotation = info.annotation
    kind = getattr(annotation, "__name__", None) or str(annotation)
    bounds = []
    for m in info.metadata:
        for cls, attr, op in ((Ge, "ge", ">="), (Gt, "gt", ">"), (Le, "le", "<="), (Lt, "lt", "<")):
            if isinstance(m, cls):
                bounds.append(f"{op} {getattr(m, attr)}")
    return f"{kind} {' and '.join(bounds)}" if bounds else kind


def _set(data: dict[str, Any], path: str, value: Any) -> None:
    head, _, rest = path.partition(".")
    if head == "classes":
        name, _, field = rest.partition(".")
        data["classes"] = tuple(c | {field: value} if c["name"] == name else c for c in data["classes"])
        return
    if rest:
        _set(data[head], rest, value)
    else:
        data[head] = value


def _get(scenario: Scenario, path: str) -> Any:
    head, _, rest = path.partition(".")
    if head == "classes":
        name, _, field = rest.partition(".")
        return getattr(next(c for c in scenario.classes if c.name == name), field)
    obj: Any = scenario
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def with_values(base: Scenario, values: Mapping[str, Any]) -> Scenario:
    """`base` with the dotted fields replaced, validated by the params' own pydantic models."""
    data = base.model_dump()
    for path, value in values.items():
        _set(data, path, value)
    return Scenario.model_validate(data)


def _errors(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" if e["loc"] else str(e["msg"]) for e in exc.errors()
    )


def expand_grid(base: Scenario, axes: Sequence[tuple[str, Sequence[str]]]) -> list[Point]:
    """The Cartesian product of the axes, first axis slowest; every field and value is checked first."""
    fields = sweepable_fields(base)
    seen: set[str] = set()
    checked: list[list[tuple[str, Any]]] = []
    for field, raw_values in axes:
        if field not in fields:
            raise SweepError(f"--param {field}: unknown field of scenario {base.name!r}; valid: {', '.join(fields)}")
        if field in seen:
            raise SweepError(f"--param {field}: given twice; put all its values in one --param {field}=v1,v2")
        seen.add(field)
        values: list[tuple[str, Any]] = []
        for raw in raw_values:
            try:
                value = _get(with_values(base, {field: raw}), field)
            except ValidationError as exc:
                # Field-level errors get the field's type and bounds; cross-field checks explain themselves.
                allowed = f" (allowed: {_allowed(fields[field])})" if any(e["loc"] for e in exc.errors()) else ""
                raise SweepError(f"--param {field}={raw}: {_errors(exc)}{allowed}") from exc
            if any(value == v for _, v in values):
                raise SweepError(f"--param {field}: value {raw!r} is repeated")
            values.append((field, value))
        checked.append(values)
    points = []
    for combo in itertools.product(*checked):
        replaced = dict(combo)
        try:
            scenario = with_values(base, replaced)
        except ValidationError as exc:  # a combination the scenario's cross-field checks reject
            raise SweepError(f"grid point {replaced}: {_errors(exc)}") from exc
        points.append(Point(values=replaced, scenario=scenario))
    return points


def run_points(
    points: Sequence[Point], seeds: Sequence[int], workers: int, progress: bool = True
) -> dict[tuple[int, int, str], dict[str, Any]]:
    """Each point under each seed and policy -> its summary, keyed (point index, seed, policy)."""
    runs = [
        ((i, s, policy), point.scenario.model_copy(update={"seed": s}), policy)
        for i, point in enumerate(points)
        for s in seeds
        for policy in POLICIES
    ]
    results = run_many(runs, workers, progress, desc="points x seeds x policies")
    return {key: result.summary for key, result in results.items()}


def pool_points(
    base: Scenario,
    points: Sequence[Point],
    seeds: Sequence[int],
    summaries: Mapping[tuple[int, int, str], dict[str, Any]],
) -> dict[str, Any]:
    """The sweep report (sweep.json): per point, the replaced values, the restart floor and the policies'
    figures pooled over the seeds as the bench pools them."""
    out_points = []
    for i, point in enumerate(points):
        policies = {p: pool([summaries[(i, s, p)] for s in seeds]) for p in POLICIES}
        add_exchange_rates(policies)
        out_points.append(
            {
                "params": point.values,
                "restart_floor_s": restart_floor_s(point.scenario.timing.model_dump()),
                "policies": policies,
                "ratios": mttr_ratios(policies, "mttr_s") | mttr_ratios(policies, "mttr_lasting_s", "_lasting"),
                "per_seed": {
                    str(s): {p: {k: summaries[(i, s, p)][k] for k in PER_SEED_KEYS} for p in POLICIES} for s in seeds
                },
            }
        )
    axes: dict[str, list[Any]] = {}
    for point in points:
        for field, value in point.values.items():
            if value not in axes.setdefault(field, []):
                axes[field].append(value)
    return {
        "version": 1,
        "scenario": base.name,
        "seeds": list(seeds),
        "axes": axes,
        "base_params": base.model_dump(mode="json"),
        "points": out_points,
    }


def table_rows(report: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Header and one row per point: varied values, restart floor, per-policy lasting-repair MTTR p50/p95 (n),
    reconciler ratios at p50, exchange rate and fleet goodput (scheduler/reconciler), lost victims and partial
    preemptions per policy (none/scheduler/reconciler)."""
    fields = list(report["axes"])
    header = [f.rsplit(".", 1)[-1] for f in fields] + ["floor s"]
    header += [f"{p} p50/p95 (n)" for p in POLICIES]
    header += ["rec/none p50", "rec/sched p50", "xr s/r", "fleet gp s/r", "lost n/s/r", "partial n/s/r"]
    rows = []
    for point in report["points"]:
        pol = point["policies"]
        row = [fmt(point["params"][f]) for f in fields] + [fmt(point["restart_floor_s"])]
        for p in POLICIES:
            m = pol[p]["mttr_lasting_s"]
            row.append(f"{'/'.join(fmt(m[q]) for q in QUANTILES[:2])} ({m['n']})")
        row += [fmt(point["ratios"][f"reconciler/{base}_p50_lasting"]) for base in ("none", "scheduler")]
        row.append("/".join(fmt(pol[p]["exchange_rate"]) for p in ("scheduler", "reconciler")))
        row.append("/".join(f"{pol[p]['fleet_goodput']:.5f}" for p in ("scheduler", "reconciler")))
        row += ["/".join(str(pol[p][k]) for p in POLICIES) for k in ("lost_victims", "partial_preemptions")]
        rows.append(row)
    return header, rows


def render(report: dict[str, Any], markdown: bool = False) -> str:
    header, rows = table_rows(report)
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])
    widths = [max(len(c) for c in col) + 2 for col in zip(header, *rows, strict=True)]
    seeds = report["seeds"]
    title = (
        f"== sweep {report['scenario']} ({len(seeds)} seeds from {seeds[0]}, "
        f"{report['base_params']['horizon_h']:.0f} h each); MTTR of lasting repairs, seconds"
    )
    body = ["".join(f"{c:>{w}}" for c, w in zip(line, widths, strict=True)) for line in [header, *rows]]
    return "\n".join([title, *body])


def sweep(
    base: Scenario,
    axes: Sequence[tuple[str, Sequence[str]]],
    seeds: Sequence[int],
    workers: int,
    progress: bool = True,
) -> dict[str, Any]:
    points = expand_grid(base, axes)
    return pool_points(base, points, seeds, run_points(points, seeds, workers, progress))
