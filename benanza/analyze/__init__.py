"""The analyzer: pure functions from (model, measurements, profile) to tables with units.

``analyze(Inputs(...)) -> Report``; the writers in ``benanza.report`` only format it.
Definitions of every figure: docs/METRICS.md.
"""

from benanza.analyze.choose import Choice, Miss, MissingReason, Policy, Source, choose
from benanza.analyze.core import analyze
from benanza.analyze.inputs import Ceilings, Constraints, Inputs
from benanza.analyze.summary import Check, Summary
from benanza.analyze.tables import Report, Span, Table
from benanza.apis.base import ApiFamily
from benanza.records import ExecutedCall, KernelSpan, LayerProfile, OverheadKind, Profile, UnmappedWork

__all__ = [
    "ApiFamily", "Ceilings", "Check", "Choice", "Constraints", "ExecutedCall", "Inputs", "KernelSpan", "LayerProfile",
    "Miss", "MissingReason", "OverheadKind", "Policy", "Profile", "Report", "Source", "Span", "Summary", "Table",
    "UnmappedWork", "analyze", "choose",
]
