"""The fertility strategies, one registry keyed by :data:`scanmt.choices.STRATEGIES`.

Each :class:`Strategy` gives, for its name:

- its **config parsing**: :meth:`~Strategy.options` reads a ``model.attention.fertility``
  section (a :class:`~scanmt.config.FertilityConfig` or its dict) into :class:`FertilityOptions`,
  :meth:`~Strategy.check` checks them; :meth:`~Strategy.request_options` are the options of
  ``scanmt fertility`` that cache the same fertilities and :meth:`~Strategy.label` names them;
- its **cache key**: :meth:`~Strategy.cache_params` (:mod:`scanmt.fertility.cache`);
- its **computation**: :meth:`~Strategy.provider` (built once per :class:`FertilitySource`) and
  :meth:`~Strategy.values`, the function a split's cache miss calls;
- its **saved state**: the provider class (:attr:`~Strategy.provider_type`, whose ``state`` and
  ``from_state`` a checkpoint stores and reads, :func:`scanmt.fertility.providers.provider_from_state`);
- its **attachment to a batch**: :meth:`FertilitySource.attach` gives a split's
  :class:`~scanmt.data.dataset.ParallelData` the cached values, which its batches carry.

``constant`` and ``guided`` (table learned from the training alignment, :func:`train_guided`) bound
any split; ``actual`` reads the split's own alignment (an oracle, :attr:`Strategy.oracle`);
``predicted`` needs a trained predictor (:attr:`Strategy.needs_predictor`, :func:`require_predictor`),
whose cache key is :func:`predictor_key`.  Code outside this package asks the registry
(:func:`strategy`, :func:`needs_predictor`, :func:`is_oracle`) instead of comparing names.
"""

from __future__ import annotations

import dataclasses
import logging
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, ClassVar, Mapping, Sequence

from scanmt.choices import STRATEGIES
from scanmt.data.dataset import ParallelData
from scanmt.data.fertility import file_digest
from scanmt.data.prepare import read_meta
from scanmt.errors import ConfigError, DataError
from scanmt.fertility.alignments import ALIGN_DIR, alignment_path, read_split_links
from scanmt.fertility.cache import CachedFertility, cached_fertility
from scanmt.fertility.providers import (
    ActualFertility,
    ConstantFertility,
    FertilityProvider,
    GuidedFertility,
    PredictedFertility,
    actual_fertility,
)
from scanmt.fertility.rules import FERTILITY_KEY
from scanmt.io import read_lines

log = logging.getLogger(__name__)

#: maps source token lists to fertilities (a provider's ``apply``)
Predict = Callable[[list[list[str]]], Sequence[Sequence[float]]]


@dataclass(frozen=True)
class FertilityOptions:
    """A strategy's settings, from a config section or the options of ``scanmt fertility``.

    Attributes:
        value: the constant (``constant`` only).
        predictor: the predictor checkpoint (``predicted``); ``predictor_key`` names it in messages.
        add: added to the predicted expected fertility (``predicted``).
        align_dir: where ``scanmt align`` wrote its links (default ``DATA/align``).
        predict, predictor_id: ``predicted`` with a predictor given in memory instead of a file: the
            function and its id in the cache key.
        cli: phrase the value errors with ``scanmt fertility``'s options (``--value``).
    """

    value: float | None = None
    predictor: str | Path | None = None
    add: float = 1.0
    align_dir: str | Path | None = None
    predictor_key: str = "attention.fertility"
    predict: Predict | None = None
    predictor_id: str | None = None
    cli: bool = False


def require_predictor(predictor: str | Path | None, *, key: str = "attention.fertility") -> Path:
    """Check that the ``predicted`` strategy has a trained predictor; return its path.

    Raises:
        ConfigError: ``predictor`` is unset (names the config key and how to train
            one) or points to nothing.
    """
    if predictor is None or str(predictor).strip() == "":
        raise ConfigError(
            f"{key}: strategy 'predicted' needs a trained fertility predictor, but none is configured; "
            "train one first and set its path, or use 'constant', 'guided' or 'actual'"
        )
    path = Path(predictor)
    if not path.exists():
        raise ConfigError(f"{key}: fertility predictor {str(path)!r} not found (train it first)")
    return path


