"""Thin command-line layer over the library: each command turns flags into one library call."""

from benanza.cli import analyze, db, generate, models, profile, run  # noqa: F401  (each module registers its commands)
from benanza.cli.main import main

__all__ = ["main"]
