"""What an archive leaves out because it is the corpus, and how restore makes it again.

An archive is meant for git, and a corpus's text does not belong there (its licence travels with the corpus,
and KFTT's prepared text alone is 300 MB).  Three kinds of file copy the corpus; a pack leaves each out and
records how to make it again and its digest, and a restore makes it again and checks the digest:

* **the prepared corpus** of a grid that prepared it itself (``--data kftt``): ``shared/data/SPLIT.KIND.LANG``
  for KIND ``raw``, ``tok`` and ``bpe`` (:func:`corpus_record`).  Restore runs the recorded ``prepare`` step
  again (the corpus from ``../shared/data`` or ``--mirror``) into a scratch folder and takes these files from
  it (:func:`remake_corpus`).  The subword model, vocabulary and ``meta.json`` travel: they are models and
  counts, not text.  ``raw`` and ``bpe`` files must match byte for byte; a ``tok`` file may differ in white
  space only (its *words* digest, every line split on white space), since everything that reads it splits
  its lines (tokenized BLEU, DROP's words, the aligner);
* **a run's joined stress inputs**, ``stress/kK.src.LANG`` and ``stress/kK.ref.LANG``: the test set's lines
  joined K at a time (:func:`scanmt.metrics.stress.join_groups`), made again from the files ``stress.json``
  names;
* **the source tokens of an attention file** (``src_i`` of seed 1's ``SPLIT.attn.npz``, which the report's
  figures read): the split's subword lines, with ``<sink>`` last for a model with a sink.  The archived file
  holds every other array; restore adds them back.  An archive with a figure window (``archive
  --max-figure-words`` ...: :mod:`scanmt.experiments.figure_window`) also leaves out the attention of the
  sentences outside it, which no report draws, and their output tokens and fertilities: the file comes back
  partial (its meta lists the sentences it holds, :data:`scanmt.data.attention_file.ROWS`).

A file is left out only when the pack has made it again from its recorded source and got the same bytes
(the same tokens, for an attention file); anything else travels as it is.  The digests decide at restore:
a corpus file that comes out otherwise (another tokenizer or sentencepiece version) is refused with the
versions the pack recorded.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import zipfile
from importlib import metadata
from pathlib import Path
from typing import Callable

import numpy as np

from scanmt.data.attention_file import ROWS, ROWS_KEPT
from scanmt.data.fertility import file_digest
from scanmt.data.vocab import SINK
from scanmt.errors import DataError
from scanmt.experiments.figure_window import FigureWindow, source_word_counts
from scanmt.experiments.layout import (ATTENTION_SUFFIX, MIRROR_ORIGIN, SPEC, STRESS_DIR, STRESS_JSON, bpe_name,
                                       SharedPaths, raw_name, shared_data, shared_marker)
from scanmt.io import atomic_open

#: a prepared corpus text file directly in ``shared/data``: ``SPLIT.KIND.LANG``
CORPUS_FILE_RE = re.compile(r"[^./]+\.(raw|tok|bpe)\.[A-Za-z][A-Za-z_-]*")
#: a joined stress input of a run, relative to the run folder
STRESS_INPUT_RE = re.compile(rf"{STRESS_DIR}/k([0-9]+)\.(src|ref)\.[A-Za-z][A-Za-z_-]*")
#: an attention file at the top of a run folder
ATTENTION_RE = re.compile(rf"[A-Za-z0-9_-]+{re.escape(ATTENTION_SUFFIX)}")
#: the packages whose versions decide the prepared text, recorded to explain a mismatch at restore
PREPARE_PACKAGES = ("sentencepiece", "sacremoses", "fugashi", "unidic-lite", "sudachipy", "scanmt")
#: where restore prepares the corpus again, inside the shared folder it is restoring (removed after)
PREPARING = ".corpus.preparing"
#: the arrays of a sentence that a partial attention file holds for the sentences it keeps only
_SENTENCE_ARRAYS = ("attn", "hyp", "fert")
#: a zip entry's time in an attention file an archive writes (zip has none before 1980): fixed, for equal bytes
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


def words_digest(path: Path) -> str:
    """SHA-256 of a text file's words: each line split on white space, joined by one space."""
    h = hashlib.sha256()
    with open(path, encoding="utf-8", newline="\n") as fh:
        for line in fh:
            h.update(" ".join(line.split()).encode())
            h.update(b"\n")
    return h.hexdigest()


