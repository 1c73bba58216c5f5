"""Seeding: every random draw of a run comes from a Generator derived from the run's identity.

The identity is (dataset, algorithm, epsilon, seed index, T) plus an optional stream name. It is
hashed (SHA-256 of a canonical string) into the entropy of a ``numpy.random.SeedSequence``, so the
stream of a run does not depend on which other runs share its process, its batch or its order.
No global RNG is ever used.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np


def canonical_epsilon(epsilon: float) -> str:
    """Stable text form of epsilon: the shortest repr of the float (0.1 -> '0.1', 1 -> '1.0')."""
    return repr(float(epsilon))


@dataclass(frozen=True)
class RunIdentity:
    dataset: str
    algorithm: str
    epsilon: float
    seed: int
    iterations: int

    def key(self, stream: str = "main") -> str:
        return "|".join(["dpnewton-v1", self.dataset, self.algorithm, canonical_epsilon(self.epsilon),
                         str(int(self.seed)), str(int(self.iterations)), stream])

    def seed_sequence(self, stream: str = "main") -> np.random.SeedSequence:
        digest = hashlib.sha256(self.key(stream).encode()).digest()
        return np.random.SeedSequence(int.from_bytes(digest, "big"))

    def generator(self, stream: str = "main") -> np.random.Generator:
        return np.random.Generator(np.random.PCG64(self.seed_sequence(stream)))


def identity_generator(dataset: str, algorithm: str, epsilon: float, seed: int, iterations: int,
                       stream: str = "main") -> np.random.Generator:
    return RunIdentity(dataset, algorithm, epsilon, seed, iterations).generator(stream)
