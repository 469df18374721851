"""The checkpoint file: one typed schema below training and decoding.

On disk a checkpoint is one ``torch.save`` dict (format :data:`FORMAT_VERSION`), unchanged
since the first version; :class:`Checkpoint` names its keys (the key is the field's name,
except the weights, stored as ``model``)::

    config        Config.to_dict(), or PredictorConfig.to_dict() for a fertility predictor
    model         model.state_dict()                                     (Checkpoint.weights)
    pipeline      TextPipeline.to_state(): languages, sentencepiece model, vocabulary   (NMT)
    fertility     the fertility provider's state (scanmt.fertility.providers)  (constrained NMT)
    data_digest   digest of the prepared data trained on (resuming on other data is refused)
    vocab, kind   the predictor's vocabulary and "fertility-predictor"       (predictor)
    optimizer     optimizer.state_dict()                                 (training checkpoints)
    progress      {"step", "epoch", "batch_in_epoch", "lr", "best_bleu", "bad_validations", ..., "run" (the run's
                  id), "kept" (the steps of its kept checkpoints)}   (scanmt.training.loop.Progress)
    rng           {"torch", "python"}       (so a resumed run continues identically)
    version       format version

Keys the schema does not name are kept (``extra``) and written back.  Files are written to
a temporary name and renamed, so a killed run never leaves a half-written checkpoint.
:func:`load_checkpoint` and :func:`save_checkpoint` are the same file as a plain dict (the file I/O lives at
the base level, :mod:`scanmt.checkpoint_file`, so that the fertility predictor loads without this module).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from scanmt.checkpoint_file import FORMAT_VERSION, load_checkpoint, save_checkpoint
from scanmt.config import Config
from scanmt.data.pipeline import TextPipeline
from scanmt.errors import ConfigError, DataError
from scanmt.fertility.providers import FertilityProvider, provider_from_state

__all__ = ["FORMAT_VERSION", "Checkpoint", "last_saved", "load_checkpoint", "save_checkpoint"]

#: the file's key of each field whose key is not its name
_KEY = {"weights": "model"}
#: fields that are not keys of the file: unknown keys, and the file a checkpoint was loaded from
_NOT_KEYS = ("extra", "source")


def last_saved(run_dir: str | Path) -> str:
    """Where an interrupted training in ``run_dir`` stands, for messages: ``saved RUN/last.pt at update N``,
    or ``nothing saved yet``."""
    last = Path(run_dir) / "last.pt"
    if not last.exists():
        return "nothing saved yet"
    return f"saved {last} at update {int(Checkpoint.load(last).progress['step'])}"


@dataclass
class Checkpoint:
    """A checkpoint's contents (see the module docstring for each field); absent ones are None."""

    config: dict[str, Any]
    weights: dict[str, torch.Tensor]
    pipeline: dict[str, Any] | None = None
    fertility: dict[str, Any] | None = None
    data_digest: str | None = None
    vocab: list[str] | None = None
    kind: str | None = None
    optimizer: dict[str, Any] | None = None
    progress: dict[str, Any] | None = None
    rng: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: the file it was loaded from (for messages), None for one built in memory
    source: str | None = field(default=None, compare=False)

    # ---------------------------------------------------------------- the file
    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Checkpoint":
        """The schema of a checkpoint dict (as :func:`load_checkpoint` returns it)."""
        names = [f.name for f in dataclasses.fields(cls) if f.name not in _NOT_KEYS]
        keys = {_KEY.get(n, n): n for n in names}
        extra = {k: v for k, v in d.items() if k not in keys and k != "version"}
        return cls(**{keys[k]: v for k, v in d.items() if k in keys}, extra=extra)

    def to_dict(self) -> dict[str, Any]:
        """The checkpoint dict: the same keys as ever (None fields left out)."""
        out = {_KEY.get(f.name, f.name): getattr(self, f.name) for f in dataclasses.fields(self)
               if f.name not in _NOT_KEYS}
        return {**self.extra, **{k: v for k, v in out.items() if v is not None}}

    @classmethod
    def load(cls, path: str | Path, map_location: str | torch.device = "cpu") -> "Checkpoint":
        return dataclasses.replace(cls.from_dict(load_checkpoint(path, map_location)), source=str(path))

    def save(self, path: str | Path) -> None:
        save_checkpoint(path, self.to_dict())

    # ---------------------------------------------------------------- typed views
    @property
    def name(self) -> str:
        """The checkpoint as named in messages: its file, or ``checkpoint``."""
        return self.source or "checkpoint"

    def nmt_config(self) -> Config:
        """The NMT model's :class:`Config`; a :class:`ConfigError` naming the file for a bad one."""
        try:
            return Config.from_dict(self.config)
        except ConfigError as exc:
            raise ConfigError(f"{self.name}: the config stored in the checkpoint is not valid: {exc}") from None
        except (TypeError, AttributeError) as exc:  # not a mapping, or a section that is not one
            raise ConfigError(f"{self.name}: the config stored in the checkpoint is not valid ({exc})") from None

    def text_pipeline(self) -> TextPipeline:
        """The NMT model's text pipeline (tokenizer, subword model, vocabulary)."""
        if self.pipeline is None:
            raise DataError(f"{self.name}: not an NMT checkpoint (it has no text pipeline)")
        return TextPipeline.from_state(self.pipeline)

    def fertility_provider(self) -> FertilityProvider | None:
        """The fertility provider a constrained model was trained with (None for unconstrained ones)."""
        return provider_from_state(self.fertility)
