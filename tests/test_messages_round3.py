"""What commands say about themselves (issue 52, item 18): help texts and the notes of their tables."""

from __future__ import annotations

import pytest

from scanmt.cli.main import main

REFS = ["A man in an orange hat starring at something.", "Two dogs play in the grass."]
HYPS = ["A man with an orange hat looking at something.", "Two dogs dogs play in the grass grass."]
SRCS = ["Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt.", "Zwei Hunde spielen im Gras."]


def test_train_help_names_both_architectures(capsys):
    """``scanmt train --help`` said "Train an attentional LSTM NMT model"; it trains a Transformer too."""
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = capsys.readouterr().out
    assert "LSTM NMT model" not in text and "a Transformer" in text and "model.arch: transformer" in text


def _files(tmp_path) -> list[str]:
    paths = []
    for name, lines in (("hyp.en", HYPS), ("ref.en", REFS), ("src.de", SRCS)):
        (tmp_path / name).write_text("".join(ln + "\n" for ln in lines), encoding="utf-8")
        paths.append(str(tmp_path / name))
    return paths


@pytest.mark.parametrize("given, missing", [("--src", "--align-model"), ("--align-model", "--src")])
def test_evaluate_says_why_drop_is_missing(tmp_path, capsys, given, missing):
    """``evaluate --src`` without ``--align-model`` gave no DROP row and no note why."""
    hyp, ref, src = _files(tmp_path)
    value = src if given == "--src" else str(tmp_path / "align")
    assert main(["evaluate", "--hyp", hyp, "--ref", ref, given, value, "--no-synonyms"]) == 0
    row = next((ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("DROP")), None)
    assert row is not None and row.split()[1] == "-" and f"not computed: it needs {missing} too" in row, row


def test_evaluate_without_any_drop_input_adds_no_drop_row(tmp_path, capsys):
    hyp, ref, _ = _files(tmp_path)
    assert main(["evaluate", "--hyp", hyp, "--ref", ref, "--no-synonyms"]) == 0
    assert "DROP" not in capsys.readouterr().out
