"""bench.phrasing_neighbours: pooling and nearest-neighbour math against plain loops, and the per-template
shares on hand-made vectors."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from bench.phrasing_neighbours import mean_pooled, nearest, neighbours


def test_mean_pooling_ignores_padding_and_has_unit_length():
    torch.manual_seed(0)
    vectors = torch.randn(3, 5, 4)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]])
    pooled = mean_pooled(vectors, mask)
    for b in range(3):
        real = [vectors[b, t] for t in range(5) if mask[b, t] == 1]
        mean = [sum(v[h].item() for v in real) / len(real) for h in range(4)]
        norm = math.sqrt(sum(x * x for x in mean))
        assert pooled[b].tolist() == pytest.approx([x / norm for x in mean], abs=1e-6)


def test_nearest_is_the_most_similar_key_by_cosine():
    torch.manual_seed(1)
    queries = torch.nn.functional.normalize(torch.randn(6, 8), dim=-1)
    keys = torch.nn.functional.normalize(torch.randn(10, 8), dim=-1)
    index, best = nearest(queries, keys)
    for q in range(6):
        sims = [sum(queries[q, h].item() * keys[k, h].item() for h in range(8)) for k in range(10)]
        assert index[q].item() == max(range(10), key=sims.__getitem__)
        assert best[q].item() == pytest.approx(max(sims), abs=1e-6)


def _task(kind: str, template: str, instruction: str):
    return SimpleNamespace(kind=kind, params={"template": template}, instruction=instruction)


def test_a_template_whose_neighbours_are_of_another_kind_scores_zero():
    train = [_task("open_app", "app-train-0", "Open News"), _task("web_search", "search-train-0", "Search x")]
    test = [
        _task("web_search", "search-test-0", "Find news"),  # nearest: the app task
        _task("web_search", "search-test-0", "Look up y"),  # nearest: the search task
        _task("open_app", "app-test-0", "Start News"),  # nearest: the app task
    ]
    train_vectors = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    test_vectors = torch.nn.functional.normalize(torch.tensor([[0.9, 0.1], [0.2, 0.8], [1.0, 0.05]]), dim=-1)
    result = neighbours(train, test, train_vectors, test_vectors)
    assert result["templates"]["search-test-0"]["same_kind_share"] == 0.5
    assert result["templates"]["search-test-0"]["neighbour_kinds"] == {"open_app": 1, "web_search": 1}
    assert result["templates"]["app-test-0"]["same_kind_share"] == 1.0
    assert result["same_kind_share"] == pytest.approx(2 / 3)
    assert result["templates"]["search-test-0"]["example"]["nearest_train"] == "Open News"
    expected_cosines = [float(test_vectors[0, 0]), float(test_vectors[1, 1]), float(test_vectors[2, 0])]
    assert result["mean_cosine"] == pytest.approx(sum(expected_cosines) / 3, abs=1e-6)
