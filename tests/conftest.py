"""Shared fixtures: the ../shared data directory and a small prepared Multi30k subset."""

from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = (REPO / ".." / "shared" / "data").resolve()
MULTI30K = SHARED_DATA / "multi30k"


def load_module(path: Path) -> ModuleType:
    """The Python file ``path`` (a script of ``scripts/`` or ``benchmarks/``, which are not packages) as a module."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def require_multi30k() -> Path:
    if not (MULTI30K / "train.de.gz").exists():
        pytest.skip(f"Multi30k not found at {MULTI30K} (needs ../shared/data/multi30k beside the repo)")
    return MULTI30K


def _head(src: Path, dst: Path, n: int) -> Path:
    with gzip.open(src, "rt", encoding="utf-8") as fh:
        lines = [next(fh) for _ in range(n)]
    dst.write_text("".join(lines), encoding="utf-8")
    return dst


SMALL_SPLITS = (("train", "train", 3000), ("valid", "val", 200), ("test", "test_2016_flickr", 100))


def _prepare_small(tmp_path_factory, splits: tuple[tuple[str, str, int], ...]) -> Path:
    """The first lines of Multi30k De-En splits ``(name, upstream, lines)``, prepared with a 2000-piece BPE.

    The raw files keep their upstream names, so meta.json maps each split to its upstream name.
    """
    m = require_multi30k()
    from scanmt.data.prepare import SplitFiles, prepare

    raw = tmp_path_factory.mktemp("raw")
    files = {}
    for name, upstream, n in splits:
        files[name] = SplitFiles(_head(m / f"{upstream}.de.gz", raw / f"{upstream}.de", n),
                                 _head(m / f"{upstream}.en.gz", raw / f"{upstream}.en", n))
    out = tmp_path_factory.mktemp("prepared") / "de-en"
    prepare(files, "de", "en", out, vocab_size=2000)
    return out


@pytest.fixture(scope="session")
def small_data_dir(tmp_path_factory) -> Path:
    """Multi30k De-En: 3000 train / 200 valid / 100 test pairs, prepared with a 2000-piece BPE."""
    return _prepare_small(tmp_path_factory, SMALL_SPLITS)


@pytest.fixture(scope="session")
def small_data_dir_2017(tmp_path_factory) -> Path:
    """:func:`small_data_dir`'s splits and 100 pairs of test_2017_flickr as ``test2017``, as `scanmt prepare` names it."""
    return _prepare_small(tmp_path_factory, SMALL_SPLITS + (("test2017", "test_2017_flickr", 100),))


def tiny_config(data_dir: Path, **overrides):
    """A very small model config for fast tests."""
    from scanmt.config import Config

    d = {
        "data": {"dir": str(data_dir), "batch_tokens": 600, "valid_limit": 30},
        "model": {"emb_size": 32, "hidden_size": 32, "layers": 1, "dropout": 0.1},
        "train": {"optimizer": "adam", "lr": 0.005, "epochs": 1, "max_steps": 20, "log_every": 5,
                  "checkpoint_every": 10, "logger": "none", "threads": 1},
        "decode": {"beam": 3, "batch_size": 16},
    }
    for key, value in overrides.items():
        sec, _, k = key.partition("__")
        node = d.setdefault(sec, {})
        parts = k.split("__")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    return Config.from_dict(d)


@pytest.fixture(scope="session")
def aligned_data_dir(small_data_dir) -> Path:
    """``small_data_dir`` with subword alignments in ``DIR/align`` (eflomal, a few seconds)."""
    from scanmt.cli.main import main

    if not (small_data_dir / "align" / "train.subword.align").exists():
        assert main(["align", "--data", str(small_data_dir), "--level", "subword"]) == 0
    return small_data_dir


def one_train_step(cfg, out: Path):
    """``(trainer, loss per unit, {parameter: gradient})`` after one ``train_step`` on the first batch."""
    import torch

    from scanmt.training.trainer import Trainer

    trainer = Trainer(cfg, out)
    batch = trainer.task.make_batch(trainer.task.epoch_batches(1)[0], torch.device("cpu"))
    torch.manual_seed(0)
    loss, n = trainer.loop.train_step(batch)
    grads = {k: p.grad.detach().clone() for k, p in trainer.model.named_parameters() if p.grad is not None}
    return trainer, loss / n, grads


def assert_one_line_error(capsys, argv: list[str], *expected: str) -> str:
    """Run ``scanmt ARGV``: exit status 2, one line on stderr (``scanmt CMD: error: ...``) holding every
    ``expected`` text, no traceback; returns that line."""
    from scanmt.cli.main import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith(f"scanmt {argv[0]}: error: "), err
    for text in expected:
        assert text in err, err
    return err


@pytest.fixture
def fertility_data_dir(tmp_path: Path) -> Path:
    """A prepared folder of two train and one valid sentence pairs with their subword alignments (no eflomal)."""
    import json

    d = tmp_path / "data"
    d.mkdir()
    (d / "meta.json").write_text(json.dumps({"src_lang": "de", "tgt_lang": "en", "splits": ["train", "valid"]}))
    (d / "train.bpe.de").write_text("▁ein ▁Hund e\n▁ein ▁Mann\n")
    (d / "train.bpe.en").write_text("▁a ▁dog s\n▁a ▁man\n")
    (d / "valid.bpe.de").write_text("▁ein ▁Katze\n")
    (d / "valid.bpe.en").write_text("▁a ▁cat\n")
    a = d / "align"
    a.mkdir()
    (a / "train.subword.align").write_text("0-0 1-1 1-2\n0-0\n")  # Hund -> dog s; e, Mann unaligned
    (a / "valid.subword.align").write_text("0-0 1-1\n")
    return d
