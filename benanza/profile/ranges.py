"""Names of the profiler ranges the capture writes and the mapping reads (no onnx, no torch here)."""

RUN_RANGE = "model_run"  # record_function name around each timed run (the mapping cuts runs on it)
NODE_RANGE = "benanza.node:"  # PyTorch: record_function prefix around each converted ONNX node
# A --torch-module bundle's capture format (meta.json extra "capture_format"; absent: 1): what its
# ranges and export mean. The mapping reads these and refuses any other in one line.
TORCH_MODULE_FORMAT = 1
TORCH_MODULE_FORMATS = frozenset({1})
