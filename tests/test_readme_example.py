"""README.md's "Use from Python" example runs as written, on 600 Multi30k pairs in a temporary folder."""

from __future__ import annotations

import gzip
import re

from tests.conftest import REPO, require_multi30k

SPLITS = {"train": ("train", 600), "valid": ("val", 50), "test": ("test_2016_flickr", 20)}


def readme_example() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Use from Python", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_python_example_runs(tmp_path, monkeypatch, capsys):
    multi30k = require_multi30k()
    raw = tmp_path / "raw"
    raw.mkdir()
    for name, (upstream, n) in SPLITS.items():
        for lang in ("de", "en"):
            with gzip.open(multi30k / f"{upstream}.{lang}.gz", "rt", encoding="utf-8") as fh:
                (raw / f"{name}.{lang}").write_text("".join(next(fh) for _ in range(n)), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    exec(compile(readme_example(), "README.md (Use from Python)", "exec"), {"__name__": "readme"})
    out = capsys.readouterr().out.splitlines()
    assert (tmp_path / "runs/tiny-csparsemax/best.pt").exists()
    assert len((tmp_path / "runs/tiny-csparsemax/test.hyp.en").read_text(encoding="utf-8").splitlines()) == 20
    assert any(line.startswith("scanmt translate --model runs/tiny-csparsemax/best.pt") for line in out)
    bleu, rep = map(float, out[-1].split())
    assert bleu >= 0 and rep >= 0
