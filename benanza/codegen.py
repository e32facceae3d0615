"""The code generator: a Plan -> a self-contained CMake project of benchmark executables.

Layout of the generated directory::

    CMakeLists.txt      hand-written (templates/CMakeLists.txt), includes benchmarks.cmake
    benchmarks.cmake    generated: the executables and where to look for cuDNN/cuBLAS
    csrc/benanza/       copy of the C++ harness
    src/bench_<api>.cu  one source per API, rendered from apis.REGISTRY[api].template
    manifest.json       what each executable's jobs are, and every benchmark they measure

Templates get only plain dicts whose strings were checked to be hex keys or enum
spellings, so no text from a model can reach C++.  Files are written only when
their content changes, so a rebuild after regeneration is incremental.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import site
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2

from benanza import paths
from benanza.apis import NAMED_CONFIG_APIS, REGISTRY, names
from benanza.apis.base import ApiFamily
from benanza.errors import BenanzaError
from benanza.library import ALGORITHM_TOLERANCE, PRECISIONS, Precision
from benanza.plan import Benchmark, Job, Plan
from benanza.records import MANIFEST, MANIFEST_SCHEMA, ManifestJob

# Strings allowed in a template context: hex keys and C/C++ or benanza enum spellings.
_SAFE_STR = re.compile(r"[A-Za-z0-9_+.\-]*")
# Directories baked into benchmarks.cmake as search hints.
_SAFE_PATH = re.compile(r"[A-Za-z0-9_+.,/@=\-]+")

PRECISION_INDEX: dict[Precision, int] = {p: i for i, p in enumerate(Precision)}


@dataclass
class Manifest:
    generated_by: str
    executables: dict[str, dict[str, Any]] = field(default_factory=dict)
    jobs: list[dict[str, Any]] = field(default_factory=list)
    benchmarks: list[dict[str, Any]] = field(default_factory=list)
    layers: list[dict[str, Any]] = field(default_factory=list)
    models: list[dict[str, Any]] = field(default_factory=list)
    written: list[str] = field(default_factory=list)  # files whose content changed (not serialized)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": MANIFEST_SCHEMA, "generated_by": self.generated_by, "executables": self.executables,
                "jobs": self.jobs, "benchmarks": self.benchmarks, "layers": self.layers, "models": self.models}


# ---------------------------------------------------------------- Jinja


def c_comment(text: str) -> str:
    """Text safe inside a // comment: printable ASCII, no backslash (line splice)."""
    return re.sub(r"[^ -\[\]-~]", "?", str(text))


def c_number(value: Any) -> str:
    """A Python number as a C++ literal (inf as HUGE_VAL)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    v = float(value)
    if math.isnan(v):
        raise ValueError("NaN in a job table")
    if math.isinf(v):
        return "HUGE_VAL" if v > 0 else "-HUGE_VAL"
    return repr(v)


def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(paths.templates_dir())),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             trim_blocks=True, lstrip_blocks=True, autoescape=False)
    env.filters["comment"] = c_comment
    env.filters["num"] = c_number
    return env


def check_plain(value: Any, where: str = "context") -> None:
    """Refuse anything but numbers, safe strings, lists and dicts in a template context."""
    if isinstance(value, bool | int | float) or value is None:
        return
    if isinstance(value, str):
        if not _SAFE_STR.fullmatch(value):
            raise BenanzaError(f"codegen: refusing unsafe text {value!r} at {where} of a template context")
        return
    if isinstance(value, list | tuple):
        for i, v in enumerate(value):
            check_plain(v, f"{where}[{i}]")
        return
    if isinstance(value, dict):
        for k, v in value.items():
            check_plain(k, f"{where} key")
            check_plain(v, f"{where}.{k}")
        return
    raise BenanzaError(f"codegen: {type(value).__name__} at {where} is not plain data")


def _precision_row(p: Precision, layout: str) -> dict[str, Any]:
    spec = PRECISIONS[p]
    row = dataclasses.asdict(spec)
    row.update(dtype=p.value, math=spec.math.value, layout=layout, cudnn_layout=f"CUDNN_TENSOR_{layout}")
    return row


def _preferred_layout(p: Precision) -> str:
    return PRECISIONS[p].cudnn_layout.removeprefix("CUDNN_TENSOR_")


def _other_layouts(jobs: list[Job]) -> tuple[tuple[Precision, str], ...]:
    """(precision, layout) of the jobs of an API measured in more than one layout
    (``ApiDef.nchw_too``) that are not in their precision's preferred layout, in job order."""
    return tuple(dict.fromkeys((j.precision, j.layout) for j in jobs if REGISTRY[j.api].nchw_too and j.layout
                              and j.layout != _preferred_layout(j.precision)))


