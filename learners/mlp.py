"""A multilayer perceptron trained by online backpropagation: the thesis' neural-network base model.

Oza (2001, §3.5) runs bagging and boosting over "neural networks trained by backpropagation": a
batch network cycles 10 times (epochs) through its training set, an online one makes one update
step per example (Table 3.6). ``MLP`` is the online network, one hidden layer of sigmoid units;
a batch network is the same learner fed its training set ``epochs`` times.

State is a handful of numpy arrays (weights, input statistics, what has been learned) grown by
doubling as features, categories and classes appear; the per-example work runs in one compiled
kernel (``mlp_run``) per call, with an interpreted twin (``learners.jit``). The initial weights
are a pure function of ``init_seed`` and of each weight's position (a counter-based hash): no
hidden RNG state, so the same ``init_seed`` and the same stream give bit-identical networks, and growing the
arrays later or sooner gives the same values.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numba as nb
import numpy as np

from .base import (
    Features,
    Label,
    ManyMixin,
    RiverEstimator,
    State,
    argmax_label,
    check_weight,
    check_weights,
)
from .jit import kernel, one_specialisation
from .limits import LimitError, Limits
from .schema import Schema

__all__ = ["MLP", "init_weights", "member_seed", "mlp_run"]

Z_CLIP = 5.0  # standardised numeric inputs are clipped to [-Z_CLIP, Z_CLIP]
S_CLIP = 40.0  # pre-activations are clipped to [-S_CLIP, S_CLIP] before the sigmoid
# what a weight block initialises (the hash keys): hidden bias, numeric inputs, category inputs,
# output weights, output bias
_B_HID, _W_NUM, _W_CAT, _W_OUT, _B_OUT = 1, 2, 3, 4, 5
# the state arrays that are sums of weights, never < 0 (a negative one made a learn divide by 0);
# any of them may be inf or NaN after hostile values (1e300 squared), as may the weights
_SUMS = ("stat_w", "code_w", "cls_w")
_MEMBER = 6  # the hash key of an ensemble member's init_seed
_M64 = (1 << 64) - 1


def _mix(z: Any) -> Any:
    """splitmix64's finaliser on a uint64 array or scalar (wrapping arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def init_weights(seed: int, block: int, rows: range, n_cols: int, scale: float) -> np.ndarray:
    """Initial weights ``[len(rows), n_cols]``, uniform in ``[-scale, scale)``: entry ``(r, c)`` is
    a hash of ``(seed, block, r, c)`` alone, so a block grown later gets the same values."""
    r = np.arange(rows.start, rows.stop, dtype=np.uint64)[:, None]
    c = np.arange(n_cols, dtype=np.uint64)[None, :]
    with np.errstate(over="ignore"):
        key = np.uint64(seed & _M64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(block)
        z = _mix(_mix(key ^ (r * np.uint64(0xD1B54A32D192ED03))) ^ (c + np.uint64(1)))
    u = (z >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))  # [0, 1)
    return (2.0 * u - 1.0) * scale


