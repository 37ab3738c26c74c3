"""Recalculate workbooks with headless LibreOffice, for tests.

openpyxl stores formulas without results. LibreOffice computes formulas that have no stored
result when it loads an .xlsx, but by default it trusts results that are stored
(Tools > Options > Calc > Formula > "Recalculation on file load: Never"), so a workbook saved
by Excel or LibreOffice after an edit would keep stale values. Each run therefore gets a private
profile whose registrymodifications.xcu sets OOXMLRecalcMode to 0 ("always recalculate"), and
the file is converted .xlsx -> .xlsx: the copy carries every formula's computed value, which
openpyxl reads with data_only=True. Several files convert in one LibreOffice start.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

_RECALC_ALWAYS = """<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema"
 xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<item oor:path="/org.openoffice.Office.Calc/Formula/Load"><prop oor:name="OOXMLRecalcMode" oor:op="fuse"><value>0</value></prop></item>
<item oor:path="/org.openoffice.Office.Calc/Formula/Load"><prop oor:name="ODFRecalcMode" oor:op="fuse"><value>0</value></prop></item>
</oor:items>
"""


def soffice() -> str | None:
    """The LibreOffice binary, or None when it is not installed."""
    return shutil.which("soffice") or shutil.which("libreoffice")


def recalculate(paths: list[Path], outdir: Path, timeout: float = 180) -> list[Path]:
    """Recalculate every formula of each .xlsx in `paths`; returns the recalculated copies in `outdir`
    (same file names, so the inputs must have distinct names)."""
    return convert(paths, outdir, "xlsx:Calc MS Excel 2007 XML", ".xlsx", recalc=True, timeout=timeout)


def convert(paths: list[Path], outdir: Path, target: str, suffix: str, recalc: bool = False,
            timeout: float = 180) -> list[Path]:
    """Convert every file in `paths` with one LibreOffice start (`--convert-to target`, e.g. "pdf"),
    in a private profile that always recalculates on load when `recalc`; returns the outputs in
    `outdir` (the inputs' names with `suffix`, so the inputs must have distinct names)."""
    binary = soffice()
    if binary is None:
        raise RuntimeError("LibreOffice (soffice) is not installed: apt-get install libreoffice-calc-nogui")
    outdir.mkdir(parents=True, exist_ok=True)
    profile = Path(tempfile.mkdtemp(prefix="lo-profile-"))
    try:
        if recalc:
            (profile / "user").mkdir()
            (profile / "user" / "registrymodifications.xcu").write_text(_RECALC_ALWAYS)
        cmd = [binary, f"-env:UserInstallation={profile.as_uri()}", "--headless", "--norestore",
               "--convert-to", target, "--outdir", str(outdir), *map(str, paths)]
        env = {**os.environ, "HOME": str(profile)}  # nothing of the user's own profile is read
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    out = [outdir / Path(p).with_suffix(suffix).name for p in paths]
    missing = [p for p in out if not p.exists()]
    if proc.returncode != 0 or missing:
        raise RuntimeError(f"LibreOffice failed (exit {proc.returncode}) for {missing}: {proc.stderr.strip()}")
    return out
