"""The framework's own execution, from a profile bundle, as an ``Execution`` the replay plans (docs/REPLAY.md).

Why: ``benanza replay --profile BUNDLE`` runs what the framework ran, call for call, beside the best
execution, so replay(as-executed) - replay(best) is the realized value of the advice with no framework
involved (issue 37). The profile mapping (``profile.mapping``) already knows each layer's library call as
the logs show it (API, algorithm or engine config, precision, layout, fusion) and which layers ran inside
another's call (``LayerProfile.fused_into``: ONNX Runtime's folded BatchNormalization). The groups here
charge exactly the database rows of those calls (``choose.executed_row``, the as-executed policy's own
lookup), in the framework's grouping: a fused call where it fused, separate calls where it did not, a
conv's separately logged bias add as its own call. The plan is then made by ``replay._Builder`` exactly
as the best execution's is.

Layers the framework ran with kernels of its own (no library call in the logs: ONNX Runtime's ReLU and
Add, PyTorch's pooling and fp16 BatchNormalization) have no call to replay: each is a group of its own,
as the framework ran it, charged as the bound charges a lone layer (its bytes at the copy roofline, or a
measured call when cheaper) and replayed as the best execution replays such a group (benanza's kernel or
the fastest measured call; the step's note says so). A layer whose logged call has no measured row, or a
compute layer with no call at all, is refused in one line naming the layer and the call: never replaced
by the best row.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from benanza.analyze.choose import Miss, MissingReason, RooflineRow, executed_row
from benanza.analyze.dag import contract, critical_path, layer_graph
from benanza.analyze.execution import Coster, Execution, Group, GroupKind, describe_row, is_alias
from benanza.analyze.folding import COMPUTE_OPS, tensor_consumers
from benanza.analyze.inputs import Inputs
from benanza.analyze.peaks import effective_ceilings
from benanza.errors import BenanzaError
from benanza.generate.replay import ReplayPlan
from benanza.library import Fusion
from benanza.model.layer import Layer
from benanza.records import ExecutedCall, LayerProfile, Result

AS_EXECUTED = "as-executed"
BEST = "best"
OWN_KERNEL = "framework kernel"  # a Group.call prefix: the framework ran the layer with a kernel of its own


def _call_text(call: ExecutedCall) -> str:
    """The call as the logs show it, for a refusal."""
    fusion = "" if call.fusion == Fusion.NONE.value else f" [{call.fusion}]"
    layout = f" {call.layout}" if call.layout else ""
    return f"{call.api} / {call.algorithm} / {call.precision}{fusion}{layout}"


def _refuse(model: str, layer: Layer, what: str) -> BenanzaError:
    return BenanzaError(f"{model}: layer {layer.name!r} ({layer.op}): {what}; the as-executed replay runs the "
                        "framework's own calls only (docs/REPLAY.md, 'The as-executed replay')")


def _rows(layer: Layer, lp: LayerProfile, inputs: Inputs) -> tuple[Result, ...]:
    """The measured rows of the layer's logged calls, in call order (the call, then its extra calls)."""
    assert lp.executed is not None
    rows = []
    for call in (lp.executed, *lp.extra):
        row = executed_row(call, layer.key, inputs)
        if isinstance(row, Miss):
            why = row.reason.value + (f": {row.detail.rsplit(': ', 1)[-1]}" if row.reason is MissingReason.NONE_OK
                                      else "")
            raise _refuse(inputs.model.name, layer, f"its executed call {_call_text(call)} has no measured row ({why})")
        if isinstance(row, RooflineRow):
            raise _refuse(inputs.model.name, layer, f"its executed call {_call_text(call)} is a framework kernel "
                          "charged its bytes (an ONNX Runtime contrib node's member): no call to replay")
        rows.append(row)
    return tuple(rows)


def _call_group(layer: Layer, members: list[int], rows: tuple[Result, ...], inputs: Inputs) -> Group:
    """The framework's call for ``layer`` and the layers it ran inside it (``members``): a fused call covers
    its fusion candidate's layers and folds the rest; a plain call folds every member (BatchNormalization
    folded into the conv's weights)."""
    main = rows[0]
    covered = tuple(sorted({layer.index, *members}))
    ms = sum(r.median_ms or 0.0 for r in rows)
    call = describe_row(main) + "".join(f" + {r.api}" for r in rows[1:])
    if main.fusion == Fusion.NONE.value:
        return Group(covered, GroupKind.CALL, ms, call, folded=tuple(members), rows=rows)
    cand = next((f for f in inputs.model.fusions if f.key == main.layer_key and f.pattern == main.fusion), None)
    if cand is None:
        raise _refuse(inputs.model.name, layer, f"its executed fused call {call} matches no fusion candidate")
    folded = tuple(i for i in members if i not in cand.layers)
    return Group(covered, GroupKind.FUSED, ms, call, folded=folded, fusion=main.fusion, rows=rows)


