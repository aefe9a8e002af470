"""Why an ensemble predicts what it does (``predict_explain_one``), and which features its trees
split on (``feature_importance``).

An explanation lists every member's class probabilities for the example and the weight its
vote has, with the rule that combines them (``VoteRule``, given by each ensemble:
``_vote_rule``), so that :func:`recompute` gives the prediction's probabilities back from the
explanation alone; for a Hoeffding-tree member also the example's path from the root to its
leaf and that leaf's class weights and predictor (``learners.compiled.member_path``).

Exactness. The members' probabilities are computed by the kernel that predicts
(``learners.compiled.tree_proba``, one call per member, or a Python member's
``predict_proba_one``), and :func:`recompute` adds them up in the kernels' order with the
kernels' operations (``_kernels.bagging_predict``, ``boosting_predict``, ``_adaptive``'s and
``_forest.forest_predict``; IEEE doubles in numba and in Python, no fused or reordered
arithmetic), so it gives the prediction's probabilities bit for bit. The stacked vote's
softmax takes ``exp`` in numba (LLVM's) and here in Python (the C library's), and the slow
path's meta-learner multiplies with numpy: there the recomputed probabilities agree within
1e-12 (``tests/test_explain.py`` checks both).

Cost. Nothing here runs unless asked: a plain prediction does exactly what it did before.
An explanation costs the prediction, one kernel call per member and a Python walk of each
member's path (measured in docs/engine-api.md, "Explanations").
"""

from __future__ import annotations

import json
import math
from typing import Any, NamedTuple

import numpy as np

from learners import NativeLearner
from learners.compiled import Split, member_path, member_splits, merit_criterion, tree_proba
from learners.jit import kernel


class NotExplainable(ValueError):
    """What was asked cannot be explained for this model (the message says why: feature
    importance of members that are not native trees); ``field`` says so to the service, which
    answers 422."""

    field = "explain"


class VoteRule(NamedTuple):
    """How an ensemble combines its members' probabilities, as its kernel does.

    ``weights[m]`` is member m's vote weight. Each member with a prediction (and, with
    ``skip_unweighted``, a weight > 0) adds ``weight * p`` to every class it gives (``majority``:
    ``weight`` to its top class; ``by_mass``: ``weight / mass * p``, mass the sum of its p, and
    ``weight`` to the total), the total is the sum of the weights added, and the classes are
    divided by it; nobody voting, ``first_alone`` makes member 0's probabilities the answer.
    ``meta`` (the stacked vote, once its meta-learner has learned): ``(W, learned)``, the
    meta-learner's weights at the classes known ([C, M C + 1]), whose softmax then is the
    answer."""

    # "average", "majority", "weighted", "boosting", "forest", "single", "output_codes"
    # (``stacking`` when ``meta`` decides)
    name: str
    weights: list[float]
    what: str  # what the weights are, in words
    majority: bool = False
    skip_unweighted: bool = False
    by_mass: bool = False
    first_alone: bool = False
    meta: tuple[np.ndarray, int] | None = None
    # output codes (leveraging bagging's): member m's bit of each class, in class order; its
    # members predict bits, and class c gets weight * P(its bit) (``majority``: weight if its
    # bit is the member's top bit), the classes then normalised by their sum
    codes: list[list[int]] | None = None


# ------------------------------------------------------------------------------ explanation
def explain_one(model: Any, x: dict) -> dict:
    """``model.predict_explain_one(x)``: the prediction of ``x`` and why (module doc)."""
    proba = model.predict_proba_one(x)  # (checks x as a prediction does; a deferred learn done)
    be = model._settled()
    rule = model._vote_rule()
    classes = list(model.classes)
    if be.native:
        members = _native_members(be.bank, x, model._member_trees(), classes,
                                  bits=rule.codes is not None)  # fmt: skip
    else:
        top = model._top_class
        members = []
        for m, member in enumerate(be.members):
            p = member.predict_proba_one(x)
            members.append({"member": m, "probabilities": dict(p), "top": top(p)})
    for m, d in enumerate(members):
        d["weight"] = rule.weights[m]
        d["votes"] = bool(d["probabilities"]) and (
            not rule.skip_unweighted or rule.weights[m] > 0.0
        )
    prediction = _argmax(proba, classes)
    ranked = sorted(proba.values(), reverse=True)
    out: dict[str, Any] = {
        "prediction": prediction,
        "probabilities": proba,
        "margin": (ranked[0] - (ranked[1] if len(ranked) > 1 else 0.0)) if ranked else None,
        "classes": classes,
        "vote": {
            "rule": rule.name,
            "weights": rule.what,
            "majority": rule.majority,
            "skip_unweighted": rule.skip_unweighted,
            "by_mass": rule.by_mass,
            "first_alone": rule.first_alone,
        },
        "members": members,
    }
    if rule.meta is not None:
        out["vote"]["rule"] = "stacking"
        out["meta_learner"] = _meta_view(rule.meta, len(members), classes)
    if rule.codes is not None:
        _decode_members(members, rule.codes, classes, prediction)
    else:
        for d in members:
            d["agrees"] = prediction is not None and d["top"] == prediction
    out["agreeing"] = [d["member"] for d in members if d["agrees"]]
    return out


