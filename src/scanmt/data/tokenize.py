"""Moses tokenization and detokenization (sacremoses), cached per language.

The tokenized form is what subwords are learned on, what "tokenized BLEU",
REP and DROP are computed on, and what word alignments index.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Iterable

from sacremoses import MosesDetokenizer, MosesPunctNormalizer, MosesTokenizer


@lru_cache(maxsize=None)
def _tokenizer(lang: str) -> MosesTokenizer:
    return MosesTokenizer(lang=lang)


@lru_cache(maxsize=None)
def _detokenizer(lang: str) -> MosesDetokenizer:
    return MosesDetokenizer(lang=lang)


@lru_cache(maxsize=None)
def _normalizer(lang: str) -> MosesPunctNormalizer:
    return MosesPunctNormalizer(lang=lang)


def tokenize(line: str, lang: str, *, lowercase: bool = False) -> str:
    """Moses-tokenize one line (punctuation normalized, no HTML escaping)."""
    text = _normalizer(lang).normalize(line.strip())
    out = _tokenizer(lang).tokenize(text, escape=False, return_str=True)
    return out.lower() if lowercase else out


def tokenize_all(lines: Iterable[str], lang: str, *, lowercase: bool = False) -> list[str]:
    return [tokenize(ln, lang, lowercase=lowercase) for ln in lines]


def detokenize(line: str, lang: str) -> str:
    """Inverse of :func:`tokenize` (up to Moses' normalization)."""
    return _detokenizer(lang).detokenize(line.split(), unescape=False)
