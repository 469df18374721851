"""Japanese words: MeCab through ``fugashi`` with the ``unidic-lite`` dictionary, after NFKC normalization.

docs/japanese.md measures this choice against SudachiPy (speed, and agreement with the KyTea
segmentation of KFTT's official tokenized dev set) and explains the normalization:

- **NFKC** first: full-width Latin letters, digits and brackets become the ASCII ones the English
  side has (Moses normalizes English punctuation the same way), so the joint subword vocabulary
  shares them, and the ideographic space U+3000 becomes a plain space, which separates words.
- **Detokenization** joins the words without spaces, except that a space stays between two words
  where the first ends and the second begins with a Latin letter or digit (``Windows 95``, not
  ``Windows95``): written Japanese has no spaces, but Latin-script runs inside it do.
"""

from __future__ import annotations

import os
import re
import unicodedata

from scanmt.errors import ConfigError

#: a Latin letter (ASCII or accented) or a digit: two words meeting on these keep a space between them
_LATIN_OR_DIGIT = re.compile(r"[0-9A-Za-z\u00c0-\u024f]")


def _tagger():
    """A MeCab tagger on unidic-lite's dictionary (named explicitly: fugashi would prefer a full ``unidic``)."""
    try:
        import fugashi
        import unidic_lite
    except ImportError as exc:
        raise ConfigError(f"Japanese tokenization needs the packages fugashi and unidic-lite ({exc}); "
                          "install them: pip install fugashi unidic-lite") from None
    dicdir = unidic_lite.DICDIR
    return fugashi.Tagger(f'-d "{dicdir}" -r "{os.path.join(dicdir, "mecabrc")}"')


class JapaneseWords:
    """Japanese text <-> words (see the module docstring)."""

    name = "mecab-unidic-lite+nfkc"

    def __init__(self) -> None:
        self.tagger = _tagger()

    def words(self, line: str) -> list[str]:
        """The words of ``line``, NFKC-normalized.

        >>> JapaneseWords().words("京都は日本の都市です。")
        ['京都', 'は', '日本', 'の', '都市', 'です', '。']
        """
        text = unicodedata.normalize("NFKC", line).strip()
        return [piece for w in self.tagger(text) for piece in w.surface.split()]

    def tagged(self, line: str) -> list[tuple[str, str]]:
        """The words of ``line`` (as :meth:`words`, one for one) with UniDic's part of speech: its first two
        levels, such as ``名詞-固有名詞`` (proper noun) or ``助詞-格助詞`` (case particle).

        >>> JapaneseWords().tagged("京都は都市です。")
        [('京都', '名詞-固有名詞'), ('は', '助詞-係助詞'), ('都市', '名詞-普通名詞'), ('です', '助動詞'), ('。', '補助記号-句点')]
        """
        text = unicodedata.normalize("NFKC", line).strip()
        out = []
        for w in self.tagger(text):
            pos = "-".join(x for x in (w.feature.pos1, w.feature.pos2) if x and x != "*")
            out.extend((piece, pos) for piece in w.surface.split())
        return out

    def join(self, words: list[str]) -> str:
        """``words`` as Japanese text: no spaces, except between two Latin letters or digits.

        >>> JapaneseWords().join(["1990", "年", "に", "Windows", "95", "を"])
        '1990年にWindows 95を'
        """
        out: list[str] = []
        for w in words:
            if out and _LATIN_OR_DIGIT.match(out[-1][-1]) and _LATIN_OR_DIGIT.match(w[0]):
                out.append(" ")
            out.append(w)
        return "".join(out)
