"""The models: one package per architecture above the modules they share.

Architectures (``model.arch``; each registers itself in :mod:`.build`): :mod:`.lstm` (the paper's BiLSTM
encoder-decoder with its attention and CovVector) and :mod:`.transformer`.  Shared: the interface every model
implements (:mod:`.interface`), the fertility-bounded attention bookkeeping (:mod:`.bounds`), the attention
transforms' registry (:mod:`.transforms`), the output layer's distribution (:mod:`.output`) and loss
(:mod:`.loss`), building a model (:mod:`.build`), the checkpoint file's schema (:mod:`.checkpoint`) and
checkpoint averaging (:mod:`.averaging`).
"""
