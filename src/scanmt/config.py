"""Typed experiment configuration: dataclasses loaded from commented YAML.

A config has four sections (``data``, ``model``, ``train``, ``decode``).  Unknown
keys, wrong types and bad values raise :class:`~scanmt.errors.ConfigError`
naming the dotted key.  The full config is stored inside every checkpoint so a
model can always be rebuilt exactly.

``--set section.key=value`` overrides are parsed with YAML rules
(``--set train.lr=0.5 --set model.attention.transform=csparsemax``).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import yaml

from scanmt.choices import (
    ALPHA_TRANSFORMS,
    BATCH_SORTS,
    LEARN_ALPHA,
    LOGGERS,
    NORMALIZATIONS,
    OUTPUTS,
    OPTIMIZERS,
    LR_SCHEDULES,
    PENALTY_MODES,
    PRECISIONS,
    PREDICTOR_LEVELS,
    SCALINGS,
    SCORES,
    TRANSFORMS,
    check_choice,
)
from scanmt.errors import ConfigError
from scanmt.fertility.rules import check_attention, check_sink
from scanmt.io import load_yaml, read_text
# the keys and checks of each built-in architecture live with it (base modules of scanmt.model.*)
from scanmt.model.lstm.config import (  # noqa: F401 (CoverageConfig, check_coverage_config: re-exported)
    COVERAGE_RANGES, CoverageConfig, check_coverage_config, check_lstm,
)
from scanmt.model.transformer.config import (  # noqa: F401 (TransformerConfig: re-exported)
    RANGES as TRANSFORMER_RANGES, TransformerConfig, check_transformer,
)
from scanmt.ranges import MAX_WIDTH, Range, check_values, is_int_field  # noqa: F401 (re-exported)


@dataclass
class DataConfig:
    #: prepared-data directory written by ``scanmt prepare``
    dir: str = "runs/data/multi30k-de-en"
    src_lang: str = "de"
    tgt_lang: str = "en"
    #: training pairs with more subwords than this (either side) are dropped, with a count logged
    max_len: int = 80
    #: token-based batching: at most this many target+source tokens (incl. padding) per batch
    batch_tokens: int = 4000
    #: sentences are bucketed by length inside windows of this many batches before shuffling
    bucket_batches: int = 50
    #: the length a window is sorted by before it is packed into batches: source (source, then target) | longest
    #: (the longer side: less padding where the two sides' lengths differ, as in Ja-En; on KFTT 0.84x the
    #: batches per epoch at 88 % real tokens against 75 %: benchmarks/batch_fill.py)
    batch_sort: str = "source"
    #: use only the first N training pairs (0 = all; >= 0); for tests and smoke runs
    train_limit: int = 0
    #: use only the first N validation pairs for BLEU (0 = all; >= 0)
    valid_limit: int = 0


@dataclass
class FertilityConfig:
    """Fertility upper bounds for constrained transforms (paper Section 4)."""

    #: none | constant | guided | predicted | actual (oracle from the pair's own alignment)
    strategy: str = "none"
    #: the constant f (strategy constant), in (0, 1000]
    value: float = 2.0
    #: directory written by `scanmt align` (default: DATA_DIR/align); guided and actual
    align_dir: str = ""
    #: checkpoint written by `scanmt fertility train-predictor` (strategy predicted)
    predictor: str = ""
    #: added to the predicted expected fertility (the paper adds 1), in [0, 1000]
    add: float = 1.0


@dataclass
class AttentionConfig:
    #: scores: "general" (Luong bilinear, z = s^T W h) or "mlp" (Bahdanau, v^T tanh(W s + U h))
    score: str = "general"
    #: transform from the registry: softmax | sparsemax | entmax15 | entmax (alpha-entmax, alpha below) |
    #: csoftmax | csparsemax | centmax (constrained alpha-entmax with fertility bounds, alpha below)
    transform: str = "softmax"
    #: alpha of entmax and centmax, in (1, 10] (1 would be softmax / csoftmax, 2 is sparsemax / csparsemax);
    #: the initial value when learned (learn_alpha); ignored by the other transforms
    alpha: float = 1.5
    #: learn the alpha of entmax / centmax (refused with the other transforms): none (fixed at alpha) | model
    #: (one alpha for the model's attention) | head (one per cross-attention head of every decoder layer;
    #: transformer only). A learned alpha = 1 + softplus(a) stays above 1; the training log reports it
    #: (attn/alpha, and attn/alpha_min, attn/alpha_max per head)
    learn_alpha: str = "none"
    #: score scaling: none (the paper's raw scores) | sqrt (z / sqrt(d)) | learned (g z, g learned, 1/sqrt(d) at
    #: first) | cosine (g cos(s, W h), g learned; general only). Unscaled scores make sparse attention one-hot
    #: within a few Adam updates, after which it gets no gradient (docs/attention-recipe.md).
    #: transformer: none or sqrt (both q.k / sqrt(d_head)), or cosine (g_h cos(q, k) in the cross-attention
    #: layers that use the transform, one learned g per head, 1 at first). A learned g is in the training log
    #: (attn/scale, and attn/scale_min, attn/scale_max over heads and layers)
    #: The default must stay "none": checkpoints written before this key existed load with it.
    scaling: str = "none"
    #: append a <sink> token (unbounded fertility) to every source; null = on for constrained transforms.
    #: false with a constrained transform needs constant fertility that can never run out (scanmt.fertility.rules)
    sink: Optional[bool] = None
    #: exhaustion strategy: scores z + c * u on real tokens (the paper uses c = 0.2), c in [0, 100]; constrained only
    exhaustion: float = 0.0
    fertility: FertilityConfig = field(default_factory=FertilityConfig)


@dataclass
class ModelConfig:
    #: the architecture: "lstm" (the paper's BiLSTM encoder and input-feeding LSTM decoder) or "transformer"
    #: (pre-norm; model.transformer). Checkpoints written before this key existed load as "lstm".
    arch: str = "lstm"
    #: embedding size, in [1, 16384] (transformer: must equal hidden_size, which is d_model)
    emb_size: int = 256
    #: LSTM and attention size, in [1, 16384] (wider does not fit in memory); the transformer's d_model
    hidden_size: int = 256
    #: layers of the BiLSTM encoder and of the LSTM decoder, in [1, 32] (the transformer uses
    #: model.transformer.*_layers)
    layers: int = 1
    #: dropout probability, in [0, 1)
    dropout: float = 0.3
    #: tie the generator's output matrix to the target embeddings (needs emb_size == hidden_size)
    tie_generator: bool = False
    #: share source and target embeddings (the subword vocabulary is joint)
    share_embeddings: bool = False
    #: the output layer's distribution over the next word: softmax (cross-entropy) | sparsemax | entmax15 |
    #: entmax (alpha = model.output_alpha). The sparse ones give tokens exactly zero probability and train with
    #: their Fenchel-Young loss (scanmt.model.output); validation then reports that loss and token accuracy
    #: instead of perplexity. The default must stay "softmax": checkpoints written before this key load with it.
    output: str = "softmax"
    #: alpha of model.output: entmax, in (1, 10] (1.5 is entmax15, 2 sparsemax); other outputs ignore it
    output_alpha: float = 1.5
    attention: AttentionConfig = field(default_factory=AttentionConfig)
    coverage: CoverageConfig = field(default_factory=CoverageConfig)
    #: the transformer's keys (model.arch: transformer); configs without this section load with its defaults
    transformer: TransformerConfig = field(default_factory=TransformerConfig)


@dataclass
class TrainConfig:
    #: random seed, in [0, 2**32 - 1]
    seed: int = 1
    #: "sgd" (OpenNMT default: lr 1.0, halved from decay_start) or "adam"
    optimizer: str = "sgd"
    #: learning rate, in (0, 1000]: the peak rate, reached at the end of the warm-up
    lr: float = 1.0
    #: "epoch_decay": multiply the lr by ``lr_decay`` at the start of every epoch from ``lr_decay_start`` on, and
    #: from the first validation whose perplexity does not improve (OpenNMT-py); "inverse_sqrt": lr *
    #: sqrt(warmup_steps / update) after the warm-up (Vaswani et al. 2017, fairseq's inverse_sqrt; needs
    #: ``warmup_steps`` > 0, and ignores ``lr_decay`` and ``lr_decay_start``)
    lr_schedule: str = "epoch_decay"
    #: multiply the lr by this factor ...
    lr_decay: float = 0.5
    #: ... at the start of every epoch from this one on (1-based), and whenever validation perplexity stops improving
    lr_decay_start: int = 8
    max_grad_norm: float = 5.0
    #: linear learning-rate warm-up over the first N updates (0 = none)
    warmup_steps: int = 0
    #: uniform init range for parameters (OpenNMT: 0.1), at most 100; 0 keeps torch defaults. The transformer
    #: ignores it (Xavier-uniform matrices, N(0, d^-1/2) embeddings, zero biases)
    param_init: float = 0.1
    label_smoothing: float = 0.0
    epochs: int = 13
    #: stop after this many optimizer steps (0 = no limit)
    max_steps: int = 0
    #: stop after this many minutes of training (0 = no limit); checked between steps
    max_minutes: float = 0.0
    #: validate (perplexity + greedy BLEU) every N steps (0 = once per epoch)
    valid_every: int = 0
    #: stop after this many validations without BLEU improvement (0 = never)
    patience: int = 0
    #: write the "last" checkpoint every N steps (and at every validation)
    checkpoint_every: int = 500
    #: also keep the weights of the last N validations as RUN/checkpoints/stepS.pt, for ``scanmt average``
    #: (checkpoint averaging); 0 = none
    keep_checkpoints: int = 0
    log_every: int = 50
    #: "tensorboard", "csv" or "none" (stdout logging is always on)
    logger: str = "csv"
    #: torch intra-op threads (0 = torch default), at most 1024
    threads: int = 0
    #: "fp32", or "bf16": mixed precision (torch.autocast with bfloat16) for the training forward pass;
    #: weights, gradients, optimizer, loss, attention transforms and validation stay float32.
    #: About 1.8x faster on an AMD EPYC with AVX512-BF16 and on Ampere+ GPUs; 0.6-0.7x on an Intel Xeon with
    #: AVX512-BF16 but no AMX, so the flag does not decide: training warns when bf16 measures slower here
    #: (scanmt.training.precision).
    precision: str = "fp32"
    #: what the summed loss is divided by before the backward pass: "tokens" (the batch's target
    #: tokens) or "sents" (its sentences: OpenNMT-py's default ``-normalization sents``, the gradient
    #: scale that the paper's SGD lr 1.0 and clipping at 5 were tuned with)
    normalization: str = "tokens"


@dataclass
class DecodeConfig:
    """Decoding settings; every number's range is declared in :data:`RANGES` (``decode``), shared by the
    ``translate``/``tune-penalties`` options, the penalties file and the API's requests."""

    #: beam size, in [1, 1000]; 1 = greedy
    beam: int = 5
    #: Wu et al. length penalty lp(Y) = ((5+|Y|)/6)^alpha; 0 disables
    length_alpha: float = 0.0
    #: maximum output length = max_len_a * source_length + max_len_b (</s> included; a + b >= 2)
    max_len_a: float = 2.0
    max_len_b: int = 10
    #: no ``</s>`` before this many output tokens (1: a non-empty source never gets an empty translation,
    #: like fairseq's and JoeyNMT's defaults; 0: OpenNMT-py's default, where a model that gives ``</s>``
    #: some mass at the first step can win the beam with the empty output when length_alpha is 0).
    #: The maximum length (max_len_a, max_len_b) wins where it is shorter.
    min_len: int = 1
    #: sentences per decoding batch, >= 1
    batch_size: int = 64
    #: CovPenalty (Wu et al. 2016): beta in cp = beta * sum_j log max(eps, min(1, sum_t a_tj)); 0 disables
    coverage_beta: float = 0.0
    #: eps of the coverage penalty (the paper's extension; 0.1)
    coverage_eps: float = 0.1
    #: where the penalties apply: "rescore" (finished hypotheses only) or "step" (every step, when ranking the beam)
    penalty_mode: str = "rescore"
    #: the longest source sentence decoded, in subwords: a longer one is refused before any decoding (naming its
    #: line), as the attention kept for it grows with the square of its length (4 bytes x S x (2 S + 10) per
    #: hypothesis: 8 MB at 1,000 subwords, 3.2 GB at 20,000)
    max_source_len: int = 1000


