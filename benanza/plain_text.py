"""Untrusted text (model names, paths, child output) made safe for the terminal.

Rich reads ``[...]`` in a plain string as markup: a node named ``[/]`` crashed the
listing, ``[bold]x[/bold]`` printed as ``x``. And escape sequences in a name reach
the terminal raw (colours, window titles, hyperlinks). Everything a command prints
that it did not write itself goes through ``plain`` (a rich ``Text``, never markup)
or ``strip_controls`` (for ``click.echo`` and messages).
"""

from __future__ import annotations

import re

from rich.text import Text

# ESC-introduced sequences: CSI (colours, cursor), OSC (titles, hyperlinks; ended by BEL or ST),
# and two-byte escapes; then any other C0/C1 control but newline.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]?"
                      r"|\x9b[0-?]*[ -/]*[@-~]")
_CONTROLS = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def strip_controls(text: object) -> str:
    """``text`` as a string with escape sequences removed and other control characters shown as ``?``
    (tabs become a space; newlines stay)."""
    s = _ESCAPES.sub("", str(text)).replace("\t", " ")
    return _CONTROLS.sub("?", s)


def one_line(text: object) -> str:
    """``strip_controls`` and newlines shown as ``\\n``: a name or an error message stays one line
    (a directory named ``x\\nerror: ...`` printed a second line that looked like our own)."""
    return strip_controls(text).replace("\n", "\\n")


def plain(text: object, style: str = "") -> Text:
    """Untrusted text as a rich ``Text``: printed literally, whatever brackets it holds."""
    return Text(strip_controls(text), style=style)


def line(text: object, style: str = "") -> Text:
    """Untrusted text as one literal line (``one_line``): notes and ``wrote PATH`` lines name files."""
    return Text(one_line(text), style=style)


def labelled(label: str, style: str, text: object) -> Text:
    """``label`` in ``style`` (our own words), then untrusted ``text`` literally on the same one line:
    e.g. ``error: <message>``."""
    return Text.assemble((label, style), " ", Text(one_line(text)))
