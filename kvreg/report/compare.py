"""Quarter over quarter: the earlier report's data.json, checked, and what changed since it (models,
GPUs and plans added, removed or changed; plan capacity and GPUs to buy)."""

from __future__ import annotations

from pathlib import Path

from kvreg.core import limits
from kvreg.core.errors import KvregError
from kvreg.core.units import quarter_folder
from kvreg.figures.quarters import previous_quarter
from kvreg.report.gather import DATA_FORMAT



def load_previous(out: Path, quarter: str, compare: str | None) -> tuple[dict | None, dict]:
    """The earlier report's data.json to compare against, and a note saying which (or why none).

    `compare` names a quarter explicitly (its report must exist); otherwise the previous
    quarter's report is used when it is there.
    """
    q = compare or previous_quarter(quarter)
    against = f"{quarter_folder(q)}/data.json"
    path = out / against
    note = {"found": False, "against": against, "previous_quarter": q}
    if not path.is_file():
        if compare:
            raise KvregError(f"--compare {q}: there is no report at {path}: write it first with "
                             f"`kvreg report --quarter {q}`, or leave out --compare")
        return None, {**note, "note": f"No earlier report to compare with: {against} is not in the output folder"}
    try:
        prev = limits.parse_json(limits.read_input(str(path), limits.MAX_DATA_JSON_BYTES, "report data file"), against,
                                 "report data file")
        _check_previous(prev)
    except (OSError, ValueError) as exc:
        reason = " ".join(str(exc).split())
        if compare:
            raise KvregError(f"--compare {q}: {path} cannot be read ({reason}): write that quarter's report again")
        return None, {**note, "note": f"Nothing is compared: {against} cannot be read ({reason})"}
    return prev, note


# What compare_reports reads of an earlier data.json: list -> (key every item must have as text,
# keys whose values must be numbers or null).
_PREVIOUS_SHAPE = {"models": ("model", ()), "gpus": ("gpu", ()), "plans": ("plan", ("max_concurrency",)),
                   "procurement": ("gpu", ("gpus_needed", "cost_per_month"))}


def _check_previous(prev) -> None:
    """ValueError (its text says what is wrong) unless `prev` has the shape compare_reports reads."""
    if not isinstance(prev, dict) or prev.get("format") != DATA_FORMAT:
        raise ValueError(f"it is not a {DATA_FORMAT} file")
    for name, (key, numbers) in _PREVIOUS_SHAPE.items():
        items = prev.get(name, [])
        if not isinstance(items, list) or not all(isinstance(r, dict) and isinstance(r.get(key), str) for r in items):
            raise ValueError(f"its {name} is not a list of records with a {key} name")
        for r in items:
            demand = r.get("demand") if isinstance(r.get("demand"), dict) else {}
            bad = [k for k in numbers if r.get(k) is not None and type(r.get(k)) not in (int, float)]
            bad += [f"demand.{k}" for k in ("capacity_users", "gpus_needed")
                    if demand.get(k) is not None and type(demand.get(k)) not in (int, float)]
            if bad:
                raise ValueError(f"{name} {r[key]!r}: {bad[0]} is not a number")
            for k in ("inputs", "kv", "demand"):
                if r.get(k) is not None and not isinstance(r[k], dict):
                    raise ValueError(f"{name} {r[key]!r}: {k} is not an object")
            kv = r.get("kv") or {}
            if any(v is not None and not isinstance(v, dict) for v in kv.values()):
                raise ValueError(f"{name} {r[key]!r}: kv holds a value that is not an object")


def _flat(record: dict, skip: tuple[str, ...] = ()) -> dict:
    """A record's fields as one level: inputs under their own names, KV figures as `name (dtype)`."""
    out = {}
    for k, v in record.items():
        if k in skip:
            continue
        if k == "inputs":
            out.update({ik: iv for ik, iv in v.items() if ik not in out})
        elif k == "kv":
            for dtype, figs in v.items():
                for fk, fv in (figs or {}).items():
                    out[f"{fk} ({dtype})"] = fv
        else:
            out[k] = v
    return out


def _diff(before: list[dict], after: list[dict], key: str, skip: tuple[str, ...] = ()) -> dict:
    old = {r[key]: _flat(r, skip) for r in before}
    new = {r[key]: _flat(r, skip) for r in after}
    changed = []
    for name in sorted(old.keys() & new.keys()):
        fields = sorted(f for f in old[name].keys() | new[name].keys() if old[name].get(f) != new[name].get(f))
        if fields:
            changed.append({"name": name, "fields": fields})
    return {"added": sorted(new.keys() - old.keys()), "removed": sorted(old.keys() - new.keys()), "changed": changed}


def _change(before, after):
    return None if before is None or after is None else after - before


def _procurement_change(before: list[dict], after: list[dict]) -> list[dict]:
    """GPU types in the last report against this one. These are `since_last_report` figures: the
    quarter-over-quarter change within one registry is gpus_needed_quarter_change, a declared figure."""
    # A GPU type missing from a report had no demand that quarter: nothing to buy.
    old, new = {r["gpu"]: r for r in before}, {r["gpu"]: r for r in after}
    zero = {"gpus_needed": 0, "cost_per_month": 0, "gpus_to_buy": 0}
    out = []
    for gpu in sorted(old.keys() | new.keys()):
        o, n = old.get(gpu, zero), new.get(gpu, zero)
        row = {"gpu": gpu}
        for name in ("gpus_to_buy", "gpus_needed", "cost_per_month"):
            a, b = o.get(name), n.get(name)  # a report written before the fleet existed has no gpus_to_buy
            row.update({f"last_report_{name}": a, name: b, f"{name}_since_last_report": _change(a, b)})
        out.append(row)
    return out


def _capacity_change(before: list[dict], after: list[dict]) -> list[dict]:
    old = {p["plan"]: p for p in before}
    out = []
    for p in after:
        o = old.get(p["plan"])
        if o is None:
            continue
        od, nd = o.get("demand") or {}, p.get("demand") or {}
        row = {"plan": p["plan"]}
        for name, a, b in (("max_concurrency", o.get("max_concurrency"), p.get("max_concurrency")),
                           ("capacity_users", od.get("capacity_users"), nd.get("capacity_users")),
                           ("gpus_needed", od.get("gpus_needed"), nd.get("gpus_needed"))):
            row.update({f"last_report_{name}": a, name: b, f"{name}_since_last_report": _change(a, b)})
        out.append(row)
    return out


def compare_reports(previous: dict, current: dict, note: dict) -> dict:
    """What changed since the earlier report: models, GPUs and plans added, removed or changed,
    and the change in plan capacity and in GPUs to buy."""
    return {
        **note,
        "found": True,
        "note": None,
        "previous_quarter": previous.get("quarter"),
        "previous_registry_sha256": (previous.get("provenance") or {}).get("registry_sha256"),
        "models": _diff(previous.get("models", []), current["models"], "model"),
        "gpus": _diff(previous.get("gpus", []), current["gpus"], "gpu"),
        "plans": _diff(previous.get("plans", []), current["plans"], "plan", skip=("demand", "quarters")),
        "procurement": _procurement_change(previous.get("procurement", []), current["procurement"]),
        "capacity": _capacity_change(previous.get("plans", []), current["plans"]),
    }