def predictor_key(path: str | Path, add: float) -> str:
    """The ``predicted`` cache key's id of the predictor checkpoint ``path`` with ``add``: the one place it is made."""
    return f"{file_digest(path)[:16]}-add{add:g}"


def train_guided(data_dir: str | Path, align_dir: str | Path | None = None) -> GuidedFertility:
    """The guided table learned from ``data_dir``'s training source and its subword alignment."""
    data_dir = Path(data_dir)
    meta = read_meta(data_dir)
    align_dir = Path(align_dir) if align_dir else data_dir / ALIGN_DIR
    train_src = data_dir / f"train.bpe.{meta['src_lang']}"
    train_align = alignment_path(align_dir, "train")
    if not train_align.exists():
        raise DataError(f"{train_align}: no training alignment; run `scanmt align --data {data_dir}` first")
    train = [ln.split() for ln in read_lines(train_src, what="source file")]
    guided = GuidedFertility.train(train, read_split_links(align_dir, "train", train, data_dir))
    log.info("guided fertility: %d source types from %d training pairs", len(guided.table), len(train))
    return guided


# --------------------------------------------------------------------------- the strategies


class Strategy(ABC):
    """One fertility strategy (see the module docstring)."""

    name: ClassVar[str]
    provider_type: ClassVar[type[FertilityProvider]]
    #: takes ``value`` (the constant)
    takes_value: ClassVar[bool] = False
    #: needs a trained fertility predictor
    needs_predictor: ClassVar[bool] = False
    #: bounds from each pair's own (reference) alignment: none for new sentences
    oracle: ClassVar[bool] = False

    def options(self, section: Any) -> FertilityOptions:
        """What this strategy reads of a ``model.attention.fertility`` section (FertilityConfig or dict)."""
        return FertilityOptions(align_dir=_get(section, "align_dir") or None)

    def request_options(self, section: Any) -> dict[str, Any]:
        """The options of ``scanmt fertility`` (:class:`scanmt.api.FertilityRequest`) besides ``strategy``,
        ``splits`` and ``align_dir`` that cache this section's fertilities."""
        return {}

    def label(self, section: Any) -> str:
        """The section's fertility in a step or run label: the name, with what tells its caches apart."""
        return self.name

    def check(self, options: FertilityOptions) -> None:
        """Raise :class:`ConfigError` for options this strategy cannot use."""
        if options.value is not None:
            if options.cli:
                raise ConfigError(f"--value is only for --strategy constant, not {self.name}")
            raise ConfigError(f"fertility strategy {self.name!r} takes no value (only 'constant' does)")

    @abstractmethod
    def cache_params(self, source: "FertilitySource", split: str) -> dict[str, Any]:
        """The parameters of ``split``'s cache key (:func:`scanmt.fertility.cache.fertility_cache_path`)."""

    @abstractmethod
    def provider(self, source: "FertilitySource") -> FertilityProvider:
        """The provider a model trained with this strategy stores (built once per source)."""

    def values(self, source: "FertilitySource", split: str) -> Predict:
        """What computes ``split``'s fertilities on a cache miss: by default the provider's ``apply``."""
        return lambda src: source.provider().apply(src)


def _get(section: Any, key: str) -> Any:
    """``section[key]`` of a dict or ``section.key`` of a config dataclass."""
    return section[key] if isinstance(section, Mapping) else getattr(section, key)


class Constant(Strategy):
    name = "constant"
    provider_type = ConstantFertility
    takes_value = True

    def options(self, section: Any) -> FertilityOptions:
        return FertilityOptions(value=_get(section, "value"))

    def request_options(self, section: Any) -> dict[str, Any]:
        return {"value": float(_get(section, "value"))}

    def label(self, section: Any) -> str:
        return f"{self.name}-{_get(section, 'value'):g}"

    def check(self, options: FertilityOptions) -> None:
        if options.value is None:
            if options.cli:
                raise ConfigError("--strategy constant needs --value F (e.g. --value 2)")
            raise ConfigError("fertility strategy 'constant' needs a value (e.g. --value 2)")

    def cache_params(self, source: "FertilitySource", split: str) -> dict[str, Any]:
        return dict(source.provider().params)

    def provider(self, source: "FertilitySource") -> FertilityProvider:
        return ConstantFertility(source.options.value)


