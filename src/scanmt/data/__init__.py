"""Corpora, tokenization, subwords, vocabularies, batching, alignment and link files, fertility files and cache."""
