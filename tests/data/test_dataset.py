import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scanmt.data.dataset import ParallelData
from scanmt.data.vocab import BOS_ID, EOS_ID, PAD_ID, Vocab
from scanmt.errors import DataError


def _data(lengths):
    src = [[7] * a for a, _ in lengths]
    tgt = [[8] * b for _, b in lengths]
    return ParallelData(src, tgt)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 30), st.integers(1, 30)), min_size=1, max_size=200),
    st.integers(64, 800),
    st.integers(0, 5),
)
def test_token_batches_cover_every_example_once_within_budget(lengths, budget, epoch):
    d = _data(lengths)
    batches = d.token_batches(budget, seed=3, epoch=epoch, bucket_batches=4)
    flat = sorted(i for b in batches for i in b)
    assert flat == list(range(len(lengths)))
    for b in batches:
        cost = len(b) * (max(lengths[i][0] + 1 for i in b) + max(lengths[i][1] + 1 for i in b))
        assert len(b) == 1 or cost <= budget
    assert batches == d.token_batches(budget, seed=3, epoch=epoch, bucket_batches=4)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 30), st.integers(1, 30)), min_size=1, max_size=200),
    st.integers(64, 800),
)
def test_longest_sort_covers_every_example_once_within_budget(lengths, budget):
    d = _data(lengths)
    batches = d.token_batches(budget, seed=3, epoch=1, bucket_batches=4, sort="longest")
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for b in batches:
        cost = len(b) * (max(lengths[i][0] + 1 for i in b) + max(lengths[i][1] + 1 for i in b))
        assert len(b) == 1 or cost <= budget


def test_longest_sort_pads_less_where_the_sides_differ():
    """Targets as long as their source give or take 8 tokens, as translations are: sorted by source, a batch's
    targets vary and pad; sorted by the longer side, fewer batches carry the same examples.  Where the sides'
    lengths are unrelated (a 5-token source with a 25-token target beside the reverse) the longer side is the
    worse key, so training sorts by source unless ``data.batch_sort`` says otherwise."""
    rng = random.Random(0)
    lengths = [(n, max(1, n + rng.randint(-8, 8))) for n in (rng.randint(1, 40) for _ in range(2000))]
    d = _data(lengths)

    def fill(batches):
        real = sum(a + b + 2 for batch in batches for a, b in (lengths[i] for i in batch))
        return real / sum(len(batch) * (max(lengths[i][0] + 1 for i in batch) + max(lengths[i][1] + 1 for i in batch))
                          for batch in batches)

    by_source = d.token_batches(600, seed=1, epoch=1)
    longest = d.token_batches(600, seed=1, epoch=1, sort="longest")
    assert len(longest) < len(by_source) and fill(longest) > fill(by_source) + 0.02
    with pytest.raises(ValueError, match="sort must be one of source, longest"):
        d.token_batches(600, seed=1, epoch=1, sort="target")


def test_batches_differ_between_epochs():
    d = _data([(i % 17 + 1, i % 13 + 1) for i in range(300)])
    assert d.token_batches(200, seed=1, epoch=1) != d.token_batches(200, seed=1, epoch=2)


def test_collate_shapes_and_specials():
    d = ParallelData([[5, 6, 7], [9]], [[10], [11, 12]])
    b = d.make_batch([0, 1])
    assert b.src.tolist() == [[5, 6, 7], [9, PAD_ID, PAD_ID]]
    assert b.src_len.tolist() == [3, 1]
    assert b.tgt_in.tolist() == [[BOS_ID, 10, PAD_ID], [BOS_ID, 11, 12]]
    assert b.tgt_out.tolist() == [[10, EOS_ID, PAD_ID], [11, 12, EOS_ID]]
    assert b.n_tgt_tokens == 5


def test_too_long_filtered_or_error(tmp_path):
    vocab = Vocab.build([["a", "b"]])
    (tmp_path / "s").write_text("a b\na a a a\nb\n")
    (tmp_path / "t").write_text("b\nb\nb b b b b\n")
    d = ParallelData.from_files(tmp_path / "s", tmp_path / "t", vocab, max_len=3)
    assert d.index == [0]
    with pytest.raises(DataError, match=r"s:2: sentence has 4 subwords, more than the maximum 3"):
        ParallelData.from_files(tmp_path / "s", tmp_path / "t", vocab, max_len=3, on_too_long="error")
