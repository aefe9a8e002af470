"""Why a member predicts what it does, and which features its splits use, read from a bank's
arrays in Python (nothing here is compiled, so explaining a prediction costs no compilation and
a plain prediction nothing at all; a decision stump's split is its own kernel's,
``predict.stump_split``).

* :func:`member_path`: an example's walk from the root to its leaf as ``routing.sort_to_leaf``
  takes it when predicting (without growing a branch), each split's test, the branch taken and
  the example's value; where ``predict.tree_proba`` answers from (the leaf, or the deepest node
  with weight when the walk stops at a split or at an empty leaf), that node's class weights and
  which predictor it uses (``predict.leaf_proba``: majority class, naive Bayes, naive Bayes
  adaptive's choice, or a decision stump's split, ``"stump"``: its feature, test and the
  example's side).
* :func:`member_splits`: the split nodes of a member's tree (feature, depth, the class weight
  the node held when it split: a split node learns no more, so its weights are those of the
  moment it split; and what the node recorded when it split, its merit and the model's example
  count then, ``learn.attempt_split``).

The member's probabilities themselves come from ``tree_proba`` (the kernel that predicts), so an
explanation's numbers are the prediction's; what is read here is only *why*.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from learners.jit import kernel

from .layout import (
    CATEGORICAL_SPLIT,
    CRIT_GINI,
    CRIT_INFO_GAIN,
    LEAF,
    NUMERIC_SPLIT,
    OTHER_BRANCH,
    PRED_MC,
    PRED_NB,
    PRED_NBA,
    PRED_STUMP,
    UNKNOWN_MERIT,
)
from .predict import stump_split

# the answer's "prediction" field: which predictor a leaf uses (``predict.leaf_proba``)
MODES = {PRED_MC: "majority", PRED_NB: "naive_bayes", PRED_NBA: "naive_bayes_adaptive",
         PRED_STUMP: "stump"}  # fmt: skip


def _weights(T: Any, m: int, node: int, n_classes: int) -> list[tuple[int, float]]:
    """The node's (class code, weight) entries below ``n_classes``, in class order."""
    n = int(T.d_len[m, node])
    if n == 0:
        return []
    a = int(T.d_at[m, node])
    codes = T.wc[m, a : a + n].tolist()
    vals = T.wv[m, a : a + n].tolist()
    return [(c, v) for c, v in zip(codes, vals, strict=True) if c < n_classes]


def node_weight(T: Any, m: int, node: int, n_classes: int) -> float:
    """The node's total class weight, summed in class order (``rows.node_weight``)."""
    tot = 0.0
    for _, v in _weights(T, m, node, n_classes):
        tot += v
    return tot


def _children(T: Any, m: int, node: int) -> list[int]:
    out = []
    c = int(T.child[m, node])
    while c >= 0:
        out.append(c)
        c = int(T.sibling[m, c])
    return out


def _heaviest(T: Any, m: int, node: int, n_classes: int) -> int:
    """``routing.heaviest_child``: the first child of the largest weight (-1: none)."""
    best, best_w = -1, -1.0
    for c in _children(T, m, node):
        w = node_weight(T, m, c, n_classes)
        if w > best_w:
            best, best_w = c, w
    return best


def _find(T: Any, m: int, node: int, branch: int) -> int:
    for c in _children(T, m, node):
        if int(T.branch[m, c]) == branch:
            return c
    return -1


def _value_name(schema: Any, code: int) -> Any:
    return schema.code_value[code] if 0 <= code < len(schema.code_value) else None


