"""A replay plan as plain data, and the C++ project that runs it (``benanza replay``, docs/REPLAY.md).

The lower bound is a sum of micro-benchmarks timed alone; a replay runs the model's best equivalent
execution as one program, each step with exactly the call the analysis charged, so the bound can be
checked against a real execution of itself. The plan (``ReplayPlan``) is built from the analysis by
``benanza.analyze.replay``; this module only writes it down:

    src/replay.cu          rendered from templates/replay.cu.j2: the same for every model (no job in it)
    src/replay.jobs        the steps in order (kind, row in the kind's table, buffers read/written, tolerance)
    src/replay.buffers     one device buffer per tensor the steps pass (elements, alias and its offset, input)
    src/replay.<kind>      each step kind's rows: exactly the job-table row its micro-benchmark had
                           (the API's own columns, ``ApiDef.columns``), plus the chosen algorithm
    csrc/benanza/          the harness, as every benchmark project has it
    plan.json              the plan as JSON, with the layer names (model text stays out of the C++)

Like the benchmark job tables (benanza/apis/job_table.py), every table is plain data read at run time
and percent-encoded, so no layer name or attribute can reach C++ as code; the source depends on the
supported step kinds alone and builds once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benanza import paths
from benanza.apis import REGISTRY, job_table
from benanza.apis.base import ApiFamily
from benanza.apis.cudnn_ops import POOLING_MODE
from benanza.apis.job_table import PRECISION, Column, Kind, Vocabulary, choice, ints
from benanza.errors import BenanzaError
from benanza.generate import codegen
from benanza.library import PRECISIONS, Api, Precision

EXECUTABLE = "replay"
TEMPLATE = "replay.cu.j2"
PLAN_JSON = "plan.json"
REPLAY_SCHEMA = 1


class StepKind:
    """What the C++ replay knows how to run (csrc/benanza/replay.h); the values name its tables."""

    CONV_FWD = "conv_fwd"
    CONV_BIAS_ACT = "conv_bias_act"
    GRAPH_CONV = "graph_conv"
    GEMM_EX = "gemm_ex"
    LT_MATMUL = "lt_matmul"
    POOLING = "pooling"
    SOFTMAX = "softmax"
    ADD_TENSOR = "add_tensor"
    OP_TENSOR = "op_tensor"
    ACTIVATION = "activation"
    LRN = "lrn"
    BATCHNORM = "batchnorm"
    CONCAT = "concat"  # a non-library layer: cudaMemcpy2DAsync per input, the copy the ceilings measure
    PERMUTE = "permute"  # a view the bound reads through strides (Transpose, Slice, Split, select), one strided copy
    TRANSFORM = "transform"  # a layout change between two steps (no API of the bound: composition cost)
    CHAIN = "chain"  # benanza's fused pointwise kernel: an elementwise chain the bound charges a roofline
    POOL = "pool"  # benanza's pooling kernel: a pool the bound charges a roofline
    # the graph API's other calls (csrc/benanza/replay_graph.h): exactly the named engine config
    GRAPH_MATMUL = "graph_matmul"
    GRAPH_NORM = "graph_norm"
    GRAPH_POINTWISE = "graph_pointwise"
    GRAPH_SDPA = "graph_sdpa"


# The supported set: API -> the step kind that makes its call as its micro-benchmark did. An API
# not here makes the generator refuse the plan, naming the layer and the API (never a silent skip).
REPLAY_KINDS: dict[Api, str] = {
    Api.CONV_FWD: StepKind.CONV_FWD,
    Api.CONV_BIAS_ACT: StepKind.CONV_BIAS_ACT,
    Api.GRAPH_CONV: StepKind.GRAPH_CONV,
    Api.GEMM_EX: StepKind.GEMM_EX,
    Api.LT_MATMUL: StepKind.LT_MATMUL,
    Api.POOLING: StepKind.POOLING,
    Api.SOFTMAX: StepKind.SOFTMAX,
    Api.ADD_TENSOR: StepKind.ADD_TENSOR,
    Api.OP_TENSOR: StepKind.OP_TENSOR,
    Api.ACTIVATION: StepKind.ACTIVATION,
    Api.LRN: StepKind.LRN,
    Api.BATCHNORM_INF: StepKind.BATCHNORM,
    Api.GRAPH_MATMUL: StepKind.GRAPH_MATMUL,
    Api.GRAPH_NORM: StepKind.GRAPH_NORM,
    Api.GRAPH_POINTWISE: StepKind.GRAPH_POINTWISE,
    Api.GRAPH_SDPA: StepKind.GRAPH_SDPA,
}
KIND_APIS: dict[str, Api] = {kind: api for api, kind in REPLAY_KINDS.items()}
# Step kinds that only run in place on their first input (cudnnAddTensor: C += bias): they serve a conv's bias
# add, never a layer that writes a buffer of its own (a roofline member's stand-in call).
IN_PLACE_KINDS: frozenset[str] = frozenset({StepKind.ADD_TENSOR})
# Non-library layers (charged their bytes at the copy roofline) the replay runs as copies: op -> kind.
COPY_KINDS: dict[str, str] = {"Concat": StepKind.CONCAT}
# Views the bound reads through strides (charged nothing) that the replay runs as a copy: op -> kind. Each
# output is a window of its input (analyze.replay_views.VIEW_RULES: dims, strides, offset), copied packed.
VIEW_KINDS: dict[str, str] = {op: StepKind.PERMUTE for op in ("Transpose", "Slice", "Split", "Gather")}
# Layers the bound charges a roofline that benanza's own kernels run (csrc/benanza/replay_kernels.h):
# op -> kind. A chain runs as one fused step when every member has a ChainOpDef (CHAIN_OPS below).
KERNEL_KINDS: dict[str, str] = {
    **{op: StepKind.POOL for op in ("MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool")},
    **{op: StepKind.CHAIN for op in ("Add", "Sub", "Mul", "Div", "Sum", "Relu", "Sigmoid", "Tanh", "Clip",
                                     "LeakyRelu", "Elu", "HardSigmoid", "HardSwish", "BatchNormalization")},
}
OWN_KERNEL_STEPS: frozenset[str] = frozenset(KERNEL_KINDS.values())
KERNEL_ALGORITHM = "benanza"  # a step of benanza's own kernel: its algorithm column
# Each kind once (several ops share one: every view is a permute), in the order the C++ enumerates them.
STEP_KINDS: tuple[str, ...] = tuple(dict.fromkeys((*REPLAY_KINDS.values(), *COPY_KINDS.values(), *VIEW_KINDS.values(),
                                                   StepKind.TRANSFORM, *sorted(OWN_KERNEL_STEPS))))


@dataclass(frozen=True)
class ChainOpDef:
    """How one ONNX elementwise op runs in the fused pointwise kernel: the kernel's op (a ``CHAIN_OP``
    word, ``bz::ChainOp``), how many tensor operands it takes (-1: any number, folded pairwise), the
    attributes read as the instruction's alpha and beta (with ONNX's defaults), and the per-channel
    constants it becomes (BatchNormalization in inference: y = x * scale + shift)."""

    op: str
    operands: int
    params: tuple[tuple[str, float], ...] = ()
    channel_constants: int = 0


FLOAT_MAX = 3.4028234663852886e38  # Clip without an upper bound
CHAIN_OPS: dict[str, ChainOpDef] = {
    "Add": ChainOpDef("Add", 2), "Sum": ChainOpDef("Add", -1), "Sub": ChainOpDef("Sub", 2),
    "Mul": ChainOpDef("Mul", 2), "Div": ChainOpDef("Div", 2),
    "Relu": ChainOpDef("Relu", 1), "Sigmoid": ChainOpDef("Sigmoid", 1), "Tanh": ChainOpDef("Tanh", 1),
    "Clip": ChainOpDef("Clip", 1, (("min", -FLOAT_MAX), ("max", FLOAT_MAX))),
    "LeakyRelu": ChainOpDef("LeakyRelu", 1, (("alpha", 0.01),)),
    "Elu": ChainOpDef("Elu", 1, (("alpha", 1.0),)),
    "HardSigmoid": ChainOpDef("HardSigmoid", 1, (("alpha", 0.2), ("beta", 0.5))),
    "HardSwish": ChainOpDef("HardSwish", 1),
    "BatchNormalization": ChainOpDef("Affine", 1, channel_constants=2),
}
# The fused kernel's op vocabulary (csrc/benanza/kernels.h ChainOp: every name is an enumerator there).
CHAIN_OP = Vocabulary("bz::ChainOp", tuple(dict.fromkeys(d.op for d in CHAIN_OPS.values())), "bz::ChainOp::")
MAX_CHAIN_OPS, MAX_CHAIN_INPUTS, MAX_CHAIN_CONSTS = 16, 8, 8  # replay_kernels.h kMaxChain*
CHAIN_NONE = -1  # an operand code: none (otherwise >= 0 a register, -2 - k the constant k)

TENSOR_FORMAT = Vocabulary("cudnnTensorFormat_t", ("CUDNN_TENSOR_NCHW", "CUDNN_TENSOR_NHWC"))
# A transform step's own row: the tensor's 4-D dims and the two layouts.
TRANSFORM_COLUMNS: tuple[Column, ...] = (PRECISION, ints("dims", 4), choice("src", TENSOR_FORMAT),
                                         choice("dst", TENSOR_FORMAT))
# A concat's row: outer rows of parts[i] x inner elements from each input (axis split as the model's NCHW
# order, or NHWC rows for a channel concat of NHWC data).
CONCAT_COLUMNS: tuple[Column, ...] = (PRECISION, ints("parts", at_least=1, at_most=256), Column("outer", Kind.INT),
                                      Column("inner", Kind.INT))
# A view's row: the window of its (packed) input it copies, packed, into its own buffer: the output's dims,
# each dim's stride in input elements and the input element of its first index (analyze.replay_views.Window).
PERMUTE_COLUMNS: tuple[Column, ...] = (PRECISION, ints("dims", at_least=1, at_most=8),
                                       ints("strides", at_least=1, at_most=8), Column("offset", Kind.INT))
# A fused chain's row: the output's 4-D dims (channels on axis 1) and layout, the program (ChainProgram:
# per op its kernel op, operand codes a, b, c and parameters alpha, beta) and each constant's count.
_OPS_LIST = {"at_least": 1, "at_most": MAX_CHAIN_OPS}
CHAIN_COLUMNS: tuple[Column, ...] = (
    PRECISION, ints("dims", 4), choice("format", TENSOR_FORMAT),
    Column("ops", Kind.CHOICES, 1, MAX_CHAIN_OPS, vocabulary=CHAIN_OP),
    ints("a", **_OPS_LIST), ints("b", **_OPS_LIST), ints("c", **_OPS_LIST),
    Column("alpha", Kind.REALS, 1, MAX_CHAIN_OPS), Column("beta", Kind.REALS, 1, MAX_CHAIN_OPS),
    ints("consts", at_most=MAX_CHAIN_CONSTS))
# A pool's row: the pooling benchmark's 14 dims (pads begin and end apart, the model's output size) and mode.
POOL_COLUMNS: tuple[Column, ...] = (PRECISION, ints("dims", 14), choice("mode", POOLING_MODE),
                                    choice("format", TENSOR_FORMAT))
OWN_COLUMNS: dict[str, tuple[Column, ...]] = {StepKind.TRANSFORM: TRANSFORM_COLUMNS, StepKind.CONCAT: CONCAT_COLUMNS,
                                              StepKind.PERMUTE: PERMUTE_COLUMNS, StepKind.CHAIN: CHAIN_COLUMNS,
                                              StepKind.POOL: POOL_COLUMNS}
# Every step kind's table beside its API's own columns: the algorithm the analysis chose.
ALGORITHM = Column("algorithm", Kind.TEXT)
STEPS_COLUMNS: tuple[Column, ...] = (
    Column("kind", Kind.CHOICE, vocabulary=Vocabulary("ReplayKind", STEP_KINDS, "ReplayKind::")),
    Column("row", Kind.INT),
    ints("reads", at_most=8), ints("writes", at_most=1, at_least=1),
    Column("tolerance", Kind.REAL))  # the step's check (Step.tolerance): the plan's, so C++ keeps no rule of its own
# precision: its storage type's row; offset: an alias's first element in its root (0 for a buffer of its own)
BUFFER_COLUMNS: tuple[Column, ...] = (PRECISION, Column("elements", Kind.INT), Column("alias", Kind.INT),
                                      Column("offset", Kind.INT), Column("input", Kind.FLAG))


def kind_columns(kind: str) -> tuple[Column, ...]:
    """The columns of a step kind's table: its API's job-table columns and the chosen algorithm."""
    own = OWN_COLUMNS[kind] if kind in OWN_COLUMNS else REGISTRY[KIND_APIS[kind]].columns
    return (*own, ALGORITHM)


# The max |out - ref| / max |ref| a step's output may have against the fp32 reference of the same
# inputs: its precision's own tolerance (library.PRECISIONS), as in its micro-benchmark, except
# where that benchmark's algorithm table loosens it (Winograd: library.ALGORITHM_TOLERANCE).
def step_tolerance(precision: Precision, algorithm: str) -> float:
    """The output check's tolerance of one step: as its micro-benchmark checked that algorithm."""
    from benanza.library import ALGORITHM_TOLERANCE

    return max(PRECISIONS[precision].tolerance, ALGORITHM_TOLERANCE.get(algorithm, 0.0))


