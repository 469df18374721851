"""Training the NMT model: the NMT :class:`~scanmt.training.loop.Task` and the ``Trainer`` facade.

Validation computes perplexity (teacher forcing) and greedy BLEU (sacreBLEU,
detokenized) on the validation split; early stopping and ``best.pt`` follow
BLEU, lr decay follows perplexity; the greedy output's length over the references' is logged beside BLEU
(``valid/len_ratio``).  A sparse output (``model.output`` other than
softmax) trains with its Fenchel–Young loss (:mod:`scanmt.model.output`); its
perplexity would be infinite as soon as a reference token gets zero probability,
so validation reports the Fenchel–Young loss per token (``valid/fy_loss``, which lr
decay follows) and token accuracy (``valid/accuracy``) instead.  Constrained transforms get their fertility
bounds from :mod:`scanmt.fertility.setup`, and the fertility provider
is stored in every checkpoint.
"""

from __future__ import annotations

import logging
import math
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sacrebleu
import torch

from scanmt.config import Config
from scanmt.data.dataset import Batch, ParallelData
from scanmt.data.pipeline import TextPipeline
from scanmt.data.prepare import read_meta, training_digest
from scanmt.data.vocab import PAD_ID
from scanmt.decoding.translator import Translator
from scanmt.errors import ConfigError
from scanmt.io import read_lines
from scanmt.fertility.providers import provider_state
from scanmt.model.build import build_model
from scanmt.model.interface import NMTModel
from scanmt.model.loss import nmt_loss
from scanmt.model.output import fy_loss, is_sparse, output_loss, token_accuracy
from scanmt.ops import load_native_kernels
from scanmt.training import distributed
from scanmt.training.attention_health import AttentionHealth
from scanmt.fertility.setup import FertilitySetup, setup_fertility
from scanmt.training.loop import Progress, TrainLoop
from scanmt.training.precision import precision_advice
from scanmt.training.run_dir import claim_run_dir

log = logging.getLogger("scanmt.train")


@dataclass
class TrainData:
    pipeline: TextPipeline
    train: ParallelData
    valid: ParallelData
    valid_refs: list[str]
    #: digest of the prepared files used (stored in checkpoints: resuming on other data is refused)
    digest: str | None = None


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
    return TrainData(pipeline, train, valid, refs, training_digest(d, s, t))


#: logged once when a run with a sparse output starts
SPARSE_OUTPUT_NOTE = ("sparse output: perplexity is infinite when the reference gets zero probability; validation "
                      "reports the Fenchel-Young loss and token accuracy")


def _length_note(m: dict[str, float]) -> str:
    """`` (length ratio 0.93)``: the greedy output's length over the references' (empty when not measured)."""
    return f" (length ratio {m['valid/len_ratio']:.2f})" if "valid/len_ratio" in m else ""


