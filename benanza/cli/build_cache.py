"""``benanza build-cache``: where the cache of built benchmark executables is, how big, and clearing it."""

from __future__ import annotations

import click

from benanza.cli.main import console, friendly_errors, main
from benanza.measure import build_cache
from benanza.plain_text import plain


@main.command("build-cache")
@click.option("--clear", is_flag=True, help="Delete every cached executable (the next builds compile them again).")
@friendly_errors
def build_cache_cmd(clear: bool) -> None:
    """Show (or --clear) the cache of built benchmark executables that every project's build shares.

    `benanza run` and `pipeline` copy an executable from it when its source, the harness, the
    compilers, flags and cuDNN/cuBLAS files are those it was built with, and compile only the
    others (docs/GENERATOR.md). BENANZA_BUILD_CACHE_DIR moves it, BENANZA_BUILD_CACHE_MAX_MB
    bounds it (least recently used go first), BENANZA_NO_BUILD_CACHE=1 or --no-build-cache
    bypasses it.
    """
    where = build_cache.root()
    if clear:
        gone = build_cache.clear()
        console.print(plain(f"{where}: deleted {gone} cached executable(s)"), highlight=False)
        return
    count, size = build_cache.usage()
    state = "off (BENANZA_NO_BUILD_CACHE)" if not build_cache.enabled() else "on"
    console.print(plain(f"{where}: {count} executable(s), {size / 2**20:.1f} MiB; cache {state}"), highlight=False)
