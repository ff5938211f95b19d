"""The tuner's selection rule on score matrices (no database): it leaves the default only on evidence."""

import numpy as np
import pytest

from ragstore.errors import InvalidInput
from ragstore.evaluation.tune import ALPHAS, cross_validate_scores, default_grid, fold_assignment, select, tune
from ragstore.search.fusion import DEFAULT_FUSION, FusionSettings

N, FOLDS, SEED = 50, 5, 0
SETTINGS = [DEFAULT_FUSION] + [FusionSettings(fusion="cc", alpha=a) for a in (0.3, 0.4, 0.5, 0.6, 0.7)]


def overfit_matrix(delta: float = 0.01, noise: float = 0.2) -> np.ndarray:
    """Row 0 the default (0.5 on every query); row f + 1 gains ``delta`` on every fold but ``f`` and loses
    ``3 · delta`` on fold ``f``, each query ± ``noise``. Trained on
    the folds other than ``f``, candidate ``f + 1`` has the best mean (every other candidate's gains and
    losses cancel), yet it loses on the held-out fold ``f``: the argmax overfits."""
    fold_of = fold_assignment(N, FOLDS, SEED)
    jitter = np.zeros(N)
    for f in range(FOLDS):  # alternating inside each fold, so it sums to 0 over any union of folds
        members = np.flatnonzero(fold_of == f)
        jitter[members] = noise * np.resize([1.0, -1.0], members.size)
    matrix = np.full((len(SETTINGS), N), 0.5)
    for f in range(FOLDS):
        matrix[f + 1] = np.where(fold_of == f, 0.5 - 3 * delta, 0.5 + delta) + jitter
    return matrix


def test_the_argmax_winner_of_each_training_set_loses_held_out_and_the_rule_keeps_the_default():
    matrix = overfit_matrix()
    cv = cross_validate_scores(matrix, SETTINGS, folds=FOLDS, seed=SEED)
    assert [SETTINGS[f.chosen] for f in cv.folds] == [DEFAULT_FUSION] * FOLDS
    assert SETTINGS[cv.chosen] == DEFAULT_FUSION
    assert cv.held_out == cv.default_held_out == 0.5


def test_without_a_margin_the_rule_is_the_plain_argmax_and_loses_held_out():
    cv = cross_validate_scores(overfit_matrix(), SETTINGS, folds=FOLDS, seed=SEED, min_gain_se=0.0)
    assert [f.chosen for f in cv.folds] == [1, 2, 3, 4, 5]
    assert not any(f.kept_default for f in cv.folds)
    assert cv.held_out < cv.default_held_out - 0.02
    assert all(abs(f.gain - 0.01) < 1e-9 for f in cv.folds)


def test_a_candidate_better_on_every_query_is_chosen_in_every_fold_and_stored():
    rng = np.random.default_rng(7)
    matrix = rng.uniform(0.2, 0.6, size=(len(SETTINGS), N))
    matrix[3] = matrix[0] + rng.uniform(0.05, 0.15, size=N)
    cv = cross_validate_scores(matrix, SETTINGS, folds=FOLDS, seed=SEED)
    assert [f.chosen for f in cv.folds] == [3] * FOLDS and cv.chosen == 3
    assert not any(f.kept_default for f in cv.folds) and not cv.kept_default
    assert cv.held_out > cv.default_held_out + 0.05
    for f in cv.folds:
        assert f.gain > 0.05 and 0.0 < f.gain_se < f.gain / 5
        assert f.held_out > f.default_held_out


def test_a_candidate_equal_to_the_default_never_replaces_it_even_without_a_margin():
    matrix = np.tile(np.linspace(0.1, 0.9, N), (len(SETTINGS), 1))
    cv = cross_validate_scores(matrix, SETTINGS, folds=FOLDS, seed=SEED, min_gain_se=0.0)
    assert cv.chosen == 0 and all(f.kept_default and f.gain == 0.0 for f in cv.folds)


def test_one_training_query_has_no_standard_error_so_only_the_plain_argmax_leaves_the_default():
    scores = np.array([[0.5], [0.9]])
    assert select(scores, 0).chosen == 0 and select(scores, 0).gain_se == float("inf")
    assert select(scores, 0, min_gain_se=0.0).chosen == 1


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), "1", True])
def test_a_bad_margin_is_refused_before_any_search(bad):
    with pytest.raises(InvalidInput, match="min_gain_se must be a number of at least 0"):
        tune(None, "docs", [], {}, min_gain_se=bad)


def test_a_candidate_that_differs_on_one_query_only_is_exactly_one_standard_error_up_and_not_chosen():
    # d / n over (d / √n) / √n: t is exactly 1 whatever the query and the difference; rounding must not decide
    for n in range(2, 80):
        for d in (0.1, 0.25, 0.3, 0.5, 1 / 3, 0.7):
            scores = np.full((2, n), 0.4)
            scores[1, n // 2] += d
            assert select(scores, 0).chosen == 0, (n, d)
            assert select(scores, 0, min_gain_se=0.999).chosen == 1, (n, d)


def test_the_default_grid_tunes_fusion_at_the_default_depth_only():
    grid = default_grid()
    assert grid[0] == DEFAULT_FUSION and {s.per_leg for s in grid} == {DEFAULT_FUSION.per_leg}
    assert len(grid) == len(set(grid)) == 1 + 3 * len(ALPHAS)  # rrf, and cc × 3 normalisations × alphas
    deeper = default_grid(per_legs=(30, 50, 100))
    assert {s.per_leg for s in deeper} == {DEFAULT_FUSION.per_leg, 30, 50, 100} and deeper[0] == DEFAULT_FUSION
