"""The paper's architecture (``model.arch: lstm``): a BiLSTM encoder, an input-feeding LSTM decoder with one
attention (scores, transform, fertility bounds) and an optional CovVector, and their fused cells.

:mod:`.model` (the :class:`~scanmt.model.interface.NMTModel`, registered in :mod:`scanmt.model.build`),
:mod:`.encoder`, :mod:`.decoder`, :mod:`.attention`, :mod:`.covvector` (Tu et al.'s coverage models),
:mod:`.cell` (the input-feeding LSTM cell) and :mod:`.step_linear` (per-step weights in teacher forcing).
"""