def _versions() -> dict[str, str]:
    out = {}
    for name in PREPARE_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


# --------------------------------------------------------------------------- the prepared corpus


def corpus_files(data: Path) -> list[str]:
    """The names of the prepared corpus's text files in ``data`` (regular files, not a mirror's links)."""
    if not data.is_dir() or (data / MIRROR_ORIGIN).exists():
        return []
    return sorted(p.name for p in data.iterdir() if CORPUS_FILE_RE.fullmatch(p.name) and p.is_file()
                  and not p.is_symlink())


def corpus_record(shared: Path) -> dict[str, object] | None:
    """The manifest's ``shared.corpus`` entry: the ``prepare`` step's parameters and each corpus text file's
    digests (``sha256``; ``words`` too for a ``tok`` file), with the versions of the preparing packages.  None
    when the data is a mirror of a folder prepared elsewhere (its files stay there, checked by digest), or was
    not prepared by name.

    Raises:
        DataError: the ``prepare`` step's marker cannot be read.
    """
    names = corpus_files(shared_data(shared))
    marker = shared_marker(shared, "prepare")
    if not names or not marker.exists():
        return None
    try:
        params = json.loads(marker.read_text(encoding="utf-8"))["params"]
        if not isinstance(params, dict) or not isinstance(params.get("data"), str):
            raise TypeError("no data parameter")
    except (OSError, json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as exc:
        raise DataError(f"{marker}: not a readable step marker ({exc}), so the corpus could not be prepared again "
                        "on restore") from None
    from scanmt.experiments.shared import CORPORA

    if params["data"] not in CORPORA:
        return None
    files: dict[str, dict[str, str]] = {}
    for name in names:
        path = shared_data(shared) / name
        files[name] = {"sha256": file_digest(path)}
        if name.split(".")[1] == "tok":
            files[name]["words"] = words_digest(path)
    return {"prepare": params, "files": files, "versions": _versions()}


def _same_text(path: Path, digests: dict[str, str]) -> str | None:
    """How ``path`` matches a recorded file's digests: "bytes", "words" (a ``tok`` file whose white space alone
    differs: sacremoses' output varies there between versions), or None (it differs)."""
    if file_digest(path) == digests["sha256"]:
        return "bytes"
    if "words" in digests and words_digest(path) == digests["words"]:
        return "words"
    return None


def corpus_difference(shared: Path, record: dict | None) -> str | None:
    """What makes the corpus text in ``shared/data`` another than the one an archive recorded (None: the same, or
    none recorded): a missing file, or one whose digests differ (prepared again with other settings)."""
    if not record:
        return None
    data = shared_data(shared)
    for name, digests in sorted(record.get("files", {}).items()):
        if not (data / name).is_file():
            return f"the prepared corpus has no {name}, which the archived runs read"
        if _same_text(data / name, digests) is None:
            return f"the prepared corpus's {name} differs from the one the archived runs read (prepared again?)"
    return None


def shared_skip(corpus: dict | None) -> Callable[[Path], bool]:
    """What of ``shared/`` a pack leaves out besides the usual: the corpus files of ``corpus`` (a record)."""
    names = {f"data/{name}" for name in (corpus or {}).get("files", {})}
    return lambda rel: rel.as_posix() in names


def prepare_corpus(params: dict, into: Path, mirror: str | None) -> None:
    """Run ``scanmt prepare`` with the recorded step's parameters into the new folder ``into``."""
    from scanmt import api

    request = api.PrepareRequest(pair=str(params["pair"]), out=str(into), corpus=str(params["data"]),
                                 mirror=mirror if mirror is not None else params.get("mirror"),
                                 vocab_size=params.get("vocab_size"))
    api.prepare(request)


def remake_corpus(shared: Path, record: dict, where: str, *, mirror: str | None = None,
                  say: Callable[[str], None] = print,
                  prepare: Callable[[dict, Path, str | None], None] | None = None) -> str:
    """Prepare the corpus of ``record`` again and put its text files into ``shared/data`` (an unpacked archive's
    shared folder), after checking each against its digest; returns a note for the summary.

    Raises:
        DataError: a file missing from the new preparation, or one that differs from the archived runs'.
    """
    scratch = shared / PREPARING
    shutil.rmtree(scratch, ignore_errors=True)
    params = record["prepare"]
    say(f"preparing the corpus again ({params.get('data')} {params.get('pair')}; its text is not archived)")
    try:
        (prepare or prepare_corpus)(params, scratch, mirror)
        loose = 0
        for name, digests in sorted(record["files"].items()):
            made = scratch / name
            if not made.is_file():
                raise DataError(f"{where}: preparing the corpus again gave no {name}, which the archived runs read")
            same = _same_text(made, digests)
            if same:
                loose += same == "words"
                continue
            versions = ", ".join(f"{k} {v}" for k, v in sorted(record.get("versions", {}).items())) or "not recorded"
            raise DataError(f"{where}: {name}, prepared again, differs from the file the archived runs read (sha256 "
                            f"{digests['sha256'][:12]}…): another corpus version, or other tokenizer or "
                            f"sentencepiece versions (the pack's: {versions}); nothing was restored")
        for name in record["files"]:
            os.replace(scratch / name, shared_data(shared) / name)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    note = f"corpus prepared again, {len(record['files'])} files the same"
    return note + (f" ({loose} tokenized files in their words, not their white space)" if loose else "")


# --------------------------------------------------------------------------- a run's copies of the test set


def _joined_bytes(source: Path, k: int) -> bytes:
    from scanmt.metrics.stress import join_groups

    lines = source.read_text(encoding="utf-8").splitlines()
    return "".join(f"{line}\n" for line in join_groups(lines, k)).encode("utf-8")


def _stress_sources(run: Path) -> dict[str, Path]:
    """``{"src": path, "ref": path}`` of a run's stress test: the absolute paths its ``stress.json`` names (a
    relative one would name another file from another folder at restore)."""
    try:
        doc = json.loads((run / STRESS_DIR / STRESS_JSON).read_text(encoding="utf-8"))
        paths = {"src": Path(doc["src"]), "ref": Path(doc["ref"])}
    except (OSError, json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError):
        return {}
    return {side: path for side, path in paths.items() if path.is_absolute()}


def _attention_source(run: Path, rel: str) -> tuple[Path, Path, str] | None:
    """The subword and raw text files of the split whose attention ``rel`` holds, and the source language, from
    the run's ``spec.json``."""
    try:
        spec = json.loads((run / SPEC).read_text(encoding="utf-8"))
        data, split = spec["config"]["data"], rel[:-len(ATTENTION_SUFFIX)]
        folder, lang = Path(data["dir"]), str(data["src_lang"])
    except (OSError, json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError):
        return None
    return (folder / bpe_name(split, lang), folder / raw_name(split, lang), lang) if folder.is_absolute() else None


def _source_tokens(source: Path, n: int, sink: bool) -> list[list[str]] | None:
    lines = source.read_text(encoding="utf-8").splitlines()
    if len(lines) != n:
        return None
    return [line.split() + ([SINK] if sink else []) for line in lines]


def _write_npz(path: Path, arrays: list[tuple[str, np.ndarray]]) -> None:
    """An ``.npz`` of ``arrays`` in this order, compressed, with fixed entry times (the same arrays, the same
    bytes), written atomically."""
    with atomic_open(path, "wb") as fh, zipfile.ZipFile(fh, "w", zipfile.ZIP_DEFLATED) as zf:
        for key, array in arrays:
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.asanyarray(array), allow_pickle=False)
            zf.writestr(zipfile.ZipInfo(f"{key}{os.extsep}npy", date_time=_ZIP_TIME), buf.getvalue(),
                        compress_type=zipfile.ZIP_DEFLATED)


