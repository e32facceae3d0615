"""The code generator: a Plan -> a self-contained CMake project of benchmark executables.

Layout of the generated directory::

    CMakeLists.txt      hand-written (templates/CMakeLists.txt), includes benchmarks.cmake
    benchmarks.cmake    generated: the executables and where to look for cuDNN/cuBLAS
    csrc/benanza/       copy of the C++ harness
    src/bench_<api>.cu  one source per API, rendered from apis.REGISTRY[api].template
    src/bench_<api>.jobs  its job table, read at run time (benanza/apis/job_table.py)
    manifest.json       what each executable's jobs are, and every benchmark they measure

A source depends on its API alone (template, precisions, the API's algorithms and job-table
columns), never on the jobs: every project that measures an API compiles the same source, which
the build cache (benanza/measure/build_cache.py) then builds once (issue 32). Templates get only plain
dicts of enum spellings and numbers; the jobs, model text included (layer keys), go to the job
table, percent-encoded, and never into C++.  Files are written only when their content changes,
so a rebuild after regeneration is incremental.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import site
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2

from benanza import paths
from benanza.apis import REGISTRY, job_table, names
from benanza.apis.base import ApiFamily
from benanza.apis.graph import engine_cells
from benanza.errors import BenanzaError
from benanza.generate.plan import Benchmark, Job, Plan
from benanza.library import ALGORITHM_TOLERANCE, PRECISIONS, Api, Precision
from benanza.records import MANIFEST, MANIFEST_SCHEMA, ManifestJob

# Strings allowed in a template context: hex keys and C/C++ or benanza enum spellings.
_SAFE_STR = re.compile(r"[A-Za-z0-9_+.\-]*")
# Directories baked into benchmarks.cmake as search hints.
_SAFE_PATH = re.compile(r"[A-Za-z0-9_+.,/@=\-]+")
# C++ names a template's column table spells (enum types and values, scoped or not).
_SAFE_CPP = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)*(::)?")
# The layouts a precision's row may have (cudnnTensorFormat_t without CUDNN_TENSOR_).
LAYOUTS = ("NCHW", "NHWC")


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


c_comment = job_table.comment_line  # text safe inside a // comment: printable ASCII, no backslash


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


# Every precision in Precision order in its preferred layout, then each precision in each other
# layout: the same list in every source (a job's ``precision`` column indexes it), so a source
# does not depend on which layouts its jobs use.
PRECISION_LAYOUTS: tuple[tuple[Precision, str], ...] = (
    *((p, _preferred_layout(p)) for p in Precision),
    *((p, layout) for p in Precision for layout in LAYOUTS if layout != _preferred_layout(p)))
PRECISION_INDEX: dict[tuple[Precision, str], int] = {pl: i for i, pl in enumerate(PRECISION_LAYOUTS)}


def precision_rows() -> list[dict[str, Any]]:
    """``PRECISION_LAYOUTS`` as the templates' rows (the layout, cudnnTensorFormat_t, comes with each)."""
    return [_precision_row(p, layout) for p, layout in PRECISION_LAYOUTS]


def precision_index(job: Job) -> int:
    """The job's row of ``precision_rows``: its precision's preferred layout, or for an API measured in
    more than one layout (``ApiDef.both_layouts``) the layout of the job."""
    layout = job.layout if REGISTRY[job.api].both_layouts and job.layout else _preferred_layout(job.precision)
    return PRECISION_INDEX[(job.precision, layout)]


def job_row(job: Job) -> dict[str, Any]:
    """One line of the job table, as the builder's row plus the key, precision row and fusion."""
    row = {"key": job.key, "precision": precision_index(job), "fusion": job.fusion.value, **job.fields.row}
    if "engines" in row:  # named engine configs (apis.graph.with_named_configs), as the table spells them
        row["engines"] = engine_cells(row["engines"])
    return row


def source_context(api: Api) -> dict[str, Any]:
    """What an API's template is rendered from: the same for every project (no job in it)."""
    spec = REGISTRY[api]
    if not spec.columns:
        raise BenanzaError(f"codegen: {api.value} has no job-table columns (ApiDef.columns)")
    algorithms = list(spec.algorithms)
    context = {"api": api.value, "executable": spec.executable, "precisions": precision_rows(),
               "algorithms": algorithms, "algorithm_tolerance": [ALGORITHM_TOLERANCE.get(a, 0.0) for a in algorithms]}
    # api is a library.Api value (e.g. "cudnn_frontend::graph::conv_fprop"), never model text
    check_plain({k: v for k, v in context.items() if k != "api"})
    return {**context, "columns": column_contexts(spec.columns, api.value)}


