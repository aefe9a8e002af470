"""Loaders for the UCI datasets of Oza (2001), Table 3.1, read from ``--data-dir`` (never copied).

Every loader returns a :class:`Dataset`: ``X`` is a list of feature dicts (categorical values are
``str``, numeric values ``float``; missing values -- ``?`` in the files -- are left out of the
dict), ``y`` the list of labels (``str``) and ``kinds`` maps each feature to ``"categorical"`` or
``"numeric"``. The expected layout is that of ``shared/datasets/raw`` (see its ``SOURCES.md``).

Census-Income: only the UCI *test* file (99762 rows) is available. ``load("census")`` returns it
with a fixed split, ``train_idx``/``test_idx``: a seeded permutation (seed 0) puts two thirds in
training and one third in test, the 2:1 ratio of UCI's own train/test split. The ``year`` column
is dropped (it leaves the 39 inputs of Oza's Table 3.1) and the ``instance weight`` column is
ignored, as the ``.names`` file says.
"""

from __future__ import annotations

import gzip
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["DATASETS", "Dataset", "load"]


@dataclass
class Dataset:
    """One dataset: features, labels, feature kinds and (Census only) a fixed train/test split."""

    name: str
    X: list[dict[str, str | float]]
    y: list[str]
    kinds: dict[str, str]
    train_idx: list[int] | None = None
    test_idx: list[int] | None = None
    notes: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.y)

    def summary(self) -> str:
        """``name: rows x features, class counts``."""
        counts = ", ".join(f"{c} {n}" for c, n in Counter(self.y).most_common())
        return f"{self.name}: {len(self)} x {len(self.kinds)} ({counts})"


def _lines(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="latin-1") as f:
        return [line.rstrip("\r\n") for line in f if line.strip()]


def _row(names: list[str], values: list[str], kinds: dict[str, str]) -> dict[str, str | float]:
    x: dict[str, str | float] = {}
    for name, value in zip(names, values, strict=True):
        value = value.strip()
        if value == "?" or value == "":
            continue
        x[name] = float(value) if kinds[name] == "numeric" else value
    return x


def _table(
    name: str,
    path: Path,
    names: list[str],
    *,
    label_col: int,
    numeric: set[str] = frozenset(),  # type: ignore[assignment]
    sep: str | None = ",",
    skip_cols: tuple[int, ...] = (),
    label_map: dict[str, str] | None = None,
) -> Dataset:
    kinds = {n: ("numeric" if n in numeric else "categorical") for n in names}
    X, y = [], []
    for line in _lines(path):
        fields = line.split(sep) if sep else line.split()
        label = fields[label_col].strip()
        values = [v for i, v in enumerate(fields) if i != label_col and i not in skip_cols]
        X.append(_row(names, values, kinds))
        y.append(label_map.get(label, label) if label_map else label)
    return Dataset(name, X, y, kinds)


def load_promoters(root: Path) -> Dataset:
    """Promoters (106 x 57): nucleotides ``p1..p57`` (a/c/g/t), class ``+``/``-``."""
    names = [f"p{i}" for i in range(1, 58)]
    kinds = dict.fromkeys(names, "categorical")
    X, y = [], []
    for line in _lines(root / "promoters" / "promoters.data"):
        label, _, seq = line.split(",", 2)
        seq = seq.strip()
        X.append(dict(zip(names, seq, strict=True)))
        y.append(label.strip())
    return Dataset("promoters", X, y, kinds)


def load_balance(root: Path) -> Dataset:
    """Balance Scale (625 x 4 numeric 1..5), class L/B/R in the first column."""
    names = ["left_weight", "left_distance", "right_weight", "right_distance"]
    return _table(
        "balance", root / "balance-scale" / "balance-scale.data", names, label_col=0,
        numeric=set(names),
    )  # fmt: skip


def load_breast_cancer(root: Path) -> Dataset:
    """Breast Cancer Wisconsin, original (699 x 9 numeric 1..10, 16 missing); id dropped."""
    names = [
        "clump_thickness", "cell_size", "cell_shape", "adhesion", "epithelial_size",
        "bare_nuclei", "bland_chromatin", "normal_nucleoli", "mitoses",
    ]  # fmt: skip
    return _table(
        "breast_cancer",
        root / "breast-cancer-wisconsin" / "breast-cancer-wisconsin.data",
        names,
        label_col=10,
        numeric=set(names),
        skip_cols=(0,),
        label_map={"2": "benign", "4": "malignant"},
    )


def load_german(root: Path) -> Dataset:
    """German Credit (1000 x 20: 7 numeric, 13 categorical), class good/bad."""
    names = [
        "checking", "duration", "history", "purpose", "amount", "savings", "employment",
        "installment_rate", "personal_status", "debtors", "residence", "property", "age",
        "installment_plans", "housing", "existing_credits", "job", "liable", "telephone",
        "foreign",
    ]  # fmt: skip
    numeric = {
        "duration", "amount", "installment_rate", "residence", "age", "existing_credits", "liable",
    }  # fmt: skip
    return _table(
        "german", root / "german" / "german.data", names, label_col=20, numeric=numeric,
        sep=None, label_map={"1": "good", "2": "bad"},
    )  # fmt: skip


def load_car(root: Path) -> Dataset:
    """Car Evaluation (1728 x 6 categorical), 4 classes."""
    names = ["buying", "maint", "doors", "persons", "lug_boot", "safety"]
    return _table("car", root / "car" / "car.data", names, label_col=6)


