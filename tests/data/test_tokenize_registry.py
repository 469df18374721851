"""The per-language tokenizer registry (issue 53): Japanese words through MeCab/unidic-lite, Moses elsewhere."""

from __future__ import annotations

import pytest

from scanmt.data import tokenize as registry
from scanmt.data.tokenize import detokenize, tokenize, tokenizer_name


def test_a_known_japanese_sentence_is_segmented_into_words():
    assert tokenize("京都は日本の都市です。", "ja").split() == ["京都", "は", "日本", "の", "都市", "です", "。"]


def test_japanese_words_come_with_their_part_of_speech_one_for_one():
    """``JapaneseWords.tagged`` (DROP by word class): the words of ``tokenize``, each with UniDic's part of
    speech (its first two levels), after the same NFKC normalization."""
    from scanmt.data.japanese import JapaneseWords

    line = "京都は日本の都市です。２７．袋井宿"
    tagged = JapaneseWords().tagged(line)
    assert [w for w, _ in tagged] == tokenize(line, "ja").split()
    assert tagged == [("京都", "名詞-固有名詞"), ("は", "助詞-係助詞"), ("日本", "名詞-固有名詞"), ("の", "助詞-格助詞"),
                      ("都市", "名詞-普通名詞"), ("です", "助動詞"), ("。", "補助記号-句点"), ("27", "名詞-数詞"),
                      (".", "補助記号-句点"), ("袋井", "名詞-固有名詞"), ("宿", "名詞-普通名詞")]


def test_japanese_is_nfkc_normalized_and_the_ideographic_space_separates_words():
    """Full-width Latin, digits and brackets become the ASCII the English side has; U+3000 is no word."""
    assert tokenize("ＡＢＣ　１２３と（京都）", "ja") == "ABC 123 と ( 京都 )"


@pytest.mark.parametrize("text", [
    "京都は日本の都市です。",
    "1990年にWindows 95をインストールした。",
    "臨済宗は、その名の通り、会昌の廃仏後、唐末の宗祖臨済義玄に始まる。",
    "JR東海道本線のKyoto駅から徒歩約40分。",
])
def test_japanese_detokenization_round_trips(text):
    """Words joined without spaces, but a space kept between two Latin letters or digits."""
    assert detokenize(tokenize(text, "ja"), "ja") == text


def test_japanese_detokenization_keeps_spaces_only_between_latin_letters_or_digits():
    assert detokenize("1990 年 に Windows 95 を Café au lait と", "ja") == "1990年にWindows 95をCafé au laitと"
    # the rule cannot know that MeCab split a unit off its number: "3.5km" comes back as "3.5 km"
    assert detokenize(tokenize("3.5km", "ja"), "ja") == "3.5 km"


def test_a_region_tag_uses_its_base_languages_tokenizer():
    assert tokenizer_name("ja_JP") == tokenizer_name("ja") == "mecab-unidic-lite+nfkc"
    assert tokenize("京都は都市です。", "ja_JP") == "京都 は 都市 です 。"


def test_other_languages_stay_moses():
    assert tokenizer_name("de") == tokenizer_name("en") == "moses"
    assert tokenize("Hello, world!", "en") == "Hello , world !"
    assert detokenize("Hello , world !", "en") == "Hello, world!"
    assert tokenize("Ein Mann.", "de", lowercase=True) == "ein mann ."


def test_the_registry_dispatches_by_language(monkeypatch):
    """A language added to the registry is used by tokenize and detokenize (no branch elsewhere)."""

    class Upper:
        name = "upper"

        def words(self, line: str) -> list[str]:
            return line.upper().split()

        def join(self, words: list[str]) -> str:
            return "_".join(words)

    monkeypatch.setitem(registry.REGISTRY, "xx", lambda lang: Upper())
    registry.tokenizer_for.cache_clear()
    try:
        assert tokenize("a b", "xx") == "A B" and detokenize("a b", "xx_YY") == "a_b"
        assert tokenizer_name("xx") == "upper"
    finally:
        registry.tokenizer_for.cache_clear()


def test_a_missing_japanese_package_is_a_one_line_error(monkeypatch):
    import builtins

    from scanmt.data import japanese
    from scanmt.errors import ConfigError

    real_import = builtins.__import__

    def no_fugashi(name, *args, **kwargs):
        if name == "fugashi":
            raise ImportError("No module named 'fugashi'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_fugashi)
    with pytest.raises(ConfigError, match="pip install fugashi unidic-lite"):
        japanese.JapaneseWords()


def test_moses_lines_keep_the_bytes_archived_grids_were_digested_with():
    """Multi30k train.en line 16,217: Moses's own output (a double and a trailing space) is what every grid
    archived before the tokenizer registry digested in ``train.tok.en``; a single-space join broke their
    restore on a freshly prepared corpus.  The words are the same either way."""
    from scanmt.data.tokenize import tokenize

    line = "A man and a woman on a motorcycle .`"
    assert tokenize(line, "en") == "A man and a woman on a motorcycle  . ' "
    assert tokenize(line, "en").split() == ["A", "man", "and", "a", "woman", "on", "a", "motorcycle", ".", "'"]


def test_japanese_lines_are_words_joined_by_single_spaces():
    from scanmt.data.tokenize import tokenize

    assert tokenize("京都は 日本の都市です。", "ja") == "京都 は 日本 の 都市 です 。"