# the valid values of the keys with a closed set of them are declared in scanmt.choices (ARCHS ...)


def check_attention_choices(a: "AttentionConfig", prefix: str = "model.attention") -> None:
    """Raise :class:`ConfigError` for an unknown ``transform``, ``score`` or ``scaling`` (the fertility
    strategy is checked with the transform's rules, :func:`scanmt.fertility.rules.check_strategy`)."""
    check_choice(f"{prefix}.transform", a.transform, tuple(TRANSFORMS), "transform")
    check_choice(f"{prefix}.score", a.score, SCORES, "score")
    check_choice(f"{prefix}.scaling", a.scaling, SCALINGS, "scaling")
    check_choice(f"{prefix}.learn_alpha", a.learn_alpha, LEARN_ALPHA, "mode")


def check_alpha(m: "ModelConfig") -> None:
    """Raise :class:`ConfigError` for a learned alpha that the model cannot have: ``learn_alpha`` with a transform
    without an alpha (whether an architecture has heads for ``head`` is its own check)."""
    a = m.attention
    if a.learn_alpha == "none":
        return
    if a.transform not in ALPHA_TRANSFORMS:
        raise ConfigError(
            f"model.attention.learn_alpha={a.learn_alpha}: only {' and '.join(sorted(ALPHA_TRANSFORMS))} have an alpha "
            f"to learn, not model.attention.transform={a.transform} (set learn_alpha: none, or transform: entmax "
            "or centmax)"
        )


