"""Names of the profiler ranges the capture writes and the mapping reads (no onnx, no torch here)."""

RUN_RANGE = "model_run"  # record_function name around each timed run (the mapping cuts runs on it)
NODE_RANGE = "benanza.node:"  # PyTorch: record_function prefix around each converted ONNX node