@dataclass(frozen=True)
class Buffer:
    """One device buffer of the replay: a tensor a step writes (or the model reads), or a view of one."""

    id: int
    tensor: str  # the model's tensor name (model text: plan.json only, never the C++)
    shape: tuple[int, ...]
    elements: int
    layout: str = ""  # "NCHW" / "NHWC" as its producer writes it; "" where the layout does not matter
    alias: int = -1  # the buffer whose memory it shares (Reshape, Flatten ...), -1 for its own memory
    input: bool = False  # a model input: filled with random values once
    offset: int = 0  # an alias: the element of its root where it starts (a contiguous view, a select of Q)


@dataclass(frozen=True)
class Step:
    """One call of the replay: a group's (or a part of a group's) call as the analysis chose it."""

    index: int
    kind: str  # a StepKind value
    api: str  # the Api value ("" for a transform)
    algorithm: str  # legacy enum spelling, cuBLAS algo, engine config name, or the op's mode
    dtype: str  # a Precision value (tf32 computes on fp32 storage)
    layout: str
    fusion: str
    layers: tuple[int, ...]  # the model's layers this step computes (a group's, head first)
    names: tuple[str, ...]  # their names (plan.json only)
    reads: tuple[int, ...]  # buffer ids, in the order the kind takes them (x [, z])
    writes: int
    row: dict[str, Any]  # the API's job-table row, as its micro-benchmark had it
    precision_index: int  # index into the templates' precision rows (codegen.PRECISION_INDEX)
    tolerance: float
    charged_ms: float  # what the bound charges the group (the first step of a group carries it)
    measured_ms: float | None  # the median of the row this step runs (None for a transform)
    note: str = ""  # why the step differs from the bound's charge, if it does


