"""Shared fixtures: a fresh registry per test, and a CLI runner bound to it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
HF_CONFIGS = SHARED / "hf-configs"


@pytest.fixture
def db_url(tmp_path) -> str:
    """URL of a registry that does not exist yet (created and seeded on first open)."""
    return f"sqlite:///{tmp_path / 'registry.db'}"


@pytest.fixture
def engine(db_url):
    from kvreg.db.engine import open_registry

    eng = open_registry(db_url)
    yield eng
    eng.dispose()


class Kvreg:
    """Runs the CLI against one registry: kv("capacity", "--format", "json")."""

    def __init__(self, url: str):
        self.url = url
        self.runner = CliRunner()

    def __call__(self, *args, input=None, ok=True):
        from kvreg.cli import cli

        result = self.runner.invoke(cli, ["--db", self.url, *map(str, args)], input=input, catch_exceptions=False)
        if ok and result.exit_code != 0:
            raise AssertionError(f"kvreg {' '.join(map(str, args))} exited {result.exit_code}:\n{result.output}")
        return result

    def json(self, *args):
        return json.loads(self(*args, "--format", "json").stdout)


@pytest.fixture
def kv(db_url) -> Kvreg:
    return Kvreg(db_url)