def load_chess(root: Path) -> Dataset:
    """Chess kr-vs-kp (3196 x 36 categorical), won/nowin."""
    names = [f"a{i}" for i in range(1, 37)]
    return _table("chess", root / "kr-vs-kp" / "kr-vs-kp.data", names, label_col=36)


def load_mushroom(root: Path) -> Dataset:
    """Mushroom (8124 x 22 categorical; 2480 missing stalk-root), class e/p first."""
    names = [
        "cap_shape", "cap_surface", "cap_color", "bruises", "odor", "gill_attachment",
        "gill_spacing", "gill_size", "gill_color", "stalk_shape", "stalk_root",
        "stalk_surface_above", "stalk_surface_below", "stalk_color_above", "stalk_color_below",
        "veil_type", "veil_color", "ring_number", "ring_type", "spore_print_color", "population",
        "habitat",
    ]  # fmt: skip
    return _table("mushroom", root / "mushroom" / "agaricus-lepiota.data", names, label_col=0)


def load_nursery(root: Path) -> Dataset:
    """Nursery (12960 x 8 categorical), 5 classes."""
    names = ["parents", "has_nurs", "form", "children", "housing", "finance", "social", "health"]
    return _table("nursery", root / "nursery" / "nursery.data", names, label_col=8)


def load_connect4(root: Path) -> Dataset:
    """Connect-4 (67557 x 42 categorical b/x/o), win/loss/draw."""
    names = [f"{c}{r}" for c in "abcdefg" for r in range(1, 7)]
    return _table("connect4", root / "connect-4" / "connect-4.data", names, label_col=42)


_CENSUS_NAMES = [
    "age", "class_of_worker", "industry_code", "occupation_code", "education", "wage_per_hour",
    "enrolled_in_edu", "marital_status", "major_industry", "major_occupation", "race",
    "hispanic_origin", "sex", "union_member", "unemployment_reason", "employment_status",
    "capital_gains", "capital_losses", "dividends", "tax_filer_status", "region_prev",
    "state_prev", "household_detail", "household_summary", "instance_weight", "migration_msa",
    "migration_reg", "migration_within_reg", "same_house", "migration_sunbelt",
    "num_persons_worked", "family_under_18", "country_father", "country_mother", "country_self",
    "citizenship", "self_employed", "veteran_questionnaire", "veteran_benefits", "weeks_worked",
    "year",
]  # fmt: skip
_CENSUS_NUMERIC = {
    "age", "wage_per_hour", "capital_gains", "capital_losses", "dividends",
    "num_persons_worked", "weeks_worked",
}  # fmt: skip


def load_census(root: Path, *, seed: int = 0) -> Dataset:
    """Census-Income KDD test file (99762 rows, 39 inputs) with a seeded 2:1 train/test split."""
    keep = [n for n in _CENSUS_NAMES if n not in ("instance_weight", "year")]
    kinds = {n: ("numeric" if n in _CENSUS_NUMERIC else "categorical") for n in keep}
    X, y = [], []
    for line in _lines(root / "census-income-kdd" / "census-income.test.gz"):
        fields = [f.strip() for f in line.split(",")]
        row = dict(zip(_CENSUS_NAMES, fields[:-1], strict=True))
        X.append(_row(keep, [row[n] for n in keep], kinds))
        y.append("50000+" if fields[-1].startswith("50000+") else "-50000")
    perm = list(range(len(y)))
    random.Random(seed).shuffle(perm)
    cut = (2 * len(y)) // 3
    ds = Dataset("census", X, y, kinds, train_idx=sorted(perm[:cut]), test_idx=sorted(perm[cut:]))
    ds.notes.append(
        f"UCI test file only: seeded (seed={seed}) 2:1 split, {cut} train / {len(y) - cut} test"
    )
    return ds


SYNTHETIC_N = 100_000  # Table 3.1: 80,000 training + 20,000 test examples per fold


def load_synthetic(name: str, *, n: int = SYNTHETIC_N, seed: int = 0) -> Dataset:
    """Synthetic1-3 of Oza (2001, §3.5.1): ``n`` generated examples (``benchmarks/synthetic.py``
    states every assumption made where the thesis' text is lost)."""
    from benchmarks.synthetic import generate

    X, y = generate(name, n, seed)
    kinds = dict.fromkeys(X[0] if X else (), "categorical")
    ds = Dataset(name, X, y, kinds)
    if n != SYNTHETIC_N:
        ds.notes.append(
            f"generated with {n:,} examples where a run says --synthetic-n {n} "
            f"(the thesis: {SYNTHETIC_N:,})"
        )
    return ds


DATASETS = {
    "promoters": load_promoters,
    "balance": load_balance,
    "breast_cancer": load_breast_cancer,
    "german": load_german,
    "car": load_car,
    "chess": load_chess,
    "mushroom": load_mushroom,
    "nursery": load_nursery,
    "connect4": load_connect4,
    "synthetic1": lambda root, **kw: load_synthetic("synthetic1", **kw),
    "synthetic2": lambda root, **kw: load_synthetic("synthetic2", **kw),
    "synthetic3": lambda root, **kw: load_synthetic("synthetic3", **kw),
    "census": load_census,
}


def load(name: str, data_dir: str | Path, **kw: int) -> Dataset:
    """Load dataset ``name`` (a key of ``DATASETS``) from ``data_dir``; ``kw`` goes to the
    loader (the synthetic datasets take ``n``, the number of examples generated)."""
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; choose from {sorted(DATASETS)}")
    return DATASETS[name](Path(data_dir), **kw)
