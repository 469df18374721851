"""BLEU equals the sacrebleu command line on the same files; tokenized BLEU; paired bootstrap."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from scanmt.data.tokenize import tokenize_all
from scanmt.errors import DataError
from scanmt.metrics.bleu import detok_bleu, paired_bootstrap, tokenized_bleu
from scanmt.metrics.paired import MIN_INPUTS

REFS = [
    "A man in an orange hat starring at something.",
    "A Boston Terrier is running on lush green grass in front of a white fence.",
    "A girl in karate uniform breaking a stick with a front kick.",
    "Five people wearing winter jackets and helmets stand in the snow, with snowmobiles in the background.",
    "People are fixing the roof of a house.",
    "A man in light colored clothing photographs a group of men wearing dark suits and hats standing around a woman.",
    "A group of people standing in front of an igloo.",
    "A boy in a red uniform is attempting to avoid getting out at home plate, while the catcher tries.",
    "Two young girls are playing with a ball on the beach.",
    "An old woman sells vegetables at a market stall.",
]  # (10: a paired bootstrap over fewer than MIN_INPUTS sentences gives no p-value)
HYPS = [
    "A man with an orange hat looking at something.",
    "A Boston terrier runs on green grass in front of a white fence.",
    "A girl in a karate uniform breaks a stick with a kick.",
    "Five people in winter jackets and helmets are standing in the snow with snowmobiles behind them.",
    "People fix the roof of a house.",
    "A man in light clothes photographs a group of men in dark suits and hats around a woman.",
    "A group of people stands in front of an igloo.",
    "A boy in a red uniform tries not to be out at home plate while the catcher tries.",
    "Two little girls play with a ball on the beach.",
    "An old woman is selling vegetables at a market.",
]


def sacrebleu_cli(ref: Path, hyp: Path, *extra: str) -> float:
    out = subprocess.run(
        [sys.executable, "-m", "sacrebleu", str(ref), "-i", str(hyp), "-b", "-w", "6", *extra],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.strip())


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    return path


def test_detok_bleu_equals_sacrebleu_cli(tmp_path):
    ref, hyp = write(tmp_path / "ref", REFS), write(tmp_path / "hyp", HYPS)
    ours = detok_bleu(HYPS, REFS)
    assert 10 < ours.score < 90
    assert ours.score == pytest.approx(sacrebleu_cli(ref, hyp), abs=1e-5)
    assert "case:mixed" in ours.signature and "tok:13a" in ours.signature and "version:" in ours.signature


def test_tokenized_bleu_equals_sacrebleu_cli_on_tokenized_lowercased(tmp_path):
    ref_tok, hyp_tok = tokenize_all(REFS, "en"), tokenize_all(HYPS, "en")
    ref, hyp = write(tmp_path / "ref.tok", ref_tok), write(tmp_path / "hyp.tok", hyp_tok)
    ours = tokenized_bleu(hyp_tok, ref_tok)
    assert ours.score == pytest.approx(sacrebleu_cli(ref, hyp, "-tok", "none", "-lc"), abs=1e-5)
    assert "case:lc" in ours.signature and "tok:none" in ours.signature
    # lowercasing matters: "Boston terrier" vs "Boston Terrier"
    assert ours.score > detok_bleu(HYPS, REFS).score - 5


def test_bleu_on_multi30k_test_equals_cli(shared_data, tmp_path):
    import gzip

    refs = gzip.decompress((shared_data / "multi30k" / "test_2016_flickr.en.gz").read_bytes()).decode().splitlines()
    # a crude "system": every reference with its first word dropped
    hyps = [" ".join(r.split()[1:]) for r in refs]
    ref, hyp = write(tmp_path / "ref", refs), write(tmp_path / "hyp", hyps)
    assert detok_bleu(hyps, refs).score == pytest.approx(sacrebleu_cli(ref, hyp), abs=1e-5)


def test_bleu_errors():
    with pytest.raises(DataError, match="2 hypotheses but 1 references"):
        detok_bleu(["a", "b"], ["a"])
    with pytest.raises(DataError, match="no sentences"):
        tokenized_bleu([], [])


def test_paired_bootstrap():
    worse = [" ".join(h.split()[: len(h.split()) // 2]) for h in HYPS]
    # one sentence changed a little: not a significant difference
    close = list(HYPS)
    close[4] = "People are fixing the roof of the house."
    near = paired_bootstrap(HYPS, close, REFS, samples=200)
    assert near.score1 == pytest.approx(detok_bleu(HYPS, REFS).score)
    assert near.score2 == pytest.approx(detok_bleu(close, REFS).score)
    assert near.score2 != pytest.approx(near.score1)
    assert near.p_value > 0.05
    better = paired_bootstrap(worse, REFS, REFS, samples=200)
    assert better.score2 == pytest.approx(100.0)
    assert better.score1 == pytest.approx(detok_bleu(worse, REFS).score)
    assert better.p_value < 0.05
    assert "bs:200" in better.signature
    tok = paired_bootstrap(HYPS, REFS, REFS, tokenized=True, samples=50)
    assert "tok:none" in tok.signature


@pytest.mark.parametrize("k", [1, MIN_INPUTS - 1])
def test_a_bootstrap_over_fewer_than_min_inputs_sentences_gives_no_p_value(k):
    """Over one sentence every resample is that sentence (issue 52, item 9): the scores, but no p-value."""
    assert len(REFS) >= MIN_INPUTS
    worse = [" ".join(h.split()[: len(h.split()) // 2]) for h in HYPS[:k]]
    few = paired_bootstrap(worse, REFS[:k], REFS[:k], samples=100)
    assert few.p_value is None and few.samples == 100
    assert few.score1 == pytest.approx(detok_bleu(worse, REFS[:k]).score) and few.score2 == pytest.approx(100.0)
    assert "case:mixed" in few.signature
    worse = [" ".join(h.split()[: len(h.split()) // 2]) for h in HYPS[:MIN_INPUTS]]
    enough = paired_bootstrap(worse, REFS[:MIN_INPUTS], REFS[:MIN_INPUTS], samples=100)
    assert enough.p_value is not None and enough.p_value < 0.05
