"""``train``: train an NMT model from a :class:`~scanmt.config.Config` (also under ``torchrun``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from scanmt.api.arguments import check_type
from scanmt.api.requests import CommandRequest
from scanmt.config import Config


@dataclass(frozen=True)
class TrainRequest(CommandRequest):
    """``scanmt train``: a YAML config with ``--set`` overrides, trained into the run folder ``out``."""

    COMMAND = "train"
    #: YAML config (e.g. ``configs/cpu-small.yaml``)
    config: str
    #: run folder for checkpoints and logs
    out: str
    #: ``key=value`` overrides of the config
    set: tuple[str, ...] = ()
    #: continue the run in ``out`` from its ``last.pt``
    resume: bool = False

    def load_config(self) -> Config:
        """The config file with the overrides applied (checked)."""
        return Config.load(self.config, list(self.set))


@dataclass(frozen=True)
class TrainResult:
    """The end of a training run."""

    out: Path
    #: why training stopped (max steps, epochs, early stopping, ...)
    stop_reason: str
    step: int
    #: epochs completed
    epochs: int
    parameters: int
    #: training time in seconds and target tokens trained on
    seconds: float
    tokens: int
    best_bleu: float
    best_step: int
    #: the last validation perplexity (None before any validation, and for a sparse model.output)
    last_valid_ppl: float | None
    #: this process reports (the main process of a distributed run, or the only one)
    is_main: bool
    #: processes of a distributed run (1 when not distributed) and the largest weight difference between replicas
    world_size: int
    replica_divergence: float | None
    #: a sparse model.output: the last validation's Fenchel-Young loss per token and token accuracy (else None)
    last_valid_fy_loss: float | None = None
    last_valid_accuracy: float | None = None

    @property
    def best_checkpoint(self) -> Path:
        return self.out / "best.pt"

    def summary(self, request: TrainRequest | None = None) -> str:
        """The block ``scanmt train`` prints at its end (a blank line first); ``request`` is not needed."""
        lines = [
            f"\ntraining summary ({self.out})",
            f"  stopped:          {self.stop_reason}",
            f"  steps / epochs:   {self.step} / {self.epochs}",
            f"  parameters:       {self.parameters:,}",
            f"  train time:       {self.seconds / 60:.1f} min, {self.tokens / max(self.seconds, 1e-9):.0f} target tok/s",
            f"  best valid BLEU:  {self.best_bleu:.2f} (greedy, step {self.best_step}) -> {self.best_checkpoint}",
        ]
        if self.world_size > 1:
            d = self.replica_divergence
            lines.append(f"  distributed:      {self.world_size} processes, "
                         f"replicas {'in sync' if d == 0 else f'DIVERGED by {d:g}'}")
        if self.last_valid_ppl is not None:
            lines.append(f"  last valid ppl:   {self.last_valid_ppl:.2f}")
        if self.last_valid_fy_loss is not None:
            lines.append(f"  last valid:       Fenchel-Young loss {self.last_valid_fy_loss:.4f}, token accuracy "
                         f"{100 * (self.last_valid_accuracy or 0.0):.2f}% (sparse output: no perplexity)")
        return "\n".join(lines)


def train(config: Config | TrainRequest, out: str | Path | None = None, *, resume: bool = False) -> TrainResult:
    """Train a model: a :class:`Config` into ``out``, or what a :class:`TrainRequest` names.

    Writes ``config.yaml``, ``last.pt``, ``best.pt`` (highest validation BLEU) and
    ``metrics.csv`` into the run folder; ``resume`` continues from its ``last.pt``.
    """
    from scanmt.training import distributed
    from scanmt.training.trainer import Trainer

    check_type("train", "config", config, Config, TrainRequest)
    if isinstance(config, TrainRequest):
        out, resume = config.out, config.resume
        config = config.load_config()
    check_type("train", "out (the run folder)", out, str, Path)
    check_type("train", "resume", resume, bool)
    trainer = Trainer(config, Path(out), resume=resume)
    p = trainer.train()
    dist = trainer.dist
    last = p.history[-1] if p.history else {}
    result = TrainResult(
        out=trainer.out, stop_reason=trainer.stop_reason, step=p.step,
        epochs=p.epoch - (1 if p.batch_in_epoch == 0 else 0),
        parameters=sum(t.numel() for t in trainer.model.parameters()), seconds=p.elapsed, tokens=p.units,
        best_bleu=p.best_score, best_step=p.best_step,
        last_valid_ppl=last.get("valid/ppl"), is_main=dist.is_main,
        world_size=dist.world_size if dist.enabled else 1,
        replica_divergence=trainer.replica_divergence if dist.enabled else None,
        last_valid_fy_loss=last.get("valid/fy_loss"), last_valid_accuracy=last.get("valid/accuracy"),
    )
    distributed.teardown()
    return result
