"""The built-in catalog: dtypes, GPUs and models as TOML data files next to this module.

Each file is an array of tables (``[[dtype]]``, ``[[gpu]]``, ``[[model]]``) whose keys are
column names of the registry tables; a key that is absent means NULL (or the column default).
"""

from __future__ import annotations

import tomllib
from importlib import resources

# catalog key -> (file name, array-of-tables name inside it)
_FILES = {
    "dtypes": ("dtypes.toml", "dtype"),
    "gpus": ("gpus.toml", "gpu"),
    "models": ("models.toml", "model"),
    "plans": ("plans.toml", "plan"),
    "demand": ("plans.toml", "demand"),
}


def load_catalog() -> dict[str, list[dict]]:
    """Read the built-in rows: ``{"dtypes": [...], "gpus": [...], "models": [...], "plans": [...], "demand": [...]}``.

    Each row is a dict of column name -> value, in file order.
    """
    root = resources.files(__name__)
    catalog: dict[str, list[dict]] = {}
    for key, (filename, table) in _FILES.items():
        data = tomllib.loads(root.joinpath(filename).read_text(encoding="utf-8"))
        catalog[key] = data[table]
    return catalog


def load_device_names() -> list[dict]:
    """device_names.toml: each catalog GPU's name as a startup log prints it (``[{"name", "memory",
    "device_names", "source"}, ...]``). Not a registry table: `kvreg calibrate --log` reads it to tell the GPU."""
    text = resources.files(__name__).joinpath("device_names.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)["gpu"]
