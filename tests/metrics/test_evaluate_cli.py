"""``scanmt evaluate`` and ``scanmt plot-attention`` end to end on small files."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import numpy as np
import pytest

from scanmt.cli.main import main
from scanmt.data.attention_file import SentenceAttention, save_attention
from scanmt.data.tokenize import tokenize_all
from scanmt.metrics.bleu import detok_bleu
from scanmt.metrics.paired import NO_TEST

REFS = [
    "A man in an orange hat starring at something.",
    "Two dogs play in the grass.",
    "People are fixing the roof of a house.",
]
HYPS = [
    "A man with an orange hat looking at something.",
    "Two dogs dogs play in the grass grass.",
    "People fix the roof of the house.",
]
SRCS = [
    "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt.",
    "Zwei Hunde spielen im Gras.",
    "Leute reparieren das Dach eines Hauses.",
]


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def lines(path: Path, items: list[str]) -> Path:
    return write(path, "".join(x + "\n" for x in items))


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    return {
        "ref": lines(tmp_path / "ref.en", REFS),
        "hyp": lines(tmp_path / "hyp.en", HYPS),
        "src": lines(tmp_path / "src.de", SRCS),
    }


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(["evaluate", *argv]) if argv[0].startswith("--") else main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_text_metrics_table_and_json(files, tmp_path, capsys):
    out_json = tmp_path / "res" / "scores.json"
    rc, out, err = run(
        capsys, "--hyp", str(files["hyp"]), "--ref", str(files["ref"]), "--no-synonyms", "--json", str(out_json)
    )
    assert rc == 0, err
    for name in ("BLEU (detok, cased)", "BLEU (tokenized, lc)", "METEOR", "REP"):
        assert name in out
    assert "nrefs:1|case:mixed" in out  # the signature is printed
    assert "no synonyms" in out  # next to the METEOR number
    res = json.loads(out_json.read_text())
    assert res["bleu"]["score"] == pytest.approx(detok_bleu(HYPS, REFS).score)
    assert res["meteor"]["synonyms"] is False
    # REP by hand on the tokenized text: "dogs dogs" (ww: 2 * 1) and "grass grass" (2 * 1), nothing else
    ref_words = sum(len(x.split()) for x in tokenize_all(REFS, "en"))
    assert res["rep"]["score"] == pytest.approx(100 * 4 / ref_words)
    assert res["metrics"] == ["bleu", "tok-bleu", "meteor", "rep"]


def test_pretokenized_input_gives_same_tokenized_scores(files, tmp_path, capsys):
    rc, _, _ = run(capsys, "--hyp", str(files["hyp"]), "--ref", str(files["ref"]), "--metrics", "tok-bleu", "rep",
                   "--json", str(tmp_path / "a.json"))
    assert rc == 0
    hyp_tok = lines(tmp_path / "hyp.tok", tokenize_all(HYPS, "en"))
    ref_tok = lines(tmp_path / "ref.tok", tokenize_all(REFS, "en"))
    rc, _, _ = run(capsys, "--hyp", str(hyp_tok), "--ref", str(ref_tok), "--tokenized", "--metrics", "tok-bleu",
                   "rep", "--json", str(tmp_path / "b.json"))
    assert rc == 0
    a, b = (json.loads((tmp_path / f).read_text()) for f in ("a.json", "b.json"))
    assert a["tok_bleu"]["score"] == pytest.approx(b["tok_bleu"]["score"])
    assert a["rep"]["score"] == pytest.approx(b["rep"]["score"])


def test_paired_bootstrap_row(tmp_path, capsys):
    # the three sentences four times over: a paired bootstrap over fewer than MIN_INPUTS gives no p-value
    ref, hyp, hyp2 = (lines(tmp_path / f, items * 4) for f, items in (("ref.en", REFS), ("hyp.en", HYPS),
                                                                      ("hyp2.en", REFS)))
    rc, out, err = run(capsys, "--hyp", str(hyp), "--ref", str(ref), "--hyp2", str(hyp2), "--metrics", "bleu",
                       "--bootstrap-samples", "50", "--json", str(tmp_path / "b.json"))
    assert rc == 0, err
    assert "bootstrap" in out and "100.00" in out and re.search(r"p = 0\.\d{3} \(50 resamples\)", out), out
    assert 0 < json.loads((tmp_path / "b.json").read_text())["bootstrap"]["p_value"] < 1


def test_paired_bootstrap_over_fewer_than_min_inputs_prints_no_p_value(files, tmp_path, capsys):
    """Issue 52, item 9: over 3 sentences the row says the test cannot be run; the JSON has p_value null."""
    hyp2 = lines(tmp_path / "hyp2.en", REFS)
    rc, out, err = run(capsys, "--hyp", str(files["hyp"]), "--ref", str(files["ref"]), "--hyp2", str(hyp2),
                       "--metrics", "bleu", "--bootstrap-samples", "50", "--json", str(tmp_path / "b.json"))
    assert rc == 0, err
    row = next(line for line in out.splitlines() if "BLEU --hyp2" in line)
    assert "100.00" in row and f"p = {NO_TEST}" in row and "resamples" not in row, row
    res = json.loads((tmp_path / "b.json").read_text())["bootstrap"]
    assert res["p_value"] is None and res["bleu_hyp2"] == pytest.approx(100.0)


def test_different_line_counts(files, tmp_path, capsys):
    short = lines(tmp_path / "short.en", HYPS[:2])
    rc, _, err = run(capsys, "--hyp", str(short), "--ref", str(files["ref"]))
    assert rc == 2
    assert f"error: {short}: {short} has only 2 lines but {files['ref']} has 3" in err  # issue 27: blames --hyp
    long = lines(tmp_path / "long.en", HYPS + ["extra"])
    rc, _, err = run(capsys, "--hyp", str(long), "--ref", str(files["ref"]))
    assert rc == 2 and f"{long}:4:" in err
    assert len(err.strip().splitlines()) == 1  # one line, no traceback


def test_hypothesis_with_extra_trailing_newline(files, tmp_path, capsys):
    hyp = write(tmp_path / "nl.en", "".join(x + "\n" for x in HYPS) + "\n")
    rc, _, err = run(capsys, "--hyp", str(hyp), "--ref", str(files["ref"]))
    assert rc == 2
    assert f"{hyp}:4: hypothesis file ends with a blank line" in err


def test_reference_with_extra_trailing_newline(files, tmp_path, capsys):
    ref = write(tmp_path / "nl.ref", "".join(x + "\n" for x in REFS) + "\n")
    rc, _, err = run(capsys, "--hyp", str(files["hyp"]), "--ref", str(ref))
    assert rc == 2 and f"{ref}:4:" in err and "blank line" in err


def test_empty_hypothesis_line_is_allowed(files, tmp_path, capsys):
    hyp = lines(tmp_path / "empty.en", [HYPS[0], "", HYPS[2]])
    rc, out, err = run(capsys, "--hyp", str(hyp), "--ref", str(files["ref"]), "--no-synonyms")
    assert rc == 0, err


def test_metric_without_its_inputs(files, capsys):
    rc, _, err = run(capsys, "--hyp", str(files["hyp"]), "--ref", str(files["ref"]), "--metrics", "drop")
    assert rc == 2 and "drop needs" in err and "--align-model" in err
    rc, _, err = run(capsys, "--hyp", str(files["hyp"]), "--metrics", "bleu")
    assert rc == 2 and "--hyp and --ref go together" in err


# --------------------------------------------------------------------------- attention


def _attention(tmp_path: Path) -> Path:
    """Two forced-decoded sentences with a sink column and the final </s> row."""
    s1 = SentenceAttention(
        attention=np.array(
            [
                [0.9, 0.0, 0.0, 0.1],  # ▁a   -> ▁ein (word 0)
                [0.0, 0.3, 0.6, 0.1],  # ▁dog -> e (word 1)
                [0.0, 0.0, 0.0, 1.0],  # ▁.   -> sink only: no link
                [0.5, 0.0, 0.0, 0.5],  # </s>
            ]
        ),
        src=["▁ein", "▁Hund", "e", "<sink>"],
        hyp=["▁a", "▁dog", "▁.", "</s>"],
        fertility=np.array([1.0, 1.0, 1.0, np.inf]),
    )
    s2 = SentenceAttention(
        attention=np.array([[0.2, 0.8], [1.0, 0.0]]),
        src=["▁ja", "▁."],
        hyp=["▁yes", "</s>"],
    )
    path = tmp_path / "att.npz"
    save_attention(path, [s1, s2])
    return path


def test_attention_metrics(tmp_path, capsys):
    att = _attention(tmp_path)
    # 1-indexed talp: sentence 1 sure 1-1, 2-2, possible 2-3; sentence 2 sure 2-1
    gold = write(tmp_path / "gold.talp", "1-1 2-2 2p3\n2-1\n")
    rc, out, err = run(capsys, "--attention", str(att), "--gold-align", str(gold), "--gold-one-indexed",
                       "--json", str(tmp_path / "r.json"))
    assert rc == 0, err
    res = json.loads((tmp_path / "r.json").read_text())
    # hard links: s1 {(0,0), (1,1)}, s2 {(1,0)}: |A∩S| = 3, |A∩P| = 3, |A| = 3, |S| = 3 -> 0
    assert res["aer"]["score"] == pytest.approx(0.0)
    # word attention (sink and </s> dropped) s1 rows: a [0.9, 0], dog [0, 0.3 + 0.6], . [0, 0]; s2: yes [0.2, 0.8]
    # |MA.MS| = 0.9 + 0.9 + 0.8; |MA.MP| = 2.6 + 0 (possible 1-2 hits the zero "." row); |MA| = 1.8 + 1.0; |MS| = 3
    assert res["saer"]["score"] == pytest.approx(100 * (1 - 5.2 / 5.8))
    st = res["attention_stats"]
    assert st["sentences"] == 2 and st["steps"] == 6
    assert st["zero_fraction"] == pytest.approx(9 / 20)  # zeros per row: 2, 1, 3, 2 | 0, 1
    assert st["max_fertility_ratio"] == pytest.approx(1.4)  # word "▁ein": 0.9 + 0.5 (the </s> step)
    assert st["sink_share"] == pytest.approx(1.7 / 4)  # sentence 1's sink column: 0.1 + 0.1 + 1.0 + 0.5
    assert st["saturated_share"] == pytest.approx(1 / 3)  # sentence 1: 1.4 >= 0.99 x 1; 0.3 and 0.6 below
    for name in ("AER", "SAER", "exact zeros", "never attended", "to the sink  ", "bounds reached"):
        assert name in out
    assert "42.50%" in out and "33.33%" in out


def test_gold_alignment_out_of_range(tmp_path, capsys):
    att = _attention(tmp_path)
    gold = write(tmp_path / "gold.talp", "1-1\n3-1\n")  # sentence 2 has 2 source words
    rc, _, err = run(capsys, "--attention", str(att), "--gold-align", str(gold), "--gold-one-indexed")
    assert rc == 2
    assert f"{gold}:2:" in err and "source index 2 out of range for 2 source words" in err
    gold0 = write(tmp_path / "gold0.talp", "0-0\n")
    rc, _, err = run(capsys, "--attention", str(att), "--gold-align", str(gold0))
    assert rc == 2 and "has 1 lines but" in err and "2 sentences" in err


def test_plot_attention_cli(tmp_path, capsys):
    att = _attention(tmp_path)
    out = tmp_path / "maps" / "m.png"
    rc = main(["plot-attention", "--attention", str(att), str(att), "--names", "softmax", "csparsemax",
               "--index", "0", "--out", str(out)])
    stdout, err = capsys.readouterr()
    assert rc == 0, err
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = struct.unpack(">II", data[16:24])
    assert f"{w}x{h}" in stdout
    rc = main(["plot-attention", "--attention", str(att), "--sample", "2", "--out", str(out)])
    stdout, _ = capsys.readouterr()
    assert rc == 0
    assert (tmp_path / "maps" / "m.0.png").is_file() and (tmp_path / "maps" / "m.1.png").is_file()
    rc = main(["plot-attention", "--attention", str(att), "--index", "5", "--out", str(out)])
    _, err = capsys.readouterr()
    assert rc == 2 and "index 5 out of range" in err and str(att) in err
