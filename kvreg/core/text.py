"""Rules for user text that is shown to people or to spreadsheets (stdlib only).

- `invisible_characters`: characters a name must not hold because they make it display other
  than it is: bidi overrides and isolates (U+202A-202E, U+2066-2069, U+200E/U+200F, U+061C),
  zero-width characters (U+200B-200D, U+2060, U+FEFF) and every other Unicode "format" (Cf)
  character, plus line and paragraph separators. kvreg.app.registry.check_name refuses them.
- `spreadsheet_safe`: text for a CSV cell, which a spreadsheet opening the file would run as a
  formula if it starts with = + - @ or a tab or carriage return (OWASP "CSV injection"); such
  text gets a leading apostrophe, the mark spreadsheets read as "this is text". The workbook
  stores the same strings as typed text cells (kvreg.export.excel_layout.Grid.text).
"""

from __future__ import annotations

import unicodedata

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def invisible_characters(text: str) -> list[str]:
    """The code points (as U+XXXX) in text that are invisible or change the text's direction."""
    found = []
    for ch in text:
        if unicodedata.category(ch) in ("Cf", "Zl", "Zp"):
            code = f"U+{ord(ch):04X}"
            if code not in found:
                found.append(code)
    return found


def spreadsheet_safe(value):
    """value, with a leading apostrophe if it is text a spreadsheet would read as a formula."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value
