"""Reader for cuBLAS (``CUBLAS_LOGINFO_DBG=1``) and cuBLASLt (``CUBLASLT_LOG_LEVEL>=2``) API logs.

Why: the GEMMs a framework ran (shapes, transposes, types, math mode, algorithm) are
what the Gemm/MatMul layers' benchmarks must reproduce, and the math mode (e.g.
``CUBLAS_TF32_TENSOR_OP_MATH`` set by ONNX Runtime around each ``cublasSgemm``) is
only visible here.

cuBLAS format (read from a real cuBLAS 13.1 log): a record
``I! cuBLAS (v13.1.0) function <C signature> called:`` then ``i!  name: type=T; val=V``
lines, ``i! Time: <second-resolution time> elapsed from start ...`` and
``i!Process=...; Thread=...; GPU=...; Handle=...; StreamId=...; MathMode=...`` which
ends it. cuBLASLt format (one line a call, from the documented log format; no real
sample was at hand): ``[time][cublasLt][pid][Api][cublasLtMatmul] A=.. Adesc=[type=R_32F
rows=.. cols=.. ld=..] ... computeDesc=[computeType=COMPUTE_32F_FAST_TF32 ...]
algo=[algoId=.. tile=..] ...``. Both styles may be mixed in one file.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benanza.apis import names
from benanza.errors import BenanzaError
from benanza.profile._io import iter_lines

_HEADER = re.compile(r"^([IWE])! cuBLAS \(v([\w.]+)\) function (.*) called:\s*$")
_ARG = re.compile(r"^i!\s+(\w+): type=([^;]*); val=(.*)$")
_LT_LINE = re.compile(
    r"^\[(?P<time>[^\]]+)\]\[cublasLt\]\[(?P<pid>\d+)\]\[(?P<level>\w+)\]\[(?P<fn>\w+)\]\s*(?P<rest>.*)$")
_KV = re.compile(r"(\w+)=(\[[^\]]*\]|\S+)")
_POINTER = re.compile(r"POINTER \(IN HEX:0x(?:0x)?([0-9a-fA-F]+|\(nil\))\)")
_SNIFF_LINES = 200

# Classic GEMM/GEMV entry points (name without _v2/_64) -> (storage type, compute type) when the
# function name fixes them; None means the types are arguments (the *Ex functions).
GEMM_FUNCTIONS: dict[str, tuple[str, str] | None] = {
    "cublasSgemm": ("CUDA_R_32F", "CUBLAS_COMPUTE_32F"),
    "cublasDgemm": ("CUDA_R_64F", "CUBLAS_COMPUTE_64F"),
    "cublasHgemm": ("CUDA_R_16F", "CUBLAS_COMPUTE_16F"),
    "cublasSgemmBatched": ("CUDA_R_32F", "CUBLAS_COMPUTE_32F"),
    "cublasSgemmStridedBatched": ("CUDA_R_32F", "CUBLAS_COMPUTE_32F"),
    "cublasHgemmBatched": ("CUDA_R_16F", "CUBLAS_COMPUTE_16F"),
    "cublasHgemmStridedBatched": ("CUDA_R_16F", "CUBLAS_COMPUTE_16F"),
    "cublasSgemv": ("CUDA_R_32F", "CUBLAS_COMPUTE_32F"),
    "cublasDgemv": ("CUDA_R_64F", "CUBLAS_COMPUTE_64F"),
    "cublasGemmEx": None,
    "cublasGemmBatchedEx": None,
    "cublasGemmStridedBatchedEx": None,
    "cublasSgemmEx": None,
}
_OPS = {"CUBLAS_OP_N": "N", "CUBLAS_OP_T": "T", "CUBLAS_OP_C": "C", "OP_N": "N", "OP_T": "T", "OP_C": "C"}


@dataclass(frozen=True)
class GemmCall:
    """One GEMM (or GEMV, as a GEMM with n=1) in column-major cuBLAS terms: C[m,n] = op(A)[m,k] op(B)[k,n].

    Types use the CUDA/cuBLAS C spellings that benanza.library's tables use
    (``CUDA_R_32F``, ``CUBLAS_COMPUTE_32F_FAST_TF32``). ``math_mode`` is the handle's
    math mode at the call (classic API only). Times: classic logs have one-second
    resolution (``elapsed_s``); cuBLASLt lines carry their own time stamp string.
    """

    function: str  # as logged, e.g. cublasSgemm_v2 or cublasLtMatmul
    kind: str  # "gemm" or "gemv"
    transa: str  # N, T or C
    transb: str
    m: int
    n: int
    k: int
    lda: int | None
    ldb: int | None
    ldc: int | None
    a_type: str
    b_type: str
    c_type: str
    compute_type: str
    math_mode: str | None
    algo: str | None
    batch_count: int
    line: int
    time: str
    elapsed_s: float | None
    thread: str
    stream: str
    handle: str
    library_version: str | None
    epilogue: str | None = None

    @property
    def tf32(self) -> bool:
        """Whether fp32 math may run as TF32 on Tensor Cores (compute type or handle math mode)."""
        return self.compute_type == "CUBLAS_COMPUTE_32F_FAST_TF32" or (
            self.a_type == "CUDA_R_32F" and self.math_mode == "CUBLAS_TF32_TENSOR_OP_MATH")

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k * self.batch_count


@dataclass(frozen=True)
class CublasLog:
    path: Path
    version: str | None  # cuBLAS version of the classic records, e.g. "13.1.0"
    calls: tuple[GemmCall, ...]
    truncated: bool = False
    notes: tuple[str, ...] = ()


def _enum(val: str) -> str:
    return re.sub(r"\s*\(-?\d+\)$", "", val.strip())


def _pointer(val: str) -> str:
    m = _POINTER.search(val)
    if not m:
        return val.strip()
    return "(nil)" if m.group(1) == "(nil)" else "0x" + m.group(1)


def _context(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in text.removeprefix("i!").strip().split("; "):
        key, _, value = part.partition("=")
        out[key.strip()] = value.strip()
    return out


def _cuda_type(val: str) -> str:
    v = _enum(val)
    return v if v.startswith("CUDA_") else "CUDA_" + v


def _compute_type(val: str) -> str:
    v = _enum(val)
    return v if v.startswith("CUBLAS_") else "CUBLAS_" + v


def _int(args: dict[str, str], name: str) -> int | None:
    try:
        return int(_enum(args[name]))
    except (KeyError, ValueError):
        return None


def _classic_call(fn: str, args: dict[str, str], ctx: dict[str, str], line: int, time: str,
                  elapsed: float | None, version: str) -> GemmCall | None:
    base = re.sub(r"(_v2)?(_64)?$", "", fn)
    if base not in GEMM_FUNCTIONS:
        return None
    fixed = GEMM_FUNCTIONS[base]
    if fixed is not None:
        a_type = b_type = c_type = fixed[0]
        compute = fixed[1]
    else:
        a_type = _cuda_type(args.get("Atype", "?"))
        b_type = _cuda_type(args.get("Btype", args.get("Atype", "?")))
        c_type = _cuda_type(args.get("Ctype", "?"))
        compute = _compute_type(args["computeType"]) if "computeType" in args else "CUBLAS_COMPUTE_32F"
    common = dict(function=fn, a_type=a_type, b_type=b_type, c_type=c_type, compute_type=compute,
                  math_mode=ctx.get("MathMode"), algo=_enum(args["algo"]) if "algo" in args else None,
                  batch_count=_int(args, "batchCount") or 1, line=line, time=time, elapsed_s=elapsed,
                  thread=ctx.get("Thread", ""), stream=_pointer(ctx.get("StreamId", "")),
                  handle=_pointer(ctx.get("Handle", "")), library_version=version)
    m, n = _int(args, "m"), _int(args, "n")
    if m is None or n is None:
        return None
    if base.endswith("gemv"):  # y = op(A) x with A m x n: as a GEMM of one column
        trans = _OPS.get(_enum(args.get("trans", "CUBLAS_OP_N")), "N")
        rows, red = (m, n) if trans == "N" else (n, m)
        return GemmCall(kind="gemv", transa=trans, transb="N", m=rows, n=1, k=red, lda=_int(args, "lda"),
                        ldb=None, ldc=None, **common)
    k = _int(args, "k")
    if k is None:
        return None
    return GemmCall(kind="gemm", transa=_OPS.get(_enum(args.get("transa", "")), "?"),
                    transb=_OPS.get(_enum(args.get("transb", "")), "?"), m=m, n=n, k=k, lda=_int(args, "lda"),
                    ldb=_int(args, "ldb"), ldc=_int(args, "ldc"), **common)


def _bracket(val: str) -> dict[str, str]:
    return dict(_KV.findall(val.strip("[]")))


def _lt_call(m: re.Match[str], line: int) -> GemmCall | None:
    kv = dict(_KV.findall(m.group("rest")))
    adesc, bdesc = _bracket(kv.get("Adesc", "")), _bracket(kv.get("Bdesc", ""))
    ddesc = _bracket(kv.get("Ddesc", kv.get("Cdesc", "")))
    cdesc = _bracket(kv.get("Cdesc", kv.get("Ddesc", "")))
    comp = {key.lower(): v for key, v in _bracket(kv.get("computeDesc", "")).items()}
    try:
        rows_d, cols_d = int(ddesc["rows"]), int(ddesc["cols"])
        rows_a, cols_a = int(adesc["rows"]), int(adesc["cols"])
    except (KeyError, ValueError):
        return None
    transa = _OPS.get(comp.get("transa", "OP_N"), "?")
    transb = _OPS.get(comp.get("transb", "OP_N"), "?")
    k = cols_a if transa == "N" else rows_a
    algo = kv.get("algo")

    def ld(desc: dict[str, str]) -> int | None:
        return int(desc["ld"]) if desc.get("ld", "").lstrip("-").isdigit() else None

    batch = ddesc.get("batchCount", "1")
    return GemmCall(
        function=m.group("fn"), kind="gemm", transa=transa, transb=transb, m=rows_d, n=cols_d, k=k,
        lda=ld(adesc), ldb=ld(bdesc), ldc=ld(cdesc), a_type=_cuda_type(adesc.get("type", "?")),
        b_type=_cuda_type(bdesc.get("type", "?")), c_type=_cuda_type(cdesc.get("type", "?")),
        compute_type=_compute_type(comp.get("computetype", "?")), math_mode=None,
        algo=algo.strip("[]") if algo else None, batch_count=int(batch) if batch.isdigit() else 1,
        line=line, time=m.group("time"), elapsed_s=None, thread=m.group("pid"), stream=kv.get("stream", ""),
        handle=kv.get("lightHandle", kv.get("handle", "")), library_version=None,
        epilogue=comp.get("epilogue"))


def read_cublas_log(path: str | Path) -> CublasLog:
    """Parse a cuBLAS and/or cuBLASLt API log into its GEMM calls, in log order."""
    path = Path(path)
    calls: list[GemmCall] = []
    version: str | None = None
    head: tuple[str, int, str] | None = None  # function, line, version
    args: dict[str, str] = {}
    time, elapsed = "", None
    records = lt_lines = seen = 0
    for lineno, line in enumerate(iter_lines(path), start=1):
        if not line.strip():
            continue
        seen += 1
        if (h := _HEADER.match(line)) is not None:
            fn = re.findall(r"(\w+)\(", h.group(3))
            head = (fn[0] if fn else h.group(3), lineno, h.group(2))
            version = version or h.group(2)
            args, time, elapsed = {}, "", None
            continue
        if (lt := _LT_LINE.match(line)) is not None:
            lt_lines += 1
            if lt.group("fn") == "cublasLtMatmul" and (call := _lt_call(lt, lineno)) is not None:
                calls.append(call)
            continue
        if head is None:
            if records == 0 and lt_lines == 0 and seen >= _SNIFF_LINES:
                break
            continue
        if line.startswith("i! Time: "):
            text = line[9:]
            time = text.split(" ", 1)[0]
            if (e := re.search(r"or ([\d.]+) seconds", text)) is not None:
                elapsed = float(e.group(1))
        elif line.startswith("i!Process=") or line.startswith("i! Process="):
            records += 1
            call = _classic_call(head[0], args, _context(line), head[1], time, elapsed, head[2])
            if call is not None:
                calls.append(call)
            head = None
        elif (a := _ARG.match(line)) is not None:
            args[a.group(1)] = a.group(3)
    if records == 0 and lt_lines == 0:
        if head is not None:
            raise BenanzaError(f"{path}: cuBLAS API log holds no complete record (file cut short?)")
        raise BenanzaError(f"{path}: not a cuBLAS/cuBLASLt API log (no 'I! cuBLAS (v...) function ... called:' "
                           "record and no '[cublasLt]' line; was it written with CUBLAS_LOGINFO_DBG=1 or "
                           "CUBLASLT_LOG_LEVEL?)")
    notes = []
    if head is not None:
        notes.append(f"{path}: file ends inside a record (cut short) at line {head[1]}; "
                     "the records before it were read")
    return CublasLog(path=path, version=version, calls=tuple(calls), truncated=head is not None, notes=tuple(notes))


# cuBLASLt's log prints an algo's configuration fields only where they differ from the
# default: (log field, name part, default, value spelling) in the order of the canonical name,
# whose parts and defaults are apis.names.LT_PARTS (the harness's name_parts.h is rendered from
# them). Swizzle and inner shape were never seen printed in the H100 logs, so they stay at their
# defaults.
LT_REDUCTIONS = {f"REDUCTION_SCHEME_{suffix}": name for suffix, name in names.LT_REDUCTIONS.items()}
_LT_LOG_FIELDS: dict[str, tuple[str, Callable[[str], str]]] = {  # name part -> (log field, value spelling)
    "tile": ("tile", lambda v: v.removeprefix("MATMUL_TILE_")),
    "stages": ("stages", lambda v: v.removeprefix("MATMUL_STAGES_")),
    "splitk": ("numSplitsK", str),
    "red": ("reductionScheme", lambda v: LT_REDUCTIONS.get(v, v)),
    "custom": ("customOption", str),
    "cluster": ("clusterShape", lambda v: v.removeprefix("CLUSTER_SHAPE_")),
}
LT_NAME_FIELDS: tuple[tuple[str, str, str, Callable[[str], str]], ...] = tuple(
    (field, part, default, spell)
    for part, default in names.LT_PARTS for field, spell in [_LT_LOG_FIELDS.get(part, ("", str))])


def lt_algorithm_name(algo: str) -> str | None:
    """The benchmarks' name of a logged ``algo=[algoId=.. tile=.. ...]`` (None without an algoId)."""
    fields = dict(item.split("=", 1) for item in algo.split() if "=" in item)
    if not fields.get("algoId", "").isdigit():
        return None
    return f"{names.LT_ALGO_TAG}{fields['algoId']}" + "".join(
        f"_{part}{spell(fields[key]) if key in fields else default}" for key, part, default, spell in LT_NAME_FIELDS)