def member_path(bank: Any, m: int, xn: np.ndarray, xc: np.ndarray, n_classes: int) -> dict:
    """Tree ``m`` of ``bank`` on one encoded example (``xn``, ``xc``: a row of
    ``Schema.encode_rows(..., grow=False)``): ``{"path": [step, ...], "leaf": {...}}``.

    A step: ``feature``, ``test`` (``"<= t"`` for a numeric split; ``"== value"`` for a
    categorical one), ``branch`` (``"yes"`` / ``"no"`` for a numeric test; the value of the
    branch taken, ``"other"`` for the branch the values without one share, ``null`` when the
    walk stopped there), ``value`` (the example's, ``null`` if missing), and ``why`` when the
    branch is not the value's own: ``"missing: heaviest branch"``, ``"no branch for the value:
    shared branch"``, ``"no branch for the value: stopped"``. The leaf: ``node``, ``depth``,
    ``class_weights`` ({class code: weight}, the counts the prediction reads), ``prediction``
    (``MODES``: the predictor the leaf uses, or ``"majority"`` of the deepest node with weight
    when the walk ended elsewhere, with ``"fallback"`` saying why)."""
    T, schema = bank.T, bank.schema
    node = 0
    last = 0
    steps: list[dict] = []
    while True:
        if _weights(T, m, node, n_classes):
            last = node
        kind = int(T.kind[m, node])
        if kind == LEAF:
            break
        a = int(T.attr[m, node])
        step: dict[str, Any] = {"node": node, "depth": int(T.depth[m, node])}
        if kind == NUMERIC_SPLIT:
            v = float(xn[a]) if a < xn.shape[0] else math.nan
            thr = float(T.thr[m, node])
            step.update(feature=schema.num_names[a], kind="numeric", test=f"<= {thr!r}",
                        threshold=thr, value=None if math.isnan(v) else v)  # fmt: skip
            if math.isnan(v):
                nxt = _heaviest(T, m, node, n_classes)
                step["why"] = "missing: heaviest branch"
            else:
                nxt = _find(T, m, node, 0 if v <= thr else 1)
            step["branch"] = None if nxt < 0 else ("yes" if int(T.branch[m, nxt]) == 0 else "no")
        else:
            code = int(xc[a]) if a < xc.shape[0] else -1
            step.update(feature=schema.cat_names[a], kind="categorical",
                        value=_value_name(schema, code))  # fmt: skip
            if code == -1:
                nxt = _heaviest(T, m, node, n_classes)
                step["value"] = None
                step["why"] = "missing: heaviest branch"
            else:
                nxt = _find(T, m, node, code) if code >= 0 else -1
                if nxt < 0:
                    nxt = _find(T, m, node, OTHER_BRANCH)
                    step["why"] = ("no branch for the value: shared branch" if nxt >= 0
                                   else "no branch for the value: stopped")  # fmt: skip
            if nxt >= 0:
                b = int(T.branch[m, nxt])
                step["branch"] = "other" if b == OTHER_BRANCH else _value_name(schema, b)
            else:
                step["branch"] = None
            step["test"] = f"== {step['branch']!r}" if step["branch"] is not None else "none"
        steps.append(step)
        if nxt < 0:
            break
        node = nxt
    return {"path": steps, "leaf": _leaf(bank, m, node, last, xn, xc, n_classes)}


def _leaf(bank: Any, m: int, node: int, last: int, xn: np.ndarray, xc: np.ndarray,
          n_classes: int) -> dict:  # fmt: skip
    """Where ``tree_proba`` answers from, and with which predictor (``predict.leaf_proba``)."""
    T, P = bank.T, bank.params
    at = node
    out: dict[str, Any] = {}
    if int(T.kind[m, node]) != LEAF or not _weights(T, m, node, n_classes):
        at = last
        mode = "majority"
        out["fallback"] = ("the walk stopped at a split: the deepest node on the way with weight"
                           if int(T.kind[m, node]) != LEAF
                           else "the leaf has no weight yet: the deepest node on the way with "
                                "weight")  # fmt: skip
    else:
        lp = int(P.leaf_prediction)
        mode = MODES[lp]
        if lp in (PRED_NB, PRED_NBA):
            enough = P.nb_threshold <= 0.0 or node_weight(T, m, node, n_classes) >= P.nb_threshold
            s = int(T.slot[m, node])
            if lp == PRED_NBA:
                mc_ok, nb_ok = float(T.mc_ok[m, s]), float(T.nb_ok[m, s])
                out["majority_correct"], out["naive_bayes_correct"] = mc_ok, nb_ok
                mode = "majority" if mc_ok > nb_ok or not enough else "naive_bayes"
                out["rule"] = "naive Bayes adaptive: naive Bayes unless majority class has been right more often at this leaf"  # fmt: skip
            elif not enough:
                mode = "majority"
            if not enough:
                out["rule"] = f"leaf weight below nb_threshold {P.nb_threshold!r}: majority"
    if mode == "stump":
        out["stump"] = _stump(bank, m, node, xn, xc, n_classes)
    out.update(node=at, depth=int(T.depth[m, at]), prediction=mode,
               class_weights=dict(_weights(T, m, at, n_classes)))  # fmt: skip
    return out


