"""Thin command-line layer over the library: each command turns flags into one library call."""

from benanza.cli import db, generate, models, run  # noqa: F401  (each module registers its commands)
from benanza.cli.main import main

__all__ = ["main"]
from benanza.cli import profile  # noqa: F401  (registers `benanza profile`)
