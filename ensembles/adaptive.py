"""The options of adaptive online bagging (ADWIN, leveraging, weighted vote, window) and the
arrays behind them: built, saved, loaded and described here; the kernels are in
``_adaptive.py``."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from . import _adaptive as ak
from . import adwin, ddm, stacking
from .diversity import window_diversity

DRIFTS = {None: ak.NO_DRIFT, "adwin": ak.DRIFT_ADWIN, "ddm": ak.DRIFT_DDM}
IMBALANCES = {None: ak.NO_IMBALANCE, "oob": ak.OOB, "uob": ak.UOB}
# the class sizes' time decay. Wang, Minku & Yao's is 0.9 (CIEL 2013, kept in TKDE 2015), which
# caps OOB's rate near 1 / (1 - 0.9) = 10 whatever the class ratio; 0.99 (the default until
# issue 40's second pass) gives a class of 1 % about half its ratio (the example's own
# 1 - decay counts); 0.9999 measured best for OOB on the imbalanced streams of
# benchmarks/results/imbalance.md and left UOB unchanged (docs/engine-api.md)
IMBALANCE_DECAY = 0.9999
DEFAULT_WINDOW = 1000  # when drift or the weighted vote is on and no window is given
ADWIN_CLOCK = 32  # MOA's defaults
ADWIN_MIN_LEN = 5


def check_options(*, poisson_lambda: Any, drift: Any, drift_delta: Any, window: Any,
                  output_codes: Any = False) -> None:  # fmt: skip
    """``ValueError`` naming the valid choices of each option."""
    if not isinstance(output_codes, bool):
        raise ValueError(f"output_codes must be true or false, got {output_codes!r}")
    if drift not in DRIFTS:
        raise ValueError(f"drift must be one of {list(DRIFTS)}, got {drift!r}")
    if (
        not isinstance(poisson_lambda, int | float)
        or isinstance(poisson_lambda, bool)
        or not (0.0 < poisson_lambda <= 100.0 and math.isfinite(poisson_lambda))
    ):
        raise ValueError(f"poisson_lambda must be a number in (0, 100], got {poisson_lambda!r}")
    if not isinstance(drift_delta, int | float) or not 0.0 < drift_delta < 1.0:
        raise ValueError(f"drift_delta must be in (0, 1), got {drift_delta!r}")
    if window is not None and (
        not isinstance(window, int | np.integer) or isinstance(window, bool)
        or not 0 <= window <= 100_000
    ):  # fmt: skip
        raise ValueError(f"window must be None or an integer in [0, 100000], got {window!r}")


def check_imbalance(imbalance: Any, decay: Any) -> None:
    """``ValueError`` naming the valid choices of ``imbalance`` and ``imbalance_decay``."""
    if imbalance not in IMBALANCES:
        raise ValueError(f"imbalance must be one of {list(IMBALANCES)}, got {imbalance!r}")
    if (not isinstance(decay, int | float) or isinstance(decay, bool)
            or not 0.0 < decay < 1.0):  # fmt: skip
        raise ValueError(f"imbalance_decay must be a number in (0, 1), got {decay!r}")


def imbalance_learner(learner: Any) -> Any:
    """The members' learner of OOB / UOB: a Hoeffding tree with ``nb_zero_variance="auto"``
    becomes one with ``"skip"`` (river's naive-Bayes rule for a class of zero variance, which
    measured better under oversampling: docs/engine-api.md); any other learner as it is."""
    if getattr(learner, "nb_zero_variance", None) != "auto":
        return learner
    params = learner.params()
    params["nb_zero_variance"] = "skip"
    return type(learner)(**params)


def zero_variance_param(learner: Any) -> dict[str, str]:
    """What an OOB / UOB spec records of its trees' ``nb_zero_variance`` (always, so that a
    spec without it is one written before the ``"auto"`` rule: ``legacy_imbalance_spec``)."""
    rule = getattr(learner, "nb_zero_variance", None)
    return {} if rule is None else {"nb_zero_variance": rule}


def legacy_imbalance_spec(spec: dict) -> dict:
    """A saved spec (a state's, a store's) with ``imbalance`` and a Hoeffding tree that does
    not name ``nb_zero_variance`` was written when the trees' default was ``"point"``: that,
    named (its model learns and predicts as it did)."""
    params = spec.get("params")
    if (
        not isinstance(params, dict) or params.get("imbalance") is None
        or spec.get("learner", "hoeffding_tree") != "hoeffding_tree"
        or "nb_zero_variance" in params
    ):  # fmt: skip
        return spec
    return {**spec, "params": {**params, "nb_zero_variance": "point"}}


def int_params(seed: int, vote: int, drift: str | None, window: int, *, codes: bool = False,
               lambda_rule: int = 0, imbalance: str | None = None) -> np.ndarray:  # fmt: skip
    """The adaptive kernels' ``ipar`` (``_adaptive.SEED`` .. ``_adaptive.IMBALANCE``)."""
    return np.array([seed, vote, DRIFTS[drift], window, ADWIN_CLOCK, ADWIN_MIN_LEN, 0, int(codes),
                     lambda_rule, IMBALANCES[imbalance]], dtype=np.int64)  # fmt: skip


