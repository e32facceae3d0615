"""Digest of what the cuDNN log readers return, per shipped log, to show that a reader change leaves it as it was.

Why: the record reader skips what no reader uses (fields built on first use, CI time, docs/RESULTS.md §16);
that must not change one record a reader consumes. Per log it prints the digest of ``read_cudnn_log``'s
result (paths made relative) and of every record ``RecordReader`` yields with its full field tree, and
the parse's CPU seconds; run it on two checkouts and compare the lines (the CPU figures aside).

    .venv/bin/python bench/parse_digest.py                    # this checkout
    .venv/bin/python bench/parse_digest.py /path/to/other/checkout   # another checkout's code and logs
"""

from __future__ import annotations

import hashlib
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any


def tree(field: Any) -> tuple:
    """A field and everything below it as plain tuples."""
    return field.name, field.type, field.val, field.raw, tuple(tree(c) for c in field.children)


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent).resolve()
    # that checkout's code, not the one an editable install points at
    sys.meta_path = [f for f in sys.meta_path if "editable" not in repr(f).lower() and "skbc" not in repr(f).lower()]
    sys.path.insert(0, str(root))
    from benanza.profile.cudnn_log import read_cudnn_log
    from benanza.profile.cudnn_records import RecordReader

    logs = [*sorted(root.glob("perfdb/bundles/*/cudnn_api.log.xz")),
            *sorted(root.glob("tests/data/samples/*cudnn_api.log.gz"))]
    total = hashlib.sha256()
    for log in logs:
        started = time.process_time()
        parsed = read_cudnn_log(log)
        cpu = time.process_time() - started
        notes = tuple(n.replace(str(root), "") for n in parsed.notes)
        relative = replace(parsed, path=log.relative_to(root), notes=notes)
        digest = hashlib.sha256(repr(relative).encode()).hexdigest()[:16]
        records = hashlib.sha256()
        reader = RecordReader(log)
        for r in reader:
            records.update(repr((r.severity, r.version, r.function, r.line, tree(r.root), r.time, r.context,
                                 r.is_return)).encode())
        records.update(repr((reader.truncated, reader.dropped, reader.records)).encode())
        total.update(digest.encode() + records.digest())
        print(f"{log.relative_to(root)} calls={len(parsed.calls)} heuristics={len(parsed.heuristics)} log={digest} "
              f"records={reader.records} tree={records.hexdigest()[:16]} parse_cpu_s={cpu:.1f}", flush=True)
    print("total", total.hexdigest()[:16])
    return 0


if __name__ == "__main__":
    sys.exit(main())
