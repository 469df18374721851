"""METEOR through nltk, with WordNet synonyms when WordNet is installed.

Definition used: nltk's ``meteor_score`` (exact, Porter-stem and WordNet
synonym matching; α = 0.9, β = 3, γ = 0.5) per sentence on tokenized text
(lowercased by nltk), and the corpus score is the **mean of the sentence
scores**, ×100.  This is not METEOR 1.5's corpus-level aggregation (Denkowski
& Lavie 2014, used by the paper), so absolute numbers differ from the Java
tool; system rankings are comparable.  Note that nltk looks synonyms up on the
stemmed words, so synonyms only match when stemming leaves a word unchanged.

WordNet comes from nltk's data path (``python -m scanmt.metrics.wordnet_setup``
builds it from Debian's ``wordnet-base``).  When it cannot be loaded METEOR
still runs, without synonyms, and :attr:`MeteorResult.note` says so.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Sequence

from nltk.translate.meteor_score import single_meteor_score

from scanmt.errors import DataError

SETUP_HINT = "run `python -m scanmt.metrics.wordnet_setup` after `apt-get install wordnet-base`"


@dataclass(frozen=True)
class WordNetStatus:
    """Result of looking for WordNet: the reader (or ``None``) and a human note."""

    reader: Any | None
    note: str

    @property
    def available(self) -> bool:
        return self.reader is not None


class _NoSynonyms:
    """Stand-in WordNet with no synsets: METEOR with exact and stem matches only."""

    def synsets(self, word: str) -> list:  # noqa: ARG002 - nltk's interface
        return []


@lru_cache(maxsize=8)
def _load(search_path: tuple[str, ...]) -> WordNetStatus:
    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    try:
        root = nltk.data.find("corpora/wordnet", paths=list(search_path))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "multilingual functions are not available": not needed here
            reader = WordNetCorpusReader(root, None)
        reader.synsets("dog")  # force loading the index
    except LookupError:
        return WordNetStatus(None, f"no synonyms: WordNet not found on nltk's data path ({SETUP_HINT})")
    except (OSError, ValueError, PermissionError, AssertionError) as exc:
        return WordNetStatus(None, f"no synonyms: WordNet could not be loaded ({type(exc).__name__}: {exc}; {SETUP_HINT})")
    return WordNetStatus(reader, f"WordNet {reader.get_version()} synonyms")


def load_wordnet() -> WordNetStatus:
    """Find and load WordNet on ``nltk.data.path`` (cached per search path)."""
    import nltk

    return _load(tuple(str(p) for p in nltk.data.path))


@dataclass(frozen=True)
class MeteorResult:
    """Corpus METEOR (0–100) and whether synonyms were used."""

    score: float
    synonyms: bool
    note: str
    sentences: int


def corpus_meteor(
    hyps: Sequence[Sequence[str]],
    refs: Sequence[Sequence[str]],
    *,
    wordnet: WordNetStatus | None = None,
    use_synonyms: bool = True,
) -> MeteorResult:
    """Mean nltk METEOR over sentences, ×100.

    Args:
        hyps, refs: one token list per sentence (tokenized text).
        wordnet: a :class:`WordNetStatus` (default: :func:`load_wordnet`).
        use_synonyms: False forces METEOR without synonyms.

    Raises:
        DataError: different numbers of sentences, or none.
    """
    if len(hyps) != len(refs):
        raise DataError(f"METEOR: {len(hyps)} hypotheses but {len(refs)} references")
    if not hyps:
        raise DataError("METEOR: no sentences")
    if use_synonyms:
        status = wordnet if wordnet is not None else load_wordnet()
    else:
        status = WordNetStatus(None, "no synonyms (disabled)")
    wn = status.reader if status.available else _NoSynonyms()
    total = sum(single_meteor_score(list(r), list(h), wordnet=wn) for h, r in zip(hyps, refs))
    return MeteorResult(score=100.0 * total / len(hyps), synonyms=status.available, note=status.note, sentences=len(hyps))
