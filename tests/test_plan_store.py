"""bz::PlanStore (csrc/benanza/plan_store.h), the files of the per-system plan cache, compiled by the
host compiler and run without a GPU: an entry comes back only under its own key (a file of another
key, a truncated or foreign one is a miss), concurrent writers never leave half an entry, a store
that cannot write says so and reads as empty, and the environment picks (or turns off) the directory."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import host_tool

from benanza.errors import BenanzaError

# argv: a scenario, then its words. Each prints what the store gave back, one line per question.
TOOL = r"""
#include <cstdio>
#include <string>
#include <thread>
#include <vector>
#include "benanza/plan_store.h"

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string scenario = argv[1];
  if (scenario == "dir") {  // the directory the environment gives
    std::printf("%s\n", bz::PlanStore::default_dir().string().c_str());
    return 0;
  }
  const bz::PlanStore store(argv[2]);
  auto show = [&](const std::string& key) {
    const auto got = store.get(key);
    std::printf("%s\n", got ? ("hit " + *got).c_str() : "miss");
  };
  if (scenario == "put") {  // argv: dir key value
    std::printf("%s\n", store.put(argv[3], argv[4]) ? "kept" : "not kept");
  } else if (scenario == "get") {  // argv: dir key
    show(argv[3]);
  } else if (scenario == "path") {  // argv: dir key
    std::printf("%s\n", store.path_of(argv[3]).string().c_str());
  } else if (scenario == "race") {  // 8 threads write the same key with values of different lengths
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t)
      threads.emplace_back([&store, t] {
        for (int k = 0; k < 50; ++k) store.put("shared key", std::string(size_t(1000 * (t + 1)), char('a' + t)));
      });
    for (auto& t : threads) t.join();
    const auto got = store.get("shared key");
    const bool whole = got && got->size() % 1000 == 0 && got->find_first_not_of((*got)[0]) == std::string::npos;
    std::printf("%s\n", whole ? "whole" : "torn");
  }
  return 0;
}
"""


@pytest.fixture(scope="module")
def tool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return host_tool(tmp_path_factory, "plan_store", TOOL)


def ask(tool: Path, *words: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([str(tool), *words], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_an_entry_comes_back_only_under_its_own_key(tool: Path, tmp_path: Path) -> None:
    store = str(tmp_path / "plans")
    assert ask(tool, "get", store, "graph A\nplan eng4") == "miss"  # nothing there yet: no error either
    assert ask(tool, "put", store, "graph A\nplan eng4", '{"plan": 1}') == "kept"
    assert ask(tool, "get", store, "graph A\nplan eng4") == 'hit {"plan": 1}'
    assert ask(tool, "get", store, "graph A\nplan eng5") == "miss"
    assert ask(tool, "put", store, "graph A\nplan eng4", '{"plan": 2}') == "kept"  # replaced, not appended
    assert ask(tool, "get", store, "graph A\nplan eng4") == 'hit {"plan": 2}'


def test_another_keys_file_a_truncated_or_foreign_one_is_a_miss(tool: Path, tmp_path: Path) -> None:
    """What a hash collision would give (the file of another key at this key's name), a file cut
    short by a full disk or a kill, one whose header claims more than any file holds, one with bytes
    after its entry, and one some other program wrote: each reads as a miss."""
    store = str(tmp_path / "plans")
    assert ask(tool, "put", store, "graph B", "value of B") == "kept"
    mine = Path(ask(tool, "path", store, "graph C"))
    mine.parent.mkdir(parents=True, exist_ok=True)
    mine.write_bytes(Path(ask(tool, "path", store, "graph B")).read_bytes())  # B's entry under C's name
    assert ask(tool, "get", store, "graph C") == "miss"
    whole = Path(ask(tool, "path", store, "graph B")).read_bytes()
    lying = b"benanza-plan 1\n7 999999999999999\ngraph Bxyz"  # a header whose size no file holds
    for cut in (whole[:-3], whole[:12], b"", b"\x7fELF not an entry\n", lying, whole + b"trailing"):
        Path(ask(tool, "path", store, "graph B")).write_bytes(cut)
        assert ask(tool, "get", store, "graph B") == "miss", cut


def test_concurrent_writers_leave_a_whole_entry_and_no_temporary_files(tool: Path, tmp_path: Path) -> None:
    store = tmp_path / "plans"
    assert ask(tool, "race", str(store)) == "whole"
    assert [p.name.endswith(".plan") for p in store.rglob("*") if p.is_file()] == [True]


def test_a_store_under_a_file_keeps_nothing_and_reads_as_empty(tool: Path, tmp_path: Path) -> None:
    """The directory's place taken by a file (a write refused, as on a read-only or full disk): the
    plan is still measured, only not kept."""
    (tmp_path / "plans").write_text("a file, not a directory")
    assert ask(tool, "put", str(tmp_path / "plans"), "k", "v") == "not kept"
    assert ask(tool, "get", str(tmp_path / "plans"), "k") == "miss"


def test_the_environment_picks_the_directory_or_turns_it_off(tool: Path, tmp_path: Path) -> None:
    base = {k: v for k, v in os.environ.items() if k not in ("BENANZA_PLAN_CACHE_DIR", "XDG_CACHE_HOME")}
    home = str(tmp_path / "home")
    assert ask(tool, "dir", env={**base, "HOME": home}) == f"{home}/.cache/benanza/plans"
    assert ask(tool, "dir", env={**base, "HOME": home, "XDG_CACHE_HOME": "/x"}) == "/x/benanza/plans"
    assert ask(tool, "dir", env={**base, "BENANZA_PLAN_CACHE_DIR": "/y", "XDG_CACHE_HOME": "/x"}) == "/y"
    assert ask(tool, "dir", env={**base, "BENANZA_PLAN_CACHE_DIR": "off"}) == ""


@pytest.mark.parametrize("given", [{}, {"XDG_CACHE_HOME": "/x"},
                                   {"BENANZA_PLAN_CACHE_DIR": "/y", "XDG_CACHE_HOME": "/x"},
                                   {"BENANZA_PLAN_CACHE_DIR": "off"}])
def test_python_finds_the_directory_the_harness_uses(tool: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     given: dict[str, str]) -> None:
    """``benanza plan-cache`` (benanza/measure/plan_cache.py) shows and clears the directory the harness
    writes: the two decide it apart, from the same environment."""
    from benanza.measure import plan_cache

    env = {k: v for k, v in os.environ.items() if k not in ("BENANZA_PLAN_CACHE_DIR", "XDG_CACHE_HOME")}
    env = {**env, "HOME": str(tmp_path), **given}
    for name in ("BENANZA_PLAN_CACHE_DIR", "XDG_CACHE_HOME", "HOME"):
        monkeypatch.delenv(name, raising=False)
        if name in env:
            monkeypatch.setenv(name, env[name])
    assert str(plan_cache.root() or "") == ask(tool, "dir", env=env)


def test_plan_cache_command_counts_and_clears_what_the_harness_kept(tool: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from benanza.cli.main import main

    store = tmp_path / "plans"
    for key in ("graph A\nplan eng4", "graph B\nplan eng8"):
        assert ask(tool, "put", str(store), key, "x" * 1000) == "kept"
    monkeypatch.setenv("BENANZA_PLAN_CACHE_DIR", str(store))
    shown = CliRunner().invoke(main, ["plan-cache"])
    assert shown.exit_code == 0 and f"{store}: 2 plan(s)" in shown.output
    cleared = CliRunner().invoke(main, ["plan-cache", "--clear"])
    assert cleared.exit_code == 0 and "deleted 2 plan(s)" in cleared.output
    assert ask(tool, "get", str(store), "graph A\nplan eng4") == "miss"
    monkeypatch.setenv("BENANZA_PLAN_CACHE_DIR", "off")
    assert "plan cache off" in CliRunner().invoke(main, ["plan-cache"]).output


def test_pruning_drops_the_least_recently_used_plans_first(tool: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """``plan_cache.prune`` (the runner calls it before each run) keeps the cache within its bound: the
    plans loaded last (the harness marks a hit used) stay, and a dead writer's old temporary file goes."""
    from benanza.measure import plan_cache

    store = tmp_path / "plans"
    monkeypatch.setenv("BENANZA_PLAN_CACHE_DIR", str(store))
    for i, key in enumerate(("graph A", "graph B", "graph C")):
        assert ask(tool, "put", str(store), key, "x" * 1000) == "kept"
        os.utime(Path(ask(tool, "path", str(store), key)), (1000 + i, 1000 + i))  # A oldest, C newest
    assert ask(tool, "get", str(store), "graph A") == "hit " + "x" * 1000  # A now the most recently used
    stale = Path(ask(tool, "path", str(store), "graph B").replace(".plan", ".plan.tmp.1.2"))
    stale.write_text("half an entry")
    os.utime(stale, (1000, 1000))
    one = Path(ask(tool, "path", str(store), "graph A")).stat().st_size
    assert plan_cache.prune(2 * one) == 1  # B, the least recently used, goes
    assert [ask(tool, "get", str(store), k)[:3] for k in ("graph A", "graph B", "graph C")] == ["hit", "mis", "hit"]
    assert not stale.exists()
    assert plan_cache.prune(2 * one) == 0
    monkeypatch.setenv("BENANZA_PLAN_CACHE_MAX_MB", "lots")  # a bad bound: one line naming it, nothing deleted
    with pytest.raises(BenanzaError, match="BENANZA_PLAN_CACHE_MAX_MB='lots': not a number of MB"):
        plan_cache.prune()
    assert len(plan_cache.entries()) == 2