def _tokens_digest(tokens: list[list[str]]) -> str:
    return hashlib.sha256("\n".join(" ".join(t) for t in tokens).encode("utf-8")).hexdigest()


def _strip_attention(run: Path, rel: str, scratch: Path, roots: list[str], window: FigureWindow | None
                     ) -> tuple[Path, dict] | None:
    """Seed 1's attention file ``rel`` without its source tokens, and with ``window``, without the attention of
    the sentences outside it (:mod:`scanmt.experiments.figure_window`: a partial file), written into ``scratch``,
    and its record; None when the tokens are not the split's subword lines below ``roots`` (then the file travels
    whole)."""
    found = _attention_source(run, rel)
    if found is None or not _below(str(found[0]), roots) or not found[0].is_file():
        return None
    source, raw, lang = found
    try:
        with np.load(run / rel, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            n, sink = int(meta["n"]), meta.get("sink") is True
            expected = _source_tokens(source, n, sink)
            if expected is None or any(z[f"src_{i}"].tolist() != expected[i] for i in range(n)):
                return None
            rows = _rows_kept(meta, expected, raw, lang, window) if window is not None else None
            arrays = [(key, z[key]) for key in z.files
                      if not key.startswith("src_") and (rows is None or not _dropped(key, rows))]
    except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile):
        return None
    record = {"from": str(source), "sink": sink, "sentences": n, "tokens": _tokens_digest(expected)}
    if rows is not None:
        meta.update({ROWS: sorted(rows), ROWS_KEPT: f"kept by an archive for the {window.describe()}"})
        arrays[0] = ("meta", np.array(json.dumps(meta)))
        record.update({"window": window.as_record(), "rows": len(rows)})
    stripped = scratch / rel
    stripped.parent.mkdir(parents=True, exist_ok=True)
    _write_npz(stripped, arrays)
    return stripped, record


