"""Saving and loading a bank's arrays: ``state_arrays`` (the canonical live rows, what
``to_state`` saves) and ``load_arrays`` (checked: ``bounds.check_bounds`` then
``checks.check_structure``), with the conversions of older state versions."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from learners.jit import MODE, interpreting
from learners.jit import kernel as jit_kernel
from learners.schema import Schema

from .alloc import Capacity, alloc, index_size, used_of
from .bounds import ANY, CLASSES, check_bounds, check_dense
from .canonical import (
    COUNT_FEATURES,
    COUNT_GAUSSIANS,
    COUNT_NODES,
    COUNT_OBSERVERS,
    COUNT_SLOTS,
    COUNT_VALUES,
    COUNT_WEIGHTS,
    N_COUNTS,
    canonical,
)
from .checks import OUT_MEMBER, OUT_PROBLEM, OUT_ROW, STRUCTURE_PROBLEMS, check_structure
from .layout import (
    INDEX_FIELDS,
    LEAF,
    NO_SPLIT_SEEN,
    NUM_STATS,
    POOL_FIELDS,
    SPLIT_RECORD,
    STATE_FIELDS,
    UNKNOWN_MERIT,
    TreeParams,
    TreeState,
)
from .rows import add_feature as add_feature_
from .rows import add_observer as add_observer_
from .rows import add_value as add_value_
from .rows import build_index
from .rows import fill_gaussians as fill_gaussians_
from .rows import fill_weights as fill_weights_
from .structs import interpreted_bank, make_bank


class TreeBank(Protocol):
    """What saving and loading use of a ``bank.TreeBank``."""

    M: int
    T: TreeState
    params: TreeParams
    schema: Schema

    def flush(self) -> None: ...
    def sync(self) -> None: ...
    def view(self, interpreted: bool | None = None) -> Any: ...
    def set_arrays(self, T: TreeState) -> None: ...
    def direct_widths(self) -> dict[str, int]: ...


# the integer arrays a saved state stores as int32 when their values fit (version 4)
NARROW = tuple(name for name in STATE_FIELDS if name not in ("thr", "merit", "last", "mc_ok",
                                                              "nb_ok", "wv", "gv"))  # fmt: skip
I32 = np.iinfo(np.int32)

# the arrays of a version-1 state, in its order (dense leaf blocks "cat", "catw", "nvals", "num")
V1_FIELDS = ("kind", "attr", "thr", "slot", "child", "sibling", "branch", "depth", "dist",
              "n_nodes", "cat", "catw", "nvals", "num", "last", "mc_ok", "nb_ok", "free", "n_free",
              "n_slots")  # fmt: skip
V1_TREE = V1_FIELDS[:8] + V1_FIELDS[9:10] + V1_FIELDS[14:]  # the arrays v3 has as they are
V1_INT_FIELDS = ("kind", "attr", "slot", "child", "sibling", "branch", "depth", "n_nodes",
                  "nvals", "free", "n_free", "n_slots")  # fmt: skip
# a version-2 state: the version-3 arrays but for the class blocks, dense over all classes
V2_DENSE = ("dist", "catw", "cat", "num")
V2_FIELDS = tuple(name for name in STATE_FIELDS if name not in POOL_FIELDS and not name.endswith(
    ("_at", "_len")) and name not in ("o_fresh", *SPLIT_RECORD)) + V2_DENSE  # fmt: skip
FLOAT_FIELDS = ("thr", "merit", "last", "mc_ok", "nb_ok", "wv", "gv", *V2_DENSE)


def canonical_state(bank: TreeBank) -> TreeState:
    """The live rows and class entries of every member in canonical order (``canonical``),
    in arrays as wide as the largest member's: what a saved state holds. Capacity, freed
    rows, dead class entries and the index do not affect results."""
    bank.flush()
    bank.sync()
    counts = np.zeros((bank.M, N_COUNTS), np.int64)
    interp = MODE.interpreted and interpreting()
    run = jit_kernel(canonical)
    src = bank.view(interp)
    run(src, src, counts, False)
    most = counts.max(axis=0) if bank.M else np.zeros(N_COUNTS, np.int64)
    size = Capacity(nodes=int(most[COUNT_NODES]), slots=int(most[COUNT_SLOTS]),
                    features=int(most[COUNT_FEATURES]), values=int(most[COUNT_VALUES]),
                    observers=int(most[COUNT_OBSERVERS]), keys=1,
                    weights=int(most[COUNT_WEIGHTS]), gaussians=int(most[COUNT_GAUSSIANS]))  # fmt: skip
    C = alloc(bank.M, size)
    dst = interpreted_bank(C, bank.params) if interp else make_bank(C, bank.params)
    run(src, dst, counts, True)
    return C


def state_arrays(bank: TreeBank, prefix: str = "tree.") -> dict[str, np.ndarray]:
    """The saved arrays (``STATE_FIELDS``): the live rows and class entries only, renumbered
    canonically (``canonical``: a state depends on what the model holds, not on when its
    arrays grew, were compacted or reloaded), integer arrays as int32 when their values fit
    (all, within the default limits)."""
    C = canonical_state(bank)
    out = {}
    for name in STATE_FIELDS:
        a = getattr(C, name)
        if name in NARROW and (a.size == 0 or (I32.min <= a.min() and a.max() <= I32.max)):
            a = a.astype(np.int32)
        out[prefix + name] = a
    return out


def load_arrays(bank: TreeBank, arrays: dict[str, np.ndarray], prefix: str = "tree.",
                min_classes: int = 1) -> None:  # fmt: skip
    """Load saved arrays (``state_arrays``; set ``schema`` first). Arrays of older states are
    converted: version 1 (dense per-leaf blocks over the whole vocabulary) and version 2
    (sparse rows, dense over the classes). ``min_classes``: the class codes the trees may hold
    whatever the schema's classes (2 for members that learn bits: leveraging bagging's output
    codes learn bit 1 before a second class is seen)."""
    bank.flush()
    if prefix + "wc" not in arrays and prefix + "dist" in arrays:
        if prefix + "v_code" in arrays:
            load_v2(bank, arrays, prefix)
        else:
            load_v1(bank, arrays, prefix)
        return
    # (a state saved before splits kept their merit and time has neither array: unknown)
    missing = tuple(name for name in SPLIT_RECORD if prefix + name not in arrays)
    parts = checked_arrays(bank, arrays, prefix,
                           tuple(name for name in STATE_FIELDS if name not in missing))  # fmt: skip
    for name in missing:  # (as a leaf's: mark_unknown_splits marks the splits below)
        parts[name] = (np.zeros(parts["kind"].shape) if name == "merit"
                       else np.full(parts["kind"].shape, NO_SPLIT_SEEN, np.int64))  # fmt: skip
    saved = TreeState(**parts, **{name: np.zeros((0, 0), np.int64) for name in INDEX_FIELDS})
    size = used_of(saved)
    s = bank.schema
    n_classes = max(len(s.classes), min_classes)
    check_bounds(parts, n_classes, len(s.num_names), len(s.cat_names), prefix)
    # at least 1 node/slot/row (kernels index safely); room for the index
    cap = Capacity(
        nodes=max(size.nodes, 1),
        slots=max(size.slots, 1),
        features=max(size.features, 1),
        values=max(size.values, 1),
        observers=max(size.observers, 1),
        keys=64,
        weights=max(parts["wc"].shape[1], 64),
        gaussians=max(parts["gc"].shape[1], 32),
    )
    new = alloc(bank.M, cap._replace(keys=keys_for(size), **bank.direct_widths()))
    for name in STATE_FIELDS:
        src, dst = parts[name], getattr(new, name)
        if src.ndim != dst.ndim or any(s > d for s, d in zip(src.shape, dst.shape, strict=True)):
            raise ValueError(f"state array {prefix + name} has shape {src.shape}")
        dst[tuple(slice(0, n) for n in src.shape)] = src
    mark_unknown_splits(new, missing)
    check_loaded(bank, new, prefix)
    bank.set_arrays(new)
    jit_kernel(build_index)(bank.view())


def mark_unknown_splits(T: TreeState, missing: tuple[str, ...] = SPLIT_RECORD) -> None:
    """The split nodes of a state saved without their merit or time (``missing``: a state of
    before issue 41's merits, or of an older Chorus) get ``UNKNOWN_MERIT`` /
    ``NO_SPLIT_SEEN`` (feature importance counts them as splits of unknown merit); leaves get
    0.0 / ``NO_SPLIT_SEEN``, as ``rows.new_leaf`` makes them."""
    live = np.arange(T.kind.shape[1]) < T.n_nodes[:, None]
    split = live & (T.kind != LEAF)
    if "merit" in missing:
        T.merit[...] = np.where(split, UNKNOWN_MERIT, 0.0)
    if "split_seen" in missing:
        T.split_seen[...] = NO_SPLIT_SEEN


def check_loaded(bank: TreeBank, T: TreeState, prefix: str) -> None:
    """``ValueError`` naming the array unless the loaded arrays ``T`` hold together as the
    kernels' own states do (``check_structure``; ``check_bounds`` first)."""
    s = bank.schema
    interp = MODE.interpreted and interpreting()
    view = interpreted_bank(T, bank.params) if interp else make_bank(T, bank.params)
    out = np.zeros(3, np.int64)
    jit_kernel(check_structure)(view, s.code_attr_array, s.n_cat, s.n_num, out)
    if out[OUT_PROBLEM]:
        name, what = STRUCTURE_PROBLEMS[out[OUT_PROBLEM] - 1]
        raise ValueError(f"state array {prefix + name}: {what} (member {out[OUT_MEMBER]}, row "
                         f"{out[OUT_ROW]}; a forged or damaged state)")  # fmt: skip


def checked_arrays(bank: TreeBank, arrays: dict[str, np.ndarray], prefix: str,
             names: tuple[str, ...]) -> dict[str, np.ndarray]:  # fmt: skip
    """The arrays ``names`` of a saved state, with their dtypes and member count checked."""
    parts: dict[str, np.ndarray] = {}
    for name in names:
        key = prefix + name
        if key not in arrays:
            raise ValueError(f"state has no array {key} (a state of an older format?)")
        a = np.asarray(arrays[key])
        want = np.float64 if name in FLOAT_FIELDS else np.int64
        if want is np.int64 and a.dtype == np.int32:  # version 4 narrows what fits
            a = a.astype(np.int64)
        if a.dtype != want:
            raise ValueError(f"state array {key} has dtype {a.dtype}, want {want}")
        parts[name] = a
    if parts["kind"].shape[0] != bank.M:
        raise ValueError(f"state has {parts['kind'].shape[0]} members, model has {bank.M}")
    return parts


def keys_for(size: Capacity) -> int:
    """Index size for the rows of ``size`` (+ the children of categorical splits)."""
    return index_size(size.features + size.values + size.observers + size.nodes)


def fill_classes(bank: TreeBank, dense_rows) -> None:
    """Give rows their class entries from dense vectors: ``dense_rows`` yields ``(kind, m,
    row, vector)`` with kind "d" (node weights), "f" (feature row), "v" (value row) or "o"
    (observer: ``[C, NUM_STATS]``). Then rebuild the index."""
    B = bank.view()
    T = bank.T
    fill_w, fill_g = jit_kernel(fill_weights_), jit_kernel(fill_gaussians_)
    heads = {"d": (T.d_at, T.d_len), "f": (T.fw_at, T.fw_len), "v": (T.vw_at, T.vw_len)}
    for kind, m, row, vec in dense_rows:
        if kind == "o":
            fill_g(B, m, row, np.ascontiguousarray(vec))
        else:
            fill_w(B, *heads[kind], m, row, np.ascontiguousarray(vec))
    bank.sync()
    jit_kernel(build_index)(bank.view())


def load_v2(bank: TreeBank, arrays: dict[str, np.ndarray], prefix: str) -> None:
    """Load a version-2 state: the same rows and lists, each row's dense class vector turned
    into entries for its classes with weight (in class order)."""
    old = checked_arrays(bank, arrays, prefix, V2_FIELDS)
    s = bank.schema
    tree = {name: old[name] for name in V2_FIELDS[: -len(V2_DENSE)]}
    check_bounds(tree, len(s.classes), s.n_num, s.n_cat, prefix)
    M = bank.M
    N, F, E, O = (old[n].shape[1] for n in ("kind", "nvals", "v_code", "o_attr"))  # noqa: E741
    check_dense(
        {
            "dist": (old["dist"], (M, N, CLASSES)),
            "catw": (old["catw"], (M, F, CLASSES)),
            "cat": (old["cat"], (M, E, CLASSES)),
            "num": (old["num"], (M, O, CLASSES, NUM_STATS)),
        },
        len(s.classes),
        prefix,
    )
    C = old["dist"].shape[2]
    if old["catw"].shape[2] != C or old["cat"].shape[2] != C or old["num"].shape[2] < C:
        raise ValueError(f"state arrays {prefix}dist, catw, cat, num: class axes of "
                         "different lengths (a forged or damaged state)")  # fmt: skip
    cap = Capacity(
        nodes=max(old["kind"].shape[1], 1), slots=max(old["last"].shape[1], 1),
        features=max(old["nvals"].shape[1], 1), values=max(old["v_code"].shape[1], 1),
        observers=max(old["o_attr"].shape[1], 1), keys=64, weights=64, gaussians=32,
    )  # fmt: skip
    size = cap._replace(nodes=int(old["n_nodes"].max()))
    T = alloc(bank.M, cap._replace(keys=keys_for(size), **bank.direct_widths()))
    for name in V2_FIELDS[: -len(V2_DENSE)]:
        src, dst = old[name], getattr(T, name)
        dst[tuple(slice(0, n) for n in src.shape)] = src
    mark_unknown_splits(T)
    check_loaded(bank, T, prefix)  # (no class entries yet: those are made below)
    bank.set_arrays(T)
    dist, catw, cat, num = (old[name] for name in V2_DENSE)

    def rows():
        for m in range(bank.M):
            for n in range(int(T.n_nodes[m])):
                yield "d", m, n, dist[m, n]
                s = int(T.slot[m, n])
                if s < 0:
                    continue
                for f in chain(T.f_next[m], T.f_head[m, s], T.f_pend[m, s]):
                    yield "f", m, f, catw[m, f]
                    for e in chain(T.v_next[m], T.v_head[m, f], T.v_pend[m, f]):
                        yield "v", m, e, cat[m, e]
                for o in chain(T.o_next[m], T.o_head[m, s], T.o_pend[m, s]):
                    yield "o", m, o, num[m, o, :C]

    fill_classes(bank, rows())


def load_v1(bank: TreeBank, arrays: dict[str, np.ndarray], prefix: str) -> None:
    """Load a version-1 state: a row for every (leaf, feature), (leaf, value) and (leaf,
    numeric feature) with weight, value rows in code order -- the statistics the sparse
    layout would hold after the same stream, so predictions and learning go on unchanged."""
    old = {}
    for name in V1_FIELDS:
        arr = np.asarray(arrays[prefix + name])
        want = np.int64 if name in V1_INT_FIELDS else np.float64
        if arr.dtype != want:
            raise ValueError(f"state array {prefix + name} has dtype {arr.dtype}, want {want}")
        old[name] = arr
    kind, slot, n_nodes = old["kind"], old["slot"], old["n_nodes"]
    cat, catw, nvals, num = old["cat"], old["catw"], old["nvals"], old["num"]
    s = bank.schema
    tree = {name: old[name] for name in V1_TREE}
    check_bounds(tree, len(s.classes), s.n_num, s.n_cat, prefix)
    M, N, L = bank.M, kind.shape[1], old["last"].shape[1]
    if kind.shape[0] != M:
        raise ValueError(f"state has {kind.shape[0]} members, model has {M}")
    shapes = {"dist": (old["dist"], (M, N, CLASSES)), "cat": (cat, (M, L, ANY, CLASSES)),
              "catw": (catw, (M, L, ANY, CLASSES)),
              "num": (num, (M, L, ANY, CLASSES, NUM_STATS))}  # fmt: skip
    check_dense(shapes, len(s.classes), prefix)
    _, _, K, C = cat.shape
    A, J = catw.shape[2], num.shape[2]
    if nvals.shape != (M, L, A) or K > len(s.code_attr) or A > s.n_cat or J > s.n_num:
        raise ValueError(f"state arrays {prefix}cat, catw, nvals, num: more categories or "
                         "features than the model has (a forged or damaged state)")  # fmt: skip
    if catw.shape[3] != C or num.shape[3] != C or old["dist"].shape[2] != C:
        raise ValueError(f"state arrays {prefix}dist, cat, catw, num: class axes of "
                         "different lengths (a forged or damaged state)")  # fmt: skip
    code_attr = np.asarray(bank.schema.code_attr, dtype=np.int64)[:K]
    seen_value = np.asarray(cat.sum(axis=3) > 0.0)  # [M, L, K]
    seen_num = np.asarray((num[..., 0] > 0.0).any(axis=3))  # [M, L, J]
    leaves = [slot[m, : n_nodes[m]][slot[m, : n_nodes[m]] >= 0] for m in range(M)]
    rows = np.array([[int((nvals[m, ls] > 0).sum()), int(seen_value[m, ls].sum()),
                      int(seen_num[m, ls].sum())] for m, ls in enumerate(leaves)],
                    dtype=np.int64).reshape(M, 3)  # fmt: skip
    most = rows.max(axis=0)
    cap = Capacity(
        nodes=max(kind.shape[1], 1), slots=max(L, 1), features=int(most[0]) + 1,
        values=int(most[1]) + 1, observers=int(most[2]) + 1,
        keys=index_size(int(rows.sum(axis=1).max()) + kind.shape[1]), weights=64,
        gaussians=32, **bank.direct_widths(),
    )  # fmt: skip
    T = alloc(bank.M, cap)
    for name in V1_TREE:  # same layout
        src, dst = old[name], getattr(T, name)
        dst[tuple(slice(0, n) for n in src.shape)] = src
    mark_unknown_splits(T)
    check_loaded(bank, T, prefix)  # (the tree and slots: no rows yet, made below)
    bank.set_arrays(T)
    B = bank.view()
    add_feature, add_value, add_observer = (
        jit_kernel(add_feature_),
        jit_kernel(add_value_),
        jit_kernel(add_observer_),
    )
    dense = []
    for m in range(M):
        dense += [("d", m, n, old["dist"][m, n]) for n in range(int(n_nodes[m]))]
        for s in leaves[m].tolist():
            for a in np.flatnonzero(nvals[m, s] > 0):
                f = add_feature(B, m, s, a)
                dense.append(("f", m, f, catw[m, s, a]))
                for code in np.flatnonzero(seen_value[m, s] & (code_attr == a)):
                    dense.append(("v", m, add_value(B, m, s, f, code), cat[m, s, code]))
            for j in np.flatnonzero(seen_num[m, s]):
                dense.append(("o", m, add_observer(B, m, s, j), num[m, s, j]))
    fill_classes(bank, dense)


def chain(nxt: np.ndarray, *heads: int):
    """The rows of linked lists starting at ``heads`` (``nxt`` one member's links)."""
    for i in heads:
        while i >= 0:
            yield int(i)
            i = nxt[i]