def column_contexts(columns: Sequence[job_table.Column], where: str) -> list[dict[str, Any]]:
    """A job table's columns as a template renders them (``_job_table.j2``), each name and enum
    spelling checked to be a C++ name and each vocabulary word plain text."""
    job_table.check_columns(columns, where)
    out = [c.context() for c in columns]
    for c in out:
        spelled = (c["name"], *c["enum_values"], *([c["ctype"]] if c["ctype"] else []))
        if any(not _SAFE_CPP.fullmatch(v) for v in spelled):
            raise BenanzaError(f"codegen: column {c['name']!r} of {where} spells something that is not a C++ name")
        check_plain(c["words"], f"column {c['name']}")
    return out


def render_source(env: jinja2.Environment, api: Api, command: str) -> str:
    """One executable's source: its API's template, which reads its jobs at run time."""
    return env.get_template(REGISTRY[api].template).render(command=command, **source_context(api))


def check_algorithms(jobs: list[Job]) -> None:
    """Every job measures algorithms its source compiles in (``ApiDef.algorithms``, where it has them)."""
    for job in jobs:
        compiled = REGISTRY[job.api].algorithms
        missing = [a for a in job.fields.algorithms if compiled and a not in compiled]
        if missing:
            raise BenanzaError(f"codegen: job {job.index} of {job.executable} measures {', '.join(missing)}, "
                               f"which the {job.api.value} template does not compile in (ApiDef.algorithms)")


def render_table(jobs: list[Job], command: str) -> str:
    """One executable's job table (benanza/apis/job_table.py): one line per job, in job order."""
    check_algorithms(jobs)
    api = jobs[0].api
    return job_table.render(api.value, REGISTRY[api].columns, [job_row(j) for j in jobs],
                            f"generated by benanza, do not edit: {command}")


def site_dirs() -> list[str]:
    """site-packages of the running Python, where the nvidia wheels keep cuDNN/cuBLAS."""
    dirs = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *site.getsitepackages()]
    return [d for d in dict.fromkeys(dirs) if _SAFE_PATH.fullmatch(d) and Path(d).is_dir()]


# ---------------------------------------------------------------- files


def write_file(path: Path, text: str, manifest: Manifest) -> None:
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


def copy_harness(out: Path, manifest: Manifest, env: jinja2.Environment) -> None:
    src = paths.csrc_dir() / "benanza"
    for f in sorted(src.iterdir()):
        if f.is_file() and f.suffix in (".h", ".cuh", ".cu"):
            write_file(out / "csrc" / "benanza" / f.name, f.read_text(), manifest)
    write_file(out / "csrc" / "benanza" / NAME_PARTS_H, name_parts_header(env), manifest)


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
            source = render_source(env, jobs[0].api, command_line)
        except jinja2.TemplateNotFound as exc:
            raise BenanzaError(f"{paths.templates_dir() / exc.name}: template missing for {jobs[0].api.value}") \
                from None
        write_file(out / "src" / f"{exe}.cu", source, manifest)
        write_file(out / "src" / f"{exe}{job_table.SUFFIX}", render_table(jobs, command_line), manifest)
        manifest.executables[exe] = {"api": jobs[0].api.value, "num_jobs": len(jobs), "source": f"src/{exe}.cu",
                                     "table": f"src/{exe}{job_table.SUFFIX}"}
    for suffix in (".cu", job_table.SUFFIX):
        for stale in (out / "src").glob(f"bench_*{suffix}") if (out / "src").is_dir() else ():
            if stale.name.removesuffix(suffix) not in executables:
                stale.unlink()
    copy_harness(out, manifest, env)
    write_file(out / "CMakeLists.txt", (paths.templates_dir() / "CMakeLists.txt").read_text(), manifest)
    host_only = sorted(exe for exe, jobs in executables.items() if REGISTRY[jobs[0].api].host_only)
    frontend = sorted(exe for exe, jobs in executables.items() if REGISTRY[jobs[0].api].family is ApiFamily.GRAPH)
    cmake = env.get_template("benchmarks.cmake.j2").render(command=command_line, executables=sorted(executables),
                                                           host_only=host_only, frontend=frontend,
                                                           site_dirs=site_dirs())
    write_file(out / "benchmarks.cmake", cmake, manifest)
    _manifest_entries(plan, manifest)
    # compact: an indented dump goes through json's pure-Python encoder (half of generate's time for the zoo)
    write_file(out / MANIFEST, json.dumps(manifest.to_dict(), separators=(",", ":")) + "\n", manifest)
    return manifest