def precision_rows(others: tuple[tuple[Precision, str], ...] = ()) -> list[dict[str, Any]]:
    """Every precision in Precision order in its preferred layout, then ``others``: a job's
    ``precision`` indexes this list, and its template takes the layout (cudnnTensorFormat_t) from it."""
    return [*(_precision_row(p, _preferred_layout(p)) for p in Precision),
            *(_precision_row(p, layout) for p, layout in others)]


def job_row(job: Job, others: tuple[tuple[Precision, str], ...] = ()) -> dict[str, Any]:
    index = PRECISION_INDEX[job.precision]
    if (job.precision, job.layout) in others:
        index = len(PRECISION_INDEX) + others.index((job.precision, job.layout))
    return {"key": job.key, "precision": index, "fusion": job.fusion.value, **job.fields.row}


def render_source(env: jinja2.Environment, jobs: list[Job], command: str) -> str:
    """One executable's source: its API's template over the jobs' rows."""
    api = jobs[0].api
    others = _other_layouts(jobs)
    # the legacy enum spellings a template tables; named engine configs travel as numbers in the rows
    algorithms = list(dict.fromkeys(a for j in jobs if j.api not in NAMED_CONFIG_APIS
                                    for a in j.fields.algorithms if a != "*"))
    context = {"api": api.value, "executable": jobs[0].executable, "precisions": precision_rows(others),
               "algorithms": algorithms, "jobs": [job_row(j, others) for j in jobs],
               "algorithm_tolerance": [ALGORITHM_TOLERANCE.get(a, 0.0) for a in algorithms]}
    # api is a library.Api value (e.g. "cudnn_frontend::graph::conv_fprop"), never model text
    check_plain({k: v for k, v in context.items() if k != "api"})
    return env.get_template(REGISTRY[api].template).render(command=command, **context)


def site_dirs() -> list[str]:
    """site-packages of the running Python, where the nvidia wheels keep cuDNN/cuBLAS."""
    dirs = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *site.getsitepackages()]
    return [d for d in dict.fromkeys(dirs) if _SAFE_PATH.fullmatch(d) and Path(d).is_dir()]


# ---------------------------------------------------------------- files


def _write(path: Path, text: str, manifest: Manifest) -> None:
    """Write only if the content changed (keeps Ninja's rebuilds incremental)."""
    if path.exists() and path.read_text() == text:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    manifest.written.append(str(path))


NAME_PARTS_H = "name_parts.h"  # the harness header rendered from benanza.apis.names


def name_parts_header(env: jinja2.Environment | None = None) -> str:
    """``benanza/name_parts.h``: the pieces of engine-config and cuBLASLt names, from Python's one spelling."""
    context = names.header_context()
    check_plain(context)
    return (env or environment()).get_template(f"{NAME_PARTS_H}.j2").render(**context)


def _copy_harness(out: Path, manifest: Manifest, env: jinja2.Environment) -> None:
    src = paths.csrc_dir() / "benanza"
    for f in sorted(src.iterdir()):
        if f.is_file() and f.suffix in (".h", ".cuh", ".cu"):
            _write(out / "csrc" / "benanza" / f.name, f.read_text(), manifest)
    _write(out / "csrc" / "benanza" / NAME_PARTS_H, name_parts_header(env), manifest)


