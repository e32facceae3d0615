"""benanza: benchmark-generation compiler for deep-learning inference on NVIDIA GPUs."""

__version__ = "0.1.0"
SCHEMA_VERSION = 1
