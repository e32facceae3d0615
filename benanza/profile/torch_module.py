"""A PyTorch user's own ``nn.Module`` as a model to profile: ``benanza profile --torch-module pkg.module:factory``.

The factory (called with no arguments, or with ``batch=`` when it takes one) returns the
module, or ``(module, example_inputs)``; a module alone must carry ``example_inputs``.  The
module is built with its own (random) initialization and put in eval mode, exported to ONNX
with the TorchScript exporter, whose node names carry the module path
(``/layer1/layer1.0/conv1/Conv``), and run natively under the profiler with one
``benanza.node:<module path>`` range per module: the mapping gives each range the layers
whose node scope is that module call (``module_of_node``, ``module_spans``), so kernels reach
layers through the module hierarchy and the ATen ops inside each call, with no conversion back
from ONNX.

Every failure (a bad spec, an import error, a factory that raises or returns something else,
an export failure) is one BenanzaError line naming the spec.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benanza.errors import BenanzaError

SPEC = re.compile(r"^([A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*):([A-Za-z_]\w*)$")
EXPORT_OPSET = 17  # the TorchScript exporter's opset: the one whose node names carry module scopes


@dataclass(frozen=True)
class ModuleSpec:
    """``pkg.module:factory``, checked for form only (nothing imported)."""

    module: str
    factory: str

    def __str__(self) -> str:
        return f"{self.module}:{self.factory}"


def parse_spec(spec: str) -> ModuleSpec:
    """The spec's parts, or a one-line error saying what form it must take."""
    m = SPEC.match(spec.strip())
    if m is None:
        raise BenanzaError(f"--torch-module {spec!r}: expected pkg.module:factory (a dotted module path, a colon, "
                           "a function name)")
    return ModuleSpec(m.group(1), m.group(2))


def build(spec: ModuleSpec, batch: int | None = None) -> tuple[Any, tuple[Any, ...]]:
    """Import the factory, call it and return (module in eval mode, example inputs as a tuple)."""
    import torch

    try:
        mod = importlib.import_module(spec.module)
    except Exception as exc:  # ImportError, or whatever the module raises at import
        raise BenanzaError(f"--torch-module {spec}: cannot import {spec.module}: {_line(exc)}") from None
    factory = getattr(mod, spec.factory, None)
    if not callable(factory):
        raise BenanzaError(f"--torch-module {spec}: {spec.module} has no callable {spec.factory!r}")
    try:
        takes_batch = "batch" in inspect.signature(factory).parameters
    except (TypeError, ValueError):
        takes_batch = False
    try:
        made = factory(batch=batch) if takes_batch and batch is not None else factory()
    except Exception as exc:  # the user's code: any failure is one line
        raise BenanzaError(f"--torch-module {spec}: the factory raised {_line(exc)}") from None
    module, inputs = made if isinstance(made, tuple) and len(made) == 2 else (made, None)
    if not isinstance(module, torch.nn.Module):
        raise BenanzaError(f"--torch-module {spec}: the factory returned {type(module).__name__}, not an "
                           "nn.Module (or a (module, example_inputs) pair)")
    inputs = inputs if inputs is not None else getattr(module, "example_inputs", None)
    if inputs is None:
        raise BenanzaError(f"--torch-module {spec}: no example inputs (return (module, example_inputs) or set "
                           "module.example_inputs)")
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    if not inputs or not all(isinstance(t, torch.Tensor) for t in inputs):
        raise BenanzaError(f"--torch-module {spec}: the example inputs must be tensors")
    return module.eval(), inputs


def export(module: Any, inputs: tuple[Any, ...], path: Path, spec: ModuleSpec | str) -> Path:
    """The module as ONNX (TorchScript exporter, module-path node names), or a one-line error.

    Exported in the module's own (eval) mode with ``TrainingMode.PRESERVE``: the exporter's
    EVAL mode folds each BatchNorm into the conv before it, but eager PyTorch runs the BatchNorm as
    a kernel of its own, and the analysis must see that layer to map its kernel and price folding it."""
    import warnings

    import torch

    names = [f"input_{i}" for i in range(len(inputs))]
    try:
        with torch.no_grad(), warnings.catch_warnings(), _mha_fastpath(False):
            warnings.filterwarnings("ignore", message=".*constant folding.*training.*")  # eval modules: no training ops
            torch.onnx.export(module, inputs, str(path), input_names=names, opset_version=EXPORT_OPSET,
                              dynamo=False, do_constant_folding=True, training=torch.onnx.TrainingMode.PRESERVE)
    except Exception as exc:  # the exporter raises many types; each means "this module does not export"
        raise BenanzaError(f"--torch-module {spec}: export to ONNX failed: {_line(exc)}") from None
    return path


