"""Raw text <-> model ids: word tokenization (:mod:`scanmt.data.tokenize`), subwords, vocabulary.

A :class:`TextPipeline` is stored inside every checkpoint (languages, the
sentencepiece model bytes and the vocabulary), so a checkpoint alone can
translate raw text.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from scanmt.data.subword import SubwordModel, merge_pieces
from scanmt.data.tokenize import detokenize, tokenize
from scanmt.data.vocab import EOS_ID, Vocab


@dataclass
class TextPipeline:
    src_lang: str
    tgt_lang: str
    vocab: Vocab
    subwords: SubwordModel

    @classmethod
    def from_data_dir(cls, data_dir: str | Path, src_lang: str, tgt_lang: str) -> "TextPipeline":
        d = Path(data_dir)
        return cls(src_lang, tgt_lang, Vocab.load(d / "vocab.txt"), SubwordModel(d / "spm.model"))

    def to_state(self) -> dict:
        return {
            "src_lang": self.src_lang,
            "tgt_lang": self.tgt_lang,
            "vocab": self.vocab.itos,
            "spm_model": self.subwords.proto,
        }

    @classmethod
    def from_state(cls, state: dict) -> "TextPipeline":
        """The pipeline :meth:`to_state` saved (no file is written: the subword model loads from its bytes)."""
        return cls(state["src_lang"], state["tgt_lang"], Vocab(state["vocab"]), SubwordModel.from_bytes(state["spm_model"]))

    def source_pieces(self, raw: str) -> list[str]:
        return self.subwords.encode(tokenize(raw, self.src_lang))

    def source_pieces_all(self, raw: Sequence[str]) -> list[list[str]]:
        return self.subwords.encode_all([tokenize(r, self.src_lang) for r in raw])

    def target_pieces_all(self, raw: Sequence[str]) -> list[list[str]]:
        return self.subwords.encode_all([tokenize(r, self.tgt_lang) for r in raw])

    def target_pieces(self, ids: Sequence[int]) -> list[str]:
        ids = list(ids)
        if EOS_ID in ids:
            ids = ids[: ids.index(EOS_ID)]
        return self.vocab.decode(ids)

    def detokenize_target(self, pieces: Sequence[str]) -> str:
        """Subword pieces -> detokenized text."""
        return detokenize(merge_pieces(pieces), self.tgt_lang)

    def tokenized_target(self, pieces: Sequence[str]) -> str:
        return merge_pieces(pieces)