def new_state(n_models: int, window: int, poisson_lambda: float, drift_delta: float,
              imbalance_decay: float = IMBALANCE_DECAY) -> ak.AdaptiveStruct:  # fmt: skip
    """Fresh arrays for ``n_models`` members and a window of ``window`` examples (an
    ``AdaptiveState`` in the ``AdaptiveStruct`` the kernels get)."""
    M = n_models
    fpar = [float(poisson_lambda), float(drift_delta), stacking.RATE, stacking.L2, stacking.INIT,
            float(imbalance_decay)]  # fmt: skip
    arrays = ak.AdaptiveState(
        fpar=np.array(fpar),
        adwin=adwin.adwin_state(M),
        ddm=ddm.ddm_state(M),
        win_pred=np.full((window, M), ak.RESET, np.int32),
        win_y=np.zeros(window, np.int64),
        win_ok=np.zeros(M, np.int64),
        win_n=np.zeros(M, np.int64),
        resets=np.zeros(M, np.int64),
        counters=np.zeros(3, np.int64),
        mpred=np.full(M, -1, np.int64),
        lam=np.zeros((3, M)),
        meta_w=np.zeros((0, 1)),  # (capacity 0: the stacked vote's kernels grow them)
        meta_x=np.zeros((M + 1, 0)),
        meta_n=np.zeros(1, np.int64),
        cls_w=np.zeros(0),  # (capacity 0: imbalance_rate grows it)
    )
    return ak.AdaptiveStruct(arrays)


def meta_state(n_models: int) -> ak.AdaptiveStruct:
    """The stacked vote's meta-learner alone (``_stacking``'s kernels over its ``meta_w``,
    ``meta_x``, ``meta_n`` and ``fpar``; every other array empty), for an ensemble whose own
    state is not an adaptive one: the forests' ``ForestState.meta``."""
    empty = new_state(0, 0, 1.0, 0.5).arrays
    return ak.AdaptiveStruct(empty._replace(meta_x=np.zeros((n_models + 1, 0))))


def class_sizes_array(sizes: np.ndarray, n_classes: int) -> dict[str, np.ndarray]:
    """The saved class sizes of OOB / UOB (``imbalance.class_sizes``, [C] at the ``n_classes``
    classes the model knows, in its class order) from ``sizes`` at any capacity."""
    out = np.zeros(n_classes)
    k = min(n_classes, sizes.shape[0])
    out[:k] = sizes[:k]
    return {"imbalance.class_sizes": out}


def load_class_sizes(arrays: dict[str, np.ndarray], n_classes: int) -> np.ndarray:
    """The class sizes from ``class_sizes_array`` output, checked: ``ValueError`` naming the
    array unless it is one the kernels make for a model that knows ``n_classes`` classes:
    shape [C] float64, every size in [0, 1] and their sum at most 1 (the sizes are a
    time-decayed share: ``sum_k w_k = 1 - decay^t``). A forged size of 0 for a class seen, or
    of NaN, made UOB's rate 0 or NaN for every example."""
    name = "imbalance.class_sizes"
    if name not in arrays:
        raise ValueError(f"state array {name} is missing (an imbalance model's state)")
    sizes = np.asarray(arrays[name])
    if sizes.dtype != np.float64 or sizes.shape != (n_classes,):
        _refuse(name, f"shape {sizes.shape} / {sizes.dtype}, want ({n_classes},) / float64")
    if not (np.isfinite(sizes).all() and (sizes >= 0.0).all() and (sizes <= 1.0).all()
            and sizes.sum() <= 1.0 + 1e-9):  # fmt: skip
        _refuse(name, "a size outside [0, 1] (or NaN), or sizes summing to more than 1")
    return sizes.copy()