def _decode_members(members: list[dict], codes: list[list[int]], classes: list,
                    prediction: Any) -> None:  # fmt: skip
    """Output-code members (``VoteRule.codes``): each predicts a bit; ``bit_1`` is its
    probability of bit 1 (what the vote reads), ``codes`` its bit of each class (in class
    order), ``probabilities`` what it gives each class (P(the class' bit)), ``top`` its top bit,
    and it agrees when the prediction's bit is its top bit."""
    at = {c: i for i, c in enumerate(classes)}
    for d, bits in zip(members, codes, strict=True):
        p_bits = d.pop("probabilities")  # {bit: p}, sparse
        p1 = p_bits.get(1, 0.0)
        d["bit_1"] = p1
        d["codes"] = bits
        d["probabilities"] = ({c: (p1 if b == 1 else 1.0 - p1) for c, b in zip(classes, bits,
                                                                           strict=True)}
                              if p_bits else {})  # fmt: skip
        d["agrees"] = (prediction is not None and d["top"] is not None
                       and bits[at[prediction]] == d["top"])  # fmt: skip


def _argmax(p: dict, classes: list) -> Any:
    """The first class (in class order) of the largest probability (``argmax_label``)."""
    if not p:
        return None
    best = max(p.values())
    for c in classes:
        if p.get(c) == best:
            return c
    return max(p, key=lambda k: p[k])


def _native_members(bank: Any, x: dict, trees: list[int], classes: list, *,
                    bits: bool = False) -> list[dict]:  # fmt: skip
    """Each member's probabilities (``tree_proba``, the kernel that predicts; member m's tree
    is ``trees[m]`` of the bank) and its tree's path and leaf (``member_path``); with ``bits``
    (output codes) over the two bits its tree learns, keyed 0 and 1."""
    s = bank.schema
    xn, xc, _, _ = s.encode_rows([x], grow=False)
    n = 2 if bits else s.n_classes
    if bits:
        classes = [0, 1]
    C = max(n, 2)
    pk = np.empty(C, np.int64)
    pv = np.empty(2 * C)
    hint = np.full((bank.M, 4), -1, np.int64)
    bank.sync()  # (the arrays ``member_path`` reads are the struct's)
    B = bank.view()
    proba = kernel(tree_proba)
    code_attr = s.code_attr_array
    out = []
    for m, t in enumerate(trees):
        hint[t, 0] = -1
        k = int(proba(B, B, t, xn[0], xc[0], n, code_attr, pk, pv, hint))
        codes, vals = pk[:k].tolist(), pv[:k].tolist()
        top = None
        best = 0.0
        for c, v in zip(codes, vals, strict=True):  # (``best_class``: the first largest)
            if v > best:
                best, top = v, classes[c]
        path = member_path(bank, t, xn[0], xc[0], n)
        leaf = path["leaf"]
        leaf["class_weights"] = {classes[c]: w for c, w in leaf["class_weights"].items()}
        probabilities = {classes[c]: v for c, v in zip(codes, vals, strict=True)}
        out.append({"member": m, "probabilities": probabilities, "top": top, "tree": path})
    return out


def _meta_view(meta: tuple[np.ndarray, int], M: int, classes: list) -> dict:
    """The stacked vote's meta-learner as the explanation shows it: per output class its bias
    (``None``: not learned yet, -inf) and per member its weight of each of that member's
    class probabilities."""
    W, learned = meta
    n = len(classes)
    bias = {c: (None if W[o, M * n] == -np.inf else float(W[o, M * n]))
            for o, c in enumerate(classes)}  # fmt: skip
    weights = [{co: {ci: float(W[o, m * n + i]) for i, ci in enumerate(classes)}
                for o, co in enumerate(classes)} for m in range(M)]  # fmt: skip
    return {"kind": "softmax_regression", "learned": learned, "bias": bias,
            "weights": weights}  # fmt: skip


