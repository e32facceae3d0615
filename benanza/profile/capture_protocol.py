"""What the capture's parent (``capture.py``) and its children (``capture_child.py``) agree on: file
names, exit statuses, settings per precision, the seed.

Why a module of its own that imports nothing heavy: a child pays its imports on the profile's
critical path (the latency child's start-up comes before any GPU work), and the parent's side
(the model materializer, the bundle readers, networkx through the layer model) is none of a
child's business.
"""

from __future__ import annotations

from enum import StrEnum

from benanza.library import Precision

MODEL = "model.onnx"  # the materialized fp32 model (kept outside the bundle: it holds every weight)
MODEL_FP16 = "model_fp16.onnx"  # what ONNX Runtime runs for --dtype fp16
OPTIMIZED = "optimized_model.onnx"  # ORT's optimized graph; the bundle keeps it without weights
EXPORTED = "exported.onnx"  # a --torch-module bundle's ONNX export of the module (the model its layers come from)
NO_GPU_EXIT = 3  # a child's exit status when it finds no usable GPU
CHILD_TIMEOUT_S = 1800
LAUNCHED_ENV = "BENANZA_CHILD_LAUNCHED"  # the parent's time.time() at a child's launch: the child's start-up cost
SEED = 0  # random weights and inputs: the same model in every child


class Framework(StrEnum):
    ONNXRUNTIME = "onnxruntime"
    PYTORCH = "pytorch"


class AlgoSearch(StrEnum):
    """ONNX Runtime's ``cudnn_conv_algo_search`` (PyTorch: exhaustive = ``cudnn.benchmark``)."""

    EXHAUSTIVE = "exhaustive"
    HEURISTIC = "heuristic"
    DEFAULT = "default"


# ONNX Runtime's spelling of each setting.
ORT_ALGO_SEARCH: dict[AlgoSearch, str] = {
    AlgoSearch.EXHAUSTIVE: "EXHAUSTIVE", AlgoSearch.HEURISTIC: "HEURISTIC", AlgoSearch.DEFAULT: "DEFAULT"}
# Whether TF32 math is allowed for fp32 data (ORT ``use_tf32``, torch ``allow_tf32``), per precision.
ALLOW_TF32: dict[Precision, bool] = {
    Precision.FP32: False, Precision.TF32: True, Precision.FP16: False, Precision.BF16: False}
CAPTURE_PRECISIONS = (Precision.FP32, Precision.TF32, Precision.FP16)
