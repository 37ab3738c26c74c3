"""A plain (non-editable) `pip install .` installs every subpackage and every data file kvreg reads.

An editable install imports kvreg from the checkout, so a package missing from pyproject.toml's list goes
unseen there, while a wheel would lack it (kvreg.app, kvreg.report and kvreg.interchange.hf were once missing).
These tests read the list as setuptools reads it, without building anything and without network.
"""

from __future__ import annotations

import fnmatch
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def setuptools_config(root: Path = ROOT) -> dict:
    from setuptools.config.pyprojecttoml import read_configuration

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # setuptools calls [tool.setuptools] in pyproject.toml "beta"
        return read_configuration(root / "pyproject.toml")["tool"]["setuptools"]


def unlisted_packages(config: dict, root: Path = ROOT) -> list[str]:
    """Folders under kvreg/ holding an __init__.py that the packages list leaves out, and listed packages
    that have no folder (a package-dir entry maps a top-level folder such as migrations/ into kvreg)."""
    package_dir = config.get("package-dir", {})
    on_disk = {".".join(p.parent.relative_to(root).parts) for p in (root / "kvreg").rglob("__init__.py")
               if "__pycache__" not in p.parts}
    listed = set(config["packages"])
    gone = {p for p in listed if not (root / package_dir.get(p, p.replace(".", "/")) / "__init__.py").is_file()}
    return sorted(on_disk - listed) + sorted(f"{p} (no such folder)" for p in gone)


def unpackaged_files(config: dict, root: Path = ROOT) -> list[str]:
    """Files in a package's folder that are not Python and match none of that package's package-data patterns."""
    package_dir, data = config.get("package-dir", {}), config.get("package-data", {})
    folders = {root / package_dir.get(p, p.replace(".", "/")): p for p in config["packages"]}
    missing = []
    for folder, package in sorted(folders.items()):
        for path in sorted(folder.rglob("*")):
            if not path.is_file() or path.suffix in (".py", ".pyc") or "__pycache__" in path.parts:
                continue
            if next(folders[f] for f in path.parents if f in folders) != package:
                continue  # a subpackage's file: checked under that package
            rel = path.relative_to(folder).as_posix()
            if not any(fnmatch.fnmatch(rel, pattern) for pattern in data.get(package, [])):
                missing.append(f"{package}: {rel}")
    return missing


def test_every_subpackage_is_installed():
    config = setuptools_config()
    assert unlisted_packages(config) == []
    assert config["package-dir"] == {"kvreg.migrations": "migrations", "kvreg.migrations.versions": "migrations/versions",
                                     "kvreg.templates": "templates"}
    # setuptools' own discovery finds the same folders under kvreg/
    from setuptools import find_packages

    found = set(find_packages(where=str(ROOT), include=["kvreg", "kvreg.*"]))
    assert found == set(config["packages"]) - set(config["package-dir"])


def test_every_data_file_is_installed():
    """Catalog TOML, templates, the page's script and style, Alembic's template: each is package data."""
    config = setuptools_config()
    assert unpackaged_files(config) == []
    assert (ROOT / "kvreg" / "catalog" / "gpus.toml").is_file() and (ROOT / "templates" / "capacity.md.j2").is_file()


def test_a_missing_package_or_data_file_is_named(tmp_path):
    for folder in ("kvreg", "kvreg/app", "kvreg/interchange/hf", "templates"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "kvreg" / "app" / "rows.toml").write_text("")
    (tmp_path / "templates" / "page.j2").write_text("")
    config = {"packages": ["kvreg", "kvreg.interchange.hf", "kvreg.gone", "kvreg.templates"],
              "package-dir": {"kvreg.templates": "templates"}, "package-data": {"kvreg.templates": ["*.j2"]}}
    # kvreg/interchange has no __init__.py here, so it is no package: only kvreg.app is left out
    assert unlisted_packages(config, tmp_path) == ["kvreg.app", "kvreg.gone (no such folder)"]
    config["packages"].append("kvreg.app")
    assert unpackaged_files(config, tmp_path) == ["kvreg.app: rows.toml"]