def state_arrays(st) -> dict[str, np.ndarray]:
    """The arrays a saved state keeps (``to_state``): detectors, window, counters."""
    out = adwin.adwin_arrays(st.adwin, "adwin.")
    out["ddm.state"] = st.ddm.copy()
    out.update(window_arrays(st))
    out["window.resets"] = st.resets.copy()
    return out


_WINDOW = ("win_pred", "win_y", "win_ok", "win_n", "counters")  # the window proper


def window_arrays(st, prefix: str = "window.") -> dict[str, np.ndarray]:
    """The window's saved arrays (``_WINDOW``, of any state with those fields: an
    ``AdaptiveState``'s, a forest's)."""
    return {f"{prefix}{name}": getattr(st, name).copy() for name in _WINDOW}


def _checked(arrays: dict[str, np.ndarray], pairs: list) -> dict[str, np.ndarray]:
    """``arrays``' entries named in ``pairs`` (``(name, destination)``), each of its
    destination's shape and dtype (``ValueError`` naming it otherwise)."""
    loaded = {}
    for name, dst in pairs:
        src = np.asarray(arrays[name])
        if src.shape != dst.shape or src.dtype != dst.dtype:
            raise ValueError(f"state array {name} has shape {src.shape} / {src.dtype}, "
                             f"want {dst.shape} / {dst.dtype}")  # fmt: skip
        loaded[name] = src
    return loaded


def checked_window(st, arrays: dict[str, np.ndarray], prefix: str = "window.") -> dict:
    """``window_arrays`` output for ``st`` (the same window and members), checked
    (``check_window``): ``{field: array}`` to copy into ``st`` once everything else is checked."""
    loaded = _checked(arrays, [(f"{prefix}{n}", getattr(st, n)) for n in _WINDOW])
    check_window({f"window.{n}": loaded[f"{prefix}{n}"] for n in _WINDOW}, prefix)
    return {n: loaded[f"{prefix}{n}"] for n in _WINDOW}


def load_state_arrays(st, arrays: dict[str, np.ndarray]) -> None:
    """Load ``state_arrays`` output into ``st`` (built with the same options), in place; every
    array is checked before any is loaded."""
    loaded = _checked(arrays, [("ddm.state", st.ddm), ("window.resets", st.resets)])
    _check_ddm(loaded["ddm.state"])
    if (loaded["window.resets"] < 0).any():
        _refuse("window.resets", "a negative count")
    window = checked_window(st, arrays)
    adwin.load_adwin_arrays(st.adwin, arrays, "adwin.")
    st.ddm[...] = loaded["ddm.state"]
    st.resets[...] = loaded["window.resets"]
    for name, src in window.items():
        getattr(st, name)[...] = src


def _refuse(name: str, what: str) -> None:
    raise ValueError(f"state array {name}: {what} (a forged or damaged state)")


def check_window(a: dict[str, np.ndarray], prefix: str = "window.") -> None:
    """``ValueError`` naming the array unless the saved window (``window.*`` arrays, named
    ``prefix*`` in errors) is one the kernels make: the ring's position and fill within the
    window (the position the fill while it fills), each member's counts those of its entries,
    counts >= 0. (A forged position made the next learn write outside the window.)"""

    def refuse(name: str, what: str) -> None:
        _refuse(prefix + name, what)

    pred, y = a["window.win_pred"], a["window.win_y"]
    pos, filled, resets = (int(v) for v in a["window.counters"])
    W = pred.shape[0]
    if not 0 <= filled <= W or not (pos == filled if filled < W else 0 <= pos < W or W == 0):
        refuse("counters", f"a position or fill outside the window of {W}")
    if resets < 0 or (y < 0).any() or (pred < ak.WRONG).any():
        refuse("counters" if resets < 0 else "win_pred", "a negative count or class")
    counted = pred != ak.RESET
    if (counted[filled:].any()) or (a["window.win_n"] != counted.sum(axis=0)).any():
        refuse("win_n", "counts that are not the window's entries")
    if (a["window.win_ok"] != (pred == y[:, None]).sum(axis=0)).any():
        refuse("win_ok", "counts that are not the window's right answers")


