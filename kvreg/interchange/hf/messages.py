"""A batch's warnings: one line per kind of warning for the whole batch rather than one per model."""

from __future__ import annotations

import re


_ESTIMATE = re.compile(r"^(params_total|params_active) (\d[\d.,]*B) is an ESTIMATE from the config (\([^)]*\))(.*)$")


def batch_warnings(imported: list[tuple[str, list[str], bool]]) -> list[str]:
    """The warnings of an import, one per kind for the whole batch rather than one per model.

    `imported`: per model, (its name, its warnings, whether the registry kept its own parameter
    counts: an update by --replace from an estimate). A kept count's ESTIMATE warning is dropped (the
    estimate was not stored); the other ESTIMATEs become one line per count naming each model with
    its estimate; any other warning the same for several models becomes one line naming them."""
    estimates: dict[tuple[str, str, str], list[str]] = {}
    others: dict[str, list[str]] = {}
    for name, warns, kept_params in imported:
        for w in warns:
            m = _ESTIMATE.match(w)
            if m:
                if not kept_params:
                    estimates.setdefault((m.group(1), m.group(3), m.group(4)), []).append(f"{name} {m.group(2)}")
            else:
                others.setdefault(w, []).append(name)
    out = []
    for (count, how, advice), models in estimates.items():
        what = "models" if len(models) > 1 else "model"
        out.append(f"{count} is an ESTIMATE from the config {how} for {len(models)} {what}: {', '.join(models)}"
                   f"{advice}")
    out += [f"{', '.join(models)}: {w}" for w, models in others.items()]
    return out
