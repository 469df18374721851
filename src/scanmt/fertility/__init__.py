"""Fertility in one home: upper bounds on how much attention each source token may receive.

A layer between ``data`` and ``model`` (it imports ``data``, ``ops`` and the base modules;
``model``, ``decoding`` and ``training`` import it), except :mod:`~scanmt.fertility.rules`,
its base-level half that :mod:`scanmt.config` calls.  This ``__init__`` imports nothing, so
that importing the rules stays light.

- :mod:`~scanmt.fertility.rules`: the cross-field rules (transform and strategy, exhaustion,
  score scaling) and which transforms are constrained; checked when a Config is built.
- :mod:`~scanmt.fertility.sink`: the sink convention (whether a model appends ``<sink>``, and where).
- :mod:`~scanmt.fertility.providers`: the providers (constant, guided, predicted, the
  ``actual`` oracle), which map source subwords to bounds, and their saved state.
- :mod:`~scanmt.fertility.predictor`: the BiLSTM fertility tagger behind ``predicted``.
- :mod:`~scanmt.fertility.compute`: a split's fertilities for a strategy, cached next to the
  prepared data (files and cache format: :mod:`scanmt.data.fertility`).
"""
