"""The bounds of a saved state: ``check_bounds`` refuses a state whose indices would take a
kernel outside its arrays (a forged or damaged snapshot), before any kernel reads it; the rest
of its consistency is :func:`learners.tree.checks.check_structure`'s."""

from __future__ import annotations

import numpy as np

from .alloc import AXES, VALUES_PER_ENTRY
from .layout import CATEGORICAL_SPLIT, LEAF, NO_SPLIT_SEEN, NUMERIC_SPLIT, UNKNOWN_MERIT, W

# what the index fields of a saved state point at: rows of the group of ``AXES`` (-1: none)
POINTS_AT = {"child": "N", "sibling": "N", "slot": "L", "free": "L", "f_head": "F", "f_tail": "F",
             "f_pend": "F", "f_next": "F", "f_freed": "F", "v_head": "E", "v_tail": "E",
             "v_pend": "E", "v_next": "E", "v_freed": "E", "o_head": "O", "o_tail": "O",
             "o_pend": "O", "o_next": "O", "o_freed": "O"}  # fmt: skip
# class-entry blocks: (first entry, entries, pool)
BLOCKS = (("d_at", "d_len", "wc"), ("fw_at", "fw_len", "wc"), ("vw_at", "vw_len", "wc"),
          ("g_at", "g_len", "gc"))  # fmt: skip
# counts per member, and the group (or pool) whose rows they count
COUNTS = {"n_nodes": "N", "n_slots": "L", "n_free": "L", "n_f": "F", "n_v": "E", "n_o": "O",
          "w_used": "P", "w_dead": "P", "g_used": "Q", "g_dead": "Q"}  # fmt: skip
# the count of each group's rows in use (per member)
COUNT_OF = {"N": "n_nodes", "L": "n_slots", "F": "n_f", "E": "n_v", "O": "n_o", "P": "w_used",
            "Q": "g_used"}  # fmt: skip
ANY, CLASSES = -1, -2  # axes of a dense class array (check_dense)


def block_caps(n: np.ndarray) -> np.ndarray:
    """``rows.block_cap`` of every entry count in ``n``: 0, 1, 2, 4, 8, ..."""
    return np.where(n > 1, 2 ** np.ceil(np.log2(np.maximum(n, 1))), n)


def _refuse(prefix: str, name: str, what: str) -> None:
    raise ValueError(f"state array {prefix + name}: {what} (a forged or damaged state)")


def check_bounds(parts: dict[str, np.ndarray], n_classes: int, n_num: int, n_cat: int,
                 prefix: str) -> None:  # fmt: skip
    """``ValueError`` unless every index a kernel follows in a saved state stays inside the
    arrays a load makes of it. The kernels do not check their indices (numba does not): a
    snapshot with a valid plain SHA-256, which anyone can compute, made a loading process read
    and write outside its arrays (a crash at best) with one child, slot or class-block
    pointer out of range. Checked: every count within the rows saved (so a state cannot ask a
    load for more memory than its own size); in the rows below the counts (the only ones a
    kernel reads: a row is written in full when taken), every row pointer in -1..rows-1, every
    class block inside its pool, each split's and each row's feature among the model's features
    of its kind; every class code of a pool below the model's classes; and that no walk of a
    tree or a list goes on for ever (no node reached twice from the root, every list row
    reaching the end). The rest of a state's consistency (a tail that is not its list's last
    row, a count below the rows in use, a row on two lists, ...), with which a later call could
    still loop, is ``checks.check_structure``'s, run next on the arrays the load makes. Arrays a
    version-1/2 state does not have are skipped.
    ``CHORUS_SNAPSHOT_KEY`` (HMAC) keeps forged snapshots out (docs/service.md, *Security*)."""
    rows = _check_shapes(parts, prefix)
    _check_pointers(parts, rows, prefix)
    _check_features(parts, n_classes, n_num, n_cat, prefix)
    _check_split_record(parts, prefix)
    _check_walks(parts, prefix)


