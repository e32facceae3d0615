"""One error type for bad input: its message is the one line the user sees."""

from __future__ import annotations


class BenanzaError(Exception):
    """A problem with the user's input or environment, named with the file it concerns.

    The CLI prints ``error: <message>`` on one line (newlines in it, e.g. from a file name, are
    shown as ``\\n``) and exits 1, with no traceback. ``detail`` is further text of our own making
    (a compiler's last lines), printed indented below that line; ``str()`` holds both.
    """

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(f"{message}:\n{detail}" if detail else message)
        self.message = message
        self.detail = detail
