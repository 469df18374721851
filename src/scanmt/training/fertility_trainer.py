"""Training the fertility predictor (a BiLSTM tagger) with the shared :class:`TrainLoop`: the loop's task.

The network, its targets and its evaluation are :mod:`scanmt.fertility.predictor`; this
module is what belongs to the training loop (the task and the run).

Targets are the aligner's fertilities (``level``): with ``subword`` (the default), for
every source subword of the train (valid) split, the number of target subwords it is
aligned to in ``ALIGN_DIR/{split}.subword.align``; with ``word``, for every piece, the
number of target words its word is aligned to in ``ALIGN_DIR/{split}.word.align``
(:mod:`scanmt.fertility.predictor.targets`).  Both are capped at ``model.max_fertility``.
Validation reports accuracy (argmax class = capped count) and the mean absolute
error of the expected fertility against the uncapped count; early stopping
follows accuracy.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.nn import functional as F

from scanmt.config import PredictorConfig
from scanmt.data.dataset import Batch, ParallelData
from scanmt.data.prepare import read_meta
from scanmt.data.vocab import Vocab
from scanmt.fertility.alignments import ALIGN_DIR
from scanmt.fertility.predictor.network import FertilityPredictor
from scanmt.fertility.predictor.targets import load_split
from scanmt.training import distributed
from scanmt.training.loop import Progress, TrainLoop
from scanmt.training.run_dir import claim_run_dir


class FertilityTask:
    score_key = "valid/accuracy"
    decay_key = "valid/loss"

    def __init__(self, cfg: PredictorConfig, vocab: Vocab, train: ParallelData, valid: ParallelData):
        self.cfg, self.vocab, self.train, self.valid = cfg, vocab, train, valid
        m = cfg.model
        self.model = FertilityPredictor(len(vocab), m.emb_size, m.hidden_size, m.layers, m.dropout, m.max_fertility)
        if cfg.train.param_init > 0:
            for p in self.model.parameters():
                torch.nn.init.uniform_(p, -cfg.train.param_init, cfg.train.param_init)

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        return self.train.token_batches(self.cfg.data.batch_tokens, seed=self.cfg.train.seed, epoch=epoch)

    def make_batch(self, positions: list[int], device: torch.device) -> Batch:
        return self.train.make_batch(positions).to(device)

    def _loss_terms(self, net: torch.nn.Module, batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        logits = net(batch.src, batch.src_len)
        mask = torch.arange(batch.src.size(1), device=batch.src.device).unsqueeze(0) < batch.src_len.unsqueeze(1)
        target = batch.fertility.clamp(max=self.cfg.model.max_fertility).long()
        return logits, target, mask

    def loss(self, net: torch.nn.Module, batch: Batch) -> tuple[torch.Tensor, int]:
        logits, target, mask = self._loss_terms(net, batch)
        loss = F.cross_entropy(logits[mask].float(), target[mask], reduction="sum")
        return loss, int(mask.sum())

    def sequences(self, batch: Batch) -> int:
        return int(batch.src.size(0))

    def validate(self) -> dict[str, float]:
        device = next(self.model.parameters()).device
        tot_loss = correct = n = 0.0
        abs_err = 0.0
        for batch in self.valid.iter_batches(self.valid.sequential_batches(128)):
            batch = batch.to(device)
            logits, target, mask = self._loss_terms(self.model, batch)
            tot_loss += float(F.cross_entropy(logits[mask].float(), target[mask], reduction="sum"))
            correct += float((logits.argmax(-1)[mask] == target[mask]).sum())
            expected = self.model.expected(batch.src, batch.src_len)
            abs_err += float((expected - batch.fertility).abs()[mask].sum())
            n += float(mask.sum())
        return {"valid/loss": tot_loss / n, "valid/accuracy": 100.0 * correct / n, "valid/mae": abs_err / n}

    def describe_validation(self, m: dict[str, float]) -> str:
        return f"valid accuracy {m['valid/accuracy']:.2f}%, MAE {m['valid/mae']:.3f}, loss {m['valid/loss']:.3f}"

    def saved_config(self) -> dict[str, Any]:
        return self.cfg.to_dict()

    def checkpoint_extras(self) -> dict[str, Any]:
        return {"vocab": self.vocab.itos, "kind": "fertility-predictor"}


@dataclass
class PredictorResult:
    progress: Progress
    stop_reason: str
    checkpoint: Path


def train_predictor(cfg: PredictorConfig, out_dir: str | Path, *, resume: bool = False) -> PredictorResult:
    dist = distributed.setup()
    with claim_run_dir(out_dir, resume=resume, lock=dist.is_main):  # before any data is read
        if cfg.train.threads:
            torch.set_num_threads(cfg.train.threads)
        data_dir = Path(cfg.data.dir)
        meta = read_meta(data_dir)
        align_dir = Path(cfg.align_dir) if cfg.align_dir else data_dir / ALIGN_DIR
        vocab = Vocab.load(data_dir / "vocab.txt")
        train = load_split(data_dir, align_dir, "train", vocab, meta["src_lang"], cfg.data.train_limit, cfg.level)
        valid = load_split(data_dir, align_dir, "valid", vocab, meta["src_lang"], cfg.data.valid_limit, cfg.level)
        torch.manual_seed(cfg.train.seed)
        random.seed(cfg.train.seed)
        task = FertilityTask(cfg, vocab, train, valid)
        loop = TrainLoop(task, cfg.train, out_dir, resume=resume, dist=dist, unit="tok")
        progress = loop.run()
    return PredictorResult(progress, loop.stop_reason, Path(out_dir) / "best.pt")
