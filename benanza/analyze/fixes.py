"""What closes each gap, per framework: the first change in a gap's list that the run has not made.

Why a table: a fix the run already applied (``cudnn.benchmark`` on a run that had it on) sends a user
after nothing, so each gap lists its changes in order with the recorded setting (meta.json ``extra``)
that shows a change was made; the first change whose setting does not show it is the fix named.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Change:
    text: str
    setting: str = ""  # the meta.json "extra" field that records it ("" : never recorded)
    done: tuple[Any, ...] = ()  # values of that field meaning the run made it already


# gap step (the waterfall's names) -> framework -> changes in order of preference; "" is any framework.
FIXES: dict[str, dict[str, tuple[Change, ...]]] = {
    "framework overhead": {
        "pytorch": (Change("capture the model in a CUDA graph (torch.cuda.CUDAGraph, or torch.compile "
                           "mode='reduce-overhead')", "cuda_graph", (True,)),
                    Change("keep inputs on the GPU (copy once before the timed loop)")),
        "onnxruntime": (Change("CUDA graphs (CUDA EP option enable_cuda_graph=1, inputs bound with IOBinding)",
                               "enable_cuda_graph", (True, 1, "1")),
                        Change("keep inputs on the GPU (IOBinding)")),
        "": (Change("cut host work between kernels: CUDA graphs, fewer syncs and copies"),),
    },
    "algorithm selection": {
        "pytorch": (Change("torch.backends.cudnn.benchmark = True", "cudnn.benchmark", (True,)),
                    Change("torch.backends.cudnn.benchmark_limit = 0 (time every engine config, not the "
                           "heuristics' first 10)", "cudnn.benchmark_limit", (0,)),
                    Change("the search ran over every engine config: pin the fastest engine (cuDNN frontend)")),
        "onnxruntime": (Change("cudnn_conv_algo_search = EXHAUSTIVE", "cudnn_conv_algo_search", ("EXHAUSTIVE",)),
                        Change("EXHAUSTIVE search ran: pin the fastest engine config (cuDNN frontend) or raise "
                               "cudnn_conv_use_max_workspace")),
        "": (Change("search algorithms exhaustively (ORT cudnn_conv_algo_search=EXHAUSTIVE, "
                    "torch.backends.cudnn.benchmark=True)"),),
    },
    # a run whose as-executed calls are cuDNN frontend engines (gaps.algorithm_family): ONNX Runtime's
    # search setting does not reach them (1.31.1 on an H100 ran the same engines under HEURISTIC and
    # EXHAUSTIVE, docs/RESULTS.md); PyTorch's benchmark mode times engine configs (the general list)
    "algorithm selection graph": {
        "onnxruntime": (Change("no ONNX Runtime option: its CUDA EP runs these convolutions as cuDNN frontend "
                               "engines and its cudnn_conv_algo_search does not change them; pin the faster engine "
                               "configs in a runtime that takes them (cuDNN frontend, TensorRT EP)"),),
    },
    "layout": {
        "pytorch": (Change("run in channels_last (model.to(memory_format=torch.channels_last) and the input too)",
                           "channels_last", (True,)),),
        "onnxruntime": (Change("NHWC kernels (CUDA EP option prefer_nhwc=1)", "prefer_nhwc", (True, 1, "1")),),
        "": (Change("run the convolutions in the faster layout (NHWC for fp16/bf16 on Tensor Cores)"),),
    },
    "fusion": {
        "pytorch": (Change("fold BatchNorm and fuse conv+bias(+add)+activation (torch.compile, or "
                           "torch.fx fuse_conv_bn_eval + cuDNN fused convolutions)"),),
        "onnxruntime": (Change("run conv+bias(+add)+activation as one call: ORT's CUDA EP adds biases and "
                               "activations in kernels of their own (its TensorRT EP, or cuDNN runtime fusion)"),),
        "": (Change("fuse convolution + bias + activation (cuDNN graph API runtime fusion)"),),
    },
    # the fusion gap's fix follows the pattern whose fused calls save most in the bound (gaps.dominant_fusion):
    # a transformer's gap is its attention or its GEMM epilogues, never a conv+BatchNorm it does not have
    "fusion attention": {
        "pytorch": (Change("fused attention: torch.nn.functional.scaled_dot_product_attention (Hugging Face "
                           "attn_implementation='sdpa')", "attn_implementation", ("sdpa", "flash_attention_2")),
                    Change("fused attention ran: pin cuDNN's fused SDPA (torch.nn.attention.sdpa_kernel("
                           "SDPBackend.CUDNN_ATTENTION))")),
        "onnxruntime": (Change("fused attention: the Attention / MultiHeadAttention contrib op "
                               "(onnxruntime.transformers optimizer)"),),
        "": (Change("fused scaled-dot-product attention (cuDNN graph API sdpa)"),),
    },
    "fusion gemm+bias": {
        "pytorch": (Change("bias in the GEMM's epilogue (torch.nn.Linear / addmm with cuBLASLt, or torch.compile)"),),
        "onnxruntime": (Change("bias in the GEMM's epilogue (Gemm with C, or FusedMatMul via the transformers "
                               "optimizer)"),),
        "": (Change("bias (and activation) in the GEMM's epilogue (cuBLASLt epilogues)"),),
    },
    "fusion pointwise-chain": {
        "pytorch": (Change("fuse the elementwise chains (torch.compile)"),),
        "onnxruntime": (Change("fuse the elementwise chains (FastGelu / BiasGelu via the transformers optimizer)"),),
        "": (Change("fuse each elementwise chain into one kernel (cuDNN graph API pointwise)"),),
    },
    "fusion rmsnorm": {
        "pytorch": (Change("a fused RMSNorm (torch.nn.RMSNorm with torch.compile)"),),
        "": (Change("one RMSNorm kernel (cuDNN graph API norm)"),),
    },
    "parallelism": {
        "": (Change("run independent branches concurrently (several CUDA streams, inside one CUDA graph)"),),
    },
}


def fix_for(gap: str, framework: str, settings: Mapping[str, Any], detail: str = "") -> str:
    """The first change for ``gap`` in ``framework`` that the run's ``settings`` do not show as made;
    ``detail`` (the fusion pattern that saves most, the API family of the algorithm gap) picks a more
    specific list where there is one."""
    specific, general = FIXES.get(f"{gap} {detail}", {}) if detail else {}, FIXES.get(gap, {})
    changes = (specific.get(framework) or specific.get("") or general.get(framework) or general.get("", ()))
    for change in changes:
        if not change.setting or settings.get(change.setting) not in change.done:
            return change.text
    return changes[-1].text if changes else "see docs/METRICS.md"