#: the config check of each architecture (``model.arch``), run once when a :class:`Config` is built: the built-in
#: ones (:data:`scanmt.choices.ARCHS`) with their keys, others through :func:`register_architecture_keys`
_ARCHITECTURE_CHECKS: dict[str, Callable[["ModelConfig"], None]] = {
    "lstm": check_lstm,
    "transformer": check_transformer,
}


def register_architecture_keys(arch: str, check: Callable[["ModelConfig"], None]) -> None:
    """Accept ``model.arch: ARCH`` in configs, and check their ``model`` section with ``check`` (which raises
    :class:`ConfigError` naming the key) when a :class:`Config` is built.  The model itself registers with
    :func:`scanmt.model.build.register_architecture`."""
    _ARCHITECTURE_CHECKS[arch] = check


def check_arch(m: "ModelConfig") -> None:
    """Raise :class:`ConfigError` for an unknown ``model.arch`` or ``model.output``, a key its architecture does
    not have (the architecture's own check, after :func:`check_alpha`), or a tied generator that does not fit the
    embeddings."""
    check_choice("model.arch", m.arch, tuple(_ARCHITECTURE_CHECKS), "architecture")
    check_choice("model.output", m.output, OUTPUTS, "output")
    check_alpha(m)
    _ARCHITECTURE_CHECKS[m.arch](m)
    if m.tie_generator and m.emb_size != m.hidden_size:
        raise ConfigError(
            f"model.tie_generator needs model.emb_size == model.hidden_size (got {m.emb_size} and {m.hidden_size})"
        )


