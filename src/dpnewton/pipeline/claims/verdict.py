"""A verdict on one claim in one setting, and the outcomes it can take."""

from __future__ import annotations

import math
from dataclasses import dataclass

REPRODUCED, PARTLY, NOT, NA = "reproduced", "partly", "not reproduced", "not evaluable"


@dataclass(frozen=True)
class Verdict:
    """Outcome of a verdict rule: ``verdict`` (one of REPRODUCED, PARTLY, NOT, NA), our numbers as
    text (``ours``), the rule's reading of them (``reason``), and the counts or ratio a rule decided on."""

    verdict: str
    ours: str = ""
    reason: str = ""
    wins: int | None = None
    ties: int | None = None
    n: int | None = None
    ratio: float | None = None

    def row(self) -> dict:
        """The columns a verdict contributes to a report row."""
        return {"ours": self.ours, "verdict": self.verdict, "reason": self.reason}


def format_number(x, digits=3) -> str:
    """``x`` to ``digits`` significant digits; ``n/a`` for None or NaN, ``inf`` / ``-inf``."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a" if x is None or math.isnan(x) else ("inf" if x > 0 else "-inf")
    return f"{x:.{digits}g}"
