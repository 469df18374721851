"""Corpora, tokenization, subwords, vocabularies, batching, alignment, fertility."""
