"""Wall seconds per named phase: where a command's time goes, measured per phase rather than guessed
(issue 32). The profile's capture records them in meta.json (``extra.capture_s``), the pipeline in
``--timings``."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class Phases:
    """Wall seconds per named phase, in order; a phase lapped twice adds up."""

    times: dict[str, float] = field(default_factory=dict)
    mark: float = field(default_factory=time.perf_counter)

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.times[name] = round(self.times.get(name, 0.0) + now - self.mark, 3)
        self.mark = now