def _stump(bank: Any, m: int, node: int, xn: np.ndarray, xc: np.ndarray, n_classes: int) -> dict:
    """The split a decision stump predicts with (its kernel's, ``predict.stump_split``) and the
    example's side of it (``predict.stump_apply``): the class weights of that side, else the
    node's."""
    schema = bank.schema
    B = bank.view()
    kind, a, thr = kernel(stump_split)(B, B, m, node, n_classes, schema.code_attr_array)
    kind, a, thr = int(kind), int(a), float(thr)
    if kind == NUMERIC_SPLIT:
        v = float(xn[a]) if a < xn.shape[0] else math.nan
        missing = math.isnan(v)
        return {"feature": schema.num_names[a], "kind": "numeric", "test": f"<= {thr!r}",
                "threshold": thr, "value": None if missing else v,
                "branch": None if missing else ("yes" if v <= thr else "no")}  # fmt: skip
    if kind == CATEGORICAL_SPLIT:
        code = int(xc[a]) if a < xc.shape[0] else -1
        value = _value_name(schema, code) if code >= 0 else None
        return {"feature": schema.cat_names[a], "kind": "categorical", "value": value,
                "test": "== value", "branch": value}  # fmt: skip
    return {"feature": None, "why": "no split is better than none: the class distribution"}


# what a split's merit measures (``TreeParams.criterion``): information gain in bits, or Gini gain
CRITERIA = {CRIT_INFO_GAIN: "info_gain", CRIT_GINI: "gini"}


def merit_criterion(bank: Any) -> str:
    """What the merits of ``bank``'s splits measure: ``"info_gain"`` (bits) or ``"gini"``."""
    return CRITERIA[int(bank.params.criterion)]


class Split(NamedTuple):
    """A split node of a member's tree, as :func:`member_splits` reads it."""

    feature: str
    kind: str  # "numeric" or "categorical"
    depth: int
    weight: float  # the class weight the node held when it split
    merit: float | None  # its merit when it split (None: unknown, a state saved before merits)
    seen: int | None  # the model's example count when it split (None: unknown)


def member_splits(bank: Any, m: int) -> list[Split]:
    """Tree ``m``'s splits (``Split``), in node order. (The weights are summed with numpy, ~100x
    faster than node by node for a large tree, to within rounding: this is for importance, not
    for an exact prediction.)"""
    T, schema = bank.T, bank.schema
    n = int(T.n_nodes[m])
    kinds = T.kind[m, :n]
    nodes = np.flatnonzero((kinds == NUMERIC_SPLIT) | (kinds == CATEGORICAL_SPLIT))
    if nodes.size == 0:
        return []
    at = np.maximum(T.d_at[m, nodes], 0)
    ln = T.d_len[m, nodes]
    run = np.concatenate(([0.0], np.cumsum(T.wv[m])))
    weights = np.where(ln > 0, run[at + ln] - run[at], 0.0).tolist()
    names = (schema.num_names, schema.cat_names)
    out = []
    for kind, attr, depth, w, merit, seen in zip(
        kinds[nodes].tolist(), T.attr[m, nodes].tolist(), T.depth[m, nodes].tolist(), weights,
        T.merit[m, nodes].tolist(), T.split_seen[m, nodes].tolist(), strict=True,
    ):  # fmt: skip
        numeric = kind == NUMERIC_SPLIT
        out.append(Split(names[0 if numeric else 1][attr], "numeric" if numeric else "categorical",
                         depth, w, None if merit == UNKNOWN_MERIT else merit,
                         None if seen < 0 else seen))  # fmt: skip
    return out
