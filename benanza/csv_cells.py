"""CSV cells that a spreadsheet shows as text, never runs as a formula (OWASP "CSV injection").

Node names, model file names and database strings come from files benanza did not write; a cell
that starts with ``=``, ``+``, ``-`` or ``@`` (or a tab, CR or LF, which some spreadsheets skip
before reading one of those) is a formula to Excel, LibreOffice and Google Sheets. Such a text cell
gets a leading ``'``, as OWASP recommends; numbers stay numbers (a negative gap is -0.5, not text).
Rows end in CRLF (RFC 4180), so that a CR inside a cell is quoted: with LF endings Python's csv
writes it bare, and a reader splits the row there (a node named ``x\r=1`` began a row with ``=1``).
"""

from __future__ import annotations

import csv
from typing import Any, TextIO

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n")


def cell(value: Any) -> Any:
    """``value`` as a CSV writer should get it: a text that a spreadsheet would evaluate gets a ``'``."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def writer(handle: TextIO) -> Any:
    """A csv writer for untrusted text: CRLF row endings (RFC 4180), so every CR or LF in a cell is quoted."""
    return csv.writer(handle, lineterminator="\r\n")
