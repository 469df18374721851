"""The Transformer (``model.arch: transformer``): :mod:`.model` (the :class:`~scanmt.model.interface.NMTModel`,
registered in :mod:`scanmt.model.build`), :mod:`.layers` (attention with fertility-bounded heads, feed-forward,
encoder and decoder layers) and :mod:`.fused_attention` (the fused softmax attention).
"""