#: the range of every numeric key, by section (checked when a Config is built: :func:`check_ranges`)
RANGES: dict[str, dict[str, Range]] = {
    "data": {
        "max_len": Range(1, 10_000),
        "batch_tokens": Range(1, 10_000_000),
        "bucket_batches": Range(1, 1_000_000),
        "train_limit": Range(0, note="0 = all"),
        "valid_limit": Range(0, note="0 = all"),
    },
    "model": {
        "emb_size": Range(1, MAX_WIDTH),
        "hidden_size": Range(1, MAX_WIDTH),
        "layers": Range(1, 32),
        "dropout": Range(0, 1, high_open=True),
        "output_alpha": Range(1, 10, low_open=True, note="1 would be softmax: use model.output: softmax"),
    },
    "model.attention": {"exhaustion": Range(0, 100), "alpha": Range(1, 10, low_open=True)},
    "model.attention.fertility": {"value": Range(0, 1000, low_open=True), "add": Range(0, 1000)},
    "model.coverage": COVERAGE_RANGES,
    "model.transformer": TRANSFORMER_RANGES,
    "train": {
        "seed": Range(0, 2**32 - 1),
        "lr": Range(0, 1000, low_open=True),
        "lr_decay": Range(0, 1, low_open=True, note="1 = no decay"),
        "lr_decay_start": Range(1, note="an epoch, 1-based"),
        "max_grad_norm": Range(0, note="0 = no clipping"),
        "param_init": Range(0, 100, note="0 = torch's initialisation"),
        "label_smoothing": Range(0, 1, high_open=True),
        "epochs": Range(1),
        "max_steps": Range(0, note="0 = no limit"),
        "max_minutes": Range(0, note="0 = no limit"),
        "valid_every": Range(0, note="0 = once per epoch"),
        "patience": Range(0, note="0 = never stop early"),
        "checkpoint_every": Range(1),
        "keep_checkpoints": Range(0, note="0 = none"),
        "log_every": Range(1),
        "threads": Range(0, 1024, note="0 = torch's default"),
        "warmup_steps": Range(0, note="0 = no warm-up"),
    },
    "decode": {
        "beam": Range(1, 1000, note="1 = greedy"),
        "length_alpha": Range(0, 100, note="0 disables the length penalty"),
        "max_len_a": Range(0, 1000),
        "max_len_b": Range(0, 100_000),
        "min_len": Range(0, note="0 allows an empty translation"),
        "batch_size": Range(1, 1_000_000),
        "max_source_len": Range(1, 1_000_000, note="longer inputs are refused before decoding"),
        "coverage_beta": Range(0, 100, note="0 disables the coverage penalty"),
        "coverage_eps": Range(0, 1, low_open=True, note="so that the penalty is finite"),
    },
}
#: the decode keys of the length and coverage penalties (:func:`check_penalty_config`)
PENALTY_RANGE_KEYS: tuple[str, ...] = ("length_alpha", "coverage_beta", "coverage_eps")


