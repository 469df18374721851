"""The fertility predictor behind the ``predicted`` strategy (paper Section 4).

- :mod:`~scanmt.fertility.predictor.network`: the BiLSTM tagger (:class:`FertilityPredictor`).
- :mod:`~scanmt.fertility.predictor.targets`: its targets (subword or word level) and the
  word-level bounds carried to the pieces.
- :mod:`~scanmt.fertility.predictor.evaluation`: ``scanmt fertility --eval-predictor``.

Training it is a task of the shared training loop (:mod:`scanmt.training.fertility_trainer`);
a trained one becomes a provider with :meth:`scanmt.fertility.providers.PredictedFertility.load`.
"""

from scanmt.fertility.predictor.network import FertilityPredictor

__all__ = ["FertilityPredictor"]
