"""Checkpoints written before the issue-15 refactor still load and compute the same numbers.

The fixtures (``tests/fixtures/old_checkpoints``) were made by ``make_fixtures.py`` with the code of the
commit recorded in ``expected.json``: five tiny models (softmax + CovVector with cosine scores, sparsemax
with sqrt scores, csoftmax with constant, csparsemax with guided and with predicted fertility), and what
that code computed from them by forced decoding of three sentence pairs.
"""

from __future__ import annotations

import json
import math
import tarfile
from pathlib import Path

import pytest
import torch

from scanmt.cli.main import main
from scanmt.decoding.translator import Translator

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "old_checkpoints"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text(encoding="utf-8"))
SYSTEMS = sorted(EXPECTED["systems"])


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("old-checkpoints")
    with tarfile.open(FIXTURES / "checkpoints.tar.xz") as tar:
        tar.extractall(out, filter="data")
    return out


def test_fixture_covers_every_system(checkpoints):
    assert sorted(p.stem for p in checkpoints.glob("*.pt")) == SYSTEMS
    assert len(SYSTEMS) == 5


@pytest.mark.parametrize("name", SYSTEMS)
def test_forced_decoding_matches_the_old_code(checkpoints, name):
    tr = Translator.from_checkpoint(checkpoints / f"{name}.pt")
    src, tgt = zip(*EXPECTED["pairs"])
    got = tr.force(list(src), list(tgt))
    assert len(got) == len(EXPECTED["systems"][name])
    for g, want in zip(got, EXPECTED["systems"][name]):
        assert math.isclose(g.hypothesis.score, want["log_prob"], rel_tol=1e-5, abs_tol=1e-4), name
        torch.testing.assert_close(g.hypothesis.attention, torch.tensor(want["attention"]), atol=1e-5, rtol=1e-4)
        if want["fertility"] is None:
            assert g.fertility is None
        else:
            torch.testing.assert_close(torch.tensor(g.fertility), torch.tensor(want["fertility"]), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ["softmax-covvector", "csparsemax-predicted"])
def test_old_checkpoint_translates_from_the_command_line(checkpoints, tmp_path, name):
    inp = tmp_path / "in.de"
    inp.write_text("".join(f"{s}\n" for s, _ in EXPECTED["pairs"]), encoding="utf-8")
    out = tmp_path / "out.en"
    assert main(["translate", "--model", str(checkpoints / f"{name}.pt"), "--input", str(inp),
                 "--output", str(out), "--beam", "2", "--max-len", "20"]) == 0
    assert len(out.read_text(encoding="utf-8").splitlines()) == len(EXPECTED["pairs"])
