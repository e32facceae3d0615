"""ONNX views as strided windows of their input: the elements a replay's strided copy selects.

Why: the bound charges a view (a Transpose, a Slice, a Split's parts, a Gather by one constant index)
nothing, its consumers reading it through strides (``execution.is_view``). The replay runs one as a
single strided copy (the ``permute`` step): each output is a window of the packed input, dims plus a
stride per dim and an element offset, the same three numbers for every op. One rule per op
(``VIEW_RULES``) computes them from the layer; anything a rule cannot express raises ``NotAWindow``
with the reason, which the planner turns into its one-line refusal.

A rule takes any window, not only a packed one, so a chain of views composes: a view of a pending view
is the rule applied to that view's window (offsets add, strides compose), and an alias that keeps the
element order (a Reshape, Squeeze, Unsqueeze, Flatten) is ``Window.reshaped`` where the dims it merges or
splits are contiguous in the window. A contiguous window (``Window.contiguous``) is its source's own
elements from its offset on: no copy at all.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benanza.model.layer import Layer

MAX_RANK = 8  # cuDNN's N-d tensor descriptors (CUDNN_DIM_MAX)


class NotAWindow(ValueError):
    """A view the strided copy cannot express (the message says why)."""


@dataclass(frozen=True)
class Window:
    """The elements of a packed source buffer a view reads: its dims, each dim's stride in source
    elements, and the element its first index reads."""

    dims: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0

    @classmethod
    def packed(cls, shape: tuple[int, ...]) -> Window:
        """The whole of a packed (row-major) tensor of ``shape``."""
        strides = [1] * len(shape)
        for i in range(len(shape) - 2, -1, -1):
            strides[i] = strides[i + 1] * int(shape[i + 1])
        return cls(tuple(int(d) for d in shape), tuple(strides))

    def permuted(self, perm: list[int]) -> Window:
        """Dim ``i`` of the result is dim ``perm[i]`` of this window (ONNX Transpose)."""
        if sorted(perm) != list(range(len(self.dims))):
            raise NotAWindow(f"perm {perm} is no permutation of {len(self.dims)} dims")
        return Window(tuple(self.dims[p] for p in perm), tuple(self.strides[p] for p in perm), self.offset)

    def reshaped(self, shape: tuple[int, ...]) -> Window:
        """The same elements in the same order as ``shape`` (an alias of the view): each group of dims it
        merges or splits must be contiguous in the window, else no window of the source holds the result."""
        shape = tuple(int(d) for d in shape)
        if math.prod(shape) != math.prod(self.dims):
            raise NotAWindow(f"a reshape of {list(self.dims)} to {list(shape)}")
        old = [(d, st) for d, st in zip(self.dims, self.strides, strict=True) if d != 1]
        new = [d for d in shape if d != 1]
        strides: list[int] = []
        o = n = 0
        while n < len(new):  # one group: old[o:oj] and new[n:nj] of equal products
            oj, nj, op, np_ = o + 1, n + 1, old[o][0], new[n]
            while op != np_:
                if op < np_:
                    op, oj = op * old[oj][0], oj + 1
                else:
                    np_, nj = np_ * new[nj], nj + 1
            if any(old[k][1] != old[k + 1][1] * old[k + 1][0] for k in range(o, oj - 1)):
                raise NotAWindow(f"a reshape of {list(self.dims)} to {list(shape)} merges dims not contiguous "
                                 "in the window")
            group = [old[oj - 1][1]]
            for d in reversed(new[n + 1:nj]):
                group.insert(0, group[0] * d)
            strides += group
            o, n = oj, nj
        it = iter(strides)
        return Window(shape, tuple(1 if d == 1 else next(it) for d in shape), self.offset)

    def contiguous(self) -> bool:
        """Whether the window is its source's elements from ``offset`` on, in order (dims of one ignored):
        a reader can take the source there as it is."""
        expect = 1
        for d, st in reversed([(d, st) for d, st in zip(self.dims, self.strides, strict=True) if d != 1]):
            if st != expect:
                return False
            expect *= d
        return True

    def row(self) -> dict[str, Any]:
        """The permute step's row: plain numbers only."""
        return {"dims": list(self.dims), "strides": list(self.strides), "offset": self.offset}


def _axis(value: Any, rank: int) -> int:
    axis = int(value)
    if not -rank <= axis < rank:
        raise NotAWindow(f"axis {axis} of a rank-{rank} input")
    return axis % rank


def _transpose(layer: Layer, w: Window) -> list[Window]:
    perm = layer.attrs.get("perm") or list(range(len(w.dims) - 1, -1, -1))
    return [w.permuted([int(p) for p in perm])]