def key_range(dotted: str) -> Range:
    """The :class:`Range` of a dotted numeric key (``decode.beam``)."""
    section, _, key = dotted.rpartition(".")
    return RANGES[section][key]


def check_ranges(section: Any, name: str, keys: Sequence[str] | None = None, prefix: str | None = None) -> None:
    """Raise :class:`ConfigError` for the first value of ``section`` (the config section ``name``) out of
    its range (``keys``: only those); messages name ``PREFIX.KEY`` (``prefix`` defaults to ``name``)."""
    ranges = RANGES[name]
    check_values(section, {key: ranges[key] for key in keys} if keys is not None else ranges, prefix or name)


def check_train_config(t: "TrainConfig", prefix: str = "train") -> None:
    """Raise :class:`ConfigError` naming the key for a ``train`` value out of its range or unknown."""
    check_ranges(t, "train", prefix=prefix)
    check_choice(f"{prefix}.optimizer", t.optimizer, OPTIMIZERS, "optimizer")
    check_choice(f"{prefix}.lr_schedule", t.lr_schedule, LR_SCHEDULES, "schedule")
    if t.lr_schedule == "inverse_sqrt" and t.warmup_steps == 0:
        raise ConfigError(f"{prefix}.lr_schedule=inverse_sqrt needs {prefix}.warmup_steps > 0 (its decay is "
                          f"lr * sqrt(warmup_steps / update)), got {prefix}.warmup_steps=0")
    check_choice(f"{prefix}.precision", t.precision, PRECISIONS, "precision")
    check_choice(f"{prefix}.normalization", t.normalization, NORMALIZATIONS, "normalization")
    check_choice(f"{prefix}.logger", t.logger, LOGGERS, "logger")


def check_penalty_config(d: Any, prefix: str = "decode") -> None:
    """Raise :class:`ConfigError` naming the key for bad length/coverage penalty settings (of a
    :class:`DecodeConfig`, or anything with its penalty fields)."""
    check_choice(f"{prefix}.penalty_mode", d.penalty_mode, PENALTY_MODES, "mode")
    check_ranges(d, "decode", PENALTY_RANGE_KEYS, prefix)


