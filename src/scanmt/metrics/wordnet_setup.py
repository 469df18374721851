"""Make Debian's WordNet (package ``wordnet-base``) usable by nltk, for METEOR synonyms.

nltk's ``WordNetCorpusReader`` needs ``corpora/wordnet/`` inside one of its
data directories (``nltk.data.path``).  It refuses files reached through
symlinks leaving that directory and files with several hard links, and it
reads two files Debian's package does not ship: ``lexnames`` and (nltk 3.9+,
on load) ``index.sense``.  This module builds such a directory:

- copies the dictionary files from ``/usr/share/wordnet``;
- writes ``lexnames``: WordNet 3.0's 45 lexicographer files, numbered 0–44,
  with their syntactic category;
- generates ``index.sense`` (sense key → synset offset) from the data and
  index files, following WordNet's senseidx(5WN) format.

Run ``python -m scanmt.metrics.wordnet_setup`` after ``apt-get install -y wordnet-base``.
The default target is ``$VIRTUAL_ENV/nltk_data`` (else ``sys.prefix/nltk_data``),
which nltk searches automatically.  It is idempotent and never fails an
install: when the Debian files are missing or the target is not writable it
prints a warning and exits 0, and METEOR then reports that it ran without
synonyms.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from scanmt.io import atomic_open

DEBIAN_WORDNET_DIR = Path("/usr/share/wordnet")

# the dictionary files WordNetCorpusReader opens (lexnames and index.sense are generated)
REQUIRED_FILES: tuple[str, ...] = (
    "data.adj",
    "data.adv",
    "data.noun",
    "data.verb",
    "index.adj",
    "index.adv",
    "index.noun",
    "index.verb",
    "adj.exc",
    "adv.exc",
    "noun.exc",
    "verb.exc",
)
OPTIONAL_FILES: tuple[str, ...] = ("cntlist.rev",)
_POS_FILES: tuple[str, ...] = ("noun", "verb", "adj", "adv")
_SS_TYPE_NUM = {"n": 1, "v": 2, "a": 3, "r": 4, "s": 5}

# syntactic categories of lexicographer files: 1 noun, 2 verb, 3 adjective, 4 adverb
_NOUN, _VERB, _ADJ, _ADV = 1, 2, 3, 4
LEXNAMES: tuple[tuple[str, int], ...] = (
    ("adj.all", _ADJ),
    ("adj.pert", _ADJ),
    ("adv.all", _ADV),
    ("noun.Tops", _NOUN),
    ("noun.act", _NOUN),
    ("noun.animal", _NOUN),
    ("noun.artifact", _NOUN),
    ("noun.attribute", _NOUN),
    ("noun.body", _NOUN),
    ("noun.cognition", _NOUN),
    ("noun.communication", _NOUN),
    ("noun.event", _NOUN),
    ("noun.feeling", _NOUN),
    ("noun.food", _NOUN),
    ("noun.group", _NOUN),
    ("noun.location", _NOUN),
    ("noun.motive", _NOUN),
    ("noun.object", _NOUN),
    ("noun.person", _NOUN),
    ("noun.phenomenon", _NOUN),
    ("noun.plant", _NOUN),
    ("noun.possession", _NOUN),
    ("noun.process", _NOUN),
    ("noun.quantity", _NOUN),
    ("noun.relation", _NOUN),
    ("noun.shape", _NOUN),
    ("noun.state", _NOUN),
    ("noun.substance", _NOUN),
    ("noun.time", _NOUN),
    ("verb.body", _VERB),
    ("verb.change", _VERB),
    ("verb.cognition", _VERB),
    ("verb.communication", _VERB),
    ("verb.competition", _VERB),
    ("verb.consumption", _VERB),
    ("verb.contact", _VERB),
    ("verb.creation", _VERB),
    ("verb.emotion", _VERB),
    ("verb.motion", _VERB),
    ("verb.perception", _VERB),
    ("verb.possession", _VERB),
    ("verb.social", _VERB),
    ("verb.stative", _VERB),
    ("verb.weather", _VERB),
    ("adj.ppl", _ADJ),
)


def _strip_marker(word: str) -> str:
    """``galore(ip)`` -> ``galore``: drop an adjective's syntactic marker."""
    return word[: word.index("(")] if word.endswith(")") and "(" in word else word