@dataclass(frozen=True)
class ReplayPlan:
    """One execution of one model at one batch and precision, as steps: the best equivalent execution, or
    the framework's own (``execution``)."""

    model: str
    batch: int
    dtype: str  # the run's storage precision
    precisions: tuple[str, ...]  # the precisions the analysis allowed
    system: dict[str, Any]
    lbl_seq_ms: float
    lbl_par_ms: float
    buffers: tuple[Buffer, ...]
    steps: tuple[Step, ...]
    outputs: tuple[int, ...]  # buffers holding the model's outputs
    notes: tuple[str, ...] = field(default=())
    # which execution the steps run: "best" (the headline bound's) or "as-executed" (a profile bundle's calls)
    execution: str = "best"

    def to_dict(self) -> dict[str, Any]:
        return {"schema": REPLAY_SCHEMA, **asdict(self)}


# ---------------------------------------------------------------- files


def tables(plan: ReplayPlan, command: str) -> dict[str, str]:
    """The plan's tables by file name (src/), each rendered and checked by job_table.render."""
    comment = f"generated by benanza, do not edit: {command}"
    storage = codegen.PRECISION_INDEX[(Precision(plan.dtype), "NCHW")]  # a buffer's storage type
    by_kind: dict[str, list[dict[str, Any]]] = {kind: [] for kind in STEP_KINDS}
    steps = []
    for s in plan.steps:
        rows = by_kind[s.kind]
        steps.append({"kind": s.kind, "row": len(rows), "reads": list(s.reads), "writes": [s.writes],
                      "tolerance": s.tolerance})
        rows.append({**s.row, "precision": s.precision_index, "algorithm": s.algorithm})
    out = {f"{EXECUTABLE}{job_table.SUFFIX}": job_table.render(EXECUTABLE, STEPS_COLUMNS, steps, comment),
           f"{EXECUTABLE}.buffers": job_table.render(
               f"{EXECUTABLE}.buffers", BUFFER_COLUMNS,
               [{"precision": storage, "elements": b.elements, "alias": b.alias, "offset": b.offset, "input": b.input}
                for b in plan.buffers], comment)}
    for kind, rows in by_kind.items():
        out[f"{EXECUTABLE}.{kind}"] = job_table.render(f"{EXECUTABLE}.{kind}", kind_columns(kind), rows, comment)
    return out