def _slice(layer: Layer, w: Window) -> list[Window]:
    """ONNX Slice with constant starts, ends, axes and positive steps (clamped as ONNX clamps them)."""
    if "starts" not in layer.attrs or "ends" not in layer.attrs:
        raise NotAWindow("its starts and ends are not constants")
    starts, ends = layer.attrs["starts"], layer.attrs["ends"]
    axes = layer.attrs.get("axes", list(range(len(starts))))
    steps = layer.attrs.get("steps", [1] * len(starts))
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise NotAWindow("starts, ends, axes and steps of different lengths")
    dims, strides, offset = list(w.dims), list(w.strides), w.offset
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        a, step = _axis(axis, len(dims)), int(step)
        if step < 1:
            raise NotAWindow(f"step {step} (only positive steps are strided copies here)")
        d = dims[a]
        begin = min(max(int(start) + d if int(start) < 0 else int(start), 0), d)
        stop = min(max(int(end) + d if int(end) < 0 else int(end), 0), d)
        count = max(0, -(-(stop - begin) // step))
        if count == 0:
            raise NotAWindow("an empty slice")
        offset += begin * strides[a]
        dims[a], strides[a] = count, strides[a] * step
    return [Window(tuple(dims), tuple(strides), offset)]


def _split(layer: Layer, w: Window) -> list[Window]:
    """ONNX Split: consecutive parts along ``axis``, each as long as its output is there."""
    a = _axis(layer.attrs.get("axis", 0), len(w.dims))
    out, at = [], 0
    for t in layer.outputs:
        n = int(t.shape[a]) if len(t.shape) == len(w.dims) else -1
        if n < 1 or at + n > w.dims[a]:
            raise NotAWindow(f"output {len(out)} of shape {list(t.shape)} is no part of {list(w.dims)} on axis {a}")
        dims = (*w.dims[:a], n, *w.dims[a + 1:])
        out.append(Window(dims, w.strides, w.offset + at * w.strides[a]))
        at += n
    if at != w.dims[a]:
        raise NotAWindow(f"parts of {at} of the {w.dims[a]} on axis {a}")
    return out


def _gather(layer: Layer, w: Window) -> list[Window]:
    """ONNX Gather by one constant index (a select): the index's own shape in place of ``axis``."""
    index = layer.values.get("indices")
    if len(layer.inputs) < 2 or not layer.inputs[1].constant or index is None or len(index) != 1:
        raise NotAWindow("its index is no one-element constant")
    a = _axis(layer.attrs.get("axis", 0), len(w.dims))
    i = index[0] + w.dims[a] if index[0] < 0 else index[0]
    if not 0 <= i < w.dims[a]:
        raise NotAWindow(f"index {index[0]} of a dim of {w.dims[a]}")
    shape = tuple(int(d) for d in layer.inputs[1].shape)  # () for a scalar: the axis goes
    return [Window((*w.dims[:a], *shape, *w.dims[a + 1:]), (*w.strides[:a], *(w.strides[a],) * len(shape),
                                                          *w.strides[a + 1:]), w.offset + i * w.strides[a])]


# op -> its outputs as windows of its packed first input (generate.replay.VIEW_KINDS names their step kind)
VIEW_RULES: dict[str, Callable[[Layer, Window], list[Window]]] = {
    "Transpose": _transpose, "Slice": _slice, "Split": _split, "Gather": _gather}


def view_windows(layer: Layer, source: Window | None = None) -> list[Window]:
    """Each output of a view layer as a window of ``source`` (the input's own window where the input is a
    pending view; its packed whole when None), checked against the model's shapes."""
    rule = VIEW_RULES.get(layer.op)
    if rule is None:
        raise NotAWindow("no view rule for the op")
    shape = tuple(int(d) for d in layer.inputs[0].shape)
    if source is not None and source.dims != shape:
        raise NotAWindow(f"a source window of {list(source.dims)} for the input's {list(shape)}")
    windows = rule(layer, source or Window.packed(shape))
    outputs = [t for t in layer.outputs if t.name]
    if len(windows) != len(outputs):
        raise NotAWindow(f"{len(windows)} windows for {len(outputs)} outputs")
    for t, win in zip(outputs, windows, strict=True):
        if win.dims != tuple(int(d) for d in t.shape):
            raise NotAWindow(f"a window of {list(win.dims)} for the output's {list(t.shape)}")
        if not 1 <= len(win.dims) <= MAX_RANK or math.prod(win.dims) < 1:
            raise NotAWindow(f"an output of rank {len(win.dims)} (1 to {MAX_RANK} are copied)")
    return windows
