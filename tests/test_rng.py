"""The counter-based Poisson generator."""

import numpy as np
import pytest

from ensembles._rng import poisson, poisson_block, uniform


@pytest.mark.parametrize("lam", [0.5, 1.0, 4.0])
def test_poisson_mean_and_variance_within_one_percent(lam):
    draws = poisson_block(lam, 12345, 0, 1_000_000, 0)
    assert abs(draws.mean() - lam) / lam < 0.01
    assert abs(draws.var() - lam) / lam < 0.01


@pytest.mark.parametrize("lam", [25.0, 1e4])
def test_poisson_large_rates(lam):
    draws = poisson_block(lam, 5, 0, 200_000, 1)
    assert abs(draws.mean() - lam) / lam < 0.01
    assert abs(draws.var() - lam) / lam < 0.03


def test_members_independent():
    a = poisson_block(1.0, 7, 0, 200_000, 0).astype(float)
    b = poisson_block(1.0, 7, 0, 200_000, 1).astype(float)
    assert abs(np.corrcoef(a, b)[0, 1]) < 0.01
    # consecutive sequence numbers are independent too
    assert abs(np.corrcoef(a[:-1], a[1:])[0, 1]) < 0.01


def test_pure_function_of_key():
    assert poisson(1.0, 3, 17, 2) == poisson(1.0, 3, 17, 2)
    assert uniform(3, 17, 2, 0) == uniform(3, 17, 2, 0)
    assert uniform(3, 17, 2, 0) != uniform(4, 17, 2, 0)
    assert 0.0 <= uniform(0, 0, 0, 0) < 1.0
    assert poisson(0.0, 1, 1, 1) == 0
