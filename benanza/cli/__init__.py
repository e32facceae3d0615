"""Thin command-line layer over the library: each command turns flags into one library call."""

from benanza.cli import analyze, compare, db, generate, models, profile, quickstart, run  # noqa: F401  (registers commands)
from benanza.cli.main import main

__all__ = ["main"]
