"""The training loop: token batches, SGD/Adam, clipping, validation, early stopping, checkpoints, resume.

Resuming (``resume=True``) reloads ``last.pt``: model, optimizer, lr, the
position inside the epoch and the RNG states, so the continued run produces
the same parameters as an uninterrupted one.  At most ``checkpoint_every``
steps of work are lost when a run is killed.
"""

from __future__ import annotations

import logging
import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import sacrebleu
import torch
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from scanmt.config import Config, check_compatible
from scanmt.data.dataset import Batch, ParallelData
from scanmt.data.pipeline import TextPipeline
from scanmt.data.prepare import read_meta
from scanmt.decoding.translator import Translator, build_model
from scanmt.errors import ConfigError, DataError
from scanmt.io import read_lines
from scanmt.model.nmt import NMTModel, nmt_loss
from scanmt.training import distributed
from scanmt.training.checkpoint import load_checkpoint, save_checkpoint
from scanmt.training.logger import MetricLogger
from scanmt.training.optim import build_optimizer, epoch_lr, set_lr

log = logging.getLogger("scanmt.train")


@dataclass
class Progress:
    step: int = 0
    epoch: int = 1
    batch_in_epoch: int = 0
    lr: float = 0.0
    decay_started: bool = False
    best_bleu: float = -1.0
    best_step: int = 0
    best_ppl: float = float("inf")
    bad_validations: int = 0
    elapsed: float = 0.0
    target_tokens: int = 0
    history: list[dict] = field(default_factory=list)


@dataclass
class TrainData:
    pipeline: TextPipeline
    train: ParallelData
    valid: ParallelData
    valid_refs: list[str]


def load_train_data(cfg: Config) -> TrainData:
    d = Path(cfg.data.dir)
    meta = read_meta(d)
    s, t = cfg.data.src_lang, cfg.data.tgt_lang
    if (meta["src_lang"], meta["tgt_lang"]) != (s, t):
        raise ConfigError(
            f"data.src_lang/tgt_lang = {s}/{t} but {d} was prepared for {meta['src_lang']}/{meta['tgt_lang']}"
        )
    pipeline = TextPipeline.from_data_dir(d, s, t)
    train = ParallelData.from_files(
        d / f"train.bpe.{s}", d / f"train.bpe.{t}", pipeline.vocab, max_len=cfg.data.max_len, limit=cfg.data.train_limit
    )
    valid = ParallelData.from_files(
        d / f"valid.bpe.{s}", d / f"valid.bpe.{t}", pipeline.vocab, max_len=0, limit=cfg.data.valid_limit
    )
    refs = read_lines(d / f"valid.raw.{t}", what="reference file")
    refs = [refs[i] for i in valid.index]
    return TrainData(pipeline, train, valid, refs)