class Guided(Strategy):
    name = "guided"
    provider_type = GuidedFertility

    def cache_params(self, source: "FertilitySource", split: str) -> dict[str, Any]:
        train_align = alignment_path(source.align_dir, "train")
        if not train_align.exists():
            raise DataError(f"{train_align}: no training alignment; run `scanmt align --data {source.data_dir}` first")
        return {"align": file_digest(train_align)[:16], "train_src": file_digest(source.src_path("train"))[:16]}

    def provider(self, source: "FertilitySource") -> FertilityProvider:
        return train_guided(source.data_dir, source.align_dir)


class Predicted(Strategy):
    name = "predicted"
    provider_type = PredictedFertility
    needs_predictor = True

    def options(self, section: Any) -> FertilityOptions:
        return FertilityOptions(predictor=_get(section, "predictor"), add=_get(section, "add"))

    def request_options(self, section: Any) -> dict[str, Any]:
        return {"predictor": _get(section, "predictor"), "add": float(_get(section, "add"))}

    def label(self, section: Any) -> str:
        return f"{self.name}-add{_get(section, 'add'):g}"

    def check(self, options: FertilityOptions) -> None:
        if options.predict is None:
            require_predictor(options.predictor, key=options.predictor_key)
        elif not options.predictor_id:
            raise ConfigError(
                "fertility strategy 'predicted' needs a trained fertility predictor, but none was given; "
                "train one first, or use 'constant', 'guided' or 'actual'")
        super().check(options)

    def cache_params(self, source: "FertilitySource", split: str) -> dict[str, Any]:
        o = source.options
        return {"predictor": o.predictor_id or predictor_key(o.predictor, o.add)}

    def provider(self, source: "FertilitySource") -> FertilityProvider:
        return PredictedFertility.load(source.options.predictor, source.options.add)

    def values(self, source: "FertilitySource", split: str) -> Predict:
        return source.options.predict or super().values(source, split)


class Actual(Strategy):
    name = "actual"
    provider_type = ActualFertility
    oracle = True

    def cache_params(self, source: "FertilitySource", split: str) -> dict[str, Any]:
        split_align = alignment_path(source.align_dir, split)
        if not split_align.exists():
            raise DataError(f"{split_align}: no alignment for split {split!r}; "
                            f"run `scanmt align --data {source.data_dir}` first")
        return {"align": file_digest(split_align)[:16], "rule": "max1"}

    def provider(self, source: "FertilitySource") -> FertilityProvider:
        return ActualFertility()

    def values(self, source: "FertilitySource", split: str) -> Predict:
        return lambda src: actual_fertility(src, read_split_links(source.align_dir, split, src, source.data_dir))


#: the registry: every name of :data:`scanmt.choices.STRATEGIES`, in its order
REGISTRY: Mapping[str, Strategy] = MappingProxyType({s.name: s for s in (Constant(), Guided(), Predicted(), Actual())})
assert tuple(REGISTRY) == STRATEGIES, "the registry and scanmt.choices.STRATEGIES disagree"
#: the strategies ``scanmt fertility --strategy`` offers, those without a predictor first
COMPUTE_CHOICES: tuple[str, ...] = tuple(sorted(STRATEGIES, key=lambda s: REGISTRY[s].needs_predictor))


def strategy(name: str) -> Strategy:
    """The strategy called ``name``; a :class:`ConfigError` naming the known ones for any other."""
    if name not in REGISTRY:
        raise ConfigError(f"unknown fertility strategy {name!r}; choose one of: {', '.join(STRATEGIES)}")
    return REGISTRY[name]


