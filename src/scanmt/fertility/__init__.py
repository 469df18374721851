"""Fertility in one home: upper bounds on how much attention each source token may receive.

A layer between ``data`` and ``model`` (it imports ``data``, ``ops`` and the base modules;
``model``, ``decoding``, ``training`` and ``api`` import it), except :mod:`~scanmt.fertility.rules`,
its base-level half that :mod:`scanmt.config` calls.  This ``__init__`` imports nothing, so
that importing the rules stays light.

- :mod:`~scanmt.fertility.rules`: the cross-field rules (transform and strategy, exhaustion,
  score scaling) and which transforms are constrained; checked when a Config is built.
- :mod:`~scanmt.fertility.strategies`: the strategy registry, keyed by
  :data:`scanmt.choices.STRATEGIES` (constant, guided, predicted, the ``actual`` oracle): each
  strategy's config parsing, cache key, computation, saved state and attachment to the data
  of a split; :func:`~scanmt.fertility.strategies.compute_fertility` for one split.
- :mod:`~scanmt.fertility.providers`: the providers, which map source subwords to bounds, and
  their saved state (what a checkpoint stores).
- :mod:`~scanmt.fertility.setup`: the train and valid bounds of a training run (provider built once).
- :mod:`~scanmt.fertility.cache`: a split's fertilities cached next to the prepared data
  (file format: :mod:`scanmt.data.fertility`).
- :mod:`~scanmt.fertility.alignments`: the subword alignments they are counted from.
- :mod:`~scanmt.fertility.predictor`: the BiLSTM fertility tagger behind ``predicted``: its
  network, targets and evaluation (its training task is :mod:`scanmt.training.fertility_trainer`).
- :mod:`~scanmt.fertility.sink`: the sink convention (whether a model appends ``<sink>``, and where).
"""
