"""Errors a user can fix. Each carries a one-line message that says what is wrong and what to do."""

from __future__ import annotations


class UserError(Exception):
    """Base of every error a user can fix (bad input, a registry that cannot be opened, a config that
    cannot be imported): the CLI shows it as one line and exits 1, the web UI as a message. Each layer
    defines its own subclasses; this module stays standard-library only so every layer may import it."""


class KvregError(UserError, ValueError):
    """Bad input or a request the registry cannot satisfy."""


class NotFound(KvregError):
    pass


class AlreadyExists(KvregError):
    pass


def user_error_types() -> tuple[type[BaseException], ...]:
    """Every exception type the CLI shows as a one-line message."""
    return (UserError,)


def suggest(name: str, choices: list[str], what: str) -> NotFound:
    """`unknown model 'Lama-3.1-8B': did you mean Llama-3.1-8B?`"""
    # lazy: difflib loads only to suggest a name (this module is on every command's start-up path)
    import difflib

    close = difflib.get_close_matches(name, choices, n=3, cutoff=0.5)
    if not close:
        lowered = [c for c in choices if name.lower() in c.lower()]
        close = lowered[:3]
    hint = f": did you mean {', '.join(close)}?" if close else f": see `kvreg {what} list`"
    shown = name if len(name) <= 200 else name[:197] + "..."  # a pasted page must not flood the terminal
    return NotFound(f"unknown {what} {shown!r}{hint}")