def module_ranges(module: Any) -> None:
    """Wrap every module's forward (the root's too, as "") in a ``benanza.node:<module path>`` range."""
    import torch

    from benanza.profile.ranges import NODE_RANGE

    stack: list[Any] = []

    def pre(name: str) -> None:
        rf = torch.profiler.record_function(NODE_RANGE + name)
        rf.__enter__()
        stack.append(rf)

    def post(*_: Any) -> None:
        if stack:
            stack.pop().__exit__(None, None, None)

    for name, child in module.named_modules():
        child.register_forward_pre_hook(lambda m, i, n=name: pre(n))
        child.register_forward_hook(post)


CALL_SUFFIX = re.compile(r"^(.*)_(\d+)$")  # the exporter's scope of a module's second, third... call


def module_of_node(node_name: str, modules: Collection[str] | None = None) -> str | None:
    """The module path of a TorchScript-exported node (``/layer1/layer1.0/conv1/Conv`` -> ``layer1.0.conv1``).

    The exporter writes one scope segment per module it entered, each the module's qualified name
    from its last non-numeric atom on (torch.onnx's ``_unqualified_variable_name``): ``conv1`` for
    ``layer1.0.conv1`` but ``features.0.0`` for ``features.0.0`` (a Sequential in a Sequential), so
    a segment either extends its parent's path or restates the parent's tail plus indices; a
    module's later calls get ``_1``, ``_2``... (``relu_2``: ResNet's third ReLU of a block).
    ``modules`` (the module paths that ran: the trace's ranges) settles a segment that fits two
    readings, a call suffix, and a parent that called a grandchild directly; without it a
    segment is read as written. None for a node outside any module."""
    if not node_name.startswith("/"):
        return None
    path = ""
    for seg in node_name.strip("/").split("/")[:-1]:
        path = _child_path(path, seg, modules)
    return path or None


def scope_of_node(node_name: str) -> str:
    """The node's scope as the exporter wrote it (one per call of its module): the name less its last part."""
    return node_name.rsplit("/", 1)[0] if node_name.startswith("/") else ""


def _child_path(parent: str, segment: str, modules: Collection[str] | None) -> str:
    """The qualified path of the module of scope ``segment`` entered from the module at ``parent``."""
    called = CALL_SUFFIX.match(segment)
    readings = [_readings(parent, segment)]
    if modules is None:
        return readings[0][0]
    if called:
        readings.append(_readings(parent, called.group(1)))
    for candidates in readings:
        for candidate in candidates:
            if candidate in modules:
                return candidate
    for seg in (segment, called.group(1) if called else ""):  # a grandchild called past its parent
        deeper = sorted((m for m in modules if seg and m.startswith(parent + ".") and m.endswith("." + seg)), key=len)
        if deeper:
            return deeper[0]
    return readings[0][0]


def _readings(parent: str, segment: str) -> list[str]:
    """The paths ``segment`` may stand for under ``parent``, the likelier first."""
    if not parent:
        return [segment]
    atoms, seg = parent.split("."), segment.split(".")
    last = max((i for i, a in enumerate(atoms) if not a.isnumeric()), default=0)
    tail = atoms[last:]
    joined = f"{parent}.{segment}"
    if len(seg) > len(tail) and seg[:len(tail)] == tail and all(a.isnumeric() for a in seg[len(tail):]):
        return [".".join(atoms[:last] + seg), joined]
    return [joined]


@contextlib.contextmanager
def _mha_fastpath(enabled: bool) -> Iterator[None]:
    """``nn.MultiheadAttention``'s inference fast path (``aten::_native_multi_head_attention``) switched
    for the export: it has no ONNX form (torchvision's ViT failed to export), and the decomposed
    graph is the layers the fused kernels compute; the native run keeps it, and its kernels land in
    the attention module's range like any module's own work."""
    import torch

    mha = getattr(torch.backends, "mha", None)
    if mha is None:
        yield
        return
    before = mha.get_fastpath_enabled()
    mha.set_fastpath_enabled(enabled)
    try:
        yield
    finally:
        mha.set_fastpath_enabled(before)


def _line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")