def _rows_kept(meta: dict, tokens: list[list[str]], raw: Path, lang: str, window: FigureWindow) -> set[int]:
    """The sentences of an attention file (``meta``, source ``tokens``) whose attention ``window`` keeps: those
    it admits, among those the file holds.

    Raises:
        ValueError: the raw source ``raw`` is missing or has another number of lines (the file travels whole).
    """
    lines = raw.read_text(encoding="utf-8").splitlines()
    if len(lines) != len(tokens):
        raise ValueError(f"{raw}: {len(lines)} lines, not {len(tokens)}")
    held = meta.get(ROWS)
    words = source_word_counts(lines, lang)
    return {i for i, (w, t) in enumerate(zip(words, tokens))
            if window.admits(w, len(t)) and (held is None or i in held)}


def _dropped(key: str, rows: set[int]) -> bool:
    """Whether the array ``key`` belongs to a sentence whose attention ``rows`` leaves out: its attention, output
    tokens or fertility (what a map of it would draw); its source tokens stay, as restore makes them again."""
    kind, _, index = key.partition("_")
    return kind in _SENTENCE_ARRAYS and index.isdigit() and int(index) not in rows


def source_roots(out: str, data: object) -> list[str]:
    """The folders a run's left-out copies may be made from: the experiment ``out``'s ``shared/`` and the
    prepared data folder it mirrors (``data``, the manifest's ``shared.data`` record, or None)."""
    roots = [str(SharedPaths(Path(out)).root)]
    return roots + ([str(data["dir"])] if isinstance(data, dict) and isinstance(data.get("dir"), str) else [])


def _below(source: object, roots: list[str]) -> bool:
    """Whether ``source`` is an absolute, normalized path below one of ``roots``."""
    return (isinstance(source, str) and os.path.isabs(source) and os.path.normpath(source) == source
            and any(source.startswith(root.rstrip("/") + "/") for root in roots))


def strip_run(run: Path, members: list[tuple[str, Path, os.stat_result]], scratch: Path, roots: list[str],
              window: FigureWindow | None = None) -> tuple[list[tuple[str, Path, os.stat_result]], dict[str, dict]]:
    """A run's tarball members with its copies of the test set left out or stripped, and the manifest's
    ``left_out`` record of them (``{member: how to make it again}``).  Files stripped are written into
    ``scratch`` (the caller removes it).  Only a copy made from a file below ``roots`` (:func:`source_roots`) is
    left out: restore makes nothing from elsewhere (:func:`check_left_out`), so any other travels whole.  With
    ``window``, an attention file keeps the attention of the sentences within it only."""
    sources = {side: path for side, path in _stress_sources(run).items() if _below(str(path), roots)}
    kept, left_out = [], {}
    for name, path, st in members:
        m = STRESS_INPUT_RE.fullmatch(name)
        if m and not path.is_symlink() and sources.get(m.group(2), Path("/nonexistent")).is_file():
            source, k = sources[m.group(2)], int(m.group(1))
            digest = file_digest(path)
            if hashlib.sha256(_joined_bytes(source, k)).hexdigest() == digest:
                left_out[name] = {"from": str(source), "k": k, "sha256": digest}
                continue
        if name.endswith(ATTENTION_SUFFIX) and "/" not in name and not path.is_symlink():
            stripped = _strip_attention(run, name, scratch, roots, window)
            if stripped is not None:
                left_out[name] = {"attention_sources": stripped[1]}
                kept.append((name, stripped[0], st))
                continue
        kept.append((name, path, st))
    return kept, left_out


