"""Progress of a long run: "update t of T" on the ``dpnewton.progress`` logger.

A run logs at INFO level at most once every :data:`EVERY_SECONDS` seconds of wall time, so a run
shorter than that says nothing. ``dpnewton run`` shows these lines on stderr; a library user turns them
on with ``logging.basicConfig(level=logging.INFO)`` (or a handler on ``dpnewton.progress``). The
lines carry the run's public identity and its step count only, nothing computed from the data.
"""

from __future__ import annotations

import logging
import time

EVERY_SECONDS = 5.0
LOGGER = logging.getLogger("dpnewton.progress")


class Progress:
    """Counts the updates of a run of ``total`` steps named ``what``; :meth:`step` after each update."""

    def __init__(self, what: str, total: int):
        self.what, self.total = what, int(total)
        self.started = time.perf_counter()
        self.next_report = self.started + EVERY_SECONDS

    def step(self, done: int) -> None:
        now = time.perf_counter()
        if now < self.next_report:
            return
        self.next_report = now + EVERY_SECONDS
        LOGGER.info("%s: update %d of %d (%.0f %%), %.0f s", self.what, done, self.total,
                    100.0 * done / max(self.total, 1), now - self.started)