def needs_predictor(name: str) -> bool:
    """Whether the strategy ``name`` (``none`` too) needs a trained fertility predictor."""
    return name in REGISTRY and REGISTRY[name].needs_predictor


def is_oracle(name: str | None) -> bool:
    """Whether the strategy ``name`` (``none`` or None too) bounds with each pair's own alignment."""
    return name in REGISTRY and REGISTRY[name].oracle


# --------------------------------------------------------------------------- one strategy on one folder


@dataclass
class FertilitySource:
    """One strategy with its options on one prepared folder: its provider (built once) and each split's
    fertilities (cached).  Build it with :func:`fertility_source` or :func:`source_from_config`."""

    strategy: Strategy
    data_dir: Path
    options: FertilityOptions
    _provider: FertilityProvider | None = field(default=None, repr=False)

    @property
    def align_dir(self) -> Path:
        a = self.options.align_dir
        return Path(a) if a is not None else self.data_dir / ALIGN_DIR

    def src_path(self, split: str) -> Path:
        """The subword source of ``split``."""
        return self.data_dir / f"{split}.bpe.{read_meta(self.data_dir)['src_lang']}"

    def provider(self) -> FertilityProvider:
        """The strategy's provider, built on first use (the guided table is learned once)."""
        if self._provider is None:
            self._provider = self.strategy.provider(self)
        return self._provider

    def compute(self, split: str, *, force: bool = False) -> CachedFertility:
        """``split``'s fertilities from the cache, computed and cached on a miss."""
        src_path = self.src_path(split)
        if not src_path.exists():
            raise DataError(f"{src_path}: no subword source for split {split!r} in {self.data_dir}")
        params = self.strategy.cache_params(self, split)
        return cached_fertility(self.data_dir, split, self.strategy.name, params, src_path,
                                self.strategy.values(self, split), force=force)

    def attach(self, data: ParallelData, split: str) -> ParallelData:
        """``data`` (the sentences of ``split``) with the split's cached fertilities, which its batches carry."""
        cached = self.compute(split)
        return data.with_fertility(cached.values, source=str(cached.path))


def fertility_source(data_dir: str | Path, name: str, options: FertilityOptions) -> FertilitySource:
    """The strategy ``name`` with ``options`` on ``data_dir``, checked (:meth:`Strategy.check`)."""
    strat = strategy(name)
    strat.check(options)
    return FertilitySource(strat, Path(data_dir), options)


def source_from_config(data_dir: str | Path, section: Any, *,
                       predictor_key: str = f"{FERTILITY_KEY}.predictor") -> FertilitySource:
    """:func:`fertility_source` of a ``model.attention.fertility`` section; ``predictor_key`` names its
    predictor in messages."""
    strat = strategy(_get(section, "strategy"))
    return fertility_source(data_dir, strat.name,
                            dataclasses.replace(strat.options(section), predictor_key=predictor_key))


def compute_fertility(
    data_dir: str | Path,
    split: str,
    strategy: str,
    *,
    value: float | None = None,
    align_dir: str | Path | None = None,
    predictor: Predict | None = None,
    predictor_id: str | None = None,
    force: bool = False,
) -> CachedFertility:
    """Fertilities of one split of a prepared directory, cached (computed once).

    Args:
        data_dir: prepared data (``meta.json``, ``{split}.bpe.{src_lang}``).
        split: e.g. ``train``, ``valid``, ``test``.
        strategy: one of :data:`STRATEGIES`.
        value: the constant (``constant`` only).
        align_dir: where ``scanmt align`` wrote ``{split}.subword.align``
            (default ``data_dir/align``); ``guided`` reads the train split's,
            ``actual`` the split's own.
        predictor: ``predicted`` only: maps source token lists to fertilities.
        predictor_id: ``predicted`` only: identifies the trained predictor in
            the cache key (e.g. :func:`predictor_key`).
        force: recompute even if cached.
    """
    options = FertilityOptions(value=value, align_dir=align_dir, predict=predictor, predictor_id=predictor_id)
    return fertility_source(data_dir, strategy, options).compute(split, force=force)
