"""A real ONNX Runtime CPU-EP run of a checked-in transformer export, with ORT's profiling on and
its optimized graph written: the fused contrib nodes the mapping tests read (shared by
test_ort_fused_mapping.py and test_ort_contrib_charges.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from benanza.profile.materialize import materialize
from benanza.profile.ort_profile import read_ort_profile

EXPORTS = Path(__file__).parent / "data" / "exports"


def profiling_session(stem: str, batch: int, seq: int, tmp_path: Path, optimized: Path) -> tuple[Any, dict]:
    """An ORT CPU session of ``stem`` at ``batch`` x ``seq`` that profiles its runs and writes its
    optimized graph to ``optimized``, and its feeds (token ids of 1)."""
    import onnxruntime as ort

    mat = materialize(EXPORTS / f"{stem}.onnx", batch, tmp_path / "model.onnx", seq_len=seq)
    options = ort.SessionOptions()
    options.enable_profiling = True
    options.profile_file_prefix = str(tmp_path / "ort")
    options.optimized_model_filepath = str(optimized)
    options.log_severity_level = 3
    sess = ort.InferenceSession(str(mat.path), options, providers=["CPUExecutionProvider"])
    return sess, {i.name: np.ones((batch, seq), np.int64) for i in sess.get_inputs()}


def ort_nodes(tmp_path: Path, stem: str, batch: int = 2, seq: int = 16) -> tuple[list, Path]:
    """The profiled nodes of one run, and the optimized graph's path."""
    sess, feeds = profiling_session(stem, batch, seq, tmp_path, tmp_path / "optimized.onnx")
    sess.run(None, feeds)
    return read_ort_profile(sess.end_profiling()).runs[0].nodes, tmp_path / "optimized.onnx"