def _check_shapes(parts: dict[str, np.ndarray], prefix: str) -> dict[str, int]:
    """Every array of a group as long as the others, every count within them; returns the rows
    saved per group."""
    M = parts["kind"].shape[0]
    rows: dict[str, int] = {}  # rows saved per group: every array of a group has as many
    for name, a in parts.items():
        if a.ndim == 0 or a.shape[0] != M:
            _refuse(prefix, name, f"shape {a.shape} for {M} members")
        group = AXES.get(name)
        if group is not None:
            per_row = VALUES_PER_ENTRY.get(name, 1)  # (a Gaussian entry's statistics)
            if a.ndim != 2 or a.shape[1] != per_row * rows.setdefault(group, a.shape[1]):
                _refuse(prefix, name,
                        f"shape {a.shape}, not [{M}, {per_row * rows[group]}] as its group's")  # fmt: skip
    for name, group in COUNTS.items():
        if name not in parts:  # (a version-1/2 state has fewer arrays)
            continue
        a = parts[name]
        if a.ndim != 1 or ((a < 0) | (a > rows[group])).any():
            _refuse(prefix, name, f"a count outside 0..{rows[group]}")
    return rows


def _in_use(parts: dict[str, np.ndarray], name: str) -> np.ndarray | bool:
    """The rows of array ``name`` a kernel may read: those below their member's count (the
    rest are stale: a row is written in full when taken; a version-3 state keeps what a
    member had before a reset, pointing anywhere), the first n_free of ``free``."""
    group = AXES.get(name)
    if group is None:
        return True
    count = parts["n_free" if name == "free" else COUNT_OF[group]]
    return np.arange(parts[name].shape[1] // VALUES_PER_ENTRY.get(name, 1)) < count[:, None]


def _check_pointers(parts: dict[str, np.ndarray], rows: dict[str, int], prefix: str) -> None:
    """Every row pointer in use within its group's rows, every class block within its pool."""
    for name, group in POINTS_AT.items():
        if name not in parts:
            continue
        a = parts[name]
        if (((a < -1) | (a >= rows[group])) & _in_use(parts, name)).any():
            _refuse(prefix, name, f"a row outside -1..{rows[group] - 1}")
    for at, length, pool in BLOCKS:
        if at not in parts:
            continue
        first, n = parts[at], parts[length]
        used = first >= 0
        outside = (n < 0) | (first < -1) | (used & (first + block_caps(n) > parts[pool].shape[1]))
        if (outside & _in_use(parts, at)).any():
            _refuse(prefix, at, f"a class block outside the {pool} pool")
        if (~used & (n > 0) & _in_use(parts, at)).any():
            _refuse(prefix, length, "entries without a block")


def _check_features(parts: dict[str, np.ndarray], n_classes: int, n_num: int, n_cat: int,
                    prefix: str) -> None:  # fmt: skip
    """Every class code below the model's classes, every split's and row's feature among the
    model's features of its kind."""
    for pool in ("wc", "gc"):
        if pool in parts and ((parts[pool] < -1) | (parts[pool] >= max(n_classes, 1))).any():
            _refuse(prefix, pool, f"a class code outside -1..{n_classes - 1}")
    kind, attr, nodes_live = parts["kind"], parts["attr"], _in_use(parts, "kind")
    if (((attr < -1) | ((kind != LEAF) & (attr < 0))) & nodes_live).any():
        _refuse(prefix, "attr", "a split on a negative feature")
    if (
        (
            ((kind == NUMERIC_SPLIT) & (attr >= n_num))
            | ((kind == CATEGORICAL_SPLIT) & (attr >= n_cat))
        )
        & nodes_live
    ).any():
        _refuse(prefix, "attr", "a split on a feature the model does not have")
    for name, width in (("f_attr", n_cat), ("o_attr", n_num)):
        if (
            name in parts
            and (_in_use(parts, name) & ((parts[name] < 0) | (parts[name] >= width))).any()
        ):
            _refuse(prefix, name, f"a feature id outside 0..{width - 1}")


def _check_split_record(parts: dict[str, np.ndarray], prefix: str) -> None:
    """Each live node's ``merit`` and ``split_seen`` as learning writes them (``rows.new_leaf``,
    ``learn.attempt_split``): a leaf's 0.0 and ``NO_SPLIT_SEEN``; a split's merit finite and
    >= 0, or ``UNKNOWN_MERIT`` (a migrated state), its time >= ``NO_SPLIT_SEEN``. Kernels do
    not read them, but feature importance sums them (a NaN or an infinity would make every
    feature's merit one, and its JSON answer invalid)."""
    if "merit" not in parts or "split_seen" not in parts:
        return
    live = _in_use(parts, "kind")
    leaf = parts["kind"] == LEAF
    merit, seen = parts["merit"], parts["split_seen"]
    known = np.isfinite(merit) & (merit >= 0.0)
    bad = np.where(leaf, merit != 0.0, ~(known | (merit == UNKNOWN_MERIT)))
    if (bad & live).any():
        _refuse(prefix, "merit", "a split's merit not finite and >= 0 (or unknown, "
                f"{UNKNOWN_MERIT}), or a leaf's not 0")  # fmt: skip
    bad = np.where(leaf, seen != NO_SPLIT_SEEN, seen < NO_SPLIT_SEEN)
    if (bad & live).any():
        _refuse(prefix, "split_seen", f"a split's time below {NO_SPLIT_SEEN}, or a leaf's not "
                f"{NO_SPLIT_SEEN}")  # fmt: skip


def _check_walks(parts: dict[str, np.ndarray], prefix: str) -> None:
    """No walk goes on for ever (pointers are in range from here on). The tree: nodes are only
    added (or all dropped), so a member's live nodes 0..n_nodes-1 point at live nodes, and
    each is the child or the next sibling of at most one of them, the root of none: a walk
    from the root then meets no node twice. The lists: every row below the count, live or
    freed, reaches the end (-1) of the list it is on; with pointer doubling, the 2^k-th
    successor of every row, k up to log2(rows) + 1."""
    M = parts["kind"].shape[0]
    nodes_live = _in_use(parts, "kind")
    nodes = parts["child"].shape[1]
    for name in ("child", "sibling"):
        if (nodes_live & (parts[name] >= parts["n_nodes"][:, None])).any():
            _refuse(prefix, name, "a live node pointing at a node past the member's nodes")
    if nodes:
        base = np.arange(M)[:, None] * nodes
        targets = [(parts[n] + base)[nodes_live & (parts[n] >= 0)] for n in ("child", "sibling")]
        refs = np.bincount(np.concatenate(targets), minlength=M * nodes).reshape(M, nodes)
        if (refs > 1).any() or (refs[:, 0] > 0).any():
            _refuse(prefix, "child", "a node reached twice (a cycle or a shared subtree)")
    for name in ("f_next", "v_next", "o_next"):
        if name not in parts:
            continue
        nxt = np.where(_in_use(parts, name), parts[name], -1)  # (a live row pointing at a stale
        R = nxt.shape[1]  # one: check_structure refuses it, past the count)
        if R == 0:
            continue
        jump = np.append(np.where(nxt >= 0, nxt + np.arange(M)[:, None] * R, -1).ravel(), -1)
        for _ in range(R.bit_length() + 1):
            jump = jump[jump]  # (-1 reads the last entry, -1: the end stays the end)
        if (jump[:-1] >= 0).any():
            _refuse(prefix, name, "a list that never ends (a cycle)")


def check_dense(dense: dict[str, tuple[np.ndarray, tuple[int, ...]]], n_classes: int,
                prefix: str) -> None:  # fmt: skip
    """``ValueError`` unless each dense class array of a version-1/2 state has the shape given
    with it (``ANY``: any length, ``CLASSES``: the class axis, any length) and no weight for a
    class the model does not have (a code the load's kernels would index past its classes with)."""
    for name, (a, shape) in dense.items():
        if a.ndim != len(shape) or any(
            want >= 0 and have != want for have, want in zip(a.shape, shape, strict=True)
        ):
            raise ValueError(f"state array {prefix + name}: shape {a.shape}, not {shape} (-1: "
                             "any length, -2: the classes; a forged or damaged state)")  # fmt: skip
        weights = a[..., W] if name == "num" else a  # (a Gaussian's weight)
        extra = np.moveaxis(weights, shape.index(CLASSES), -1)[..., max(n_classes, 1) :]
        if (extra > 0).any():
            raise ValueError(f"state array {prefix + name}: weight for a class outside "
                             f"0..{n_classes - 1} (a forged or damaged state)")  # fmt: skip