def source_context() -> dict[str, Any]:
    """What templates/replay.cu.j2 is rendered from: precision rows and each kind's columns (no plan)."""
    plain = {"precisions": codegen.precision_rows(), "conv_algorithms": list(REGISTRY[Api.CONV_FWD].algorithms),
             "gemm_algorithms": list(REGISTRY[Api.GEMM_EX].algorithms), "kind_names": list(STEP_KINDS)}
    codegen.check_plain(plain)
    return {**plain, "kinds": {kind: {"columns": codegen.column_contexts(kind_columns(kind), kind)}
                               for kind in STEP_KINDS},
            "steps_columns": codegen.column_contexts(STEPS_COLUMNS, EXECUTABLE),
            "buffer_columns": codegen.column_contexts(BUFFER_COLUMNS, f"{EXECUTABLE}.buffers")}


def render_source(command: str) -> str:
    """The replay program's source: the same for every plan (the plan is read at run time)."""
    env = codegen.environment()
    return env.get_template(TEMPLATE).render(command=command, **source_context())


def write_project(plan: ReplayPlan, out_dir: Path, command: str) -> list[str]:
    """Write the replay project for ``plan`` into ``out_dir`` (CMake, harness, source, tables, plan.json);
    returns the files whose content changed."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise BenanzaError(f"{out}: exists and is not a directory")
    manifest = codegen.Manifest(generated_by=command)
    env = codegen.environment()
    try:
        out.mkdir(parents=True, exist_ok=True)
        write = codegen.write_file  # the generator's one write-if-changed
        write(out / "src" / f"{EXECUTABLE}.cu", render_source(command), manifest)
        for name, text in tables(plan, command).items():
            write(out / "src" / name, text, manifest)
        codegen.copy_harness(out, manifest, env)
        write(out / "CMakeLists.txt", (paths.templates_dir() / "CMakeLists.txt").read_text(), manifest)
        cmake = env.get_template("benchmarks.cmake.j2").render(
            command=command, executables=[EXECUTABLE], host_only=[EXECUTABLE], frontend=[EXECUTABLE],
            site_dirs=codegen.site_dirs())
        write(out / "benchmarks.cmake", cmake, manifest)
        write(out / PLAN_JSON, json.dumps(plan.to_dict(), indent=1) + "\n", manifest)
    except OSError as exc:
        raise BenanzaError(f"{out}: cannot write the replay project ({exc.strerror}: {exc.filename or out})") \
            from None
    return manifest.written


def graph_family(steps: Sequence[Step]) -> bool:
    """Whether any step calls the cuDNN graph API (the build then needs cudnn-frontend and NVRTC)."""
    return any(REGISTRY[KIND_APIS[s.kind]].family is ApiFamily.GRAPH for s in steps if s.kind in KIND_APIS)
