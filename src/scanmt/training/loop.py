"""The generic training loop shared by the NMT model and the fertility predictor.

A :class:`Task` says what a batch is, how to compute its loss, and how to
validate; :class:`TrainLoop` does everything else: SGD/Adam with the OpenNMT lr
schedule, gradient clipping, a progress bar, CSV/TensorBoard logging, periodic
validation, early stopping on the task's score, atomic ``best.pt``/``last.pt``
checkpoints and exact resume.

Resuming reloads ``last.pt``: weights, optimizer, lr, the position inside the
epoch and the RNG states, so the continued run produces the same parameters as
an uninterrupted one.  At most ``checkpoint_every`` steps are lost when a run
is killed.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import random
import signal
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Protocol

import torch
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from scanmt.config import TrainConfig, check_train_config
from scanmt.errors import ConfigError, DataError
from scanmt.model.averaging import kept_path, saved_by
from scanmt.model.checkpoint import Checkpoint
from scanmt.ops import deferred_checks
from scanmt.processes import Interrupted, second_sigterm, signal_name, sigterm_interrupts
from scanmt.shape_caches import bound_shape_caches
from scanmt.training import distributed
from scanmt.training.logger import MetricLogger
from scanmt.training.run_dir import claim_run_dir
from scanmt.training.optim import build_optimizer, epoch_lr, set_lr, update_lr

log = logging.getLogger("scanmt.train")


def resident_mb() -> float:
    """Resident memory of this process in MiB (0 where /proc is unavailable)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


class Task(Protocol):
    """What :class:`TrainLoop` needs to know about a model and its data."""

    #: the model being trained
    model: torch.nn.Module
    #: key of ``validate()``'s result that early stopping maximises (e.g. "valid/bleu")
    score_key: str
    #: key of ``validate()``'s result whose failure to decrease starts lr decay (e.g. "valid/ppl"), or None
    decay_key: str | None

    def epoch_batches(self, epoch: int) -> list[Any]:
        """The epoch's batches (deterministic in the seed and ``epoch``), as cheap descriptors."""

    def make_batch(self, descriptor: Any, device: torch.device) -> Any:
        """Materialise one batch on ``device``."""

    def loss(self, net: torch.nn.Module, batch: Any) -> tuple[torch.Tensor, int]:
        """Summed loss of the batch and the number of units it is summed over."""

    def sequences(self, batch: Any) -> int:
        """Number of sequences (sentences) in the batch (``train.normalization: sents``)."""

    def validate(self) -> dict[str, float]:
        """Validation metrics (the model is put back in train mode by the loop)."""

    def describe_validation(self, metrics: dict[str, float]) -> str:
        """One log line for a validation."""

    def checkpoint_extras(self) -> dict[str, Any]:
        """What else goes into checkpoints: fields of :class:`~scanmt.model.checkpoint.Checkpoint` (pipeline, vocab, ...)."""

    def saved_config(self) -> dict[str, Any]:
        """The config stored in checkpoints (checked for compatibility on resume)."""


@dataclass
class Progress:
    step: int = 0
    epoch: int = 1
    batch_in_epoch: int = 0
    lr: float = 0.0
    decay_started: bool = False
    best_score: float = -math.inf
    best_step: int = 0
    best_decay_metric: float = math.inf
    bad_validations: int = 0
    elapsed: float = 0.0
    units: int = 0
    history: list[dict] = field(default_factory=list)
    #: the logged training loss's window (summed over all processes) at the checkpoint, so that the
    #: first loss logged after resuming averages the same updates as in an uninterrupted run
    window_loss: float = 0.0
    window_units: int = 0
    window_seconds: float = 0.0
    #: the id of this run (random), in every checkpoint it saves, kept ones included, and kept by ``--resume``
    run: str = ""
    #: the steps of the checkpoints this run kept (``train.keep_checkpoints``) and has not removed, oldest first
    kept: list[int] = field(default_factory=list)


def _check_training_state(ckpt: Checkpoint, path: Path) -> None:
    """Raise a one-line :class:`ConfigError` where ``ckpt`` (read from ``path``) lacks what ``--resume`` restores
    besides the weights (optimizer state, position, RNG states): an averaged checkpoint, or a kept
    ``checkpoints/stepN.pt`` put in the place of ``last.pt``."""
    missing = [name for name in ("optimizer", "progress", "rng") if getattr(ckpt, name) is None]
    if not missing:
        return
    what = ("an averaged checkpoint" if "averaged_from" in ckpt.extra
            else "weights only, as in a kept checkpoints/stepN.pt")
    raise ConfigError(f"{path} has no {'optimizer state' if 'optimizer' in missing else ' or '.join(missing)} "
                      f"({what}): --resume continues a run from the last.pt its training saved; put that back, or "
                      "train a new run (these weights can still translate and be evaluated)")