def sense_index_lines(source: Path) -> list[str]:
    """Lines of WordNet's ``index.sense`` (``sense_key offset sense_number tag_cnt``), sorted.

    Debian's package lacks this file but nltk (3.9+) reads it when it loads
    WordNet.  It is derived from ``data.*`` (sense keys, see wndb(5WN) and
    senseidx(5WN): ``lemma%ss_type:lex_filenum:lex_id:head_word:head_id``, the
    head only for adjective satellites), ``index.*`` (sense numbers) and
    ``cntlist.rev`` (tag counts, 0 when absent).
    """
    # offset -> (lex_filenum, ss_type, [(lemma, lex_id)], head offset of a satellite or None)
    synsets: dict[str, dict[str, tuple[int, str, list[tuple[str, int]], str | None]]] = {}
    for pos in _POS_FILES:
        table = synsets.setdefault(pos, {})
        with open(source / f"data.{pos}", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("  "):
                    continue  # licence header
                f = line.split(" | ", 1)[0].split()
                offset, lex_filenum, ss_type, w_cnt = f[0], int(f[1]), f[2], int(f[3], 16)
                words = [(_strip_marker(f[4 + 2 * k]).lower(), int(f[5 + 2 * k], 16)) for k in range(w_cnt)]
                k = 4 + 2 * w_cnt
                p_cnt = int(f[k])
                head = None
                if ss_type == "s":
                    for p in range(p_cnt):
                        sym, ptr_off = f[k + 1 + 4 * p], f[k + 2 + 4 * p]
                        if sym == "&":
                            head = ptr_off
                            break
                table[offset] = (lex_filenum, ss_type, words, head)
    # sense numbers: position of the synset in the lemma's line of index.<pos>
    sense_no: dict[tuple[str, str, str], int] = {}
    for pos in _POS_FILES:
        with open(source / f"index.{pos}", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("  "):
                    continue
                f = line.split()
                lemma, synset_cnt = f[0], int(f[2])
                for n, off in enumerate(f[len(f) - synset_cnt :], start=1):
                    sense_no[(pos, lemma, off)] = n
    tag_cnt: dict[str, str] = {}
    cntlist = source / "cntlist.rev"
    if cntlist.is_file():
        with open(cntlist, encoding="utf-8") as fh:
            for line in fh:
                f = line.split()
                if len(f) == 3:
                    tag_cnt[f[0]] = f[2]
    lines: list[tuple[str, str]] = []
    for pos, table in synsets.items():
        for offset, (lex_filenum, ss_type, words, head) in table.items():
            head_word, head_id = "", ""
            if ss_type == "s" and head is not None and head in table:
                hw, hid = table[head][2][0]
                head_word, head_id = hw, f"{hid:02d}"
            for lemma, lex_id in words:
                key = f"{lemma}%{_SS_TYPE_NUM[ss_type]}:{lex_filenum:02d}:{lex_id:02d}:{head_word}:{head_id}"
                n = sense_no.get((pos, lemma, offset), 0)
                lines.append((key, f"{key} {offset} {n} {tag_cnt.get(key, '0')}\n"))
    lines.sort()
    return [ln for _, ln in lines]


def default_nltk_data_dir() -> Path:
    """``$VIRTUAL_ENV/nltk_data`` if set, else ``sys.prefix/nltk_data`` (both on nltk's search path)."""
    venv = os.environ.get("VIRTUAL_ENV")
    return Path(venv if venv else sys.prefix) / "nltk_data"


def lexnames_text() -> str:
    """The ``lexnames`` file: ``NN<TAB>name<TAB>category`` for the 45 lexicographer files."""
    return "".join(f"{i:02d}\t{name}\t{cat}\n" for i, (name, cat) in enumerate(LEXNAMES))


def _copy(src: Path, dst: Path) -> str:
    """Copy ``src`` to ``dst`` unless an identical plain copy is there; return what was done.

    A real copy is needed: nltk refuses symlinks leaving its data directory and
    any file with more than one hard link.
    """
    if dst.is_file() and not dst.is_symlink():
        st, sd = src.stat(), dst.stat()
        if sd.st_nlink == 1 and sd.st_size == st.st_size and int(sd.st_mtime) == int(st.st_mtime):
            return "kept"
    with open(src, "rb") as fin, atomic_open(dst, "wb") as fout:
        shutil.copyfileobj(fin, fout)
    st = src.stat()
    os.utime(dst, (st.st_atime, st.st_mtime))  # same mtime: recognized as up to date next time
    return "copied"


def setup_wordnet(source: Path = DEBIAN_WORDNET_DIR, target: Path | None = None) -> Path | None:
    """Build ``{target}/corpora/wordnet`` from the Debian files in ``source``.

    Returns the corpus directory, or ``None`` (after printing a warning) when
    ``source`` lacks the WordNet files.  Safe to run repeatedly (files already
    copied, with the same size and modification time, are kept).
    """
    target = Path(target) if target is not None else default_nltk_data_dir()
    missing = [f for f in REQUIRED_FILES if not (source / f).is_file()]
    if missing:
        print(
            f"warning: WordNet not found in {source} (missing {', '.join(missing)}); "
            "install the Debian package 'wordnet-base' for METEOR synonyms. "
            "METEOR will run without synonyms.",
            file=sys.stderr,
        )
        return None
    corpus = target / "corpora" / "wordnet"
    corpus.mkdir(parents=True, exist_ok=True)
    done: dict[str, list[str]] = {}
    for name in REQUIRED_FILES + OPTIONAL_FILES:
        if (source / name).is_file():
            done.setdefault(_copy(source / name, corpus / name), []).append(name)
    lex = corpus / "lexnames"
    text = lexnames_text()
    if not lex.is_file() or lex.read_text(encoding="utf-8") != text:
        with atomic_open(lex) as fh:
            fh.write(text)
        done.setdefault("wrote", []).append("lexnames")
    else:
        done.setdefault("kept", []).append("lexnames")
    sense = corpus / "index.sense"
    if not sense.is_file() or sense.stat().st_mtime < (source / "data.noun").stat().st_mtime:
        with atomic_open(sense) as fh:
            fh.writelines(sense_index_lines(source))
        done.setdefault("wrote", []).append("index.sense")
    else:
        done.setdefault("kept", []).append("index.sense")
    for how, names in done.items():
        print(f"wordnet_setup: {how} {len(names)} file(s) in {corpus}: {' '.join(names)}")
    return corpus


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scanmt.metrics.wordnet_setup",
        description="Create an nltk WordNet corpus from Debian's wordnet-base files (for METEOR synonyms).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--source", type=Path, default=DEBIAN_WORDNET_DIR, help="directory with WordNet's dict files")
    parser.add_argument(
        "--target",
        type=Path,
        default=default_nltk_data_dir(),
        help="nltk data directory to create corpora/wordnet in (must be on nltk.data.path, or set NLTK_DATA)",
    )
    args = parser.parse_args(argv)
    try:
        setup_wordnet(args.source, args.target)
    except OSError as exc:
        print(f"warning: could not set up WordNet in {args.target} ({exc}); METEOR will run without synonyms.",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
