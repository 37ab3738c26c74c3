"""Query strings and form fields read as the CLI's own options.

The web page asks the questions the CLI asks, with the same option names, defaults, types and
checks: a query `?model=Llama-3.1-8B&context=8K,32K&tp=auto` is parsed by the click command of
`kvreg capacity` itself (`--model Llama-3.1-8B --context 8K,32K --tp auto`), so a new or changed
option reaches the page without a second list to keep in step.
"""

from __future__ import annotations

import shlex
from urllib.parse import urlencode

import click

from kvreg.errors import KvregError

# Never read from a query or form: --format picks the CLI's output (the API always answers json)
# and --help would print to the server's terminal.
_NOT_OPTIONS = frozenset({"format", "help"})


def option_names(command: click.Command) -> dict[str, click.Option]:
    """A command's options by long name without the dashes: {'kv-dtype': <Option>, ...}."""
    names = {}
    for p in command.params:
        if isinstance(p, click.Option):
            for o in p.opts:
                if o.startswith("--") and o[2:] not in _NOT_OPTIONS:
                    names[o[2:]] = p
    return names


def given(items, command: click.Command, *, ignore: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """The (name, value) pairs of a query or form that set one of the command's options, in order.

    An empty value means "not given" (the option's default), as an empty form field does. A name
    the command does not know is an error naming the ones it does.
    """
    known = option_names(command)
    out = []
    for key, value in items:
        if key in ignore:
            continue
        if key not in known:
            raise KvregError(f"unknown option {key!r}: use one of {', '.join(sorted(known))} "
                             f"(the options of `kvreg {command.name}`)")
        value = str(value).strip()
        if value:
            out.append((key, value))
    return out


def parse(command: click.Command, pairs: list[tuple[str, str]], arguments: tuple[str, ...] = ()) -> dict:
    """The command's parameters as its function receives them, parsed by click from the pairs."""
    argv = list(arguments)
    for key, value in pairs:
        argv += [f"--{key}", value]
    try:
        ctx = command.make_context(command.name, argv, resilient_parsing=False)
    except click.UsageError as exc:
        raise KvregError(exc.format_message()) from None
    params = dict(ctx.params)
    params.pop("fmt", None)
    return params


def command_line(words: list[str], pairs: list[tuple[str, str]]) -> str:
    """The shell command that asks the same question: `kvreg capacity --model ... --context ...`."""
    parts = list(words)
    for key, value in pairs:
        parts += [f"--{key}", shlex.quote(value)]
    return " ".join(parts)


def query(pairs: list[tuple[str, str]], **replace: str) -> str:
    """The pairs as a query string, with some options replaced (keys as option names)."""
    out = [(k, v) for k, v in pairs if k not in replace]
    out += [(k, v) for k, v in replace.items() if v]
    return urlencode(out)