def progress_postfix(vals: dict[str, float], unit: str) -> dict[str, str]:
    """What the progress bar shows of a logging window's metrics: loss, rate, lr, the attention's support and
    one-hot share, and a learned alpha (entmax / centmax)."""
    postfix = {"loss": f"{vals['train/loss']:.3f}", f"{unit}/s": f"{vals[f'train/{unit}_per_s']:.0f}",
               "lr": f"{vals['train/lr']:g}"}
    if "attn/support" in vals:
        postfix["support"] = f"{vals['attn/support']:.2f}"
        postfix["1hot"] = f"{100 * vals['attn/one_hot']:.0f}%"
    if "attn/alpha" in vals:
        postfix["alpha"] = f"{vals['attn/alpha']:.3f}"
    return postfix


class TrainLoop:
    def __init__(self, task: Task, cfg: TrainConfig, out_dir: str | Path, *, resume: bool = False,
                 dist: distributed.DistInfo | None = None, unit: str = "tok"):
        self.task = task
        self.cfg = cfg
        self.out = Path(out_dir)
        self.dist = dist or distributed.setup()
        self.unit = unit
        last = self.out / "last.pt"
        #: this run's hold on the folder's lock, released when :meth:`run` ends
        self.lock = claim_run_dir(self.out, resume=resume, lock=self.dist.is_main)
        check_train_config(cfg)
        bound_shape_caches()  # before the first bf16 product: oneDNN's caches grow per shape otherwise
        self.model = task.model.to(self.dist.device)
        self.optimizer = build_optimizer(self.model.parameters(), cfg)
        self.progress = Progress(lr=cfg.lr, run=uuid.uuid4().hex)
        if resume:
            self._restore(Checkpoint.load(last, map_location=self.dist.device))
        self.net: torch.nn.Module = self.model
        if self.dist.enabled:
            self.net = DistributedDataParallel(
                self.model, device_ids=[self.dist.device.index] if self.dist.device.type == "cuda" else None
            )
        if self.dist.is_main:
            self.out.mkdir(parents=True, exist_ok=True)
        self.logger = MetricLogger(self.out, cfg.logger, enabled=self.dist.is_main,
                                   resume_step=self.progress.step if resume else None)
        self.stop_reason = ""
        self.replica_divergence = 0.0
        self.interrupted = False  # set by the first Ctrl-C or SIGTERM: stop after the current update
        self.stop_signal = 0  # the signal that set it
        self.saved_step = self.progress.step  # the step of the newest last.pt
        self._window: tuple[float, int, float] = (0.0, 0, 0.0)

    # ----------------------------------------------------------- checkpoints
    def _payload(self) -> Checkpoint:
        return Checkpoint(
            **self.task.checkpoint_extras(),
            config=self.task.saved_config(),
            weights=self.model.state_dict(),
            optimizer=self.optimizer.state_dict(),
            progress=self.progress.__dict__.copy(),
            rng={"torch": torch.get_rng_state(), "python": random.getstate()},
        )

    def _save(self, name: str) -> None:
        if name == "last.pt":
            self._store_window()
            self.saved_step = self.progress.step
        if self.dist.is_main:
            self._payload().save(self.out / name)

    def _store_window(self) -> None:
        """Put the loss window, summed over the processes (all of them save last.pt), into the progress."""
        loss, units, seconds = self._window
        p = self.progress
        p.window_loss, total_units = distributed.all_reduce_sum([loss, units], self.dist)
        p.window_units, p.window_seconds = int(total_units), seconds

    def _restored_window(self) -> tuple[int, float, float]:
        """``(units, loss, start time)`` of the loss window: the checkpoint's (on the main process) or empty."""
        p = self.progress
        if not self.dist.is_main:
            return 0, 0.0, time.time()
        return p.window_units, p.window_loss, time.time() - p.window_seconds

    def _restore(self, ckpt: Checkpoint) -> None:
        _check_training_state(ckpt, self.out / "last.pt")
        self._check_resume(ckpt)
        self.model.load_state_dict(ckpt.weights)
        self.optimizer.load_state_dict(ckpt.optimizer)
        self.progress = Progress(**ckpt.progress)
        if not self.progress.run:  # saved before runs had ids: this run has none of the kept checkpoints there
            self.progress.run = uuid.uuid4().hex
        torch.set_rng_state(ckpt.rng["torch"])
        random.setstate(ckpt.rng["python"])
        p = self.progress
        log.info("resumed from step %d (epoch %d, batch %d)", p.step, p.epoch, p.batch_in_epoch)

    def _check_resume(self, ckpt: Checkpoint) -> None:
        """Refuse config changes a resumed run cannot honour (:func:`scanmt.config.check_resume`); log the others."""
        from scanmt.config import check_resume, with_defaults

        cfg = getattr(self.task, "cfg", None)
        saved = with_defaults(ckpt.config, type(cfg)) if cfg is not None else ckpt.config
        digest = self.task.checkpoint_extras().get("data_digest")
        same_data = None if digest is None or ckpt.data_digest is None else digest == ckpt.data_digest
        changes = check_resume(saved, self.task.saved_config(), str(self.out / "last.pt"), same_data=same_data)
        for key, old, new in changes:
            log.info("resume: %s changed from %r to %r", key, old, new)

    def _check_position(self, batches: list[Any]) -> None:
        """Raise if the epoch has no batches, or none left after the resumed position (the data changed)."""
        p = self.progress
        if not batches:
            raise DataError(f"epoch {p.epoch} has no training batches: no training pair fits the batching limits")
        if p.batch_in_epoch >= len(batches):
            raise ConfigError(
                f"{self.out / 'last.pt'} stopped after batch {p.batch_in_epoch} of epoch {p.epoch}, but that epoch now "
                f"has {len(batches)} batches: the training data or its batching changed since; start a new run"
            )

    # ----------------------------------------------------------- one step
    def autocast(self) -> torch.autocast:
        """The training forward's precision context (``train.precision``); a no-op for fp32."""
        return torch.autocast(self.dist.device.type, dtype=torch.bfloat16, enabled=self.cfg.precision == "bf16")

    def train_step(self, batch: Any, probe: bool = False) -> tuple[float, int]:
        """One update: ``(loss, units)``; with ``probe``, a task that has ``probe(on)`` records gradient diagnostics
        of this batch.  A gradient that is not finite makes no update and gives a NaN loss (the loop stops there)."""
        self.net.train()
        probe = probe and hasattr(self.task, "probe")
        if probe:
            self.task.probe(True)
        # the GPU kernels' input checks wait for the end of the backward pass: one host read per update
        with deferred_checks():
            with self.autocast():
                loss, n = self.task.loss(self.net, batch)
            self.optimizer.zero_grad(set_to_none=True)
            denominator = n if self.cfg.normalization == "tokens" else self.task.sequences(batch)
            (loss / max(denominator, 1)).backward()
        if probe:
            self.task.probe(False)
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.max_grad_norm or math.inf)
        if not math.isfinite(float(norm)):  # the update would make the weights NaN: no update, the loop stops
            return math.nan, n
        self.optimizer.step()
        return float(loss.detach()), n

    def _batches(self, epoch: int) -> list[Any]:
        batches = self.task.epoch_batches(epoch)
        if self.dist.enabled:  # equal shards so every rank takes the same number of steps
            n = len(batches) // self.dist.world_size * self.dist.world_size
            batches = batches[self.dist.rank : n : self.dist.world_size]
        return batches

    def _perplexity(self, loss: float) -> dict[str, float]:
        """``train/ppl`` of a mean loss per unit, unless the task's loss is not a cross-entropy
        (``task.reports_perplexity`` False: the Fenchel-Young loss of a sparse output)."""
        if not getattr(self.task, "reports_perplexity", True):
            return {}
        return {"train/ppl": math.exp(min(loss, 50.0))}

    # ----------------------------------------------------------- validation
    def _validate(self) -> None:
        p = self.progress
        self.model.eval()
        with torch.no_grad():
            metrics = self.task.validate()
        self.model.train()
        p.history.append({"step": p.step, "epoch": p.epoch, **metrics})
        key = self.task.decay_key
        if key is not None:
            if metrics[key] >= p.best_decay_metric and p.step > 0:
                p.decay_started = True
            p.best_decay_metric = min(p.best_decay_metric, metrics[key])
        improved = metrics[self.task.score_key] > p.best_score
        if improved:
            p.best_score, p.best_step, p.bad_validations = metrics[self.task.score_key], p.step, 0
        else:
            p.bad_validations += 1
        self.logger.log(p.step, metrics)
        # at an epoch's end p.epoch already names the next one
        where = f"end of epoch {p.epoch - 1}" if p.batch_in_epoch == 0 else f"epoch {p.epoch}"
        log.info("step %d, %s: %s%s", p.step, where, self.task.describe_validation(metrics),
                 " (best)" if improved else "")
        if improved:
            self._save("best.pt")
        self._keep_checkpoint()

    def _keep_checkpoint(self) -> None:
        """With ``keep_checkpoints`` N > 0: this validation's weights (no optimizer state) as
        ``RUN/checkpoints/stepS.pt``, for checkpoint averaging; the oldest beyond N that this run kept are removed.

        ``progress.kept`` records what this run kept (in ``last.pt`` too, so a resumed run goes on with it);
        nothing else in ``checkpoints/`` is ever removed or replaced.  A file at this step's path that this run
        wrote after its last ``last.pt`` (it was killed before the next one) is its own and replaced; one that
        another run saved is left as it is, and this validation's weights are then not kept (a warning says so).
        """
        n, p = self.cfg.keep_checkpoints, self.progress
        if not n or not self.dist.is_main:
            return
        path = kept_path(self.out, p.step)
        if p.step not in p.kept and path.exists() and not saved_by(path, p.run):
            log.warning("%s was saved by another run: left as it is, and the weights of step %d are not kept",
                        path, p.step)
            return
        if p.step not in p.kept:
            p.kept.append(p.step)
        ckpt = self._payload()
        ckpt.optimizer = ckpt.rng = None
        path.parent.mkdir(parents=True, exist_ok=True)
        ckpt.save(path)
        for step in p.kept[:-n]:
            kept_path(self.out, step).unlink(missing_ok=True)
        p.kept = p.kept[-n:]

    def _should_stop(self, t0: float) -> str | None:
        c, p = self.cfg, self.progress
        if self.interrupted:
            return f"interrupted ({signal_name(self.stop_signal)})"
        if c.max_steps and p.step >= c.max_steps:
            return f"reached train.max_steps={c.max_steps}"
        if c.max_minutes and (p.elapsed + time.time() - t0) >= c.max_minutes * 60:
            return f"reached train.max_minutes={c.max_minutes:g}"
        if c.patience and p.bad_validations >= c.patience:
            return f"no improvement of {self.task.score_key} in {c.patience} validations (early stopping)"
        if p.epoch > c.epochs:
            return f"finished {c.epochs} epochs"
        return None

    # ----------------------------------------------------------- loop
    def _progress_bar(self) -> tqdm:
        """One bar over the whole run (its ETA is the run's): ``train.max_steps``, else all epochs' batches.
        Only on a terminal: in a log file (the demo's ``train.log``, a grid run's ``log.txt``) its frames
        would bury the log lines."""
        c, p = self.cfg, self.progress
        planned = p.step + len(self._batches(p.epoch)) * (c.epochs - p.epoch + 1) - p.batch_in_epoch
        total = min(c.max_steps, planned) if c.max_steps else planned
        return tqdm(total=max(total, p.step), initial=p.step, desc=f"epoch {p.epoch}", unit="upd",
                    disable=None if self.dist.is_main else True, leave=False, mininterval=2.0)

    def run(self) -> Progress:
        """Train until a stop condition (:meth:`_should_stop`); the folder's lock is released at the end.

        Ctrl-C or SIGTERM (what ``timeout``, Slurm and ``docker stop`` send) stops after the current
        update and saves ``last.pt`` (then raises KeyboardInterrupt, :class:`Interrupted` for SIGTERM);
        a second one, or one under torch.distributed, stops at once and says how many updates since
        the last checkpoint are lost.
        """
        try:
            with self._interrupts():
                try:
                    p = self._run()
                except KeyboardInterrupt:
                    log.warning("interrupted at step %d: the %d update(s) since the last checkpoint (%s, step %d) "
                                "are lost", self.progress.step, self.progress.step - self.saved_step,
                                self.out / "last.pt", self.saved_step)
                    raise
        finally:
            self.lock.release()
        if self.interrupted:
            log.warning("interrupted (%s) at step %d: saved %s, no update lost; continue with --resume",
                        signal_name(self.stop_signal), p.step, self.out / "last.pt")
            raise KeyboardInterrupt if self.stop_signal == signal.SIGINT else Interrupted(self.stop_signal)
        return p

    @contextlib.contextmanager
    def _interrupts(self) -> Iterator[None]:
        """The first Ctrl-C or SIGTERM sets ``interrupted``; the next raises KeyboardInterrupt or
        :class:`Interrupted` (single process only: under torch.distributed the first one does)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        if self.dist.enabled:
            with sigterm_interrupts():
                yield
            return

        parent = os.getppid()

        def first(signum: int, frame: Any) -> None:
            self.interrupted, self.stop_signal = True, signum
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGTERM, second_sigterm(parent))  # repeats from a parent's death are ignored
            again = "press Ctrl-C again" if signum == signal.SIGINT else f"send {signal_name(signum)} again"
            log.warning("%s: stopping after this update and saving last.pt; %s to quit at once (losing the %d "
                        "update(s) since the last checkpoint)", signal_name(signum), again,
                        self.progress.step - self.saved_step)

        old = {signum: signal.signal(signum, first) for signum in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for signum, handler in old.items():
                signal.signal(signum, handler)

    def _run(self) -> Progress:
        c, p = self.cfg, self.progress
        t0 = time.time()
        stop = self._should_stop(t0)
        win_units, win_loss, win_t = self._restored_window()
        bar = self._progress_bar() if stop is None else None
        while stop is None:
            batches = self._batches(p.epoch)
            self._check_position(batches)
            if p.batch_in_epoch == 0:
                p.lr = epoch_lr(p.lr, p.epoch, c, p.decay_started)
            bar.set_description(f"epoch {p.epoch}")
            while p.batch_in_epoch < len(batches):
                batch = self.task.make_batch(batches[p.batch_in_epoch], self.dist.device)
                set_lr(self.optimizer, update_lr(p.lr, p.step, c))
                loss, n = self.train_step(batch, probe=(p.step + 1) % c.log_every == 0)
                if not math.isfinite(loss):
                    raise DataError(f"loss became NaN (or inf) at step {p.step + 1} (or its gradient did): training "
                                    "diverged; start a new run with a lower train.lr")
                p.step += 1
                p.batch_in_epoch += 1
                p.units += n
                win_units += n
                win_loss += loss
                bar.update(1)
                if p.step % c.log_every == 0:
                    tot_loss, tot_units = distributed.all_reduce_sum([win_loss, win_units], self.dist)
                    rate = tot_units / max(time.time() - win_t, 1e-9)
                    lr = self.optimizer.param_groups[0]["lr"]  # the lr of the last update (warm-up included)
                    vals = {"train/loss": tot_loss / max(tot_units, 1), f"train/{self.unit}_per_s": rate,
                            "train/lr": lr}
                    vals.update(self._perplexity(vals["train/loss"]))
                    vals["train/rss_mb"] = resident_mb()
                    vals["train/elapsed_s"] = p.elapsed + time.time() - t0  # the run's own pace, for `status`
                    health = self.task.window_metrics(p.step, p.epoch) if hasattr(self.task, "window_metrics") else {}
                    vals.update(health)
                    bar.set_postfix(**progress_postfix(vals, self.unit))
                    self.logger.log(p.step, vals)
                    win_units, win_loss, win_t = 0, 0.0, time.time()
                validate = c.valid_every and p.step % c.valid_every == 0
                end_of_epoch = p.batch_in_epoch >= len(batches)
                if end_of_epoch:
                    p.epoch += 1
                    p.batch_in_epoch = 0
                pause = time.time()
                self._window = (win_loss, win_units, pause - win_t)
                if validate or (end_of_epoch and not c.valid_every):
                    p.elapsed += time.time() - t0
                    t0 = time.time()
                    self._validate()
                    self._save("last.pt")
                elif p.step % c.checkpoint_every == 0 or end_of_epoch:
                    p.elapsed += time.time() - t0
                    t0 = time.time()
                    self._save("last.pt")
                win_t += time.time() - pause  # the logged training speed leaves validation and saving out
                stop = self._should_stop(t0)
                if stop or end_of_epoch:
                    break
        if bar is not None:
            bar.close()
        p.elapsed += time.time() - t0
        if not self.interrupted and (not p.history or p.history[-1]["step"] != p.step):
            self._validate()
        self._save("last.pt")
        if not self.interrupted and not (self.out / "best.pt").exists():
            self._save("best.pt")
        self.logger.close()
        self.replica_divergence = distributed.replica_divergence(self.model, self.dist)
        if self.dist.enabled:
            log.info("replicas: max |param - rank0 param| = %g over %d processes", self.replica_divergence,
                     self.dist.world_size)
        log.info("stopped: %s", stop)
        self.stop_reason = stop or ""
        return p
