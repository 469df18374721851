"""A font with Chinese, Japanese and Korean glyphs for figures whose labels need one.

matplotlib's default font (DejaVu Sans) has no kanji or kana: Japanese tick labels would come out
as empty boxes.  :func:`font_families` gives the font family list to draw such labels with, DejaVu
Sans first and a CJK font as matplotlib's fallback for the glyphs DejaVu lacks.  The CJK font is
looked up by family name among the fonts matplotlib knows, then among the system's font files
(matplotlib's font cache does not see a font installed after it was built: ``scripts/install.sh``
installs Debian's ``fonts-noto-cjk``).  Without one, a single warning says so and figures are still
drawn (with boxes for the missing glyphs).
"""

from __future__ import annotations

import logging
import re
from functools import lru_cache
from pathlib import Path
from typing import Iterable

log = logging.getLogger(__name__)

#: CJK families, preferred first (Japanese forms before the others)
CJK_FAMILIES = ("Noto Sans CJK JP", "Noto Sans CJK SC", "Noto Serif CJK JP", "Source Han Sans JP", "IPAexGothic",
                "IPAGothic", "TakaoGothic", "VL Gothic", "Droid Sans Fallback", "WenQuanYi Zen Hei",
                "WenQuanYi Micro Hei", "Noto Sans CJK KR", "NanumGothic")
#: file names of system fonts that may hold CJK glyphs (searched when matplotlib knows none of the families)
_CJK_FILE = re.compile(r"CJK|SourceHan|IPA|Takao|VL-?Gothic|DroidSansFallback|wqy|Nanum", re.IGNORECASE)
#: kana, CJK ideographs and punctuation, Hangul, half- and full-width forms
_CJK_CHAR = re.compile("[\u1100-\u11ff\u2e80-\u2fdf\u3000-\u30ff\u3130-\u318f\u31f0-\u9fff\ua960-\ua97f"
                       "\uac00-\ud7ff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef]")
BASE_FAMILY = "DejaVu Sans"


def has_cjk(texts: Iterable[str]) -> bool:
    """Whether any of ``texts`` has a CJK character."""
    return any(_CJK_CHAR.search(t) for t in texts)


@lru_cache(maxsize=1)
def cjk_family() -> str | None:
    """The family name of an installed CJK font (registered with matplotlib), or None (warned once)."""
    from matplotlib import font_manager

    known = {f.name for f in font_manager.fontManager.ttflist}
    for family in CJK_FAMILIES:
        if family in known:
            return family
    found: set[str] = set()
    for path in sorted(font_manager.findSystemFonts()):
        if _CJK_FILE.search(Path(path).name):
            try:
                font_manager.fontManager.addfont(path)
                found.add(font_manager.FontProperties(fname=path).get_name())
            except (OSError, RuntimeError, ValueError):
                continue
    for family in CJK_FAMILIES:
        if family in found:
            return family
    if found:
        return sorted(found)[0]
    log.warning("no font with Japanese/Chinese/Korean glyphs is installed: the attention map's CJK labels will be "
                "empty boxes (install one, e.g. apt-get install fonts-noto-cjk, as scripts/install.sh does)")
    return None


def font_families(texts: Iterable[str]) -> list[str] | None:
    """The font family list to draw ``texts`` with: None (matplotlib's default) unless they have CJK characters,
    else DejaVu Sans with the CJK font as fallback (None, after the one warning, when there is no CJK font)."""
    if not has_cjk(texts):
        return None
    family = cjk_family()
    return [BASE_FAMILY, family] if family else None
