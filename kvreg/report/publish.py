"""Publishing a report folder: written into a temporary folder beside the target and swapped into
place in one step, so a failed, interrupted or killed run leaves the previous report whole; what
killed runs left behind is cleaned up by the next."""

from __future__ import annotations

import ctypes
import gc
import os
import re
import secrets
import shutil
import sys
import tempfile
import traceback
from contextlib import contextmanager
from pathlib import Path

from kvreg.core.errors import KvregError
from kvreg.interchange.dbcopy import process_alive



def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# Folders a report run makes beside its target: .2026-Q4.tmp-<pid>-<random> (being written) and
# .2026-Q4.old-<random> (the previous report, about to be deleted). Older kvreg wrote no <pid>.
# (mkdtemp and secrets.token_hex(4) both end the name in 8 characters.)
_TEMP_NAME = re.compile(r"^\.\d{4}-Q[1-4]\.(tmp|old)-(?:(\d+)-)?[a-z0-9_]{8}$")


def clean_stale_temporaries(out: Path) -> list[Path]:
    """Delete what killed report runs left under `out`: temporary folders of kvreg's own naming
    whose process is gone (a .old- folder is always leftover: a live run deletes its own at once,
    and the report it held is already replaced). Symlinks are removed, never followed. Returns
    what was deleted."""
    removed = []
    try:
        entries = list(os.scandir(out))
    except OSError:
        return removed
    for entry in entries:
        m = _TEMP_NAME.match(entry.name)
        if not m or (m.group(1) == "tmp" and m.group(2) and process_alive(int(m.group(2)))):
            continue
        path = Path(entry.path)
        try:
            if entry.is_symlink():  # an old report folder that was a link: the link goes, not its target
                path.unlink()
            elif entry.is_dir(follow_symlinks=False):
                shutil.rmtree(path)
            else:  # kvreg makes folders here, never files: not ours
                continue
            removed.append(path)
        except OSError:  # another run removed it first, or it is not ours to delete: leave it
            pass
    return removed


def _remove(path: Path) -> None:
    """Delete a folder, or only the link if it is a symlink (never what it points to)."""
    if path.is_symlink():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path, ignore_errors=True)


def _temp_folder(out: Path, target: Path) -> Path:
    """A fresh folder beside the target (same filesystem, so the final rename is atomic)."""
    if out.exists() and not out.is_dir():
        raise KvregError(f"cannot write reports under {out}: it is a file, not a folder; choose a folder with --out")
    try:
        out.mkdir(parents=True, exist_ok=True)
        if target.exists() and not target.is_dir():
            raise KvregError(f"cannot write the report: {target} exists and is not a folder; move it away")
        clean_stale_temporaries(out)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-{os.getpid()}-", dir=out))
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it private; a report folder is not
    except OSError as exc:
        raise KvregError(f"cannot write reports under {out}: {exc.strerror or exc}; "
                         "choose a writable folder with --out") from None
    return tmp


def _exchange(a: Path, b: Path) -> bool:
    """Swap two folders in one step (Linux renameat2 RENAME_EXCHANGE); False where the system or
    the filesystem cannot, and nothing was changed."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # a C library without renameat2 (glibc before 2.28)
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    return renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


def _swap_into_place(tmp: Path, target: Path) -> None:
    """Put the new report where the old one is, then delete the old.

    Exchanging the two folders is one step, so a process killed at any moment leaves a whole
    report at the target, old or new. Where the system cannot exchange: rename the old report
    away and the new one in (undone on failure), which leaves no report for an instant."""
    # A symlink at the target is replaced by the new folder, and only the link is deleted.
    present = target.exists() or target.is_symlink()
    if present and _exchange(tmp, target):
        _remove(tmp)  # tmp now holds the old report (or the old link)
        return
    old = None
    if present:
        old = target.with_name(f".{target.name}.old-{secrets.token_hex(4)}")
        os.rename(target, old)
    try:
        os.rename(tmp, target)
    except BaseException:
        if old is not None:
            os.rename(old, target)
        raise
    if old is not None:
        _remove(old)


def _collect_quietly(exc: BaseException) -> None:
    """Collect what a failed run left half-written. openpyxl's streaming sheets are generators
    whose file is already closed; collected later (the error's traceback keeps them alive), each
    would print an "Exception ignored" traceback under the one-line error."""
    traceback.clear_frames(exc.__traceback__)  # the frames that hold the workbook, not this one

    hook = sys.unraisablehook
    sys.unraisablehook = lambda _unraisable: None
    try:
        gc.collect()
    finally:
        sys.unraisablehook = hook


@contextmanager
def publishing(out: Path, target: Path):
    """A fresh folder beside `target` (under `out`) to write the new report into; once the block ends
    without error, the folder is swapped into place and the previous report deleted. On any error the
    folder is removed and the previous report left as it was (a file-system error as one line)."""
    tmp = _temp_folder(out, target)
    try:
        yield tmp
        _swap_into_place(tmp, target)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise KvregError(f"cannot write the report to {target}: {exc.strerror or exc}; "
                         "the previous report was left as it was") from None
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        _collect_quietly(exc)
        raise
