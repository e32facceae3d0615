"""The model processor: ONNX files -> layers with concrete shapes, costs, DAG and fusion candidates.

Only ``onnx_import`` imports ``onnx``; the IR (``layer``) and everything after it never do.
"""
