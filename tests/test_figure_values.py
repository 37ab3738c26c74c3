"""Figures evaluated in Python (kvreg.figures.python) for rows no view carries: the declaration's
value, equal to what the views compute for the same inputs."""

from __future__ import annotations

import pytest

from kvreg.figures.python import evaluate, figure_value


def test_memory_gib_is_the_declared_figure():
    assert figure_value("memory_gib", {"memory_bytes": 80 * 2**30}) == 80.0
    assert figure_value("memory_gib", {"memory_bytes": 24 * 10**9}) == 24e9 / 1073741824 == 22.351741790771484
    assert figure_value("memory_gib", {"memory_bytes": None}) is None  # NULL in, NULL out, as in SQL


def test_a_figure_with_functions_is_refused():
    from kvreg.figures.declarations import FIGURES

    with pytest.raises(ValueError, match="read this figure from its view"):
        evaluate(FIGURES["fits"].expr, {})


def test_gpu_list_and_the_capacity_view_agree_on_memory_gib(kv):
    """A 24 GB card (decimal): 24e9 / 2**30 = 22.3517... GiB in `kvreg gpu list` and in the view."""
    kv("gpu", "add", "L4-24GB", "--memory", "24GB", "--bandwidth", "300GB")
    listed = {g["name"]: g["memory_gib"] for g in kv.json("gpu", "list")}
    assert listed["L4-24GB"] == 22.351741790771484
    assert listed["H100-SXM"] == 80.0
    from kvreg.app.access import open_registry
    from kvreg.app.capacity import Question, ask

    engine = open_registry(kv.url)
    with engine.connect() as conn:
        (row,) = ask(conn, Question(models=["Llama-3.1-8B"], gpus=["L4-24GB"], contexts=[8192]))
    engine.dispose()
    assert row["memory_gib"] == pytest.approx(22.351741790771484, rel=1e-15)
