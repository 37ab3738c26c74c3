"""The quarter before, declared once in kvreg.figures.quarters: its index, its text, and the cell
formulas the workbook writes for both (LibreOffice recalculates them in test_xlsx)."""

from __future__ import annotations

import pytest

from kvreg.figures.quarters import (index_of_quarter, previous_index, previous_index_excel, previous_quarter,
                                    previous_quarter_excel, quarter_of_index)


@pytest.mark.parametrize("quarter, index", [
    ("2026Q1", 2026 * 4 + 0),  # YEAR x 4 + n - 1
    ("2026Q4", 2026 * 4 + 3),
    ("2027Q1", 2027 * 4 + 0),  # one more than 2026Q4: consecutive quarters differ by 1
    ("1970Q1", 1970 * 4 + 0),
])
def test_index_of_quarter(quarter, index):
    assert index_of_quarter(quarter) == index
    assert quarter_of_index(index) == quarter


@pytest.mark.parametrize("quarter, before", [
    ("2026Q4", "2026Q3"),
    ("2026Q2", "2026Q1"),
    ("2026Q1", "2025Q4"),  # across the year: (2026 x 4 + 0) - 1 = 2025 x 4 + 3
    ("2027Q1", "2026Q4"),
])
def test_previous_quarter(quarter, before):
    assert previous_quarter(quarter) == before
    assert previous_index(index_of_quarter(quarter)) == index_of_quarter(before)


@pytest.mark.parametrize("ref, formula", [
    ("Summary!$B$3", "Summary!$B$3-1"),  # the Demand and Fleet sheets' previous_quarter_in_force
    ("C7", "C7-1"),
])
def test_previous_index_excel(ref, formula):
    assert previous_index_excel(ref) == formula


def test_previous_quarter_excel():
    # The Summary's "Previous quarter" cell: Q1 goes to Q4 of the year before, else the quarter number less one.
    assert previous_quarter_excel("B1") == 'IF(RIGHT(B1,1)="1",(LEFT(B1,4)-1)&"Q4",LEFT(B1,5)&(RIGHT(B1,1)-1))'
