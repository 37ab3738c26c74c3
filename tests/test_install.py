"""kvreg works however it is imported: installed (migrations/ and templates/ become the packages
kvreg.migrations and kvreg.templates, pyproject.toml's package-dir) or straight from a checkout.

`python -m pytest` in a checkout puts the checkout first on sys.path, so after a plain (non-editable)
`pip install .` the checkout's kvreg/ is what gets imported, and it has no migrations/ or templates/
inside: kvreg.resource_dir finds them beside it. This imports kvreg the same way, in a child Python
without site processing (so no editable install's path hook is in play), the dependencies coming
from this Python's site-packages.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_PROBE = """
import json, sys
import kvreg
from kvreg.app.access import open_registry
from kvreg.db.engine import migrations_dir
from kvreg.db.read import current_revision
from kvreg.db.revision import head_revision
from kvreg.export.markdown import environment

eng = open_registry("sqlite:///" + sys.argv[1])
with eng.connect() as conn:
    revision = current_revision(conn)
eng.dispose()
print(json.dumps({
    "kvreg": kvreg.__file__,
    "migrations": str(migrations_dir()),
    "templates": kvreg.resource_dir("templates"),
    "head": head_revision(),
    "revision": revision,
    "template": environment().get_template("capacity.md.j2").filename,
}))
"""


def test_a_checkout_imported_without_an_editable_install_finds_migrations_and_templates(tmp_path):
    site = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *sorted(site)])}
    env.pop("KVREG_DB", None)
    proc = subprocess.run([sys.executable, "-S", "-c", _PROBE, str(tmp_path / "registry.db")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["kvreg"] == str(REPO / "kvreg" / "__init__.py")
    assert got["migrations"] == str(REPO / "migrations")
    assert got["templates"] == str(REPO / "templates")
    assert got["template"] == str(REPO / "templates" / "capacity.md.j2")
    # The newest migration file names the head, and a new registry is migrated to it.
    newest = max((REPO / "migrations" / "versions").glob("[0-9]*.py")).name
    assert got["head"] == newest[:4]
    assert got["revision"] == got["head"]
