"""Progress bars stay out of log files and away from error lines (issue 52, items 15 and 17).

Before, the demo's ``train.log`` held 88 KB of ``\\r`` progress frames with log lines glued to them, ``train``
printed its error after the bar on the same line, ``experiment run`` gave a bar's fragment as a failed run's
reason, and a Transformer's greedy validation ran for minutes without a sign of progress.
"""

from __future__ import annotations

import contextlib
import errno
import io
import logging
import re

from tqdm import tqdm

from scanmt.cli.main import main
from tests.conftest import tiny_config


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _train(data, out, stderr: io.StringIO) -> None:
    from scanmt.training.trainer import Trainer

    cfg = tiny_config(data, train__max_steps=6, train__log_every=2, data__valid_limit=8)
    with contextlib.redirect_stderr(stderr):
        Trainer(cfg, out).train()


def test_training_into_a_log_file_writes_no_progress_frames(small_data_dir, tmp_path):
    log_file = io.StringIO()  # the demo's trainer: stderr is its train.log
    _train(small_data_dir, tmp_path / "run", log_file)
    assert "\r" not in log_file.getvalue() and "upd/s" not in log_file.getvalue(), log_file.getvalue()[:300]


def test_validation_shows_its_greedy_decoding_on_a_terminal(small_data_dir, tmp_path, caplog):
    terminal = _Terminal()
    with caplog.at_level(logging.INFO):
        _train(small_data_dir, tmp_path / "run", terminal)
    assert "translate (beam 1)" in terminal.getvalue() and "upd/s" in terminal.getvalue()
    assert "validation: greedy decoding of 8 sentences for BLEU" in caplog.text  # in log files too


def test_an_error_is_not_glued_to_an_open_progress_bar(tmp_path, capsys, monkeypatch):
    import scanmt.cli.prepare as prepare_cli

    def full_disk_under_a_bar(args):
        bar = tqdm(total=10, desc="epoch 1", mininterval=0, leave=False)
        bar.update(3)
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "last.pt"))

    monkeypatch.setattr(prepare_cli, "run", full_disk_under_a_bar)
    assert main(["prepare", "--pair", "de-en", "--out", "x"]) == 1
    err = capsys.readouterr().err
    assert re.search(rf"(^|[\r\n])scanmt prepare: error: No space left on device: {tmp_path / 'last.pt'}\n$", err), \
        repr(err)
    assert "3/10" not in err.rsplit("\r", 1)[-1]


def test_a_failed_grid_runs_reason_is_its_error_not_a_bar(tmp_path):
    from scanmt.experiments.pool import _tail

    log = tmp_path / "log.txt"
    log.write_text("##### 2026-11-27 20:48:50 start (cpu, 1 threads)\n20:48:57 INFO step 27, end of epoch 1\n"
                   "epoch 1:  43%|####  | 26/60 [00:06<00:08,  4.21upd/s, loss=5.5]\r"
                   "epoch 1:  45%|####  | 27/60 [00:07<00:07,  4.21upd/s]softmax/seed1: error: No space left on "
                   "device: /runs/softmax/seed1/best.pt\n\r                 \r", encoding="utf-8")
    assert _tail(log) == ("##### 2026-11-27 20:48:50 start (cpu, 1 threads) | 20:48:57 INFO step 27, end of epoch 1 "
                          "| softmax/seed1: error: No space left on device: /runs/softmax/seed1/best.pt")
