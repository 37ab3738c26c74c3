"""Quarters as numbers, and the carry-forward rule's pieces (kvreg.figures.aggregates explains the rule).

A quarter YEARQn has the index YEAR * 4 + n - 1, so consecutive quarters differ by 1; each target
(Python, SQL, Excel) computes it here. Stdlib only at import time: the read commands that filter
entries by quarter (`demand list`, `fleet list`, `plan show --quarter`) import this module and not
the figure declarations (about 30 ms).
"""

from __future__ import annotations


def quarter_of_index(index: int) -> str:
    return f"{index // 4}Q{index % 4 + 1}"


def index_of_quarter(quarter: str) -> int:
    return int(quarter[:4]) * 4 + int(quarter[5]) - 1


def quarter_index_sql(col: str) -> str:
    """The SQL index of a quarter text column: 2026Q4 -> 2026 * 4 + 3 (consecutive quarters differ by 1)."""
    return f"(CAST(substr({col}, 1, 4) AS INTEGER) * 4 + CAST(substr({col}, 6, 1) AS INTEGER) - 1)"


def quarter_of_index_sql(col: str) -> str:
    """quarter_of_index in SQL: an integer index column as YEARQn text (NULL: NULL)."""
    return (f"(CASE WHEN {col} IS NULL THEN NULL ELSE CAST(CAST(({col}) / 4 AS INTEGER) AS VARCHAR(4)) || 'Q' ||"
            f" CAST(({col}) - 4 * CAST(({col}) / 4 AS INTEGER) + 1 AS VARCHAR(1)) END)")  # no %: SQLite's spelling


def quarter_of_index_excel(ref: str) -> str:
    """quarter_of_index in a cell formula (blank: blank)."""
    return f'IF({ref}="","",INT({ref}/4)&"Q"&(MOD({ref},4)+1))'


def quarter_index_excel(ref: str) -> str:
    """The same index of a quarter cell written YEARQn (blank: blank)."""
    return f'IF({ref}="","",LEFT({ref},4)*4+RIGHT({ref},1)-1)'


def in_force_sql(alias: str, q: str) -> str:
    """The entry `alias` (a row of plan_quarter or fleet_quarter) holds in the quarter of index `q`."""
    return f"({alias}.quarter_index <= {q} AND ({alias}.until_index IS NULL OR {alias}.until_index > {q}))"


def until_sql(table: str, alias: str, key: str) -> str:
    """The next entry's quarter for the same key (NULL: none): where an entry stops holding. A
    correlated MIN over the table's unique (key, quarter) index, so the entries stay a plain table in
    the views' joins (a window function over them made SQLite evaluate plan_capacity per row)."""
    return (f"(SELECT MIN(n.quarter) FROM {table} n WHERE n.{key} = {alias}.{key}"
            f" AND n.quarter > {alias}.quarter)")


def in_force_excel(key_range: str, key_ref: str, index_range: str, index_ref: str, q: str) -> str:
    """1 when the entry on this row (key `key_ref`, quarter index `index_ref`) holds in the quarter of
    index `q`: it starts at or before q and no entry of the same key starts after it and by q."""
    return (f'IF(OR({index_ref}="",{q}=""),0,IF(AND({index_ref}<={q},'
            f'COUNTIFS({key_range},{key_ref},{index_range},">"&{index_ref},{index_range},"<="&{q})=0),1,0))')


# The quarter before: one index less. Declared here once; Python (previous_quarter, the report's
# previous_quarter_in_force flags), the rollup's SQL (previous_index_sql) and the workbook's formulas
# (the *_excel functions) take it from here.


def previous_index(index: int) -> int:
    """The index of the quarter before the quarter of index `index`: 2026Q1 (8104) -> 2025Q4 (8103)."""
    return index - 1


def previous_index_sql(col: str) -> str:
    """previous_index in SQL: `col` holds a quarter index."""
    return f"{col} - 1"


def previous_index_excel(ref: str) -> str:
    """previous_index in a cell formula: `ref` holds a quarter index."""
    return f"{ref}-1"


def previous_quarter(quarter: str) -> str:
    """The quarter before `quarter` (written YEARQn): 2026Q4 -> 2026Q3, 2026Q1 -> 2025Q4."""
    return quarter_of_index(previous_index(index_of_quarter(quarter)))


def previous_quarter_excel(ref: str) -> str:
    """previous_quarter in a cell formula: `ref` holds a quarter written YEARQn."""
    return f'IF(RIGHT({ref},1)="1",(LEFT({ref},4)-1)&"Q4",LEFT({ref},5)&(RIGHT({ref},1)-1))'