def _check_ddm(d: np.ndarray) -> None:
    """``ValueError`` unless the saved DDM detectors are ones the kernels make: counts whole
    numbers, rates in [0, 1] (their minima may be infinite: none yet), warnings 0 or 1."""
    refuse = _refuse
    n, p_s, mins = d[:, ddm.N], d[:, [ddm.P, ddm.S]], d[:, [ddm.P_MIN, ddm.S_MIN]]
    if not ((n >= 0) & (n <= 2.0**53) & (n == np.floor(n))).all():
        refuse("ddm.state", "a count that is not a whole number >= 0")
    if not (((p_s >= 0) & (p_s <= 1)).all() and (mins >= 0).all()
            and np.isin(d[:, ddm.WARNING], (0.0, 1.0)).all()):  # fmt: skip
        refuse("ddm.state", "an error rate outside [0, 1] (or NaN), or a warning not 0 or 1")


def describe(st, window: int, drift: str | None) -> dict:
    """``{"n_drifts", "diversity", "members": [{...}]}`` for ``OnlineBagging.describe``."""
    M = st.win_ok.shape[0]
    members: list[dict] = [{} for _ in range(M)]
    out: dict[str, Any] = {"n_drifts": int(st.counters[ak.RESETS]), "members": members}
    for m in range(M if drift is not None else 0):
        if drift == "adwin":
            members[m]["drift_error"] = float(adwin.adwin_estimate.py_func(st.adwin, m))
            members[m]["drift_window"] = int(st.adwin.iv[m, adwin.WIDTH])
        else:  # ddm: error rate since the last drift, and whether it is at the warning level
            members[m]["drift_error"] = float(st.ddm[m, ddm.P]) if st.ddm[m, ddm.N] else None
            members[m]["drift_window"] = int(st.ddm[m, ddm.N])
            members[m]["warning"] = bool(st.ddm[m, ddm.WARNING])
        members[m]["resets"] = int(st.resets[m])
    if window > 0:
        filled = int(st.counters[ak.FILLED])
        preds = st.win_pred[:filled].astype(np.int64)
        y = st.win_y[:filled]
        div = window_diversity(preds, y, preds != ak.RESET)
        for m, acc in enumerate(div.pop("member_accuracy")):
            members[m]["window_accuracy"] = acc
        div["window"] = window
        out["diversity"] = div
    return out


def add_description(out: dict, st, window: int, drift: str | None) -> None:
    """Add ``describe``'s ``n_drifts``, ``diversity`` and per-member figures to an ensemble's
    ``describe()`` output ``out``, in place."""
    extra = describe(st, window, drift)
    for d, more in zip(out["members"], extra.pop("members"), strict=True):
        d.update(more)
    out.update(extra)


class DriftReport:
    """``n_drifts``, ``diversity()`` and the adaptive part of ``describe()`` for an ensemble whose
    ``_float_state`` is an ``AdaptiveStruct`` when ``adaptive`` (with ``_window`` and ``drift``).
    Each reads it after the ensemble's ``_settled()`` (a deferred learn changes it)."""

    drift: str | None
    _float_state: Any
    _settled: Callable[[], Any]  # the ensemble's (OnlineEnsemble._settled)

    @property
    def adaptive(self) -> bool:  # the ensemble's
        raise NotImplementedError

    @property
    def _window(self) -> int:  # the ensemble's
        raise NotImplementedError

    @property
    def n_drifts(self) -> int:
        """Members reset after a detected drift so far (0 without ``drift``)."""
        if not self.adaptive:
            return 0
        self._settled()
        return int(self._float_state.counters[ak.RESETS])

    def diversity(self) -> dict | None:
        """Diversity of the members over the window (``describe()["diversity"]``; ``None``
        without a window)."""
        if not self.adaptive or self._window == 0:
            return None
        self._settled()
        return describe(self._float_state, self._window, None)["diversity"]

    def describe(self) -> dict:
        out = super().describe()  # type: ignore[misc]  # (it settles the model)
        if self.adaptive:
            add_description(out, self._float_state, self._window, self.drift)
        return out