def check_decode_config(d: "DecodeConfig", prefix: str = "decode") -> None:
    """Raise :class:`ConfigError` naming the key for bad decode settings (every range, the penalty mode, and
    room for a word in the longest output of a one-word source)."""
    check_penalty_config(d, prefix)
    check_ranges(d, "decode", prefix=prefix)
    if d.max_len_a + d.max_len_b < 2:
        raise ConfigError(
            f"{prefix}.max_len_a={d.max_len_a:g} and {prefix}.max_len_b={d.max_len_b}: the longest output is "
            f"max_len_a * source length + max_len_b tokens, </s> included, so max_len_a + max_len_b must be >= 2 "
            "to leave a one-word source room for a word"
        )


def longest_output(cfg: "Config") -> float:
    """The most output steps (``</s>`` included) of a one-subword source: a training target of
    ``data.max_len`` subwords + ``</s>``, or decoding's limit ``max_len_a * 1 + max_len_b``."""
    return max(cfg.data.max_len + 1, cfg.decode.max_len_a + cfg.decode.max_len_b)


def check_sections(cfg: "Config") -> None:
    """The ranges of the ``data`` and ``model`` sections (:data:`RANGES`), and how batches are sorted."""
    check_ranges(cfg.data, "data")
    check_choice("data.batch_sort", cfg.data.batch_sort, BATCH_SORTS, "sort")
    check_ranges(cfg.model, "model")
    check_ranges(cfg.model.attention, "model.attention")
    check_ranges(cfg.model.attention.fertility, "model.attention.fertility")


#: the first line of a config file written by :meth:`Config.save_yaml` (a run's ``config.yaml``)
CONFIG_HEADER = "# scanmt config: every key (see configs/cpu-small.yaml for what each one means)"


@dataclass
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Config":
        cfg = _build(cls, d, "")
        check_sections(cfg)
        check_attention_choices(cfg.model.attention)
        check_arch(cfg.model)
        check_train_config(cfg.train)
        check_decode_config(cfg.decode)
        check_attention(cfg.model.attention)  # fertility and attention cross-field rules (scanmt.fertility.rules)
        check_sink(cfg.model.attention, longest_output(cfg))
        return cfg

    @classmethod
    def load(cls, path: str | Path, overrides: Sequence[str] = ()) -> "Config":
        path = Path(path)
        if not path.exists():
            raise ConfigError(f"{path}: config file not found")
        try:
            raw = load_yaml(read_text(path, "config file"), str(path)) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: invalid YAML: {exc}") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: top level must be a mapping of sections")
        file_only = copy.deepcopy(raw)
        apply_overrides(raw, overrides)
        try:
            return cls.from_dict(raw)
        except ConfigError as exc:
            raise _blame(exc, path, file_only, overrides, cls) from None

    def save_yaml(self, path: str | Path) -> None:
        from scanmt.io import atomic_open

        with atomic_open(path) as fh:
            fh.write(CONFIG_HEADER + "\n")
            yaml.safe_dump(self.to_dict(), fh, sort_keys=False)


def _blame(exc: ConfigError, path: Path, file_only: dict[str, Any], overrides: Sequence[str],
           cls: type) -> ConfigError:
    """``exc`` prefixed with what caused it: the config file, or the ``--set`` item(s) (when the file alone loads)."""
    if overrides:
        try:
            cls.from_dict(file_only)
        except ConfigError:
            pass
        else:
            return set_error(exc, overrides)
    return ConfigError(f"{path}: {exc}")


def set_error(exc: ConfigError, overrides: Sequence[str]) -> ConfigError:
    """``exc``, caused by ``--set`` items, prefixed with the items whose key it names (else all of them)."""
    named = [o for o in overrides
             if re.search(rf"(?<![\w.]){re.escape(o.partition('=')[0].strip())}(?![\w.])", str(exc))]
    return ConfigError(f"--set {' '.join(named or overrides)}: {exc}")


