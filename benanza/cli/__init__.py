"""Thin command-line layer over the library: each command turns flags into one library call.

The command modules register themselves on ``main`` when first needed (``main.LazyGroup``).
"""

from benanza.cli.main import main

__all__ = ["main"]