# ------------------------------------------------------------------------------ recomputing
def recompute(explanation: dict) -> dict:
    """The prediction's probabilities from an explanation alone: the members' probabilities
    combined by its vote rule, as the ensemble's kernel combines them (module doc: bit for bit;
    the stacked vote within 1e-12)."""
    classes = explanation["classes"]
    vote = explanation["vote"]
    members = explanation["members"]
    meta = explanation.get("meta_learner")
    if meta is not None:
        return _softmax_vote(meta, members, classes)
    if vote["rule"] == "output_codes":
        return _codes_vote(vote, members, classes)
    at = _positions(classes)
    n = len(classes)
    out = [0.0] * n
    total = 0.0
    for d in members:
        p = d["probabilities"]
        w = d["weight"]
        if not p or (vote["skip_unweighted"] and not w > 0.0):
            continue
        if vote["majority"]:
            out[at[d["top"]]] += w
        elif vote["by_mass"]:
            mass = 0.0
            for v in p.values():
                mass += v
            if mass <= 0.0:
                continue
            wt = w / mass
            for c, v in p.items():
                out[at[c]] += wt * v
            total += wt * mass
            continue
        else:
            for c, v in p.items():
                out[at[c]] += w * v
        total += w
    if total > 0.0:
        out = [v / total for v in out]
    elif vote["first_alone"] and members:
        out = [0.0] * n
        for c, v in members[0]["probabilities"].items():
            out[at[c]] = v
    return _as_dict(out, classes)


def _positions(classes: list) -> dict:
    """Class -> its position, also under the names JSON gives a label as a key (``"1"``,
    ``"true"``), so that an explanation read back from the service recomputes too."""
    at: dict = {}
    for i, c in enumerate(classes):
        at.update({str(c): i, json.dumps(c): i})
    for i, c in enumerate(classes):
        at[c] = i
    return at


def _codes_vote(vote: dict, members: list[dict], classes: list) -> dict:
    """``_adaptive.codes_predict``: class c gets each member's weight times its probability of
    c's bit (majority: its weight when c's bit is its top bit); normalised by the sum."""
    n = len(classes)
    out = [0.0] * n
    for d in members:
        if d["top"] is None:
            continue
        wt, p1 = d["weight"], d["bit_1"]
        for c, bit in enumerate(d["codes"][:n]):
            if vote["majority"]:
                out[c] += wt if bit == d["top"] else 0.0
            else:
                out[c] += wt * (p1 if bit == 1 else 1.0 - p1)
    total = 0.0
    for v in out:
        total += v
    if total > 0.0:
        out = [v / total for v in out]
    return _as_dict(out, classes)


def _as_dict(vals: list[float], classes: list) -> dict:
    """A dense row as the bank answers it (``Schema.proba_dict``)."""
    total = sum(vals)
    if total <= 0.0:
        return {}
    if abs(total - 1.0) > 1e-12:
        vals = [v / total for v in vals]
    return dict(zip(classes, vals, strict=True))


def _get(d: dict, label: Any, default: Any = None) -> Any:
    """``d[label]``, or under the key JSON made of it (``"1"``, ``"true"``); else ``default``."""
    for key in (label, str(label), json.dumps(label)):
        if key in d:
            return d[key]
    return default


def _softmax_vote(meta: dict, members: list[dict], classes: list) -> dict:
    """``_stacking.meta_proba`` over the members' probabilities (0 for a class not given)."""
    out = []
    top = -math.inf
    for co in classes:
        b = _get(meta["bias"], co)
        z = -math.inf if b is None else b
        if z != -math.inf:
            for m, d in enumerate(members):
                wm = _get(meta["weights"][m], co)
                for ci in classes:
                    v = _get(d["probabilities"], ci, 0.0)
                    if v != 0.0:
                        z += _get(wm, ci) * v
        out.append(z)
        if z > top:
            top = z
    total = 0.0
    for o in range(len(out)):
        out[o] = math.exp(out[o] - top)
        total += out[o]
    return _as_dict([v / total for v in out], classes)