class PredictionReusingRunner:
    """The per-example calls (``run_one``) of adaptive online bagging and boosting, which reuse
    the members' predictions of ``x`` from ``predict_one(x)`` for the ``learn_one(x, y)`` that
    follows it.

    River's loop is ``predict_one(x)`` then ``learn_one(x, y)``; the adaptive kernel needs each
    member's prediction of ``x`` before learning it (the window, bagging's detectors, the
    stacked vote's meta-learner, which also reuses their probabilities, ``st.meta_x``). The kernel
    keeps them in the state (``st.mpred``), and a learn reuses them (``ipar[REUSE]`` set for
    its call, 0 between calls) when its ``x`` is the one the last call predicted (the same
    object and the same content) and nothing ran in between. A learn that the bank defers
    (``TreeBank.run_one(..., defer=True)``, ``w > 0``) is run by the next call as its first row:
    that call reuses them (no kernel ran in between); a reader's flush (``TreeBank.flush``)
    runs with ``REUSE`` 0 and predicts the members again.

    One Python call between the model and the bank, as for the plain model (whose ``run_one``
    is a ``functools.partial`` of the bank's); ``CompiledBackend`` builds it when the ensemble
    names it (``OnlineEnsemble._runner``).
    """

    __slots__ = ("bank_run_one", "kernel", "ipar", "fstate", "flag", "flush", "last", "copy",
                 "kept")  # fmt: skip

    def __init__(self, backend: Any) -> None:
        self.bank_run_one = backend.bank.run_one
        self.kernel, self.ipar, self.fstate = backend.kernel, backend.ipar, backend.fstate
        self.flag = backend.ipar.data  # ipar[REUSE] (a memoryview: cheaper to set)
        self.flush = backend.flush
        self.forget()

    def forget(self) -> None:
        """No member prediction of the last call is reused (the members change otherwise)."""
        self.last: Any = None  # x, if the last call predicted it
        self.copy: Any = None  # a copy of that x (its content then)
        self.kept = False  # the last call was a learn deferred right after its x's prediction

    def run_one(self, x, y=None, w: float = 0.0, *, predict: bool = True, learn: bool = False,
                label_only: bool = False, defer: bool = False):  # fmt: skip
        """``TreeBank.run_one`` of the model's kernel, with ``REUSE`` set when it applies."""
        last, kept = self.last, self.kept
        self.last = None
        self.kept = False
        kernel, ipar, fstate = self.kernel, self.ipar, self.fstate
        if not learn:  # a kept learn runs as this call's first row, with the kept predictions
            if kept:
                out = self._reusing(x, y, w, predict, False, label_only, False)
            else:
                out = self.bank_run_one(kernel, ipar, fstate, x, y, w, predict=predict,
                                        label_only=label_only)  # fmt: skip
            if predict and type(x) is dict:
                self.last = x
                self.copy = dict(x)
            return out
        if kept:  # the kept learn first, with the kept predictions: not this call's
            self.flag[ak.REUSE] = 1
            try:
                self.flush()
            finally:
                self.flag[ak.REUSE] = 0
        # (kept and reuse exclude each other: kept means that the last call was a learn; a
        # kept learn is always run as the first row of a kernel call: the fused one, or a flush)
        if last is x and not predict and x is not None and self.copy == x:  # predicted just now
            if defer:  # kept for the next call, which reuses the predictions (w > 0: a learn)
                out = self.bank_run_one(kernel, ipar, fstate, x, y, w, predict=False, learn=True,
                                        label_only=label_only, defer=True)  # fmt: skip
                self.kept = w > 0.0
                return out
            return self._reusing(x, y, w, False, True, label_only, False)
        return self.bank_run_one(kernel, ipar, fstate, x, y, w, predict=predict, learn=True,
                                 label_only=label_only, defer=defer)  # fmt: skip

    def _reusing(self, x, y, w, predict, learn, label_only, defer):
        """One bank call with ``ipar[REUSE]`` set (0 again after it, whatever happens)."""
        self.flag[ak.REUSE] = 1
        try:
            return self.bank_run_one(self.kernel, self.ipar, self.fstate, x, y, w,
                                     predict=predict, learn=learn, label_only=label_only,
                                     defer=defer)  # fmt: skip
        finally:
            self.flag[ak.REUSE] = 0
