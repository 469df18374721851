"""A checkpoint's text pipeline loads from its bytes: no temporary file per load, same pieces."""

from __future__ import annotations

import tarfile
import tempfile
from pathlib import Path

from scanmt.data.pipeline import TextPipeline
from scanmt.data.subword import SubwordModel
from scanmt.model.checkpoint import Checkpoint

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "old_checkpoints"
LINES = ["ein hund läuft im schnee .", "der kleine mann sitzt auf dem gras ."]


def test_pipeline_from_state_writes_no_file(tmp_path, monkeypatch):
    with tarfile.open(FIXTURES / "checkpoints.tar.xz") as tar:
        tar.extract("softmax-covvector.pt", tmp_path, filter="data")
    state = Checkpoint.load(tmp_path / "softmax-covvector.pt").pipeline
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where a NamedTemporaryFile would go
    pipe = TextPipeline.from_state(state)
    assert list(scratch.iterdir()) == []
    assert pipe.subwords.path is None and pipe.to_state()["spm_model"] == state["spm_model"]
    on_disk = tmp_path / "spm.model"
    on_disk.write_bytes(state["spm_model"])
    from_file = SubwordModel(on_disk)
    assert [pipe.source_pieces(x) for x in LINES] == [from_file.encode(x) for x in LINES]
    assert all(len(p) > 1 for p in (pipe.source_pieces(x) for x in LINES))
