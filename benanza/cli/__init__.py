"""Thin command-line layer over the library: each command turns flags into one library call."""

from benanza.cli.main import main

__all__ = ["main"]
