"""benanza.store.systems: which system of a database a command reads (generate --db and analyze alike)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benanza.errors import BenanzaError
from benanza.store import db as perfdb
from benanza.store.db import RESULT_KEY
from benanza.store.shipped import shipped_db
from benanza.store.systems import skip_predicate


def test_generate_and_analyze_pick_a_system_by_the_same_rules(tmp_path: Path) -> None:
    """One picker: an id prefix or a GPU name selects the system for generate --db's skip as
    for analyze (3289d06's generate took the full id only)."""
    h100 = perfdb.open_db(shipped_db())
    (system,) = perfdb.systems(h100)
    first = next(iter(h100.execute(f"SELECT {', '.join(RESULT_KEY)} FROM benchmarks")))
    row = dict(zip(RESULT_KEY, first, strict=True))
    for wanted in (None, system["id"], system["id"][:8], "H100"):
        skip = skip_predicate(shipped_db(), wanted)
        assert skip is not None and skip(row), wanted
        assert not skip({**row, "layer_key": "no such layer"})
    with pytest.raises(BenanzaError, match="no system matching 'A100'"):
        skip_predicate(shipped_db(), "A100")
    empty = tmp_path / "empty.db"
    perfdb.open_db(empty)
    assert skip_predicate(empty, None) is None  # nothing measured yet: skip nothing
