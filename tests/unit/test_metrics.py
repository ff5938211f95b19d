"""Retrieval metrics against hand-computed values (the arithmetic is written beside each assertion)."""

from __future__ import annotations

import math

import pytest

from ragstore.errors import InvalidInput
from ragstore.evaluation.metrics import (
    QueryScores,
    evaluate,
    hit_at_k,
    mrr_at_k,
    ndcg_at_k,
    precision_at_k,
    recall_at_k,
    score_query,
)

# One query: relevant a (grade 2), b (grade 1), e (grade 1); x is judged non-relevant (grade 0).
QRELS = {"a": 2, "b": 1, "e": 1, "x": 0}
RANKING = ["x", "a", "c", "b", "d"]  # relevant at ranks 2 (a) and 4 (b); e is never retrieved


def test_recall_counts_relevant_in_top_k_over_all_relevant() -> None:
    assert recall_at_k(RANKING, QRELS, 3) == pytest.approx(1 / 3)  # {a} of {a, b, e}
    assert recall_at_k(RANKING, QRELS, 5) == pytest.approx(2 / 3)  # {a, b} of {a, b, e}


def test_precision_divides_by_k_even_when_ranking_is_shorter() -> None:
    assert precision_at_k(RANKING, QRELS, 5) == pytest.approx(2 / 5)
    # only 5 ids returned, k=10: 2 relevant / 10, not / 5
    assert precision_at_k(RANKING, QRELS, 10) == pytest.approx(2 / 10)


def test_mrr_is_reciprocal_rank_of_first_relevant_within_k() -> None:
    assert mrr_at_k(RANKING, QRELS, 5) == pytest.approx(1 / 2)  # a at rank 2
    assert mrr_at_k(RANKING, QRELS, 1) == 0.0  # x at rank 1 is not relevant, nothing else in top 1


def test_hit_is_one_when_any_relevant_in_top_k() -> None:
    assert hit_at_k(RANKING, QRELS, 2) == 1.0
    assert hit_at_k(RANKING, QRELS, 1) == 0.0


def test_ndcg_uses_graded_gains_log2_discount_and_ideal_from_qrels() -> None:
    # DCG@5  = 2/log2(3) + 1/log2(5) = 1.261860 + 0.430677 = 1.692536
    # IDCG@5 = grades sorted desc [2, 1, 1]: 2/log2(2) + 1/log2(3) + 1/log2(4) = 2 + 0.630930 + 0.5
    #        = 3.130930
    # nDCG@5 = 1.692536 / 3.130930 = 0.540586
    dcg = 2 / math.log2(3) + 1 / math.log2(5)
    idcg = 2 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4)
    assert ndcg_at_k(RANKING, QRELS, 5) == pytest.approx(dcg / idcg)
    assert ndcg_at_k(RANKING, QRELS, 5) == pytest.approx(0.540586, abs=1e-6)


def test_ndcg_ideal_is_cut_to_k() -> None:
    # k=2: DCG = 0/log2(2) + 2/log2(3) = 1.261860; IDCG@2 = 2/1 + 1/log2(3) = 2.630930 -> 0.479625
    assert ndcg_at_k(RANKING, QRELS, 2) == pytest.approx((2 / math.log2(3)) / (2 + 1 / math.log2(3)))
    assert ndcg_at_k(RANKING, QRELS, 2) == pytest.approx(0.479625, abs=1e-6)


def test_ndcg_perfect_ranking_is_one_and_grade_order_matters() -> None:
    assert ndcg_at_k(["a", "b", "e"], QRELS, 3) == pytest.approx(1.0)
    # swapping grade 2 and grade 1: DCG = 1 + 2/log2(3) + 1/2 = 2.761860 < IDCG 3.130930
    assert ndcg_at_k(["b", "a", "e"], QRELS, 3) == pytest.approx((1 + 2 / math.log2(3) + 0.5) / 3.130930, abs=1e-6)


def test_negative_grades_count_as_non_relevant_with_zero_gain() -> None:
    qrels = {"a": 1, "spam": -2}
    # spam at rank 1 contributes gain 0, not -2: DCG = 1/log2(3), IDCG = 1 -> 0.630930
    assert ndcg_at_k(["spam", "a"], qrels, 2) == pytest.approx(1 / math.log2(3))
    assert recall_at_k(["spam"], qrels, 1) == 0.0


def test_query_without_relevant_chunk_scores_zero_per_query() -> None:
    assert score_query(["a"], {"a": 0}, 5) == QueryScores(0.0, 0.0, 0.0, 0.0, 0.0)


def test_score_query_returns_all_five() -> None:
    s = score_query(RANKING, QRELS, 5)
    assert s.as_dict() == pytest.approx(
        {"recall": 2 / 3, "precision": 2 / 5, "mrr": 1 / 2, "ndcg": 0.540586, "hit": 1.0}, abs=1e-6
    )


