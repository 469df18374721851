"""Attention statistics on small hand-made matrices."""

from __future__ import annotations

import numpy as np
import pytest

from scanmt.errors import DataError
from scanmt.metrics.attention_stats import attention_stats

# sentence 1: 3 steps x (3 source tokens + sink); sentence 2: 2 steps x 2 tokens, no sink
A1 = np.array(
    [
        [0.5, 0.5, 0.0, 0.0],
        [0.0, 1.0, 0.0, 0.0],
        [0.0, 0.0, 0.05, 0.95],
    ]
)
F1 = np.array([1.0, 2.0, 1.0, np.inf])
A2 = np.array([[0.6, 0.4], [0.3, 0.7]])


def test_hand_computed_statistics():
    st = attention_stats([A1, A2], sink=[True, False], fertilities=[F1, None])
    assert st.sentences == 2 and st.steps == 5 and st.source_tokens == 5
    # zeros: 7 in A1 (12 entries), 0 in A2 (4 entries)
    assert st.zero_fraction == pytest.approx(7 / 16)
    # non-zero entries per step: 2, 1, 2 | 2, 2 -> 9 / 5
    assert st.mean_attended == pytest.approx(9 / 5)
    # cumulative attention of real tokens: A1 [0.5, 1.5, 0.05], A2 [0.9, 1.1]
    assert st.mean_max_cumulative == pytest.approx((1.5 + 1.1) / 2)
    # ratios A1: 0.5/1, 1.5/2, 0.05/1 -> max 0.75 (sink excluded; A2 has no fertility)
    assert st.max_fertility_ratio == pytest.approx(0.75)
    assert st.mean_max_fertility_ratio == pytest.approx(0.75)
    # below 0.1: the third token of A1 only
    assert st.unattended_share == pytest.approx(1 / 5)
    # the sink: A1's steps only, weights 0, 0, 0.95 -> 0.95 / 3
    assert st.sink_share == pytest.approx(0.95 / 3)
    # A1's bounds reached (>= 99 %): none of 0.5/1, 1.5/2, 0.05/1
    assert st.saturated_share == 0.0


def test_sink_share_and_saturated_bounds_against_a_loop():
    """Random matrices, against a direct count; the sink's column is the last only where flagged."""
    rng = np.random.default_rng(0)
    mats, sinks, ferts = [], [], []
    for k in range(6):
        t, s = int(rng.integers(1, 6)), int(rng.integers(2, 7))
        a = rng.dirichlet(np.ones(s), size=t)
        mats.append(a)
        sinks.append(k % 2 == 0)
        f = np.round(rng.uniform(0.2, 3.0, size=s), 1)
        if sinks[-1]:
            f[-1] = np.inf
        ferts.append(f)
    st = attention_stats(mats, sink=sinks, fertilities=ferts)
    weights = [w for a, has in zip(mats, sinks) if has for w in a[:, -1]]
    assert st.sink_share == pytest.approx(sum(weights) / len(weights))
    hits = total = 0
    for a, has, f in zip(mats, sinks, ferts):
        cum, f = (a[:, :-1].sum(0), f[:-1]) if has else (a.sum(0), f)
        hits += sum(1 for c, b in zip(cum, f) if c >= 0.99 * b)
        total += len(f)
    assert total and st.saturated_share == pytest.approx(hits / total)
    assert 0 < hits < total  # the random bounds bind somewhere, not everywhere


def test_no_sink_and_no_fertility_give_none():
    st = attention_stats([A2])
    assert st.sink_share is None and st.saturated_share is None


def test_threshold_and_no_fertility():
    st = attention_stats([A1, A2], sink=[True, False], threshold=0.6)
    assert st.max_fertility_ratio is None and st.mean_max_fertility_ratio is None
    assert st.unattended_share == pytest.approx(2 / 5)  # 0.5 and 0.05


def test_constraint_violation_shows_as_ratio_above_one():
    st = attention_stats([A2], fertilities=[np.array([0.5, 2.0])])
    assert st.max_fertility_ratio == pytest.approx(0.9 / 0.5)


def test_errors():
    with pytest.raises(DataError, match="no sentences"):
        attention_stats([])
    with pytest.raises(DataError, match="fertility shape"):
        attention_stats([A2], fertilities=[np.ones(3)])
    with pytest.raises(DataError, match=r"\[T, S\]"):
        attention_stats([np.ones(3)])
