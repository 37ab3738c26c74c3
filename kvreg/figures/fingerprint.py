"""Which declarations a registry's views were compiled from.

Standard library only: the fast read path (kvreg.db.fastpath) checks it on every read command.
"""

from __future__ import annotations

import os

try:  # CPython's own SHA-256 (same digest): hashlib would load OpenSSL too, a few ms of start-up time
    from _sha256 import sha256
except ImportError:  # Python 3.12 and later name it _sha2; other interpreters have hashlib only
    try:
        from _sha2 import sha256
    except ImportError:
        from hashlib import sha256

_FIGURES_DIR = os.path.dirname(os.path.abspath(__file__))


def figures_fingerprint(dialect: str = "sqlite") -> str:
    """sha256 of the dialect and the source of every module in kvreg/figures.

    Equal sources compile to equal views, so while this matches the fingerprint stored beside
    the views' compiled hash (kvreg.figures.views.source_key) they are current: a few file reads
    where compiling the views costs a few hundred ms. When it differs, the views are compiled
    and rebuilt only if their SQL changed (kvreg.figures.views.sync_views).
    """
    h = sha256(dialect.encode() + b"\0")
    for name in sorted(os.listdir(_FIGURES_DIR)):
        if name.endswith(".py"):
            with open(os.path.join(_FIGURES_DIR, name), "rb") as f:
                h.update(name.encode() + b"\0" + f.read() + b"\0")
    return h.hexdigest()
