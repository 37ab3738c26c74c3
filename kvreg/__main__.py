"""`python -m kvreg` runs the `kvreg` command, for environments where the script is not on PATH."""

from kvreg.cli import main

main()
