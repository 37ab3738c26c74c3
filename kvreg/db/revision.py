"""The schema revision this kvreg migrates to, read without Alembic.

Standard library only: the fast read path (kvreg.db.fastpath) and open_registry (kvreg.db.engine)
both compare a registry's revision with this one on every command.
"""

from __future__ import annotations

import os
import re

import kvreg

_ASSIGNMENT = re.compile(r"^(revision|down_revision)\b[^=\n]*=(.*)$", re.M)
_QUOTED = re.compile(r"""['"]([^'"]+)['"]""")


def head_revision() -> str | None:
    """The schema revision this kvreg migrates to, read from the migration files' `revision` and
    `down_revision` lines (Alembic finds the same head by importing them: 0.1 s); None when
    there is not exactly one head, which keeps every registry on the normal path."""
    folder = os.path.join(kvreg.resource_dir("migrations"), "versions")
    revisions, parents = set(), set()
    for name in os.listdir(folder):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            found = {k: _QUOTED.findall(v) for k, v in _ASSIGNMENT.findall(f.read())}
        if len(found.get("revision", [])) == 1:
            revisions.update(found["revision"])
            parents.update(found.get("down_revision", []))
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None
