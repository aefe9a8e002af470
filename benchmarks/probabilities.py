"""How good are the probabilities? LogLoss / ROCAUC / accuracy on river's Phishing, prequential.

``python benchmarks/probabilities.py`` prints one line per model: Chorus bagging with
``vote="majority"`` (vote shares) and ``vote="average"`` (mean member probabilities), boosting, a
single tree, and river's own models for reference, all through ``evaluate.progressive_val_score``.
"""

from __future__ import annotations

from river import datasets, ensemble, evaluate, metrics, tree

from ensembles import OnlineBagging, OnlineBoosting
from learners import HoeffdingTree, NaiveBayes


def score(make, name: str) -> str:
    out = [
        evaluate.progressive_val_score(datasets.Phishing(), make(), metric()).get()
        for metric in (metrics.LogLoss, metrics.ROCAUC, metrics.Accuracy)
    ]
    return f"{name:40s} LogLoss {out[0]:.3f}  ROCAUC {out[1]:.4f}  accuracy {out[2]:.4f}"


def main() -> None:
    models = {}
    for vote in ("majority", "average"):
        models[f"OnlineBagging(HT, M=10, {vote})"] = lambda v=vote: OnlineBagging(
            HoeffdingTree(), n_models=10, seed=1, vote=v
        )
        models[f"OnlineBagging(NB, M=10, {vote})"] = lambda v=vote: OnlineBagging(
            NaiveBayes(), n_models=10, seed=1, vote=v
        )
    models["OnlineBoosting(HT, M=10)"] = lambda: OnlineBoosting(
        HoeffdingTree(), n_models=10, seed=1
    )
    models["HoeffdingTree"] = HoeffdingTree
    models["river BaggingClassifier(HTC, M=10)"] = lambda: ensemble.BaggingClassifier(
        tree.HoeffdingTreeClassifier(), n_models=10, seed=1
    )
    models["river HoeffdingTreeClassifier"] = tree.HoeffdingTreeClassifier
    for name, make in models.items():
        print(score(make, name), flush=True)  # noqa: T201


if __name__ == "__main__":
    main()
