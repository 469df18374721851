"""Evaluation metrics: pure functions over tokens, alignment links and attention arrays.

One module per concept; import the one you need (this package imports nothing
eagerly, so each metric stays light):

- :mod:`~scanmt.metrics.bleu`: sacrebleu BLEU (detokenized cased, tokenized lowercased), paired bootstrap.
- :mod:`~scanmt.metrics.meteor`: nltk METEOR with WordNet synonyms when available.
- :mod:`~scanmt.metrics.wordnet_setup`: builds an nltk WordNet data dir from Debian's ``wordnet-base``.
- :mod:`~scanmt.metrics.rep`: REP-score (repeated n-grams and words).
- :mod:`~scanmt.metrics.drop`: DROP-score (dropped source words).
- :mod:`~scanmt.metrics.aer`: AER, SAER, hard alignments from attention.
- :mod:`~scanmt.metrics.attention_stats`: sparsity / coverage statistics of attention.

Layering: this package may import only ``scanmt.data``, ``scanmt.ops``, ``scanmt.errors`` and ``scanmt.io``
(alignment link files are read by :mod:`scanmt.data.links`).
"""
