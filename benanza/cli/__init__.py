"""Thin command-line layer over the library: each command turns flags into one library call."""

from benanza.cli import models  # noqa: F401  (registers `benanza layers` and `benanza models zoo`)
from benanza.cli.main import main

__all__ = ["main"]
