"""The stacked vote (``vote="stacking"``) of online bagging, boosting and the random forests
(``forest.py``: its input m is member m's foreground tree): a meta-learner learns
how to combine the members' class probabilities (stacked generalisation, Wolpert 1992, online as
river's ``ensemble.StackingClassifier``).

The meta-learner is multinomial logistic regression (softmax regression) over the M x C
members' probabilities (C classes known) and a bias, trained by SGD on the cross-entropy with a
fixed learning rate ``RATE`` and an L2 penalty ``L2`` (river's ``LogisticRegression`` and
``SoftmaxRegression`` defaults: ``optim.SGD(0.01)``, ``l2=0``). Its weights start at ``INIT`` on
each member's probability of class c for class c and 0 elsewhere (river's start at 0): it starts
as ``softmax(sum_m P_m(c | x))``, whose top class is the average vote's, and learns from there.
A class's bias starts at -inf and becomes 0 at the first example of it learned: until then the
class has probability 0 and no gradient, so a class known but never learned (declared, or a
label learned with weight 0) changes nothing (with bias 0 such a class took a share of every
prediction, and ``learn_one(x, y, w=0)`` of a new label changed the model).
Started at 0 it predicted the class prior for its first hundreds of examples (on the first 2,000
of Agrawal f2, 5 bagged Hoeffding trees: 1,110 right, against 1,296 for the average vote and
1,260 started so: ``tests/test_golden.py``). For each example:

1. every member gives its class probabilities of x, *before* any member learns x; they are the
   meta-learner's input ``X[m, c]``;
2. the prediction is the meta-learner's ``softmax(W X + b)`` once it has learned an example (the
   ensemble's own average vote before);
3. learning: one SGD step of the meta-learner on (X, y), ``W[o, (m, c)] -= step (g_o X[m, c] +
   L2 W[o, (m, c)])`` for the inputs present (X[m, c] != 0, as river's ``SoftmaxRegression``
   regularises the features of the example), ``b_o -= step g_o``, with ``g_o = p_o - [o = y]``
   and ``step = RATE min(w, MAX_WEIGHT)``; then the members learn x as the ensemble's algorithm
   says (Poisson weights, boosting's lambdas).

Inputs taken after the members learned x would leak y into them (a member that has just learned
x tends to predict y for it), and the meta-learner would learn to trust the members more than
their predictions on unseen examples deserve (``tests/test_stacking.py`` detects it).

:class:`MetaLearner` is the readable reference, which the slow path (Python members) runs; the
compiled kernels are ``ensembles._stacking`` (inside the adaptive kernels). Both save the same
arrays (``state_arrays``): the weights at the C classes known, ``stack.weights`` [C, M C + 1]
(column ``m C + c`` for member m's probability of class c, the last the bias), and
``stack.learned`` (examples learned).
"""

from __future__ import annotations

import numpy as np

from ._stacking import MAX_WEIGHT

RATE = 0.01  # the meta-learner's SGD learning rate (river's optim.SGD default for its GLMs)
L2 = 0.0  # its L2 penalty (river's LogisticRegression / SoftmaxRegression default)
# its initial weight of member m's probability of class c for class c (0 for other classes): it
# starts as the softmax of the members' summed probabilities, whose top class is the average
# vote's (module doc)
INIT = 1.0


def resized(weights: np.ndarray, n_models: int, n: int, init: float = INIT) -> np.ndarray:
    """``weights`` ([K, M K + 1], K classes) laid out for ``n`` classes ([n, M n + 1]): the
    weights of classes beyond n dropped, those of a new class c as never learned (``init`` on
    each member's probability of c, 0 elsewhere, bias -inf)."""
    K = weights.shape[0]
    out = np.zeros((n, n_models * n + 1))
    k = min(K, n)
    for m in range(n_models):
        out[:k, m * n : m * n + k] = weights[:k, m * K : m * K + k]
        for c in range(k, n):
            out[c, m * n + c] = init
    out[:k, -1] = weights[:k, n_models * K]
    out[k:, -1] = -np.inf
    return out