class NMTTask:
    """Teacher-forced cross-entropy (a sparse output: its Fenchel–Young loss) over token-bucketed batches;
    validation by perplexity (a sparse output: Fenchel–Young loss and token accuracy) and greedy BLEU."""

    score_key = "valid/bleu"
    decay_key = "valid/ppl"
    #: whether validation's greedy decoding shows a progress bar on a terminal (the main process only)
    show_progress = True

    def __init__(self, cfg: Config, data: TrainData, fertility: FertilitySetup | None):
        self.cfg = cfg
        self.data = data
        self.fertility = fertility
        self.sparse_output = is_sparse(cfg.model.output)
        #: whether exp(train/loss) is a perplexity (the loop logs train/ppl only then)
        self.reports_perplexity = not self.sparse_output
        if self.sparse_output:
            self.decay_key = "valid/fy_loss"
            log.info(SPARSE_OUTPUT_NOTE)
        self.model: NMTModel = build_model(cfg, len(data.pipeline.vocab))
        self.model.reset_parameters(cfg.train.param_init)
        transform = cfg.model.attention.transform
        self.health = AttentionHealth(
            transform, sparse=transform != "softmax", sink=self.model.sink,
            scaling=cfg.model.attention.scaling, optimizer=cfg.train.optimizer, arch=cfg.model.arch,
        )

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        c = self.cfg
        return self.data.train.token_batches(
            c.data.batch_tokens, seed=c.train.seed, epoch=epoch, bucket_batches=c.data.bucket_batches,
            sort=c.data.batch_sort,
        )

    def make_batch(self, positions: list[int], device: torch.device) -> Batch:
        return self.data.train.make_batch(positions).to(device)

    def loss(self, net: torch.nn.Module, batch: Batch) -> tuple[torch.Tensor, int]:
        out = net(batch.src, batch.src_len, batch.tgt_in, batch.fertility)
        steps = batch.tgt_out != PAD_ID
        self.health.add(out.attention, steps, batch.src_len)
        self.health.add_heads(out.heads, steps)
        m = self.cfg.model
        return (output_loss(out.logits, batch.tgt_out, m.output, m.output_alpha, self.cfg.train.label_smoothing),
                batch.n_tgt_tokens)

    def probe(self, on: bool) -> None:
        """Retain the attention scores' gradients of the next batch (``on``), or record their norm (``off``)."""
        scores = self.model.probe_scores(on)
        if not on:
            self.health.add_score_grads(scores)

    def window_metrics(self, step: int, epoch: int) -> dict[str, float]:
        """Attention health of the batches since the last call, and the learned alpha of entmax / centmax
        (``attn/alpha``; ``attn/alpha_min``, ``attn/alpha_max`` per head) and the learned score scale (``attn/scale``,
        ``attn/scale_min``, ``attn/scale_max``) after them (logged with the training loss)."""
        metrics = self.health.summary()
        self.health.check(metrics, step, epoch)
        self.health.reset()
        learned = {**self.model.learned_alpha(), **self.model.learned_scale()}
        metrics.update({f"attn/{k}": v for k, v in learned.items()})
        return metrics

    def sequences(self, batch: Batch) -> int:
        return int(batch.src.size(0))

    def validate(self) -> dict[str, float]:
        device = next(self.model.parameters()).device
        valid = self.data.valid
        m = self.cfg.model
        total, n_tok, correct = 0.0, 0, 0
        for batch in valid.iter_batches(valid.sequential_batches(64)):
            batch = batch.to(device)
            out = self.model(batch.src, batch.src_len, batch.tgt_in, batch.fertility)
            if self.sparse_output:
                total += float(fy_loss(out.logits, batch.tgt_out, m.output, m.output_alpha))
                correct += token_accuracy(out.logits, batch.tgt_out)[0]
            else:
                total += float(nmt_loss(out.logits, batch.tgt_out))
            n_tok += batch.n_tgt_tokens
        translator = Translator(self.model, self.data.pipeline, self.cfg.decode, device=device)
        log.info("validation: greedy decoding of %d sentences for BLEU", len(valid))  # minutes for a Transformer
        hyps = translator.search(valid, beam=1, progress=self.show_progress and sys.stderr.isatty())
        pipe = self.data.pipeline
        texts = [pipe.detokenize_target(pipe.target_pieces(h.tokens)) for h in hyps]
        score = sacrebleu.corpus_bleu(texts, [self.data.valid_refs])
        # hypothesis / reference length: a drop in greedy BLEU at an unchanged perplexity is often short output
        decoded = {"valid/bleu": score.score, "valid/len_ratio": score.sys_len / max(score.ref_len, 1)}
        if self.sparse_output:
            return {"valid/fy_loss": total / max(n_tok, 1), "valid/accuracy": correct / max(n_tok, 1), **decoded}
        return {"valid/ppl": math.exp(min(total / max(n_tok, 1), 50.0)), **decoded}

    def describe_validation(self, m: dict[str, float]) -> str:
        if "valid/fy_loss" in m:
            return (f"valid Fenchel-Young loss {m['valid/fy_loss']:.4f}, token accuracy {100 * m['valid/accuracy']:.2f}%, "
                    f"greedy BLEU {m['valid/bleu']:.2f}{_length_note(m)}")
        return f"valid ppl {m['valid/ppl']:.2f}, greedy BLEU {m['valid/bleu']:.2f}{_length_note(m)}"

    def saved_config(self) -> dict[str, Any]:
        return self.cfg.to_dict()

    def checkpoint_extras(self) -> dict[str, Any]:
        """This task's fields of the :class:`~scanmt.model.checkpoint.Checkpoint`."""
        extras: dict[str, Any] = {"pipeline": self.data.pipeline.to_state()}
        if self.data.digest:
            extras["data_digest"] = self.data.digest
        if self.fertility is not None:
            extras["fertility"] = provider_state(self.fertility.provider)
        return extras


class Trainer:
    """Train an NMT model from a :class:`Config` into ``out_dir`` (``--resume`` continues it)."""

    def __init__(self, cfg: Config, out_dir: str | Path, *, resume: bool = False, data: TrainData | None = None):
        self.cfg = cfg
        self.out = Path(out_dir)
        self.dist = distributed.setup()
        if cfg.train.threads:
            torch.set_num_threads(cfg.train.threads)
        # before the data is loaded; the loop takes the lock too, and holds it from then on
        with claim_run_dir(self.out, resume=resume, lock=self.dist.is_main):
            self.data = data or load_train_data(cfg)
            fert = setup_fertility(cfg, self.data.train, self.data.valid)
            if fert is not None:
                self.data.train, self.data.valid = fert.train, fert.valid
            torch.manual_seed(cfg.train.seed)
            random.seed(cfg.train.seed)
            self.task = NMTTask(cfg, self.data, fert)
            self.task.show_progress = self.dist.is_main
            sparse = cfg.model.attention.transform != "softmax" or is_sparse(cfg.model.output)
            if sparse and self.dist.device.type == "cpu":
                load_native_kernels()  # a first-run build happens here, not inside the timed training
            advice = precision_advice(cfg.model.arch, cfg.train.precision, self.dist.device,
                                      torch.get_num_threads())
            if advice and self.dist.is_main:
                log.warning(advice)
            self.loop = TrainLoop(self.task, cfg.train, self.out, resume=resume, dist=self.dist, unit="tok")
        self.model = self.task.model
        if self.dist.is_main:
            cfg.save_yaml(self.out / "config.yaml")

    @property
    def progress(self) -> Progress:
        return self.loop.progress

    @property
    def stop_reason(self) -> str:
        return self.loop.stop_reason

    @property
    def replica_divergence(self) -> float:
        return self.loop.replica_divergence

    def train(self) -> Progress:
        return self.loop.run()
