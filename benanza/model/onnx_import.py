"""ONNX at the edge: the only module of the model IR that imports ``onnx`` (the capture's
``profile.materialize`` and ``profile.capture`` do too: they run models, never the IR).

``load_model`` turns one ``.onnx`` file into a ``Model`` of layers with concrete
shapes: it folds constants (``fold``), runs ONNX shape inference once per round
on a light copy of the graph (weights declared by shape, not copied), normalizes
attributes (``attrs``), prices each layer (``costs``) and builds the DAG and the
fusion candidates (``graph``).

Old IR versions (the zoo's light models are IR 3) list every weight as a graph
input that is *also* an initializer or the output of a ``ConstantOfShape`` node:
such inputs are constants.  Only inputs that nothing produces or initializes are
data inputs; their leading dimension (and any dim named like it) is the batch.

Today's exporters (torch.onnx TorchScript and dynamo, Hugging Face models) leave the
batch and sequence dims symbolic and compute reshape targets from them
(Shape -> Gather -> Concat -> Reshape): ``--seq-len`` gives the other symbolic dims a
value, then rounds of onnx shape inference (with data propagation) and constant
folding resolve every chain; the exporter's own value_info is re-inferred.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import numpy_helper

from benanza.errors import BenanzaError
from benanza.library import OP_APIS
from benanza.model import attrs as attr_rules
from benanza.model import costs, graph, validate
from benanza.model.layer import Layer, Model, Tensor
from benanza.model.onnx_shapes import (  # noqa: F401 (_Consts, _inference_proto: importable here as before)
    DTYPES,
    _attr_values,
    _Consts,
    _dtype_name,
    _first_line,
    _inference_proto,
    _resolve,
    _Resolved,
    _topo_nodes,
    _used_names,
)

# --- reading ---------------------------------------------------------------------------


def _read(path: Path) -> onnx.ModelProto:
    """Parse the file (external data from its directory) or say in one line why not."""
    try:
        proto = onnx.load(str(path))
    except DecodeError:
        raise BenanzaError(f"{path}: not an ONNX model (the protobuf does not parse: truncated or garbage)") from None
    except Exception as exc:  # external data missing, unreadable file, ...
        raise BenanzaError(f"{path}: cannot load ONNX model: {_first_line(exc)}") from None
    if not proto.HasField("graph") or not proto.graph.node:
        raise BenanzaError(f"{path}: not an ONNX model (no graph nodes)")
    return proto


def _opset(proto: onnx.ModelProto) -> int:
    return next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), 1)


def _plain(value: Any) -> Any:
    """JSON-safe attribute values for the layer IR."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


# --- batch -----------------------------------------------------------------------------