def test_duplicate_id_in_ranking_is_an_error() -> None:
    with pytest.raises(InvalidInput, match="lists chunk 'a' twice"):
        recall_at_k(["a", "b", "a"], QRELS, 10)
    with pytest.raises(InvalidInput, match="query 'q7'"):
        score_query(["a", "a"], QRELS, 10, query_id="q7")


@pytest.mark.parametrize("k", [0, -1, True, 2.0])
def test_k_must_be_positive_int(k: object) -> None:
    with pytest.raises(InvalidInput, match="k must be a positive integer"):
        precision_at_k(RANKING, QRELS, k)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="k must be a positive integer"):
        evaluate({"q": RANKING}, {"q": QRELS}, k)  # type: ignore[arg-type]


def test_non_finite_grade_is_an_error_naming_the_query() -> None:
    with pytest.raises(InvalidInput, match=r"query 'q1'.*chunk 'a'"):
        evaluate({"q1": ["a"]}, {"q1": {"a": math.nan}}, 5)


# --- evaluate ---------------------------------------------------------------------------------------


def test_evaluate_macro_averages_skips_and_zeroes() -> None:
    rankings = {
        "q1": ["a", "b"],  # relevant {a}: recall 1, P@2 1/2, MRR 1, nDCG 1, hit 1
        "q2": ["c", "d"],  # relevant {d: 3, e: 1}: recall 1/2, P@2 1/2, MRR 1/2, hit 1
        #   DCG = 3/log2(3) = 1.892789; IDCG = 3/1 + 1/log2(3) = 3.630930 -> nDCG 0.521296
        "q3": ["z"],  # no relevant chunk in qrels -> skipped
        "extra": ["a"],  # not in qrels at all -> skipped
    }
    qrels = {
        "q1": {"a": 1},
        "q2": {"d": 3, "e": 1},
        "q3": {"z": 0},
        "q4": {"a": 2},  # judged but never ranked -> all zeros, counted in the mean
    }
    report = evaluate(rankings, qrels, 2)
    assert report.k == 2
    assert report.evaluated == 3  # q1, q2, q4
    assert report.skipped == ("extra", "q3")
    assert report.unranked == ("q4",)
    # recall    (1 + 1/2 + 0) / 3 = 0.5
    # precision (1/2 + 1/2 + 0) / 3 = 1/3
    # mrr       (1 + 1/2 + 0) / 3 = 0.5
    # ndcg      (1 + 0.521296 + 0) / 3 = 0.507099
    # hit       (1 + 1 + 0) / 3 = 2/3
    ndcg_q2 = (3 / math.log2(3)) / (3 + 1 / math.log2(3))
    assert report.recall == pytest.approx(0.5)
    assert report.precision == pytest.approx(1 / 3)
    assert report.mrr == pytest.approx(0.5)
    assert report.ndcg == pytest.approx((1 + ndcg_q2) / 3)
    assert report.ndcg == pytest.approx(0.507099, abs=1e-6)
    assert report.hit == pytest.approx(2 / 3)
    assert report.per_query["q4"] == QueryScores(0.0, 0.0, 0.0, 0.0, 0.0)
    assert set(report.per_query) == {"q1", "q2", "q4"}
    assert list(report.as_dict()) == ["recall", "precision", "mrr", "ndcg", "hit"]


def test_evaluate_duplicate_ids_error_names_the_query_even_if_skipped() -> None:
    with pytest.raises(InvalidInput, match="ranking of query 'q9' lists chunk 'b' twice"):
        evaluate({"q1": ["a"], "q9": ["b", "c", "b"]}, {"q1": {"a": 1}}, 10)


def test_evaluate_with_no_judged_query_is_an_error() -> None:
    with pytest.raises(InvalidInput, match="no query has a relevant chunk"):
        evaluate({"q1": ["a"]}, {"q1": {"a": 0}, "q2": {}}, 10)


def test_evaluate_does_not_depend_on_mapping_order() -> None:
    qrels = {f"q{i}": {f"d{i}": 1 + i % 3} for i in range(30)}
    rankings = {f"q{i}": [f"n{i}", f"d{i}"] if i % 2 else [f"d{i}"] for i in range(30)}
    forward = evaluate(rankings, qrels, 5)
    backward = evaluate(dict(reversed(rankings.items())), dict(reversed(qrels.items())), 5)
    assert forward.as_dict() == backward.as_dict()
    # half the queries find d at rank 1, half at rank 2: MRR = (15*1 + 15*0.5)/30 = 0.75
    assert forward.mrr == pytest.approx(0.75)
