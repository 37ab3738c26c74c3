"""Generate the CLI reference (docs/cli.md) from the `--help` of every command and subcommand.

    python -m kvreg.cli.docgen > docs/cli.md

The text is the help exactly as `kvreg ... --help` prints it at a fixed width of 100 columns,
so the reference cannot drift from the code: tests/test_docs.py compares the file with this
output. A command whose module does not import is left out with a note on stderr (and the docs
test fails until it imports).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import click

WIDTH = 100

INTRO = """\
# kvreg command reference

Generated from `--help` by `python -m kvreg.cli.docgen > docs/cli.md`: do not edit by hand
(`tests/test_docs.py` fails when this file and the generated text differ). Every command takes the
global `--db URL` (env `KVREG_DB`, default `sqlite:///registry.db` in the current directory), given
before the command name: `kvreg --db sqlite:///team.db model list`. List and show commands take
`--format table|json|csv`.
"""


@dataclass
class Entry:
    """One command: its full path (`kvreg model add`), the first line of its help, its --help text."""

    path: str
    summary: str
    help: str


def walk(root: click.Command | None = None, warn=None) -> list[Entry]:
    """Every command under `root` (default: the kvreg CLI), depth first in listing order.

    `warn(message)` is called for each command whose module cannot be imported; it is skipped.
    """
    if root is None:
        from kvreg.cli import cli as root
    warn = warn or (lambda message: print(message, file=sys.stderr))
    # The command's own context settings (help option names -h/--help), at a fixed width.
    settings = {**root.context_settings, "terminal_width": WIDTH, "max_content_width": WIDTH}
    ctx = click.Context(root, info_name="kvreg", **settings)
    entries: list[Entry] = []
    _visit(root, ctx, entries, warn)
    return entries


def _visit(cmd: click.Command, ctx: click.Context, entries: list[Entry], warn) -> None:
    entries.append(Entry(ctx.command_path, cmd.get_short_help_str(limit=WIDTH), cmd.get_help(ctx).rstrip()))
    if not isinstance(cmd, click.Group):
        return
    for name in cmd.list_commands(ctx):
        try:
            sub = cmd.get_command(ctx, name)
        except Exception as exc:  # noqa: BLE001 - a module being written may not import yet; say so, go on
            warn(f"docgen: skipping `{ctx.command_path} {name}`: {type(exc).__name__}: {exc}")
            continue
        if sub is None or sub.hidden:
            continue
        _visit(sub, click.Context(sub, info_name=name, parent=ctx, **sub.context_settings), entries, warn)


def anchor(path: str) -> str:
    """The GitHub heading anchor of `## kvreg model add`: kvreg-model-add."""
    return path.lower().replace(" ", "-")


def render(entries: list[Entry]) -> str:
    """The Markdown reference: an index, then one section per command with its --help in a code block."""
    lines = [INTRO, "## Commands", ""]
    for e in entries:
        depth = e.path.count(" ")
        summary = f": {e.summary}" if e.summary else ""
        lines.append(f"{'  ' * max(depth - 1, 0)}- [`{e.path}`](#{anchor(e.path)}){summary}")
    for e in entries:
        lines += ["", f"## {e.path}", "", "```text", e.help, "```"]
    return "\n".join(lines) + "\n"


def main() -> None:
    sys.stdout.write(render(walk()))


if __name__ == "__main__":
    main()
