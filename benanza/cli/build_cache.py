"""``benanza build-cache`` and ``benanza plan-cache``: where the caches of built benchmark executables and
of runtime-compiled cuDNN plans are, how big, and clearing them."""

from __future__ import annotations

import click

from benanza.cli.main import console, friendly_errors, main
from benanza.measure import build_cache, plan_cache
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


@main.command("plan-cache")
@click.option("--clear", is_flag=True, help="Delete every kept plan (the next runs compile them again).")
@friendly_errors
def plan_cache_cmd(clear: bool) -> None:
    """Show (or --clear) the cache of runtime-compiled cuDNN execution plans that every benchmark
    process on this machine shares.

    A graph-API benchmark keeps each plan whose engine compiled its kernels at run time (seconds of
    NVRTC each) and loads it, instead of compiling, when the same operation graph and engine config
    come again on the same GPU, driver and cuDNN: in a later run, project or model. Its results say
    so (notes "plan_cache": "kept" or "hit"). BENANZA_PLAN_CACHE_DIR moves it ("off" turns it off),
    BENANZA_PLAN_CACHE_MAX_MB bounds it (least recently used go first, before each run).
    """
    where = plan_cache.root()
    if where is None:
        console.print(plain("plan cache off (BENANZA_PLAN_CACHE_DIR=off, or no home directory)"), highlight=False)
        return
    if clear:
        gone = plan_cache.clear()
        console.print(plain(f"{where}: deleted {gone} plan(s)"), highlight=False)
        return
    count, size = plan_cache.usage()
    console.print(plain(f"{where}: {count} plan(s), {size / 2**20:.1f} MiB"), highlight=False)