class MetaLearner:
    """Softmax regression over the members' class probabilities (module doc): the readable
    reference of ``ensembles._stacking``, with its weights at exactly the classes it has seen.

    Parameters
    ----------
    n_models
        Members M.
    rate, l2, init
        SGD learning rate, L2 penalty and the initial weight of a member's probability of a
        class for that class.

    Examples
    --------
    Two members that both lean to class 0 on an input whose labels alternate: the meta-learner
    starts as the softmax of their summed probabilities and learns from the labels.

    >>> import numpy as np
    >>> meta = MetaLearner(n_models=2)
    >>> X = np.array([[0.9, 0.1], [0.6, 0.4]])  # X[m, c]: member m's probability of class c
    >>> for y in [1, 0, 1, 0]:
    ...     meta.learn(X, y, 1.0)
    >>> meta.learned, meta.weights.shape  # C x (M C + 1): the weights, then the bias
    (4, (2, 5))
    >>> meta.proba(X).round(3).tolist()
    [0.729, 0.271]
    """

    def __init__(self, n_models: int, rate: float = RATE, l2: float = L2,
                 init: float = INIT) -> None:  # fmt: skip
        self.n_models = n_models
        self.rate = rate
        self.l2 = l2
        self.init = init
        self.weights = np.zeros((0, 1))  # [C, M C + 1]: W, then the bias
        self.learned = 0

    def inputs(self, probas: list[dict], classes: list) -> np.ndarray:
        """``X[m, c]``: member m's probability of ``classes[c]`` (0 if it does not give it)."""
        at = {label: c for c, label in enumerate(classes)}
        X = np.zeros((self.n_models, len(classes)))
        for m, p in enumerate(probas):
            for label, v in p.items():
                X[m, at[label]] = v
        return X

    def proba(self, X: np.ndarray) -> np.ndarray:
        """``softmax(W X + b)`` over the classes of ``X``'s columns (0 for a class not learned
        yet, whose bias is -inf; at least one must have been)."""
        W = self._at(X.shape[1])
        z = W[:, -1] + W[:, :-1] @ X.reshape(-1)
        e = np.exp(z - z.max())
        return e / e.sum()

    def _at(self, n: int) -> np.ndarray:
        """The weights, laid out for ``n`` classes."""
        if self.weights.shape[0] != n:
            self.weights = resized(self.weights, self.n_models, n, self.init)
        return self.weights

    def learn(self, X: np.ndarray, y: int, w: float) -> None:
        """One SGD step on inputs ``X``, class index ``y``, weight ``w`` (module doc)."""
        W = self._at(X.shape[1])
        if W[y, -1] == -np.inf:  # y's first example: its class joins the softmax
            W[y, -1] = 0.0
        p = self.proba(X)
        g = p.copy()
        g[y] -= 1.0
        step = self.rate * min(w, MAX_WEIGHT)
        x = X.reshape(-1)
        present = np.flatnonzero(x)  # the inputs of this example (X[m, c] != 0)
        learned = np.flatnonzero(W[:, -1] != -np.inf)  # the classes in the softmax
        at = np.ix_(learned, present)
        W[at] -= step * (np.outer(g[learned], x[present]) + self.l2 * W[at])
        W[learned, -1] -= step * g[learned]
        self.learned += 1


def state_arrays(weights: np.ndarray, n_models: int, n_classes: int,
                 learned: int) -> dict[str, np.ndarray]:  # fmt: skip
    """The saved arrays of a meta-learner with ``weights`` at any capacity, for the
    ``n_classes`` classes the model knows."""
    return {"stack.weights": resized(weights, n_models, n_classes),
            "stack.learned": np.array([learned], np.int64)}  # fmt: skip


def load_arrays(arrays: dict[str, np.ndarray], n_models: int, n_classes: int,
                n_seen: int) -> tuple[np.ndarray, int]:  # fmt: skip
    """``(weights [C, M C + 1], learned)`` from saved arrays, checked: ``ValueError`` naming the
    array unless they are ones the kernels make for a model of ``n_models`` members that knows
    ``n_classes`` classes and learned ``n_seen`` examples: the shapes and dtypes, ``0 <= learned
    <= n_seen``, and every weight finite and within what ``learned`` SGD steps can make from
    ``INIT`` (each moves a weight by at most ``RATE * MAX_WEIGHT``: the inputs and the gradient
    are in [-1, 1]). A forged weight of 1e300 made every later vote NaN."""

    def refuse(name: str, what: str) -> None:
        raise ValueError(f"state array {name}: {what} (a forged or damaged state)")

    for name in ("stack.weights", "stack.learned"):
        if name not in arrays:
            raise ValueError(f"state array {name} is missing (a stacked vote's state)")
    weights = np.asarray(arrays["stack.weights"])
    learned = np.asarray(arrays["stack.learned"])
    want = (n_classes, n_models * n_classes + 1)
    if weights.dtype != np.float64 or weights.shape != want:
        refuse("stack.weights", f"shape {weights.shape} / {weights.dtype}, want {want} / float64")
    if learned.dtype != np.int64 or learned.shape != (1,):
        refuse("stack.learned", f"shape {learned.shape} / {learned.dtype}, want (1,) / int64")
    count = int(learned[0])
    if not 0 <= count <= n_seen:
        refuse("stack.learned", f"{count} examples learned, not in [0, {n_seen}]")
    finite = np.isfinite(weights)
    finite[:, -1] |= weights[:, -1] == -np.inf  # (the bias of a class not learned yet)
    if not finite.all():
        refuse("stack.weights", "a weight that is not finite")
    bound = INIT + count * RATE * MAX_WEIGHT
    if np.abs(weights[np.isfinite(weights)]).max(initial=0.0) > bound * (1.0 + 1e-9):
        refuse("stack.weights", f"a weight beyond what {count} SGD steps make (|w| <= {bound:g})")
    return weights.copy(), count


def description(n_models: int, n_classes: int, learned: int) -> dict:
    """``describe()["meta_learner"]``: its size at the classes known and the examples learned."""
    inputs = n_models * n_classes + 1
    return {"kind": "softmax_regression", "classes": n_classes, "inputs": inputs,
            "weights": n_classes * inputs, "learned": int(learned), "rate": RATE, "l2": L2}  # fmt: skip
