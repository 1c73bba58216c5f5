"""Every dataset as one :class:`DatasetSpec`: source files, checksums, URLs, options and the
functions that load it.

Adding a dataset is one entry of ``_SPECS`` plus its builder in ``loaders.py`` (docs/extending.md).
Nothing here touches the file system; see ``sources.py`` for lookup/download and ``loaders.py`` for
the preprocessing recipes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping

from .errors import DatasetError
from .loaders import (Needs, build_adult, build_covertype, build_custom, build_fashion_mnist, build_libsvm_named,
                      build_protein, build_synthetic, resolve_custom, resolve_protein, resolve_sources)
from .sources import SourceFile

LIBSVM_BASE = "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary/"
UCI_ADULT_BASE = "https://archive.ics.uci.edu/ml/machine-learning-databases/adult/"
FMNIST_BASE = "https://github.com/zalandoresearch/fashion-mnist/raw/master/data/fashion/"

#: options every dataset accepts (they change how inputs are obtained, not the result)
COMMON_OPTIONS: Mapping[str, Any] = MappingProxyType(
    {"verify_checksum": True, "allow_download": True, "force": False}
)


@dataclass(frozen=True)
class DatasetSpec:
    """One dataset: what it is, where its files come from and the functions that load it.

    ``resolve(spec, ctx, opts)`` finds and verifies the input files (default: every entry of
    ``sources``); ``build(spec, files, opts, ctx)`` turns them into a :class:`~.loaders.Built`.
    ``shape`` is the expected (n, d incl. bias) with default options; ``bias`` whether column 0 is
    the constant 1 (an option ``bias``, as custom's, overrides it); ``options`` the allowed options
    with their defaults; ``extra`` the constants the loader functions read. A spec that lacks a key
    its functions declare (:func:`~.loaders.needs`) fails here, when it is defined.
    """

    name: str
    description: str
    build: Callable
    sources: Mapping[str, SourceFile]  # role -> file
    shape: tuple[int | None, int | None]
    bias: bool
    options: Mapping[str, Any] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)
    resolve: Callable = resolve_sources

    def __post_init__(self) -> None:
        problems = []
        if not self.name or not isinstance(self.name, str):
            problems.append("name must be a non-empty string")
        if not all(isinstance(s, SourceFile) for s in self.sources.values()):
            problems.append("every source must be a SourceFile")
        if len(self.shape) != 2 or not all(v is None or isinstance(v, int) for v in self.shape):
            problems.append(f"shape must be (n, d) of ints or None, got {self.shape!r}")
        if clash := sorted(set(self.options) & set(COMMON_OPTIONS)):
            problems.append(f"options {clash} are common options (COMMON_OPTIONS)")
        try:
            json.dumps(dict(self.options))
        except TypeError as exc:
            problems.append(f"option defaults must be plain JSON values ({exc})")
        for role, fn in (("build", self.build), ("resolve", self.resolve)):
            if not callable(fn):
                problems.append(f"{role} must be a function, got {fn!r}")
                continue
            need = getattr(fn, "needs", Needs())
            missing = ([f"sources[{k!r}]" for k in need.sources if k not in self.sources]
                       + [f"extra[{k!r}]" for k in need.extra if k not in self.extra]
                       + [f"options[{k!r}]" for k in need.options if k not in self.options])
            if missing:
                problems.append(f"{role} function {fn.__name__} needs {', '.join(missing)}")
        if problems:
            raise DatasetError(f"dataset spec {self.name!r}: " + "; ".join(problems))


def _libsvm(name: str, filename: str, sha: str, n_features: int, shape, extra_desc=""):
    return DatasetSpec(
        name=name,
        description=f"LIBSVM {filename}{extra_desc}: svmlight -> dense -> StandardScaler -> prepend 1",
        build=build_libsvm_named,
        sources={"data": SourceFile(filename, name, (LIBSVM_BASE + filename,), (sha,))},
        options={"prep": "v2"},
        shape=shape,
        bias=True,
        extra={"n_features": n_features},
    )


_SPECS = [
    _libsvm("a1a", "a1a.t", "0212d0c4a3996fe6fb6a0ab54033d9f4fa4b60369b6e3bb141821d9ffc40c04d",
            123, (30956, 124), " (the test file, as in the official code)"),
    _libsvm("a5a", "a5a", "5cb3a6603de0a0eb43afcdd45b1820c71ee7f20da1c09f054696bb71cbc45ad8", 123, (6414, 124)),
    _libsvm("a6a", "a6a", "6023becedbd392fdc6a62ad94b60c9363149370d4c57ef13949fcc765842a031", 123, (11220, 124)),
    _libsvm("a9a", "a9a", "f5d5ffd8d865ff41328e7ee043e4b020816914ff6843ff15b98905ddbedce906", 123, (32561, 124)),
    _libsvm("w5a", "w5a", "50599ff799c35726061b747912c106ee1b084280411c086f10e5adb3487c3993", 300, (9888, 301)),
    _libsvm("w7a", "w7a", "bd02f445a1a2f4aaefd27d7dcc31f1f6a8521f904157f2ee7c96d1294cd26e36", 300, (24692, 301)),
    _libsvm("w8a", "w8a", "6a9fa8fd5f524303240a5db07d4b3d4a51e8b7b4b20a914105d8e3e8c81640f2", 300, (49749, 301)),
    _libsvm("phishing", "phishing", "0cf66ef36604c393da9359b2e5d894a2df8aee31fd184633cefa138add2ef08a", 68,
            (11055, 69)),
    DatasetSpec(
        name="adult",
        description="UCI Adult (adult.data + adult.test), dpml-benchmark recipe, prepend 1",
        build=build_adult,
        sources={
            "train": SourceFile("adult.data", "adult", (UCI_ADULT_BASE + "adult.data",),
                                ("5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d",)),
            "test": SourceFile("adult.test", "adult", (UCI_ADULT_BASE + "adult.test",),
                               ("a2a9044bc167a35b2361efbabec64e89d69ce82d9790d2980119aac5fd7e9c05",)),
        },
        shape=(45220, 105),
        bias=True,
        extra={
            # sha256 of the official adult_processed_x.npy (np.save bytes), PROVENANCE 2.4
            "official_x_npy_sha256": "5b2cf15c827da9d9b073d36a28c93637117dbdcdde0733910822be05570a4149",
            "seed": 10000019,
        },
    ),
    DatasetSpec(
        name="covertype",
        description="UCI Covertype classes 3 (-1) vs 6 (+1), column/max scaling, seeded shuffle, prepend 1",
        build=build_covertype,
        sources={
            # sha256 published by scikit-learn (sklearn/datasets/_covtype.py, ARCHIVE) for its
            # figshare mirror of UCI covtype.data.gz.
            "data": SourceFile(
                "covtype.data.gz", "covtype",
                ("https://ndownloader.figshare.com/files/5976039",
                 "https://archive.ics.uci.edu/ml/machine-learning-databases/covtype/covtype.data.gz"),
                ("614360d0257557dd1792834a85a1cdebfadc3c4f30b011d56afee7ffb5b15771",)),
        },
        shape=(53121, 55),
        bias=True,
        extra={"seed": 10000019, "negative_class": 3, "positive_class": 6,
               "official_y_file": ("covtype", "covertype_binary_processed_y.npy")},
    ),
    DatasetSpec(
        name="synthetic",
        description="x ~ uniform on the unit sphere, w* = 1, y ~ logistic(<x, w*>); no bias",
        build=build_synthetic,
        sources={},
        options={"seed": 0, "n": 10000, "d": 100},
        shape=(10000, 100),
        bias=False,
    ),
    DatasetSpec(
        name="fashion-mnist",
        description="Fashion-MNIST train split, classes 0 (-1) vs 3 (+1), (p/255-0.5)/0.5; no bias",
        build=build_fashion_mnist,
        sources={
            # accepted: Debian re-packed gzip, Zalando/TFDS gzip, uncompressed IDX (PROVENANCE 2.8)
            "images": SourceFile(
                "train-images-idx3-ubyte.gz", "fashion-mnist", (FMNIST_BASE + "train-images-idx3-ubyte.gz",),
                ("b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7",
                 "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84"),
                installed_key="fashion-mnist"),
            "labels": SourceFile(
                "train-labels-idx1-ubyte.gz", "fashion-mnist", (FMNIST_BASE + "train-labels-idx1-ubyte.gz",),
                ("0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056",
                 "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845"),
                installed_key="fashion-mnist"),
        },
        shape=(12000, 784),
        bias=False,
        extra={"negative_class": 0, "positive_class": 3},
    ),
    DatasetSpec(
        name="protein",
        description="KDD Cup 2004 bio_train.dat, 50000-row seeded subsample, per-column standardisation, prepend 1",
        build=build_protein,
        resolve=resolve_protein,
        sources={
            # Looked up in this order; the first one found is used.
            "dat": SourceFile("bio_train.dat", "protein"),
            "parquet": SourceFile("bio_train.parquet.brotli", "protein", (),
                                  ("2b6ac0acc7631dcc059be5260f791b164370b77310bb681f5f8f23853b2b50e9",)),
            # No published checksum for the tarball: its member bio_train.dat is verified
            # against the git blob id below instead.
            "archive": SourceFile("data_kddcup04.tar.gz", "protein",
                                  ("https://kdd.org/cupfiles/KDDCupData/2004/data_kddcup04.tar.gz",)),
        },
        shape=(50000, 75),
        bias=True,
        extra={
            "member": "bio_train.dat",
            "member_git_blob": "59e0b6296bd53aa14b5a45ed2f66b34af84dbacc",
            "n_total": 145751,
            "n_sample": 50000,
            "seed": 3000,
            "indices_sha256": "f63ddd35e9259658eb4cc0f485248fe8abfc815f4b09cbb0288378b83a6a708b",
        },
    ),
    DatasetSpec(
        name="custom",
        description="user LIBSVM or CSV file; labels must take exactly two values",
        build=build_custom,
        resolve=resolve_custom,
        sources={},
        options={"file": None, "format": None, "label_column": None, "bias": True,
                 "n_features": None, "standardize": False},
        shape=(None, None),
        bias=True,
    ),
]


def by_name(specs) -> Mapping[str, DatasetSpec]:
    """A read-only name -> spec table; two specs with one name fail here."""
    table: dict[str, DatasetSpec] = {}
    for spec in specs:
        if spec.name in table:
            raise DatasetError(f"two dataset specs are named {spec.name!r}")
        table[spec.name] = spec
    return MappingProxyType(table)


#: name -> DatasetSpec (read-only)
DATASETS: Mapping[str, DatasetSpec] = by_name(_SPECS)


def get_spec(name: str) -> DatasetSpec:
    try:
        return DATASETS[name]
    except KeyError:
        raise DatasetError(
            f"unknown dataset {name!r}; choose one of: {', '.join(sorted(DATASETS))} "
            "(use 'custom' with file=... for your own LIBSVM/CSV file)"
        ) from None
