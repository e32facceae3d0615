"""Schedules and fusion contraction on the layer DAG (node weights = layer latencies).

The critical path itself (``LBL_par``) is ``benanza.model.graph.critical_path``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import networkx as nx

from benanza.model.graph import critical_path

__all__ = ["contract", "critical_path", "earliest_start", "lanes", "layer_graph"]


def earliest_start(graph: nx.DiGraph, weight: Mapping[int, float]) -> dict[int, tuple[float, float]]:
    """node -> (start, finish) when every node starts as soon as its inputs are ready."""
    times: dict[int, tuple[float, float]] = {}
    for node in nx.topological_sort(graph):
        start = max((times[p][1] for p in graph.predecessors(node)), default=0.0)
        times[node] = (start, start + weight.get(node, 0.0))
    return times


def layer_graph(graph: nx.DiGraph, indices: Iterable[int]) -> nx.DiGraph:
    """The model graph with every layer index present as a node (isolated layers included)."""
    g = nx.DiGraph()
    g.add_nodes_from(indices)
    g.add_edges_from(graph.edges)
    return g


def contract(graph: nx.DiGraph, groups: Iterable[tuple[int, ...]]) -> nx.DiGraph | None:
    """Graph with each group merged into its first node; None if that would make a cycle."""
    head = {n: n for n in graph.nodes}
    for group in groups:
        for member in group:
            head[member] = group[0]
    g = nx.DiGraph()
    g.add_nodes_from(set(head.values()))
    g.add_edges_from((head[u], head[v]) for u, v in graph.edges if head[u] != head[v])
    return g if nx.is_directed_acyclic_graph(g) else None


def lanes(intervals: Mapping[int, tuple[float, float]]) -> dict[int, int]:
    """Assign overlapping intervals to the fewest lanes (rows of a trace viewer), greedily."""
    lane_end: list[float] = []
    out: dict[int, int] = {}
    for node, (start, end) in sorted(intervals.items(), key=lambda kv: (kv[1][0], kv[0])):
        for i, busy_until in enumerate(lane_end):
            if busy_until <= start + 1e-12:
                lane_end[i] = end
                out[node] = i
                break
        else:
            lane_end.append(end)
            out[node] = len(lane_end) - 1
    return out