# ------------------------------------------------------------------------------ importance
def feature_importance(model: Any, *, decay: float | None = None,
                       half_life: float | None = None) -> dict:  # fmt: skip
    """Per feature, over the members' current trees (module doc; docs/engine-api.md, "Feature
    importance"):

    * ``splits`` (split nodes on it), ``weight`` (the class weight those nodes held when they
      split: the examples each split was made on), ``depth_weighted`` (each split counted
      ``2**-depth``, or ``decay**depth``: ``decay`` in (0, 1] is a weight per level of *depth*,
      not of time) and ``share`` (its part of all splits' weight);
    * ``merit`` (the merits its splits had when they were made, summed: the gain the Hoeffding
      test chose each with, information gain in bits or Gini gain, ``criterion``),
      ``merit_share`` (its part of all splits' merit) and ``merit_unknown`` (its splits of
      unknown merit: made before merits were kept, in a state saved then; they count in
      ``splits`` and ``weight``, not in ``merit``);
    * with ``half_life`` (examples, > 0), recency: a split made ``h`` examples ago (``h`` the
      model's example count now minus then) weighs ``0.5 ** (h / half_life)``;
      ``recent_splits`` and ``recent_merit`` are the weighted sums of its splits and of their
      merits, ``recent_share`` its part of all recent merit (splits of unknown time weigh 0;
      without ``half_life`` the three are ``None``).

    A tree replaced after a drift takes its splits with it, so the counts follow the model as
    it is; a forest's background trees count once they replace their foreground tree (with the
    merits and times of when they split). Members are summed alike, whatever their vote
    weight."""
    if decay is not None and not (_number(decay) and 0.0 < decay <= 1.0):
        raise ValueError(f"decay must be a number in (0, 1] (a weight per level of depth), "
                         f"got {decay!r}")  # fmt: skip
    if half_life is not None and not (_number(half_life) and 0.0 < half_life < math.inf):
        raise ValueError(f"half_life must be a finite number of examples > 0, got {half_life!r}")
    be = model._settled()
    if not be.native:
        raise NotExplainable("feature importance needs native trees (hoeffding_tree, "
                             "naive_bayes, stump members); this model's members are "
                             f"{type(model.learner).__name__} objects")  # fmt: skip
    bank = be.bank
    bank.sync()
    trees = model._member_trees()
    now = int(model.n_seen)
    base = 0.5 if decay is None else float(decay)
    stats: dict[str, dict[str, Any]] = {}
    for t in trees:
        for split in member_splits(bank, t):
            d = stats.get(split.feature)
            if d is None:
                d = stats[split.feature] = _feature_stats(split.kind, half_life is not None)
            _add_split(d, split, base, now, half_life)
    _add_shares(stats)
    ranked = dict(sorted(stats.items(), key=lambda kv: (-kv[1]["weight"], kv[0])))
    return {"members": len(trees), "features": ranked,
            "splits": sum(d["splits"] for d in stats.values()),
            "merit": math.fsum(d["merit"] for d in stats.values()),
            "merit_unknown": sum(d["merit_unknown"] for d in stats.values()),
            "criterion": merit_criterion(bank), "examples": now,
            "half_life": None if half_life is None else float(half_life)}  # fmt: skip


def _number(v: Any) -> bool:
    """A real number (not a bool, not NaN)."""
    return isinstance(v, int | float) and not isinstance(v, bool) and not math.isnan(v)


def _feature_stats(kind: str, recent: bool) -> dict[str, Any]:
    """A feature's sums before its first split (``feature_importance``)."""
    zero = 0.0 if recent else None
    return {"kind": kind, "splits": 0, "weight": 0.0, "depth_weighted": 0.0, "merit": 0.0,
            "merit_unknown": 0, "recent_splits": zero, "recent_merit": zero}  # fmt: skip


def _add_split(d: dict[str, Any], split: Split, base: float, now: int,
               half_life: float | None) -> None:  # fmt: skip
    """Count one split in its feature's sums ``d``: ``base**depth`` its depth weight; with
    ``half_life``, ``0.5 ** ((now - split.seen) / half_life)`` its recency (0 when its time is
    unknown; a time past ``now``, which only a state put together by hand has, reads as now)."""
    d["splits"] += 1
    d["weight"] += split.weight
    d["depth_weighted"] += base**split.depth
    if split.merit is None:
        d["merit_unknown"] += 1
    else:
        d["merit"] += split.merit
    if half_life is None or split.seen is None:
        return
    recency = 0.5 ** (max(now - split.seen, 0) / half_life)
    d["recent_splits"] += recency
    if split.merit is not None:
        d["recent_merit"] += split.merit * recency


def _add_shares(stats: dict[str, dict[str, Any]]) -> None:
    """Each feature's part of all features' weight, merit and recent merit (0 when that
    total is 0; ``recent_share`` ``None`` without a half-life)."""
    for key, share in (("weight", "share"), ("merit", "merit_share"),
                       ("recent_merit", "recent_share")):  # fmt: skip
        total = math.fsum(d[key] for d in stats.values() if d[key] is not None)
        for d in stats.values():
            d[share] = None if d[key] is None else (d[key] / total if total > 0 else 0.0)


def is_native(model: Any) -> bool:
    """Whether the model's members are native trees (paths and importance available)."""
    return isinstance(model._member_prototype(), NativeLearner)
