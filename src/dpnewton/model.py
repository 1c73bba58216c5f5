"""A trained private linear classifier as a file: weights, intercept, classes and privacy record.

The model predicts ``classes[1]`` where the decision ``<x, coef> + intercept`` is positive and
``classes[0]`` elsewhere (``classes[0]`` is the label that training mapped to -1). Training ran on
the rows projected to the unit ball, x / max(1, ||x||) with the bias column included; the projection
scales a row's decision by a positive factor, so predicted classes are those of the trained weights.

``training`` keeps the training file's layout (format, label column), which ``dpnewton predict``
uses to read new data the same way.

Two file formats, chosen by the suffix: ``.json`` (strict JSON) and ``.npz`` (``coef`` as an array,
everything else as one JSON string; read back with ``allow_pickle=False``). Both are written
atomically. The privacy record is that of the run: epsilon, delta, conversion, rho and, when the
run kept it, the per-release ledger.
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .io import atomic_path, atomic_write_text, to_json

FORMAT = "dpnewton-model/1"
SUFFIXES = (".json", ".npz")


@dataclass(frozen=True)
class LinearModel:
    coef: np.ndarray                 # (d,) weights of the features (bias column excluded)
    intercept: float                 # weight of the bias column; 0 when training had none
    classes: tuple                   # (label mapped to -1, label mapped to +1)
    privacy: dict = field(default_factory=dict)
    training: dict = field(default_factory=dict)   # the training file's layout: format, label column

    def __post_init__(self):
        coef = np.asarray(self.coef, dtype=np.float64)
        if coef.ndim != 1 or not np.isfinite(coef).all() or not np.isfinite(self.intercept):
            raise ValueError("a model needs a finite 1-D coef and a finite intercept")
        if len(self.classes) != 2:
            raise ValueError(f"a binary model needs two classes, got {list(self.classes)}")
        object.__setattr__(self, "coef", coef)
        object.__setattr__(self, "classes", tuple(self.classes))

    @classmethod
    def from_prepared(cls, w: np.ndarray, meta: dict, privacy: dict) -> "LinearModel":
        """The model of weights ``w`` trained on a prepared dataset with sidecar ``meta``.

        With a bias column (``meta['bias']``; prepended as column 0 by the data loaders) its weight
        is the intercept. The classes are the original labels, ordered by their mapped value.
        """
        w = np.asarray(w, dtype=np.float64)
        classes = tuple(label for label, _ in sorted(meta["label_mapping"].items(), key=lambda kv: kv[1]))
        training = {key: meta[key] for key in ("name", "format", "label_column") if key in meta}
        if meta["bias"]:
            return cls(w[1:], float(w[0]), classes, privacy, training)
        return cls(w, 0.0, classes, privacy, training)

    @property
    def n_features(self) -> int:
        return int(self.coef.shape[0])

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise ValueError(f"the model has {self.n_features} features, the data has shape {X.shape}")
        return X @ self.coef + self.intercept

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.where(self.decision_function(X) > 0, self.classes[1], self.classes[0])

    def _fields(self) -> dict:
        return {"format": FORMAT, "intercept": self.intercept, "classes": list(self.classes),
                "privacy": self.privacy, "training": self.training}

    def save(self, path: str | Path) -> None:
        path = Path(path)
        if path.suffix == ".json":
            atomic_write_text(path, to_json({**self._fields(), "coef": self.coef}, indent=2) + "\n")
        elif path.suffix == ".npz":
            with atomic_path(path, suffix=".npz") as tmp, open(tmp, "wb") as fh:
                np.savez(fh, coef=self.coef, fields=np.array(to_json(self._fields())))
        else:
            raise ValueError(f"{path}: a model file ends in {' or '.join(SUFFIXES)}")

    @classmethod
    def load(cls, path: str | Path) -> "LinearModel":
        path = Path(path)
        if path.suffix not in SUFFIXES:
            raise ValueError(f"{path}: a model file ends in {' or '.join(SUFFIXES)}")
        if not path.is_file():
            raise FileNotFoundError(f"model file {path} not found; write one with 'dpnewton run ... --save-model'")
        try:
            if path.suffix == ".json":
                fields = json.loads(path.read_text())
                coef = fields.pop("coef")
            else:
                with np.load(path, allow_pickle=False) as z:
                    coef, fields = z["coef"], json.loads(str(z["fields"]))
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
            raise ValueError(f"{path}: not a readable dpnewton model ({type(exc).__name__}: {exc})") from None
        if fields.get("format") != FORMAT:
            raise ValueError(f"{path}: not a {FORMAT} file (format {fields.get('format')!r})")
        return cls(np.asarray(coef, dtype=np.float64), float(fields["intercept"]), tuple(fields["classes"]),
                   fields["privacy"], fields.get("training", {}))
