"""How many layers a PyTorch (onnx2torch) profile of each export maps, checked on the CPU.

    python bench/torch_naming.py exports/resnet18_ts.onnx exports/googlenet_ts.onnx ...

Each model is materialized at batch 1, converted with benanza's onnx2torch wrapper, run
once under torch.profiler (CPU activities: the per-node ranges are host-side, so no GPU is
needed to check the naming) and its ``benanza.node:`` ranges mapped onto the layers, as
``benanza profile --framework torch`` does with the GPU trace.  Needs torch and onnx2torch.
"""

import sys
import tempfile
from pathlib import Path

import torch

from benanza.model.onnx_import import load_model
from benanza.profile.capture_child import node_ranges
from benanza.profile.kineto import read_kineto_trace
from benanza.profile.materialize import materialize
from benanza.profile.node_layers import torch_range_layers
from benanza.profile.onnx_torch import convert_named
from benanza.profile.ranges import NODE_RANGE, RUN_RANGE

for src in sys.argv[1:]:
    tmp = Path(tempfile.mkdtemp())
    mat = materialize(src, 1, tmp / "m.onnx")
    mod, names = convert_named(str(mat.path))
    node_ranges(mod, names)
    side = 299 if "inception" in src else 224
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof, torch.no_grad():
        with torch.profiler.record_function(RUN_RANGE):
            mod(torch.rand(1, 3, side, side))
    prof.export_chrome_trace(str(tmp / "t.json"))
    ranges = [a for a in read_kineto_trace(tmp / "t.json").annotations if a.name.startswith(NODE_RANGE) and not a.gpu]
    model = load_model(src, 1)
    mapped = {i for n in torch_range_layers(model, ranges) for i in n.layers}
    share = 100 * len(mapped) / len(model.layers)
    print(f"{Path(src).name}: {len(mapped)} of {len(model.layers)} layers mapped ({share:.1f} %)", flush=True)
