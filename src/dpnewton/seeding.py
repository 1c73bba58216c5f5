"""Seeding: every random draw of a run comes from the run's own ``numpy.random.Generator``.

Two sources, chosen by the run's ``seed``:

* an integer (the benchmark, the tests, ``--seed N``): the identity (dataset, algorithm, epsilon,
  seed index, T) plus a stream name is hashed (SHA-256 of a canonical string) into the entropy of
  a ``numpy.random.SeedSequence``, so a run's stream does not depend on which other runs share its
  process, its batch or its order. For benchmarking only: the noise is then a public function of
  the identity, and anyone who knows the seed can subtract it from the released model.
* ``None`` (the default of :func:`dpnewton.fit`, the estimator and ``dpnewton run``): fresh
  entropy from the operating system, ``SeedSequence()``. The run cannot be replayed, and its
  entropy is recorded nowhere.

No global RNG is ever used. numpy's Gaussian sampler works in floating point and is not hardened
against floating-point side channels (Mironov 2012, "On significance of the least significant bits
for differential privacy"); neither is any other part of this package.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np


def canonical_epsilon(epsilon: float) -> str:
    """Stable text form of epsilon: the shortest repr of the float (0.1 -> '0.1', 1 -> '1.0')."""
    return repr(float(epsilon))


def validate_seed(seed, name: str = "seed") -> int | None:
    """None (fresh OS entropy) or an integer >= 0; anything else is a ValueError naming ``name``."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"{name}={seed!r} must be None (fresh randomness) or an integer >= 0 "
                         "(a fixed seed, for benchmarking only)")
    return int(seed)


@dataclass(frozen=True)
class RunIdentity:
    dataset: str
    algorithm: str
    epsilon: float
    seed: int | None
    iterations: int

    def label(self) -> str:
        """The run in words (progress lines): algorithm, dataset, epsilon, T and seed."""
        return (f"{self.algorithm} on {self.dataset} at epsilon {self.epsilon:g}, T = {self.iterations}"
                + ("" if self.seed is None else f", seed {self.seed}"))

    def key(self, stream: str = "main") -> str:
        if self.seed is None:
            raise ValueError("a run with seed=None has no reproducible key")
        return "|".join(["dpnewton-v1", self.dataset, self.algorithm, canonical_epsilon(self.epsilon),
                         str(int(self.seed)), str(int(self.iterations)), stream])

    def seed_sequence(self, stream: str = "main") -> np.random.SeedSequence:
        if self.seed is None:
            return np.random.SeedSequence()
        digest = hashlib.sha256(self.key(stream).encode()).digest()
        return np.random.SeedSequence(int.from_bytes(digest, "big"))

    def generator(self, stream: str = "main") -> np.random.Generator:
        return np.random.Generator(np.random.PCG64(self.seed_sequence(stream)))


def dataset_generator(dataset: str, stream: str) -> np.random.Generator:
    """Generator of a per-dataset draw that belongs to no run (the holdout split, stream 'holdout').

    Seeded like a run's, from the SHA-256 of ``dpnewton-v1|dataset|<dataset>|<stream>``: a key of
    another shape than :meth:`RunIdentity.key`, so it never coincides with a run's stream.
    """
    key = "|".join(["dpnewton-v1", "dataset", dataset, stream])
    digest = hashlib.sha256(key.encode()).digest()
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(int.from_bytes(digest, "big"))))