def member_seed(init_seed: int, m: int) -> int:
    """The ``init_seed`` of member ``m`` of an ensemble whose base network has ``init_seed``:
    member 0 keeps it, member ``m >= 1`` gets a hash of ``(init_seed, m)`` (53 bits, exact in
    JSON), so every member starts from its own weights and a one-member ensemble is the network."""
    if m == 0:
        return init_seed
    with np.errstate(over="ignore"):
        key = np.uint64(init_seed & _M64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(_MEMBER)
        z = _mix(_mix(key) ^ np.uint64(m))
    return int(z >> np.uint64(11))


@nb.njit(cache=True)
def _sigmoid(s: float) -> float:
    if s > S_CLIP:
        s = S_CLIP
    elif s < -S_CLIP:
        s = -S_CLIP
    return 1.0 / (1.0 + math.exp(-s))


@nb.njit(cache=True)
def _forward(xn, xc, r, stat_w, stat_mean, stat_m2, code_w, w_num, w_cat, b_hid, w_out, b_out,
             cls_w, z, hid, out):  # fmt: skip  # noqa: ANN001
    """Hidden and output activations of row ``r`` (outputs only for the learned classes; the
    others are set to 0). Inputs never learned (feature or category weight 0) are ignored."""
    J = xn.shape[1]
    H = b_hid.shape[0]
    for j in range(J):
        v = xn[r, j]
        if v != v or stat_w[j] <= 0.0:  # missing, or a feature not learned yet: the mean
            z[j] = 0.0
            continue
        var = stat_m2[j] / stat_w[j]
        sd = math.sqrt(var) if var > 1e-12 else 1.0
        t = (v - stat_mean[j]) / sd
        z[j] = Z_CLIP if t > Z_CLIP else (-Z_CLIP if t < -Z_CLIP else t)
    for h in range(H):
        hid[h] = b_hid[h]
    for j in range(J):
        if z[j] != 0.0:
            for h in range(H):
                hid[h] += w_num[j, h] * z[j]
    for a in range(xc.shape[1]):
        c = xc[r, a]
        if c >= 0 and code_w[c] > 0.0:  # one-hot: the weight row of the category
            for h in range(H):
                hid[h] += w_cat[c, h]
    for h in range(H):
        hid[h] = _sigmoid(hid[h])
    for k in range(out.shape[0]):
        out[k] = 0.0
        if k < cls_w.shape[0] and cls_w[k] > 0.0:
            s = b_out[k]
            for h in range(H):
                s += w_out[k, h] * hid[h]
            out[k] = _sigmoid(s)


@nb.njit(cache=True, nogil=True)
def mlp_run(xn, xc, y, w, do_predict, do_learn, learning_rate, max_step_weight, stat_w,
            stat_mean, stat_m2, code_w, cls_w, w_num, w_cat, b_hid, w_out, b_out, proba):  # fmt: skip  # noqa: ANN001
    """Predict and/or learn rows in order (row ``r`` is predicted after rows ``< r`` were learned).

    ``xn[R, J]``: numeric values (NaN: missing); ``xc[R, A]``: category codes (< 0: missing or
    unseen); ``y[R]``: class codes; ``w[R]``: sample weights. ``proba[R, K]`` receives the
    normalised outputs of the learned classes (0 for the others; all 0 before any learning).
    Learning a row with ``w > 0``: the weighted running mean/variance of its numeric features are
    updated, then one gradient step of size ``learning_rate * min(w, max_step_weight)`` on the
    cross-entropy of the sigmoid outputs (target 1 for ``y``, 0 for the other learned classes).
    """
    R = xn.shape[0]
    J = xn.shape[1]
    H = b_hid.shape[0]
    K = cls_w.shape[0]
    z = np.zeros(J)
    hid = np.zeros(H)
    out = np.zeros(K)
    d_hid = np.zeros(H)
    for r in range(R):
        if do_predict:
            _forward(xn, xc, r, stat_w, stat_mean, stat_m2, code_w, w_num, w_cat, b_hid, w_out,
                     b_out, cls_w, z, hid, out)  # fmt: skip
            total = 0.0
            for k in range(K):
                total += out[k]
            for k in range(K):
                proba[r, k] = out[k] / total if total > 0.0 else 0.0
        wr = w[r]
        if not do_learn or not wr > 0.0:
            continue
        for j in range(J):  # weighted Welford update of the input statistics
            v = xn[r, j]
            if v == v:
                stat_w[j] += wr
                delta = v - stat_mean[j]
                stat_mean[j] += delta * wr / stat_w[j]
                stat_m2[j] += wr * delta * (v - stat_mean[j])
        for a in range(xc.shape[1]):
            c = xc[r, a]
            if c >= 0:
                code_w[c] += wr
        cls_w[y[r]] += wr
        _forward(xn, xc, r, stat_w, stat_mean, stat_m2, code_w, w_num, w_cat, b_hid, w_out, b_out,
                 cls_w, z, hid, out)  # fmt: skip
        step = learning_rate * (wr if wr < max_step_weight else max_step_weight)
        for h in range(H):
            d_hid[h] = 0.0
        for k in range(K):
            if cls_w[k] <= 0.0:
                continue
            d_out = (1.0 if k == y[r] else 0.0) - out[k]  # -dLoss/ds of a sigmoid + cross-entropy
            for h in range(H):
                d_hid[h] += d_out * w_out[k, h]
                w_out[k, h] += step * d_out * hid[h]
            b_out[k] += step * d_out
        for h in range(H):
            d_hid[h] *= hid[h] * (1.0 - hid[h])
            b_hid[h] += step * d_hid[h]
        for j in range(J):
            if z[j] != 0.0:
                for h in range(H):
                    w_num[j, h] += step * d_hid[h] * z[j]
        for a in range(xc.shape[1]):
            c = xc[r, a]
            if c >= 0:
                for h in range(H):
                    w_cat[c, h] += step * d_hid[h]


one_specialisation(globals())


class MLP(ManyMixin, RiverEstimator):
    """One-hidden-layer perceptron (sigmoid units) trained by online backpropagation.

    Inputs: every numeric feature is standardised online, ``z = (x - mean) / sd`` with the
    weighted running mean and variance of the values learned so far, the current example's value
    included (``sd = 1`` while the variance is 0), clipped to [-5, 5]; a missing value is ``z = 0``
    (the mean). Every (categorical feature, value) pair the schema knows is a one-hot input.
    Features, categories and classes not learned yet (first seen at prediction, or only with
    ``w = 0``) are ignored. Outputs: one sigmoid unit per class; ``predict_proba_one`` normalises
    the outputs of the classes learned so far to sum to 1.

    Learning ``(x, y)`` with weight ``w > 0`` is *one* backpropagation step on the cross-entropy
    of the outputs (target 1 for ``y``, 0 for the other classes) with step size
    ``learning_rate * min(w, max_step_weight)``: a sample weight scales the gradient step (MOA's
    reading of Fig. 3.3's ``k``) up to a cap. The default cap is 1: a Poisson ``k >= 1`` makes
    one ordinary step, a weight below 1 a smaller one. Larger caps hurt online boosting, whose
    λ (and so ``k``) grows on hard examples: 10 networks, majority vote, 3-5 seeds, Synthetic1 /
    Synthetic2 / Balance / Car, cap 1 vs 10: 0.667 / 0.849 / 0.883 / 0.868 vs 0.634 / 0.773 /
    0.867 / 0.857; online bagging is the same within 0.01 either way. A weighted step is *not*
    ``k`` repeated updates: for small steps the two agree to first order in ``learning_rate``
    (``tests/test_mlp.py`` checks this), but the network is not proportional in Oza's sense
    (§3.4), as the thesis notes of its networks.

    Initial weights are uniform in ``[-init_scale, init_scale)``, each a hash of ``init_seed`` and its
    position (input index, hidden unit, class index), so the weights of a class or an input that
    appears later are fixed in advance. Ensembles build member ``m`` with ``member_clone(m)``: its
    ``init_seed`` is ``member_seed(init_seed, m)`` (member 0 keeps ``init_seed``), so the members
    start from different weights, as independently initialised networks do; each member's state
    records its own ``init_seed``. (Before issue 20 the members shared ``init_seed``; their saved
    states still load and go on exactly, with shared weights.)

    Parameters
    ----------
    n_hidden
        Hidden units.
    learning_rate
        Step size of one update with ``w = 1``.
    max_step_weight
        Cap on the sample weight's multiplication of the step.
    init_scale
        Half-width of the initial weights' range.
    init_seed
        Key of the initial weights (``seed`` is the ensembles' Poisson key).
    limits
        Features, values and classes the network may hold (``learners.Limits``).

    Examples
    --------
    >>> from learners import MLP
    >>> model = MLP(n_hidden=4, learning_rate=0.5, init_seed=1)
    >>> for i in range(400):
    ...     x = {"a": float(i % 7), "b": "uv"[i % 2]}
    ...     model.learn_one(x, x["a"] >= 3)
    >>> model.predict_one({"a": 6.0, "b": "u"}), model.predict_one({"a": 0.0, "b": "v"})
    (True, False)

    References
    ----------
    Oza, N. C. (2001). Online Ensemble Learning. PhD thesis, UC Berkeley, §2.1.3, §3.5.
    Rumelhart, D. E., Hinton, G. E. & Williams, R. J. (1986). Learning representations by
    back-propagating errors. Nature 323, 533-536.
    """

    def __init__(self, *, n_hidden: int = 10, learning_rate: float = 0.1,
                 max_step_weight: float = 1.0, init_scale: float = 0.5, init_seed: int = 0,
                 limits: Limits | dict | None = None) -> None:  # fmt: skip
        if not isinstance(n_hidden, int) or isinstance(n_hidden, bool) or not 1 <= n_hidden <= 4096:
            raise ValueError(f"n_hidden must be an int in [1, 4096], got {n_hidden!r}")
        for name, v in (("learning_rate", learning_rate), ("max_step_weight", max_step_weight),
                        ("init_scale", init_scale)):  # fmt: skip
            if not isinstance(v, int | float) or isinstance(v, bool) or not 0 < v < math.inf:
                raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
        if not isinstance(init_seed, int) or isinstance(init_seed, bool) or init_seed < 0:
            raise ValueError(f"init_seed must be an int >= 0, got {init_seed!r}")
        self.n_hidden = n_hidden
        self.learning_rate = float(learning_rate)
        self.max_step_weight = float(max_step_weight)
        self.init_scale = float(init_scale)
        self.init_seed = init_seed
        self.limits = limits
        self._schema = Schema(Limits.coerce(limits))
        H = n_hidden
        self._stat_w, self._stat_mean, self._stat_m2 = np.zeros(0), np.zeros(0), np.zeros(0)
        self._code_w, self._cls_w = np.zeros(0), np.zeros(0)
        self._w_num, self._w_cat, self._w_out = np.zeros((0, H)), np.zeros((0, H)), np.zeros((0, H))
        self._b_out = np.zeros(0)
        self._b_hid = init_weights(init_seed, _B_HID, range(1), H, self.init_scale)[0]
        self._grow(4, 4, 2)

    # ---------------------------------------------------------------- arrays
    @staticmethod
    def _capacity(have: int, need: int, exact: bool = False) -> int:
        """Rows an array of ``have`` rows holds once it has room for ``need`` (doubling, or
        just ``need`` when ``exact``)."""
        return have if need <= have else (need if exact else max(need, 2 * have, 4))

    def _grow(self, n_num: int, n_codes: int, n_classes: int, *, exact: bool = False) -> None:
        """Room for ``n_num`` numeric features, ``n_codes`` categories and ``n_classes`` classes
        (capacities double, or grow to just that when ``exact``: near ``max_state_bytes``); new
        weights take their hashed initial values."""
        H, s, seed = self.n_hidden, self.init_scale, self.init_seed

        def more(arr: np.ndarray, need: int, block: int | None) -> np.ndarray:
            have = arr.shape[0]
            if need <= have:
                return arr
            cap = self._capacity(have, need, exact)
            if block is None:
                return np.concatenate([arr, np.zeros((cap - have,) + arr.shape[1:])])
            new = init_weights(seed, block, range(have, cap), H, s)
            return np.concatenate([arr, new[:, 0] if arr.ndim == 1 else new])

        self._stat_w = more(self._stat_w, n_num, None)
        self._stat_mean = more(self._stat_mean, n_num, None)
        self._stat_m2 = more(self._stat_m2, n_num, None)
        self._w_num = more(self._w_num, n_num, _W_NUM)
        self._code_w = more(self._code_w, n_codes, None)
        self._w_cat = more(self._w_cat, n_codes, _W_CAT)
        self._cls_w = more(self._cls_w, n_classes, None)
        self._w_out = more(self._w_out, n_classes, _W_OUT)
        self._b_out = more(self._b_out, n_classes, _B_OUT)

    @property
    def memory_bytes(self) -> int:
        """Bytes of the network's arrays as allocated (with their room to grow)."""
        return self.memory_bytes_for(0, 0, 0)

    def memory_bytes_for(self, n_num: int, n_codes: int, n_classes: int, *,
                         exact: bool = False) -> int:  # fmt: skip
        """Bytes the arrays would take once grown to hold ``n_num`` numeric features, ``n_codes``
        categories and ``n_classes`` classes (each array's rows as ``_grow`` allocates them)."""

        def cap(have: int, need: int) -> int:
            return self._capacity(have, need, exact)

        return 8 * (
            cap(self._stat_w.shape[0], n_num) * (3 + self.n_hidden)  # 3 input statistics
            + cap(self._code_w.shape[0], n_codes) * (1 + self.n_hidden)
            + cap(self._cls_w.shape[0], n_classes) * (2 + self.n_hidden)  # + the output bias
            + self.n_hidden
        )

    def _check_bytes(self, mark: tuple) -> bool:
        """Whether the arrays must grow to just what the schema holds now (doubling would pass
        ``max_state_bytes``); ``LimitError`` (the schema rolled back to ``mark``) if even that,
        plus the schema's text, would exceed it."""
        s = self._schema
        limit = s.limits.max_state_bytes
        if self.memory_bytes_for(s.n_num, s.n_codes, s.n_classes) + s.held_bytes() <= limit:
            return False
        need = self.memory_bytes_for(s.n_num, s.n_codes, s.n_classes, exact=True) + s.held_bytes()
        if need <= limit:
            return True
        s.rollback(mark)
        raise LimitError("max_state_bytes", limit, "model",
                         f"learning this would make the model's state {need:,} bytes")  # fmt: skip

    def declare(self, features: dict[str, str] | None = None, classes: list | None = None) -> None:
        """Pre-seed feature kinds and class labels (see docs/engine-api.md); an error leaves
        the network as it was."""
        s = self._schema
        mark = s.mark()
        try:
            s.declare(features, classes)
            if s.mark() != mark:
                self._grow(s.n_num, s.n_codes, s.n_classes, exact=self._check_bytes(mark))
        except Exception:
            s.rollback(mark)
            raise

    @property
    def classes(self) -> list:
        """Labels learned so far, in order of first appearance."""
        return [c for c, w in zip(self._schema.classes, self._cls_w, strict=False) if w > 0]

    # ---------------------------------------------------------------- the model API
    def _run(self, X: list, ys: list | None, ws: Any, *, predict: bool, learn: bool) -> list:
        do_predict, do_learn = predict, learn
        R = len(X)
        w = np.ones(R) if ws is None else check_weights(ws, R)
        if not do_learn:
            w = np.zeros(R)
        s = self._schema
        mark = s.mark()
        xn, xc, yc, _ = s.encode_rows(X, grow=do_learn, ys=ys if do_learn else None)
        if s.mark() != mark:  # the state grows only with what the schema learned
            self._grow(s.n_num, s.n_codes, s.n_classes, exact=self._check_bytes(mark))
        K = self._cls_w.shape[0]
        proba = np.zeros((R if do_predict else 0, K))
        kernel(mlp_run)(xn, xc, yc, w, do_predict, do_learn, self.learning_rate,
                        self.max_step_weight, self._stat_w, self._stat_mean, self._stat_m2,
                        self._code_w, self._cls_w, self._w_num, self._w_cat, self._b_hid,
                        self._w_out, self._b_out, proba)  # fmt: skip
        if not do_predict:
            return []
        labels = s.classes
        return [{labels[k]: p for k, p in enumerate(row) if p > 0.0} for row in proba.tolist()]

    def learn_one(self, x: Features, y: Label, *, w: float = 1.0) -> None:  # type: ignore[override]
        """One backpropagation step on ``(x, y)`` with sample weight ``w`` (``w = 0``: nothing)."""
        check_weight(w)
        if w == 0:
            return
        self._run([x], [y], [w], predict=False, learn=True)

    def predict_proba_one(self, x: Features) -> dict[Label, float]:  # type: ignore[override]
        """Normalised outputs of the classes learned so far (``{}`` before any training)."""
        return self._run([x], None, None, predict=True, learn=False)[0]

    def predict_one(self, x: Features) -> Label | None:  # type: ignore[override]
        """The most probable class (ties: the class learned first); ``None`` before training."""
        return argmax_label(self.predict_proba_one(x))

    def predict_learn_one(self, x: Features, y: Label, *, w: float = 1.0) -> dict[Label, float]:
        """Predict, then learn (prequential); the probabilities given before learning ``x``."""
        return self._run([x], [y], [w], predict=True, learn=True)[0]

    def member_clone(self, m: int) -> MLP:
        """A fresh network to be member ``m`` of an ensemble: the same parameters, its own initial
        weights (``init_seed = member_seed(init_seed, m)``)."""
        return self.clone({"init_seed": member_seed(self.init_seed, m)})

    # ---------------------------------------------------------------- state
    def params(self) -> dict[str, Any]:
        """The constructor arguments (JSON-able)."""
        limits = self.limits
        if limits is not None and not isinstance(limits, dict):
            limits = limits.to_dict() if hasattr(limits, "to_dict") else None
        return {"n_hidden": self.n_hidden, "learning_rate": self.learning_rate,
                "max_step_weight": self.max_step_weight, "init_scale": self.init_scale,
                "init_seed": self.init_seed, "limits": limits}  # fmt: skip

    def to_state(self) -> State:
        """``{"header": JSON-able dict, "arrays": {name: ndarray}}`` — no pickle. Only the used
        rows of each array are stored (the rest are initial values, recomputed on load)."""
        s = self._schema
        J, C, K = s.n_num, s.n_codes, s.n_classes
        header = {"format": "chorus-state", "version": 1, "type": "MLP", "learner": "mlp",
                  "params": self.params(), "schema": s.to_header()}  # fmt: skip
        json.dumps(header)
        arrays = {
            "stat_w": self._stat_w[:J], "stat_mean": self._stat_mean[:J],
            "stat_m2": self._stat_m2[:J], "w_num": self._w_num[:J], "code_w": self._code_w[:C],
            "w_cat": self._w_cat[:C], "cls_w": self._cls_w[:K], "w_out": self._w_out[:K],
            "b_out": self._b_out[:K], "b_hid": self._b_hid,
        }  # fmt: skip
        return {"header": header, "arrays": {k: v.copy() for k, v in arrays.items()}}

    @classmethod
    def from_state(cls, state: State) -> MLP:
        """Rebuild a network from ``to_state()`` output."""
        h, a = state["header"], state["arrays"]
        if h.get("type") != "MLP":
            raise ValueError(f"state is for {h.get('type')!r}, not MLP")
        net = cls(**h["params"])
        net._schema = Schema.from_header(h["schema"], net._schema.limits)
        s = net._schema
        net._grow(s.n_num, s.n_codes, s.n_classes)
        for name, n in (("stat_w", s.n_num), ("stat_mean", s.n_num), ("stat_m2", s.n_num),
                        ("w_num", s.n_num), ("code_w", s.n_codes), ("w_cat", s.n_codes),
                        ("cls_w", s.n_classes), ("w_out", s.n_classes), ("b_out", s.n_classes),
                        ("b_hid", net.n_hidden)):  # fmt: skip
            arr = np.asarray(a[name], dtype=np.float64)
            if arr.shape[0] != n:
                raise ValueError(f"MLP state: {name} has {arr.shape[0]} rows, expected {n}")
            if name in _SUMS and (arr < 0).any():  # (inf and NaN: hostile values make them)
                raise ValueError(f"MLP state {name}: a negative sum (a forged or damaged state)")
            getattr(net, "_" + name)[:n] = arr
        return net

    def __repr__(self) -> str:
        return (f"MLP(n_hidden={self.n_hidden}, learning_rate={self.learning_rate!r}, "
                f"max_step_weight={self.max_step_weight!r}, init_scale={self.init_scale!r}, "
                f"init_seed={self.init_seed})")  # fmt: skip