def _homes(inputs: Inputs) -> dict[int, int]:
    """Each layer the framework ran inside another's call (``fused_into``, no call of its own) -> the call it
    is charged with: the call its input comes from where that is a call (DenseNet's scale-shift Mul and Add
    after a BatchNormalization that ONNX Runtime ran as a call of its own, which the mapping puts in the conv
    before it), else the one the mapping names. Data flow decides: a group that read a later call's output
    would have no order to run in."""
    model, layers = inputs.model, inputs.profile.layers if inputs.profile is not None else {}
    producer = {t.name: layer.index for layer in model.layers for t in layer.outputs}
    home: dict[int, int] = {}
    for layer in model.layers:  # topological order: a member's producer is placed before it
        lp = layers.get(layer.index)
        if lp is None or lp.fused_into is None or lp.executed is not None:
            continue
        called = [home.get(p, p) for t in layer.inputs if not t.constant and (p := producer.get(t.name)) is not None]
        called = [p for p in called if (c := layers.get(p)) is not None and c.executed is not None]
        home[layer.index] = lp.fused_into if lp.fused_into in called or not called else called[0]
    return home


def executed_execution(inputs: Inputs) -> tuple[Execution, Inputs]:
    """The framework's execution of ``inputs.model`` as its profile shows it (see the module doc), costed
    with the same ceilings as the best execution (``replay.best_execution``)."""
    model, prof = inputs.model, inputs.profile
    if prof is None:
        raise BenanzaError(f"{model.name}: the as-executed replay needs a profile bundle (--profile)")
    ceil, _notes = effective_ceilings(model, inputs)
    inputs = replace(inputs, ceilings=ceil)
    coster = Coster(model, inputs, inputs.constraints, ceil)
    consumers = tensor_consumers(model)
    inside: dict[int, list[int]] = defaultdict(list)  # head -> layers the framework ran inside its call
    for member, head in _homes(inputs).items():
        inside[head].append(member)
    groups: list[Group] = []
    for layer in model.layers:
        lp = prof.layers.get(layer.index)
        if lp is not None and lp.fused_into is not None and lp.executed is None:
            head = prof.layers.get(lp.fused_into)
            if head is None or head.executed is None:
                raise _refuse(model.name, layer, f"it ran inside layer {model.layers[lp.fused_into].name!r}, "
                              "which the profile shows no library call of")
            continue  # charged with its head
        if lp is not None and lp.executed is not None:
            groups.append(_call_group(layer, sorted(inside[layer.index]), _rows(layer, lp, inputs), inputs))
        elif is_alias(layer, consumers):
            groups.append(Group((layer.index,), GroupKind.ALIAS, 0.0))
        elif layer.op in COMPUTE_OPS:
            raise _refuse(model.name, layer, "the profile shows no library call of it (nothing to replay)")
        else:  # the framework's own kernel: charged and replayed as the bound does a lone layer
            g = coster.memory(layer)
            if g is None:
                raise _refuse(model.name, layer, "a framework kernel of its own and no measured bandwidth to "
                              "charge it")
            # no rows: replayed as a roofline group (benanza's kernel or a stand-in call, ROOFLINE_NOTE), never
            # as if the framework had made the call a measured row names
            groups.append(replace(g, call=f"{OWN_KERNEL}: {g.call}", rows=()))
    graph = layer_graph(model.graph, (layer.index for layer in model.layers))
    contracted = contract(graph, [g.layers for g in groups if len(g.layers) > 1])
    if contracted is None:
        raise BenanzaError(f"{model.name}: the profile's fused calls form a cycle in the layer graph")
    weights = {g.layers[0]: g.ms for g in groups}
    par, _ = critical_path(contracted, weights)
    exe = Execution(seq_ms=sum(weights.values()), par_ms=par, groups=tuple(groups), graph=contracted,
                    unmeasured=tuple(sorted(coster.unmeasured.items())),
                    precisions=frozenset(inputs.constraints.precisions))
    return exe, inputs


def own_kernel(group: Group) -> bool:
    """Whether the framework ran this group with a kernel of its own (no library call to replay)."""
    return group.call.startswith(OWN_KERNEL)


def executed_plan(inputs: Inputs) -> ReplayPlan:
    """The replay plan of the framework's execution (``executed_execution``), made by the best plan's builder."""
    from benanza.analyze.replay import replay_plan

    exe, inputs = executed_execution(inputs)
    return replay_plan(inputs, exe, AS_EXECUTED)
