"""Word tokenization and detokenization, one registry keyed by language code.

The tokenized form (words separated by spaces) is what subwords are learned on, what
"tokenized BLEU", REP and DROP are computed on, what word alignments index, what the training-length
filter of ``prepare --max-train-words`` counts, and what attention maps label.  Every place that
turns text into words or back calls :func:`tokenize` / :func:`detokenize` here with the language code,
and the registry picks the tokenizer:

- ``ja``: MeCab (``fugashi``) with the ``unidic-lite`` dictionary, NFKC-normalized
  (:mod:`scanmt.data.japanese`; docs/japanese.md says why these);
- every other language: Moses (sacremoses), punctuation normalized, no HTML escaping.

A language code with a region or script tag (``ja_JP``, ``pt_BR``) uses its base language's entry.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable, Iterable, Protocol

from sacremoses import MosesDetokenizer, MosesPunctNormalizer, MosesTokenizer


class WordTokenizer(Protocol):
    """Splits one language's text into words and joins words back into text."""

    #: what the tokenizer is (``moses``, ``mecab-unidic-lite+nfkc``): recorded by ``prepare``
    name: str

    def words(self, line: str) -> list[str]:
        """The words of ``line`` (none contains white space)."""

    def join(self, words: list[str]) -> str:
        """The text of ``words`` (inverse of :meth:`words` up to normalization)."""


class MosesWords:
    """Moses tokenization for ``lang`` (sacremoses): punctuation normalized, no HTML escaping."""

    name = "moses"

    def __init__(self, lang: str):
        self.normalizer = MosesPunctNormalizer(lang=lang)
        self.tokenizer = MosesTokenizer(lang=lang)
        self.detokenizer = MosesDetokenizer(lang=lang)

    def text(self, line: str) -> str:
        """Moses's own output string for ``line``, byte for byte as every earlier version wrote it to the
        prepared ``*.tok.*`` files (it may hold a double or trailing space where the punctuation normalizer
        leaves one): the digests of archived grids (``experiment restore``) are over those bytes."""
        return self.tokenizer.tokenize(self.normalizer.normalize(line.strip()), escape=False, return_str=True)

    def words(self, line: str) -> list[str]:
        return self.text(line).split()

    def join(self, words: list[str]) -> str:
        return self.detokenizer.detokenize(words, unescape=False)


def _japanese(lang: str) -> WordTokenizer:
    from scanmt.data.japanese import JapaneseWords  # imports fugashi: only when Japanese is asked for

    return JapaneseWords()


#: base language code -> factory of its tokenizer; a language not listed uses :class:`MosesWords`
REGISTRY: dict[str, Callable[[str], WordTokenizer]] = {"ja": _japanese}


def base_language(lang: str) -> str:
    """``"ja_JP"`` -> ``"ja"``: the registry key of a language code."""
    return lang.split("_", 1)[0].lower()


@lru_cache(maxsize=None)
def tokenizer_for(lang: str) -> WordTokenizer:
    """The (cached) tokenizer of language ``lang``: its registry entry, else Moses."""
    factory = REGISTRY.get(base_language(lang))
    return factory(lang) if factory is not None else MosesWords(lang)


def tokenizer_name(lang: str) -> str:
    """The name of the tokenizer :func:`tokenize` uses for ``lang`` (``moses`` for most languages)."""
    return tokenizer_for(lang).name


def tokenize(line: str, lang: str, *, lowercase: bool = False) -> str:
    """One line of text -> its words separated by spaces (``""`` for a line without words): single spaces, or the
    tokenizer's own ``text(line)`` where it has one (Moses's output string, which may hold a double space:
    :meth:`MosesWords.text`); ``.split()`` gives the words."""
    tokenizer = tokenizer_for(lang)
    own_text = getattr(tokenizer, "text", None)
    out = own_text(line) if own_text is not None else " ".join(tokenizer.words(line))
    return out.lower() if lowercase else out


def tokenize_all(lines: Iterable[str], lang: str, *, lowercase: bool = False) -> list[str]:
    """:func:`tokenize` of every line."""
    return [tokenize(ln, lang, lowercase=lowercase) for ln in lines]


def detokenize(line: str, lang: str) -> str:
    """Space-separated words -> text (inverse of :func:`tokenize` up to its normalization)."""
    return tokenizer_for(lang).join(line.split())
