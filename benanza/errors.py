"""One error type for bad input: its message is the one line the user sees."""


class BenanzaError(Exception):
    """A problem with the user's input or environment, named with the file it concerns.

    The CLI prints ``error: <message>`` and exits 1, with no traceback.
    """