class Trainer:
    def __init__(self, cfg: Config, out_dir: str | Path, *, resume: bool = False, data: TrainData | None = None):
        self.cfg = cfg
        self.out = Path(out_dir)
        self.dist = distributed.setup()
        if cfg.train.threads:
            torch.set_num_threads(cfg.train.threads)
        last = self.out / "last.pt"
        if last.exists() and not resume:
            raise ConfigError(f"{self.out} already holds a run (last.pt); pass --resume to continue it or pick another --out")
        if resume and not last.exists():
            raise ConfigError(f"--resume: {last} not found")
        self.data = data or load_train_data(cfg)
        torch.manual_seed(cfg.train.seed)
        random.seed(cfg.train.seed)
        self.model: NMTModel = build_model(cfg, len(self.data.pipeline.vocab))
        self.model.reset_parameters(cfg.train.param_init)
        self.model.to(self.dist.device)
        self.optimizer = build_optimizer(self.model.parameters(), cfg.train)
        self.progress = Progress(lr=cfg.train.lr)
        if resume:
            self._restore(load_checkpoint(last, map_location=self.dist.device))
        self.net = self.model
        if self.dist.enabled:
            self.net = DistributedDataParallel(
                self.model, device_ids=[self.dist.device.index] if self.dist.device.type == "cuda" else None
            )
        if self.dist.is_main:
            self.out.mkdir(parents=True, exist_ok=True)
            cfg.save_yaml(self.out / "config.yaml")
        self.logger = MetricLogger(
            self.out, cfg.train.logger, enabled=self.dist.is_main, resume_step=self.progress.step if resume else None
        )

    # ----------------------------------------------------------- checkpoints
    def _payload(self) -> dict:
        return {
            "config": self.cfg.to_dict(),
            "pipeline": self.data.pipeline.to_state(),
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "progress": self.progress.__dict__.copy(),
            "rng": {"torch": torch.get_rng_state(), "python": random.getstate()},
        }

    def _save(self, name: str) -> None:
        if self.dist.is_main:
            save_checkpoint(self.out / name, self._payload())

    def _restore(self, ckpt: dict) -> None:
        check_compatible(ckpt["config"], self.cfg.to_dict(), f"{self.out / 'last.pt'}")
        self.model.load_state_dict(ckpt["model"])
        self.optimizer.load_state_dict(ckpt["optimizer"])
        self.progress = Progress(**ckpt["progress"])
        torch.set_rng_state(ckpt["rng"]["torch"])
        random.setstate(ckpt["rng"]["python"])
        log.info("resumed from step %d (epoch %d, batch %d)", self.progress.step, self.progress.epoch, self.progress.batch_in_epoch)

    # ----------------------------------------------------------- one step
    def _loss(self, batch: Batch) -> tuple[torch.Tensor, int]:
        out = self.net(batch.src, batch.src_len, batch.tgt_in, getattr(batch, "fertility", None))
        return nmt_loss(out.logits, batch.tgt_out, self.cfg.train.label_smoothing), batch.n_tgt_tokens

    def train_step(self, batch: Batch) -> tuple[float, int]:
        self.net.train()
        batch = batch.to(self.dist.device)
        loss, n_tok = self._loss(batch)
        self.optimizer.zero_grad(set_to_none=True)
        (loss / max(n_tok, 1)).backward()
        if self.cfg.train.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.train.max_grad_norm)
        self.optimizer.step()
        return float(loss.detach()), n_tok

    # ----------------------------------------------------------- validation
    @torch.no_grad()
    def validate(self) -> dict[str, float]:
        self.model.eval()
        total, n_tok = 0.0, 0
        for batch in self.data.valid.iter_batches(self.data.valid.sequential_batches(64)):
            batch = batch.to(self.dist.device)
            out = self.model(batch.src, batch.src_len, batch.tgt_in, getattr(batch, "fertility", None))
            total += float(nmt_loss(out.logits, batch.tgt_out))
            n_tok += batch.n_tgt_tokens
        ppl = math.exp(min(total / max(n_tok, 1), 50.0))
        translator = Translator(
            self.model, self.data.pipeline, self.cfg.decode, fertility_fn=self.fertility_fn, device=self.dist.device
        )
        hyps = translator.search(self.data.valid, beam=1)
        texts = [self.data.pipeline.detokenize_target(self.data.pipeline.target_pieces(h.tokens)) for h in hyps]
        bleu = sacrebleu.corpus_bleu(texts, [self.data.valid_refs]).score
        self.model.train()
        return {"valid/ppl": ppl, "valid/bleu": bleu}

    fertility_fn = None  # set for constrained transforms (see scanmt.model.fertility)

    # ----------------------------------------------------------- loop
    def _epoch_batches(self, epoch: int) -> list[list[int]]:
        c = self.cfg
        batches = self.data.train.token_batches(
            c.data.batch_tokens, seed=c.train.seed, epoch=epoch, bucket_batches=c.data.bucket_batches
        )
        if self.dist.enabled:  # equal shards so every rank takes the same number of steps
            n = len(batches) // self.dist.world_size * self.dist.world_size
            batches = batches[self.dist.rank : n : self.dist.world_size]
        return batches

    def _should_stop(self, t0: float) -> str | None:
        c = self.cfg.train
        if c.max_steps and self.progress.step >= c.max_steps:
            return f"reached train.max_steps={c.max_steps}"
        if c.max_minutes and (self.progress.elapsed + time.time() - t0) >= c.max_minutes * 60:
            return f"reached train.max_minutes={c.max_minutes}"
        if c.patience and self.progress.bad_validations >= c.patience:
            return f"no BLEU improvement in {c.patience} validations (early stopping)"
        return None

    def _after_validation(self, metrics: dict[str, float]) -> None:
        p = self.progress
        p.history.append({"step": p.step, "epoch": p.epoch, **metrics})
        if metrics["valid/ppl"] >= p.best_ppl and p.step > 0:
            p.decay_started = True
        p.best_ppl = min(p.best_ppl, metrics["valid/ppl"])
        improved = metrics["valid/bleu"] > p.best_bleu
        if improved:
            p.best_bleu, p.best_step, p.bad_validations = metrics["valid/bleu"], p.step, 0
        else:
            p.bad_validations += 1
        self.logger.log(p.step, metrics)
        log.info(
            "step %d epoch %d: valid ppl %.2f, greedy BLEU %.2f%s",
            p.step, p.epoch, metrics["valid/ppl"], metrics["valid/bleu"], " (best)" if improved else "",
        )
        if improved:
            self._save("best.pt")

    def train(self) -> Progress:
        c = self.cfg.train
        p = self.progress
        t0 = time.time()
        stop = self._should_stop(t0)
        window_tok, window_loss, window_t = 0, 0.0, time.time()
        while stop is None and p.epoch <= c.epochs:
            batches = self._epoch_batches(p.epoch)
            if p.batch_in_epoch == 0:
                p.lr = epoch_lr(p.lr, p.epoch, c, p.decay_started)
            set_lr(self.optimizer, p.lr)
            bar = tqdm(
                total=len(batches), initial=p.batch_in_epoch, desc=f"epoch {p.epoch}", unit="batch",
                disable=not self.dist.is_main, leave=False, mininterval=2.0,
            )
            while p.batch_in_epoch < len(batches):
                batch = self.data.train.make_batch(batches[p.batch_in_epoch])
                loss, n_tok = self.train_step(batch)
                if not math.isfinite(loss):
                    raise DataError(f"training diverged at step {p.step + 1} (loss {loss}); lower train.lr")
                p.step += 1
                p.batch_in_epoch += 1
                p.target_tokens += n_tok
                window_tok += n_tok
                window_loss += loss
                bar.update(1)
                if p.step % c.log_every == 0:
                    tot_loss, tot_tok = distributed.all_reduce_sum([window_loss, window_tok], self.dist)
                    dt = time.time() - window_t
                    vals = {"train/ppl": math.exp(min(tot_loss / max(tot_tok, 1), 50)), "train/tok_per_s": tot_tok / max(dt, 1e-9), "train/lr": p.lr}
                    bar.set_postfix(ppl=f"{vals['train/ppl']:.1f}", tok_s=f"{vals['train/tok_per_s']:.0f}", lr=f"{p.lr:g}")
                    self.logger.log(p.step, vals)
                    window_tok, window_loss, window_t = 0, 0.0, time.time()
                validate = c.valid_every and p.step % c.valid_every == 0
                end_of_epoch = p.batch_in_epoch >= len(batches)
                if end_of_epoch:
                    p.epoch += 1
                    p.batch_in_epoch = 0
                if validate or (end_of_epoch and not c.valid_every):
                    p.elapsed += time.time() - t0
                    t0 = time.time()
                    self._after_validation(self.validate())
                    self._save("last.pt")
                elif p.step % c.checkpoint_every == 0 or end_of_epoch:
                    p.elapsed += time.time() - t0
                    t0 = time.time()
                    self._save("last.pt")
                stop = self._should_stop(t0)
                if stop or end_of_epoch:
                    break
            bar.close()
        if stop is None:
            stop = f"finished {c.epochs} epochs"
        p.elapsed += time.time() - t0
        if not p.history or p.history[-1]["step"] != p.step:
            self._after_validation(self.validate())
        self._save("last.pt")
        if not (self.out / "best.pt").exists():
            self._save("best.pt")
        self.logger.close()
        self.replica_divergence = distributed.replica_divergence(self.model, self.dist)
        if self.dist.enabled:
            log.info("replicas: max |param - rank0 param| = %g over %d processes", self.replica_divergence, self.dist.world_size)
        log.info("stopped: %s", stop)
        self.stop_reason = stop
        return p
