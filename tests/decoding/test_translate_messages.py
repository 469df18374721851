"""What ``scanmt translate`` says about long lines and its searches (issue 52, items 16 and 18)."""

from __future__ import annotations

from tests.conftest import assert_one_line_error


def test_a_line_refused_as_too_long_is_not_announced_as_translated_in_full(model, tmp_path, capsys, caplog):
    """A 3,000-word line got a warning that it would be "translated in full", then the error that it is too long."""
    inp = tmp_path / "in.de"
    inp.write_text("Ein Hund läuft.\n" + " ".join(["Hund"] * 120) + "\n", encoding="utf-8")  # > data.max_len 80
    argv = ["translate", "--model", str(model), "--input", str(inp), "--output", str(tmp_path / "o.en"),
            "--max-source-len", "100"]
    with caplog.at_level("WARNING"):
        assert_one_line_error(capsys, argv, f"{inp}:2: the line has ", "more than decode.max_source_len=100")
    assert "translated in full" not in caplog.text


def test_a_softmax_output_says_nothing_of_its_support(model, tmp_path, capsys):
    """``output softmax: mean support 7787 words per step; search exact for 0/20``: a softmax's support is the
    vocabulary, and its searches are exact only by chance."""
    from scanmt.cli.main import main

    inp = tmp_path / "in.de"
    inp.write_text("Ein Hund läuft.\n", encoding="utf-8")
    assert main(["translate", "--model", str(model), "--input", str(inp), "--output", str(tmp_path / "o.en")]) == 0
    out = capsys.readouterr().out
    assert "translated 1 sentences" in out and "support" not in out and "exact" not in out, out
