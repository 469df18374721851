"""Names that enter paths are whole-string checked (issue 52, item 6): ``experiment report --name ../x`` or
``--name /abs`` wrote outside ``--out``, and a check anchored with ``$`` took a name ending in a newline
(``runs/a\\n/seed1`` was made)."""

from __future__ import annotations

import os

import pytest

from scanmt.cli.main import main
from scanmt.errors import ConfigError
from scanmt.experiments.grid import GridError, load_grid
from tests.experiments.test_results_json import SEEDS, fake_experiment


@pytest.mark.parametrize("name", ["../x", "{abs}", "x\n", "a/b", ".hidden"])
def test_report_name_is_a_grid_name(tmp_path, capsys, name):
    out, docs = tmp_path / "exp", tmp_path / "docs"
    fake_experiment(out, SEEDS)
    name = name.format(abs=tmp_path / "abs")
    before = sorted(p for p in tmp_path.rglob("*"))
    code = main(["experiment", "report", str(out), "--out", str(docs), "--name", name, "--figures", "0",
                 "--examples", "0", "--bootstrap-samples", "10"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"--name: {name!r}: use letters, digits, '_', '.' and '-' only" in err and "Traceback" not in err, err
    assert sorted(p for p in tmp_path.rglob("*")) == before  # nothing written, inside --out or outside


def test_report_name_that_is_a_grid_name_is_used(tmp_path, capsys):
    out, docs = tmp_path / "exp", tmp_path / "docs"
    fake_experiment(out, SEEDS)
    assert main(["experiment", "report", str(out), "--out", str(docs), "--name", "t1.v2-final", "--figures", "0",
                 "--examples", "0", "--bootstrap-samples", "10"]) == 0
    assert (docs / "t1.v2-final.md").is_file() and (docs / "t1.v2-final.json").is_file()


@pytest.mark.parametrize("text", ['name: "g\\n"\nsystems: [{name: s}]\n', 'name: g\nsystems: [{name: "a\\n"}]\n',
                                  'name: g\nsystems: [{name: a}, {name: b, reuse_model: "a\\n"}]\n'])
def test_grid_names_ending_in_a_newline_are_refused(tmp_path, text):
    path = tmp_path / "g.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(GridError, match=r"use letters, digits, '_', '\.' and '-' only"):
        load_grid(path)


def test_other_whole_string_checks_refuse_a_trailing_newline(tmp_path):
    from scanmt.fertility.cache import _param_tag, fertility_cache_path
    from scanmt.io import _open_descriptor

    with pytest.raises(ConfigError, match="bad split name"):
        fertility_cache_path(tmp_path, "train\n", "constant", {"value": 2})
    assert _param_tag({"value": "2\n"}) != "2\n"  # hashed: a file name gets no newline
    r, w = os.pipe()
    try:
        assert _open_descriptor(f"/dev/fd/{w}") == w
        assert _open_descriptor(f"/dev/fd/{w}\n") is None  # another file's name, not the descriptor
    finally:
        os.close(r)
        os.close(w)