def _shallow_fields(b: Benchmark) -> dict[str, Any]:
    """``dataclasses.asdict`` of a Benchmark (plain strings), without its deep copy (26 000 calls for the zoo)."""
    return {f.name: getattr(b, f.name) for f in dataclasses.fields(b)}


def _manifest_entries(plan: Plan, manifest: Manifest) -> None:
    for job in plan.jobs:
        manifest.jobs.append(dataclasses.asdict(ManifestJob(
            job.executable, job.index, job.key, job.api.value, job.precision.value, job.math, job.fusion.value,
            job.layout, job.fields.shapes, list(job.fields.algorithms))))
        for b in job.benchmarks():
            if b.algorithm != "*":
                manifest.benchmarks.append({**_shallow_fields(b), "name": b.name(),
                                            "executable": job.executable, "job": job.index})
    seen: set[str] = set()
    for model in plan.models:
        for layer in model.layers:
            if layer.key in seen:
                continue
            seen.add(layer.key)
            manifest.layers.append({
                "key": layer.key, "op": layer.op, "attrs": layer.attrs,
                "shapes": {"inputs": [list(t.shape) for t in layer.inputs],
                           "outputs": [list(t.shape) for t in layer.outputs]},
                "flops": layer.flops, "macs": layer.macs,
                "bytes_read": layer.bytes_read, "bytes_written": layer.bytes_written})
        manifest.models.append({
            "name": model.name, "path": model.path, "batch": model.batch,
            "layers": [{"index": layer.index, "name": layer.name, "key": layer.key} for layer in model.layers],
            "edges": sorted([int(a), int(b)] for a, b in model.graph.edges),
            "fusions": [{"key": getattr(f, "key", ""), "pattern": f.pattern, "layers": list(f.layers)}
                        for f in model.fusions]})


def generate(plan: Plan, out_dir: str | Path, command_line: str) -> Manifest:
    """Write the benchmark project for ``plan`` into ``out_dir``; returns its manifest."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise BenanzaError(f"{out}: exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
        return _write_project(plan, out, command_line)
    except OSError as exc:  # a parent that is a file, /proc, a read-only or full disk: one line
        where = exc.filename or out
        raise BenanzaError(f"{out}: cannot write the project ({exc.strerror}: {where})") from None


def _write_project(plan: Plan, out: Path, command_line: str) -> Manifest:
    env = environment()
    manifest = Manifest(generated_by=command_line)
    executables = plan.executables()
    for exe, jobs in executables.items():
        try:
            source = render_source(env, jobs, command_line)
        except jinja2.TemplateNotFound as exc:
            raise BenanzaError(f"{paths.templates_dir() / exc.name}: template missing for {jobs[0].api.value}") \
                from None
        _write(out / "src" / f"{exe}.cu", source, manifest)
        manifest.executables[exe] = {"api": jobs[0].api.value, "num_jobs": len(jobs), "source": f"src/{exe}.cu"}
    for stale in (out / "src").glob("bench_*.cu") if (out / "src").is_dir() else ():
        if stale.stem not in executables:
            stale.unlink()
    _copy_harness(out, manifest, env)
    _write(out / "CMakeLists.txt", (paths.templates_dir() / "CMakeLists.txt").read_text(), manifest)
    host_only = sorted(exe for exe, jobs in executables.items() if REGISTRY[jobs[0].api].host_only)
    frontend = sorted(exe for exe, jobs in executables.items() if REGISTRY[jobs[0].api].family is ApiFamily.GRAPH)
    cmake = env.get_template("benchmarks.cmake.j2").render(command=command_line, executables=sorted(executables),
                                                           host_only=host_only, frontend=frontend,
                                                           site_dirs=site_dirs())
    _write(out / "benchmarks.cmake", cmake, manifest)
    _manifest_entries(plan, manifest)
    # compact: an indented dump goes through json's pure-Python encoder (half of generate's time for the zoo)
    _write(out / MANIFEST, json.dumps(manifest.to_dict(), separators=(",", ":")) + "\n", manifest)
    return manifest