def check_left_out(key: str, left_out: object, roots: list[str], where: str) -> None:
    """Refuse a manifest's ``left_out`` record of run ``key`` unless each name is a joined stress input or a
    top-level attention file, and each source an absolute, normalized path below one of ``roots`` (the archived
    experiment's ``shared/`` and the prepared data it mirrors): a crafted manifest can neither write outside the
    run's folder nor copy another file into it.

    Raises:
        DataError: naming the run and the entry.
    """
    if not isinstance(left_out, dict):
        raise DataError(f"{where}: run {key!r} records its left-out files as {type(left_out).__name__}, not a table "
                        "(a damaged manifest); nothing was restored")
    for name, how in left_out.items():
        how = how if isinstance(how, dict) else {}
        attention = isinstance(how.get("attention_sources"), dict)
        source = (how["attention_sources"] if attention else how).get("from")
        name_ok = (ATTENTION_RE if attention else STRESS_INPUT_RE).fullmatch(str(name)) is not None
        if not (name_ok and _below(source, roots)):
            raise DataError(f"{where}: run {key!r} records the left-out file {name!r} made from {source!r}: not a "
                            "stress input or attention file of the run made from the experiment's own data (a "
                            "damaged or crafted manifest); nothing was restored")


def remake_run(run: Path, left_out: dict[str, dict], where: str) -> None:
    """Make a run's left-out copies of the test set again in the unpacked run folder ``run`` and check them.

    Raises:
        DataError: a source file missing, or a copy that comes out otherwise than the archived run's.
    """
    for name, how in sorted(left_out.items()):
        target = run / name
        if "attention_sources" in how:
            _restore_attention(target, how["attention_sources"], where, name)
            continue
        source = Path(how["from"])
        if not source.is_file():
            raise DataError(f"{where}: {name} is made again from {source}, which is missing; nothing was restored")
        data = _joined_bytes(source, int(how["k"]))
        if hashlib.sha256(data).hexdigest() != how["sha256"]:
            raise DataError(f"{where}: {name}, joined again from {source}, differs from the archived run's "
                            "(the test set changed?); nothing was restored")
        target.parent.mkdir(parents=True, exist_ok=True)
        with atomic_open(target, "wb") as fh:
            fh.write(data)


def _restore_attention(path: Path, how: dict, where: str, name: str) -> None:
    source = Path(how["from"])
    if not source.is_file():
        raise DataError(f"{where}: the source tokens of {name} come from {source}, which is missing; nothing was "
                        "restored")
    tokens = _source_tokens(source, int(how["sentences"]), bool(how["sink"]))
    if tokens is None or _tokens_digest(tokens) != how["tokens"]:
        raise DataError(f"{where}: the source tokens of {name}, read again from {source}, differ from the "
                        "archived run's; nothing was restored")
    if not path.is_file():
        raise DataError(f"{where}: {name} is missing from the run's tarball, though the manifest records its "
                        "stripped copy; nothing was restored")
    st = path.stat()
    try:
        with np.load(path, allow_pickle=False) as z:
            stripped = {key: z[key] for key in z.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise DataError(f"{where}: {name} cannot be read ({type(exc).__name__}: {exc})") from None
    try:
        rows = json.loads(str(stripped["meta"])).get(ROWS)
        held = {i for i in range(len(tokens)) if f"attn_{i}" in stripped}
        if held != (set(range(len(tokens))) if rows is None else set(rows)):
            raise ValueError("it holds the attention of other sentences than its meta lists")
        if any(f"hyp_{i}" not in stripped for i in held):
            raise ValueError("a sentence's output tokens are missing")
    except (ValueError, TypeError, AttributeError, KeyError) as exc:
        raise DataError(f"{where}: {name} is not the attention file the archive recorded ({exc}); nothing was "
                        "restored") from None
    arrays = [("meta", stripped.pop("meta"))]
    for i, src in enumerate(tokens):
        arrays += [(f"attn_{i}", stripped.pop(f"attn_{i}"))] if i in held else []
        arrays += [(f"src_{i}", np.array(src, dtype=str))]
        arrays += [(f"hyp_{i}", stripped.pop(f"hyp_{i}"))] if i in held else []
        if f"fert_{i}" in stripped:
            arrays.append((f"fert_{i}", stripped.pop(f"fert_{i}")))
    arrays += sorted(stripped.items())
    _write_npz(path, arrays)
    os.utime(path, (st.st_atime, st.st_mtime))  # the packed time, so that packing it again gives the same bytes