def apply_overrides(raw: dict[str, Any], overrides: Sequence[str]) -> None:
    """Apply ``a.b.c=value`` strings to the nested dict ``raw`` in place."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"--set {item!r}: expected key=value, e.g. train.lr=0.5")
        key, _, value = item.partition("=")
        parts = key.strip().split(".")
        node = raw
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {item!r}: {p} is not a section")
        try:
            node[parts[-1]] = yaml.safe_load(value)
        except yaml.YAMLError:
            node[parts[-1]] = value


def _is_dataclass_type(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _coerce(tp: Any, value: Any, key: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None:
            return None
        return _coerce(args[0], value, key)
    if _is_dataclass_type(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a section (mapping), got {value!r}")
        return _build(tp, value, key + ".")
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        (inner,) = typing.get_args(tp)[:1] or (Any,)
        return [_coerce(inner, v, key) for v in value]
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true/false, got {value!r}")
        return value
    if tp is int:
        number = _number(value)
        if number is None or number != int(number):
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        if abs(number) >= 2**63:
            raise ConfigError(f"{key}: {value} is too large for an integer key (at most 2**63 - 1)")
        return int(number)
    if tp is float:
        number = _number(value)
        if number is None:
            raise ConfigError(f"{key}: expected a number, got {value!r}")
        return float(number)
    if tp is str:
        if not isinstance(value, str):
            hint = " (YAML reads yes/no/on/off/true/false and numbers as such: quote it)" if value is not None else ""
            raise ConfigError(f"{key}: expected a string, got {value!r}{hint}")
        return value
    return value


def _number(value: Any) -> int | float | None:
    """A finite number from a YAML value, or None.

    Strings in Python's number syntax count (``1e-3``, ``2E-4``, ``.5``, ``1_000``), since
    YAML 1.1 reads ``1e-3`` as a string; booleans, ``nan`` and ``inf`` do not.
    """
    if isinstance(value, str):
        text = value.strip()
        try:
            value = int(text)
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return value


def _build(cls: type, d: dict[str, Any], prefix: str) -> Any:
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - names)
    if unknown:
        raise ConfigError(
            f"unknown config key {prefix}{unknown[0]!s} (known keys in {prefix.rstrip('.') or 'top level'}: "
            f"{', '.join(sorted(names))})"
        )
    kwargs = {k: _coerce(hints[k], v, prefix + k) for k, v in d.items()}
    return cls(**kwargs)


@dataclass
class PredictorModelConfig:
    emb_size: int = 128
    hidden_size: int = 128
    layers: int = 1
    dropout: float = 0.3
    #: classes 0..max_fertility; larger aligner counts are capped
    max_fertility: int = 5


def _predictor_train_defaults() -> "TrainConfig":
    return TrainConfig(optimizer="adam", lr=0.002, epochs=8, patience=2, lr_decay_start=6, label_smoothing=0.0)


#: fertility targets of the predictor (PredictorConfig.level): scanmt.choices.PREDICTOR_LEVELS


@dataclass
class PredictorConfig:
    """Config of the fertility predictor (``scanmt fertility --train-predictor``)."""

    data: DataConfig = field(default_factory=DataConfig)
    #: `scanmt align` output with {train,valid}.{level}.align (default: data.dir/align)
    align_dir: str = ""
    #: fertility targets: subword (aligner counts per subword) | word (each word's count from the word
    #: aligner, on every piece; bounds shared evenly among a word's pieces; see scanmt.fertility.predictor.targets).
    #: Predictors saved before this key existed are subword ones.
    level: str = "subword"
    model: PredictorModelConfig = field(default_factory=PredictorModelConfig)
    train: TrainConfig = field(default_factory=_predictor_train_defaults)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "PredictorConfig":
        """The config of ``d``; keys missing under ``train`` take the predictor's defaults (Adam, 8 epochs ...).

        (Until this was fixed, overriding any ``train`` key, e.g. ``train.threads=1``, silently gave
        the NMT defaults instead: SGD with lr 1.0, 13 epochs, no early stopping.)
        """
        train = d.get("train")
        if isinstance(train, dict):
            d = {**d, "train": {**dataclasses.asdict(_predictor_train_defaults()), **train}}
        cfg = _build(cls, d, "")
        check_ranges(cfg.data, "data")
        check_train_config(cfg.train)
        check_choice("level", cfg.level, PREDICTOR_LEVELS, "fertility level")
        return cfg


#: keys whose change makes a checkpoint unusable for a config (architecture)
ARCHITECTURE_KEYS: tuple[str, ...] = (
    "model.arch",
    "model.emb_size",
    "model.hidden_size",
    "model.layers",
    "model.tie_generator",
    "model.share_embeddings",
    "model.attention.score",
    "model.attention.scaling",
    "model.attention.learn_alpha",
    "model.coverage.type",
    "model.coverage.dim",
    "model.transformer.heads",
    "model.transformer.ff_size",
    "model.transformer.encoder_layers",
    "model.transformer.decoder_layers",
)


#: keys that may change when a run is resumed (``train --resume``): how long and how it runs, logs and
#: saves, and the decoding defaults stored for ``translate`` (validation decodes greedily); every
#: other key would make the continued run differ from what its checkpoint and config.yaml say.
#: ``train.precision`` only sets the forward's autocast (weights, gradients and optimizer state stay
#: float32), so a run killed on one machine continues on another in the precision that is fast there
RESUME_CHANGEABLE: tuple[str, ...] = (
    "train.epochs",
    "train.max_steps",
    "train.max_minutes",
    "train.patience",
    "train.valid_every",
    "train.checkpoint_every",
    "train.keep_checkpoints",
    "train.log_every",
    "train.logger",
    "train.threads",
    "train.precision",
    "decode.",
)
#: may change on resume when the new folder holds the same prepared data (the run's data was moved)
DATA_DIR_KEY = "data.dir"


def get_key(d: dict[str, Any], dotted: str) -> Any:
    node: Any = d
    for p in dotted.split("."):
        node = node.get(p) if isinstance(node, dict) else None
    return node


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def config_differences(old: dict[str, Any], new: dict[str, Any], ignore: Sequence[str] = (),
                       prefixes: Sequence[str] = ()) -> list[tuple[str, Any, Any]]:
    """``(key, old, new)`` for every differing dotted key (``ignore`` keys and ``prefixes`` sections left out)."""
    a, b = flatten(old), flatten(new)
    diffs = []
    for key in sorted(set(a) | set(b)):
        if key in ignore or any(key.startswith(p) for p in prefixes):
            continue
        if a.get(key) != b.get(key):
            diffs.append((key, a.get(key), b.get(key)))
    return diffs


def with_defaults(config: dict[str, Any], cls: type = Config) -> dict[str, Any]:
    """A saved config with the keys added to ``cls`` since, at their defaults: a new option whose
    default keeps the old behaviour is not a change of config.  A config that no longer loads is
    returned as it is (its differences are then reported)."""
    try:
        return cls.from_dict(copy.deepcopy(config)).to_dict()
    except (ConfigError, TypeError, ValueError):
        return config


def _changeable(key: str) -> bool:
    return any(key == k or (k.endswith(".") and key.startswith(k)) for k in RESUME_CHANGEABLE)


def check_resume(saved: dict[str, Any], current: dict[str, Any], what: str, *,
                 same_data: bool | None = None) -> list[tuple[str, Any, Any]]:
    """The changes of ``current`` against the ``saved`` config of a run being resumed.

    Returns the allowed ones (:data:`RESUME_CHANGEABLE`; ``data.dir`` when ``same_data``
    says the new folder holds the same data) and raises :class:`ConfigError` for the
    first other one, naming the key and both values.  ``same_data`` False (the data
    changed under the same ``data.dir``) is an error too.
    """
    allowed = []
    for key, old, new in config_differences(saved, current):
        if _changeable(key) or (key == DATA_DIR_KEY and same_data):
            allowed.append((key, old, new))
            continue
        kind = "an architecture key" if key in ARCHITECTURE_KEYS else "it is part of what was trained"
        raise ConfigError(
            f"{what} was trained with {key}={old!r} but the config says {key}={new!r}: {key} cannot change on "
            f"--resume ({kind}; keys that can: {', '.join(RESUME_CHANGEABLE)}*). Start a new run (another --out) "
            f"to train with {key}={new!r}"
            + (" (the new data.dir holds other data)" if key == DATA_DIR_KEY and same_data is False else "")
        )
    if same_data is False and not any(k == DATA_DIR_KEY for k, _, _ in allowed):
        raise ConfigError(
            f"the data in {DATA_DIR_KEY}={get_key(current, DATA_DIR_KEY)!r} changed since {what} was written "
            "(prepared again?): resuming would train on other data; start a new run (another --out)"
        )
    return allowed