def _data_inputs(proto: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    g = proto.graph
    constant = {t.name for t in g.initializer} | {o for n in g.node for o in n.output}
    return [v for v in g.input if v.name not in constant]


def _leading_dim(v: onnx.ValueInfoProto) -> int | None:
    dims = v.type.tensor_type.shape.dim
    return int(dims[0].dim_value) if dims and dims[0].HasField("dim_value") else None


def _dim_symbols(data_inputs: list[onnx.ValueInfoProto]) -> set[str]:
    """The names of the batch dimension: every symbol that appears at axis 0 of a data input."""
    out = set()
    for v in data_inputs:
        dims = v.type.tensor_type.shape.dim
        if dims and dims[0].HasField("dim_param"):
            out.add(dims[0].dim_param)
    return out


def _set_dims(data_inputs: list[onnx.ValueInfoProto], batch: int, seq_len: int | None, label: str) -> None:
    """Give every data input a static shape: ``batch`` at axis 0 and wherever the batch's symbol appears,
    ``seq_len`` for every other symbolic dimension (a sequence length: exporters name it freely)."""
    batch_symbols = _dim_symbols(data_inputs)
    for v in data_inputs:
        tt = v.type.tensor_type
        if not v.type.HasField("tensor_type") or not tt.HasField("shape"):
            raise BenanzaError(f"{label}: input '{v.name}' has no tensor shape")
        for axis, d in enumerate(tt.shape.dim):
            if axis == 0 or (d.HasField("dim_param") and d.dim_param in batch_symbols):
                d.Clear()
                d.dim_value = batch
            elif not d.HasField("dim_value"):
                if seq_len is None:
                    raise BenanzaError(f"{label}: input '{v.name}' has dynamic dimension '{d.dim_param or '?'}' at "
                                       f"axis {axis} with no value; give it with --seq-len")
                d.Clear()
                d.dim_value = seq_len


def _schemaless_value_info(proto: onnx.ModelProto, nodes: list[onnx.NodeProto], old: int | None,
                           new: int) -> list[onnx.ValueInfoProto]:
    """Declared shapes are kept only where ONNX cannot infer them (the rest is re-inferred).

    Those are outputs of ops without a schema (custom domains); their leading dim
    follows the batch when it was the old batch (or dynamic).
    """
    schemaless = {o for n in nodes if not onnx.defs.has(n.op_type, n.domain) for o in n.output}
    kept = []
    for v in proto.graph.value_info:
        if v.name not in schemaless:
            continue
        v = onnx.ValueInfoProto.FromString(v.SerializeToString())
        dims = v.type.tensor_type.shape.dim
        if dims and (not dims[0].HasField("dim_value") or dims[0].dim_value == old):
            dims[0].Clear()
            dims[0].dim_value = new
        kept.append(v)
    return kept


def _repoint_reshapes(proto: onnx.ModelProto, nodes: list[onnx.NodeProto], resolved: _Resolved,
                      old: int, new: int) -> None:
    """Reshape shape constants whose leading entry is the old batch get the new batch.

    The zoo files hard-code batch 1 in them.  Each such Reshape gets its own new
    initializer (the old one may be shared); anything else that hard-codes the batch
    is caught by the element-count check after re-inference.
    """
    taken = {t.name for t in proto.graph.initializer}
    for i, node in enumerate(nodes):
        if i in resolved.folded or node.op_type != "Reshape" or len(node.input) < 2:
            continue
        data, target = node.input[0], node.input[1]
        if data in resolved.consts or target not in resolved.consts:
            continue
        value = resolved.consts.value(target).reshape(-1).astype(np.int64)
        in_shape = resolved.shapes.get(data)
        if value.size and int(value[0]) == old and in_shape and in_shape[0] == old:
            value = value.copy()
            value[0] = new
            name = f"{target}__batch{new}"
            while name in taken:
                name += "_"
            taken.add(name)
            proto.graph.initializer.append(numpy_helper.from_array(value, name))
            node.input[1] = name


# --- layers ----------------------------------------------------------------------------


def _tensor(name: str, r: _Resolved) -> Tensor:
    if name in r.consts:
        return Tensor(name, r.consts.shape(name), r.consts.dtype(name), constant=True)
    return Tensor(name, r.shapes[name], r.dtypes.get(name, "float32"))


def _layer(node: onnx.NodeProto, index: int, r: _Resolved, used: set[str], opset: int, label: str) -> Layer:
    default_domain = node.domain in ("", "ai.onnx")
    op = node.op_type if default_domain else f"{node.domain}.{node.op_type}"
    name = node.name or f"{node.op_type}_{index}"
    raw = _attr_values(node)
    moved = attr_rules.VALUE_INPUTS.get(op, {})
    kept = attr_rules.INDEX_INPUTS.get(op, {})
    inputs = []
    values: dict[str, list[int]] = {}
    for pos, tname in enumerate(node.input):
        if not tname:
            continue
        if pos in kept and tname in r.consts and math.prod(r.consts.shape(tname)) == 1:
            values[kept[pos]] = [int(v) for v in r.consts.value(tname).reshape(-1)]
        if pos in moved and tname in r.consts:
            raw[moved[pos]] = r.consts.value(tname).tolist()
        else:
            inputs.append(_tensor(tname, r))
    outputs = [_tensor(o, r) for o in node.output if o and (o in r.shapes or o in used)]
    validate.check_layer(op, name, inputs, outputs, raw, label)  # before normalize divides by a stride
    try:
        attrs = attr_rules.normalize(op, raw, [t.shape for t in inputs], opset)
    except (KeyError, ValueError, IndexError, TypeError, ZeroDivisionError) as exc:
        raise BenanzaError(f"{label}: {op} node '{name}' has bad attributes: {_first_line(exc)}") from None
    attrs = {k: _plain(v) for k, v in attrs.items()}
    validate.check_layer(op, name, inputs, outputs, attrs, label)
    layer = Layer(name=name, op=op, inputs=inputs, outputs=outputs, attrs=attrs, index=index, values=values)
    cost = costs.layer_cost(op, inputs, outputs, attrs)
    layer.macs, layer.flops = cost.macs, cost.flops
    layer.bytes_read, layer.bytes_written = cost.bytes_read, cost.bytes_written
    return layer


def _check_reshape(layer: Layer, label: str, batch_changed: bool) -> None:
    if layer.op != "Reshape" or not layer.inputs or not layer.outputs:
        return
    src, dst = layer.inputs[0].shape, layer.outputs[0].shape
    if costs.numel(src) != costs.numel(dst):
        why = ("it hard-codes a shape that does not follow the batch (export the model at that batch, or give "
               "its PyTorch module with --torch-module PKG.MODULE:FACTORY to have it exported at --batch)"
               if batch_changed else "element counts differ")
        raise BenanzaError(f"{label}: Reshape node '{layer.name}' maps {list(src)} to {list(dst)}: {why}")


def load_model(path: str | Path, batch: int | None = None, seq_len: int | None = None) -> Model:
    """One ONNX file -> Model; ``batch`` replaces the leading dim of the data inputs, ``seq_len`` their
    other symbolic dims (a model with such dims and no ``seq_len`` is refused in one line)."""
    return _load(Path(path), batch, seq_len)[0]


def load_model_constants(path: str | Path, batch: int | None = None,
                         seq_len: int | None = None) -> tuple[Model, dict[str, np.ndarray]]:
    """``load_model`` plus the values of the folded constants its layers read (index tensors,
    position ids...): what a framework must be given to run the folded graph (``profile.capture``)."""
    model, resolved = _load(Path(path), batch, seq_len)
    names = {t.name for layer in model.layers for t in layer.inputs if t.constant}
    return model, {n: resolved.consts.value(n) for n in sorted(names) if n in resolved.consts}


def _load(path: Path, batch: int | None, seq_len: int | None) -> tuple[Model, _Resolved]:
    if not path.exists():
        raise BenanzaError(f"{path}: no such file")
    if path.is_dir():
        raise BenanzaError(f"{path}: is a directory (use load_models)")
    if batch is not None and batch < 1:
        raise BenanzaError(f"{path}: batch must be >= 1, got {batch}")
    if seq_len is not None and seq_len < 1:
        raise BenanzaError(f"{path}: sequence length must be >= 1, got {seq_len}")
    label = str(path)
    proto = _read(path)
    validate.check_proto(proto, _opset(proto), label)
    data_inputs = _data_inputs(proto)
    nodes = _topo_nodes(proto.graph, [v.name for v in data_inputs], label)
    old = _leading_dim(data_inputs[0]) if data_inputs else None
    target = batch if batch is not None else (old or 1)
    if old is not None and target != old:
        at_old_inputs = [onnx.ValueInfoProto.FromString(v.SerializeToString()) for v in data_inputs]
        _set_dims(at_old_inputs, old, seq_len, label)
        at_old = _resolve(proto, nodes, at_old_inputs, list(proto.graph.value_info), label)
        _repoint_reshapes(proto, nodes, at_old, old, target)
    # declared shapes are re-inferred (exporters write symbolic or stale ones), except where no schema can
    declared = _schemaless_value_info(proto, nodes, old, target)
    _set_dims(data_inputs, target, seq_len, label)
    resolved = _resolve(proto, nodes, data_inputs, declared, label)

    opset = _opset(proto)
    used = _used_names(proto)
    layers: list[Layer] = []
    problems: list[str] = []
    for i, node in enumerate(nodes):
        if i in resolved.folded:
            continue
        layer = _layer(node, len(layers), resolved, used, opset, label)
        _check_reshape(layer, label, target != old)
        if layer.op not in OP_APIS:
            problems.append(f"{label}: op '{layer.op}' (node '{layer.name}') has no library mapping")
        layers.append(layer)
    outputs = {o.name for o in proto.graph.output}
    return Model(name=path.stem, path=label, batch=target, layers=layers, graph=graph.build_graph(layers),
                 fusions=graph.find_fusions(layers, outputs), problems=problems), resolved


def model_files(path: str | Path) -> list[Path]:
    """The ONNX files a path names: itself, or every ``*.onnx`` in a directory (sorted)."""
    path = Path(path)
    if not path.exists():
        raise BenanzaError(f"{path}: no such file or directory")
    if not path.is_dir():
        return [path]
    files = sorted(p for p in path.glob("*.onnx") if p.is_file())
    if not files:
        raise BenanzaError(f"{path}: directory has no *.onnx files")
    return files


def load_models(path: str | Path, batch: int | None = None,
                seq_len: int | None = None) -> tuple[list[Model], list[str]]:
    """Every model a path names, plus one error line per file that could not be loaded.

    A directory with one bad file still yields all the others; a single bad file
    (or a missing path, or an empty directory) raises BenanzaError.
    """
    files = model_files(path)
    if len(files) == 1 and not Path(path).is_dir():
        return [load_model(files[0], batch, seq_len)], []
    models, errors = [], []
    for f in files:
        try:
            models.append(load_model(f, batch, seq_len))
        except BenanzaError as exc:
            errors.append(str(exc))
    return models, errors
