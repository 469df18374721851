"""Word alignment with eflomal, symmetrized, with a saved model for new sentence pairs.

Typical use::

    aligner = Aligner()                                   # default settings
    train_links = aligner.fit(src_sents, tgt_sents)       # align the training corpus
    aligner.save("DIR/align/subword")                     # priors + settings
    ...
    aligner = Aligner.load("DIR/align/subword")
    links = aligner.align(new_src, new_tgt)               # list[set[(i, j)]]

How it works.  :meth:`Aligner.fit` runs eflomal (Östling & Tiedemann 2016; a
Bayesian HMM with fertility, sampled with Gibbs sampling, C core) on the
corpus in both directions and symmetrizes the two directional alignments
(grow-diag-final-and by default, :mod:`scanmt.data.symmetrize`).  From the
directional training alignments it computes eflomal's Dirichlet *priors*
(lexical pair counts, HMM jump counts and fertility counts, exactly what
``eflomal-makepriors`` writes).  :meth:`Aligner.align` aligns new pairs by
running eflomal on them alone with those priors, which is how eflomal is meant
to align small sets with a model learned on a large one: the result is close to
what aligning the new pairs together with the training corpus would give.

Corpora are given as a path to a tokenized text file (one sentence per line,
tokens separated by spaces), a list of lines, or a list of token lists.  Links
are 0-based ``(source index, target index)`` over those tokens.

Caveats:

- **Not deterministic.** The eflomal binary seeds its random generator from
  ``/dev/urandom`` and offers no seed option, so two runs on the same data give
  slightly different alignments (typically a fraction of a percent of the
  links).  Everything around it (priors, symmetrization, files) is
  deterministic.  The ``seed`` setting is therefore not offered; save an
  aligner and its output once and reuse them (``scanmt align`` does).
- eflomal lowercases all tokens internally, so alignment is case-insensitive.
- eflomal runs ``n_samplers`` sampler threads (OpenMP).
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import json
import logging
import math
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence, Union

from scanmt.data.subword import word_index
from scanmt.data.symmetrize import METHODS, get_method
from scanmt.errors import ConfigError, DataError
from scanmt.io import atomic_open, read_json, read_lines, temp_dir
from scanmt.processes import dies_with_me
from scanmt.data.links import format_links, read_links

log = logging.getLogger(__name__)

Link = tuple[int, int]
LinkSet = set[Link]
#: A corpus: a tokenized text file, a list of lines, or a list of token lists.
Corpus = Union[str, Path, Sequence[str], Sequence[Sequence[str]]]

MODEL_FILE = "aligner.json"
PRIORS_FILE = "priors.gz"
FORMAT = "scanmt-aligner"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class AlignerSettings:
    """eflomal and symmetrization settings (saved with the model).

    Attributes:
        symmetrization: one of :data:`scanmt.data.symmetrize.METHODS`.
        model: eflomal model: 1 = IBM1, 2 = +HMM, 3 = +HMM+fertility.
        n_samplers: independent Gibbs samplers (threads) whose marginals are averaged.
        rel_iterations: number of iterations relative to eflomal's default
            (which depends on the corpus size).
        null_prior: eflomal's prior probability of a NULL alignment.
    """

    symmetrization: str = "grow-diag-final-and"
    model: int = 3
    n_samplers: int = 3
    rel_iterations: float = 1.0
    null_prior: float = 0.2

    def __post_init__(self) -> None:
        if self.symmetrization not in METHODS:
            raise ConfigError(
                f"unknown symmetrization {self.symmetrization!r}; choose one of: {', '.join(METHODS)}"
            )
        if self.model not in (1, 2, 3):
            raise ConfigError(f"eflomal model must be 1, 2 or 3, got {self.model!r}")
        if not isinstance(self.n_samplers, int) or self.n_samplers < 1:
            raise ConfigError(f"n_samplers must be a positive integer, got {self.n_samplers!r}")
        if not self.rel_iterations > 0:
            raise ConfigError(f"rel_iterations must be > 0, got {self.rel_iterations!r}")
        if not 0 < self.null_prior < 1:
            raise ConfigError(f"null_prior must be in (0, 1), got {self.null_prior!r}")

    @classmethod
    def from_dict(cls, d: dict, *, where: str = "aligner settings") -> "AlignerSettings":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return cls(**d)


# --------------------------------------------------------------------------- corpora


def as_token_lists(corpus: Corpus, *, what: str = "corpus") -> list[list[str]]:
    """Normalize a corpus to a list of token lists.

    A ``str`` or :class:`~pathlib.Path` is a file (read with
    :func:`scanmt.io.read_lines`, so bad files give file:line errors; empty
    lines are allowed and mean an empty sentence).  Otherwise each element is
    either a line (a ``str``, split on whitespace) or a sequence of tokens.

    Raises:
        DataError: a token that is empty or contains whitespace (it would shift
            every later index), naming the sentence (1-based).
    """
    if isinstance(corpus, (str, Path)):
        return [ln.split() for ln in read_lines(corpus, allow_empty=True, what=what)]
    out: list[list[str]] = []
    for n, sent in enumerate(corpus):
        if isinstance(sent, str):
            out.append(sent.split())
            continue
        toks = list(sent)
        for tok in toks:
            if not isinstance(tok, str) or not tok or tok != "".join(tok.split()):
                raise DataError(f"{what}, sentence {n + 1}: bad token {tok!r} (tokens must be non-empty, without spaces)")
        out.append(toks)
    return out


def _check_pair(src: list[list[str]], tgt: list[list[str]]) -> None:
    if len(src) != len(tgt):
        raise DataError(
            f"source has {len(src)} sentences but target has {len(tgt)}: parallel corpora must match line by line"
        )


def _lines(sents: list[list[str]]) -> list[str]:
    return [" ".join(s) + "\n" for s in sents]


def corpus_digest(*corpora: list[list[str]]) -> str:
    """SHA-256 (hex) of tokenized corpora; used to recognize reusable models and outputs."""
    h = hashlib.sha256()
    for sents in corpora:
        for s in sents:
            h.update(" ".join(s).encode("utf-8"))
            h.update(b"\n")
        h.update(b"\x00")
    return h.hexdigest()


# --------------------------------------------------------------------------- eflomal


def _eflomal_version() -> str:
    try:
        from importlib.metadata import version

        return version("eflomal")
    except Exception:  # pragma: no cover - metadata missing
        return "unknown"


#: the temporary folder of one eflomal run: SYSTEM_TMP/scanmt-eflomal.PID.RANDOM (removed by the next run
#: when a ``kill -9`` left it behind)
TEMP_PREFIX = "scanmt-eflomal."


def _eflomal_program() -> str:
    """The eflomal program that the eflomal package installs (``eflomal/bin/eflomal``), else the one on PATH."""
    import eflomal

    bundled = Path(eflomal.__file__).parent / "bin" / "eflomal"
    found = str(bundled) if bundled.is_file() else shutil.which("eflomal")
    if found is None:
        raise DataError(f"the eflomal program was not found ({bundled} is missing and PATH has none); "
                        "reinstall the eflomal package")
    return found


def _eflomal_command(settings: AlignerSettings, n_sentences: int, files: dict[str, Path], priors: bool,
                     quiet: bool) -> list[str]:
    """The eflomal program's command line, as ``eflomal.Aligner.align`` makes it: iterations per model stage
    from ``rel_iterations`` and the corpus size by eflomal's own rule."""
    iters = max(2, round(settings.rel_iterations * 5000 / math.sqrt(n_sentences)))
    quarter = max(1, iters // 4)
    stages = {1: (iters,), 2: (max(2, quarter), iters), 3: (max(2, quarter), quarter, iters)}[settings.model]
    cmd = [_eflomal_program(), "-m", str(settings.model), "-s", str(files["src"]), "-t", str(files["tgt"]),
           "-n", str(settings.n_samplers), "-N", str(settings.null_prior),
           "-f", str(files["fwd"]), "-r", str(files["rev"])]
    for stage, n in enumerate(stages, 1):
        cmd += [f"-{stage}", str(n)]
    return cmd + (["-p", str(files["priors"])] if priors else []) + (["-q"] if quiet else [])


def _write_inputs(aligner, src: list[list[str]], tgt: list[list[str]], priors_text: str | None,
                  files: dict[str, Path]) -> None:
    """eflomal's input files (its numbered texts and priors) for the pair, written by the eflomal package."""
    with open(files["src"], "wb") as s_out, open(files["tgt"], "wb") as t_out, \
            open(files["priors"], "w", encoding="utf-8") as p_out:
        priors_in = None if priors_text is None else io.StringIO(priors_text)
        aligner.prepare_files(_lines(src), s_out, _lines(tgt), t_out, priors_in, p_out)


def _run_eflomal(
    src: list[list[str]], tgt: list[list[str]], settings: AlignerSettings, priors_text: str | None
) -> tuple[list[LinkSet], list[LinkSet]]:
    """Run eflomal on the pair; return ``(fwd, rev)`` 0-based link sets per sentence.

    The eflomal program runs as a child that gets SIGTERM when this process dies (``kill -9`` included),
    on files in a temporary folder (:data:`TEMP_PREFIX`) that is removed at the end, after Ctrl-C or
    SIGTERM too; one that a ``kill -9`` left is removed by the next run.
    """
    import eflomal  # the C extension: imported lazily so importing this module stays cheap

    _check_pair(src, tgt)
    if not src:
        return [], []
    quiet = not log.isEnabledFor(logging.DEBUG)
    eflomal_log = logging.getLogger("eflomal")  # its per-call INFO lines ("Prepared N sentences", ...)
    eflomal_level = eflomal_log.level
    aligner = eflomal.Aligner(model=settings.model, n_samplers=settings.n_samplers,
                              rel_iterations=settings.rel_iterations, null_prior=settings.null_prior)
    with temp_dir(TEMP_PREFIX, "alignment (eflomal)") as tmp:
        files = {name: tmp / name for name in ("src", "tgt", "priors", "fwd", "rev")}
        try:
            if quiet:
                eflomal_log.setLevel(logging.WARNING)
            _write_inputs(aligner, src, tgt, priors_text, files)
        finally:
            eflomal_log.setLevel(eflomal_level)
        cmd = _eflomal_command(settings, len(src), files, priors_text is not None, quiet)
        done = subprocess.run(cmd, preexec_fn=dies_with_me(), stdin=subprocess.DEVNULL, check=False)
        if done.returncode != 0:
            raise DataError(f"eflomal failed (exit status {done.returncode}): {' '.join(cmd)}")
        src_lens = [len(s) for s in src]
        tgt_lens = [len(t) for t in tgt]
        # read_links checks the line count and that every link lies inside its sentence
        fwd = [sure for sure, _ in read_links(files["fwd"], src_lens=src_lens, tgt_lens=tgt_lens)]
        rev = [sure for sure, _ in read_links(files["rev"], src_lens=src_lens, tgt_lens=tgt_lens)]
    return fwd, rev


def compute_priors(
    src: list[list[str]], tgt: list[list[str]], fwd: list[LinkSet], rev: list[LinkSet]
) -> str:
    """eflomal's prior file (text, ``LEX``/``FERF``/``FERR``/``HMMF``/``HMMR`` lines) from directional links."""
    from eflomal import calculate_priors, write_priors

    priors = calculate_priors(
        [" ".join(s) for s in src],
        [" ".join(t) for t in tgt],
        [format_links(f) for f in fwd],
        [format_links(r) for r in rev],
    )
    buf = io.StringIO()
    write_priors(buf, *priors)
    return buf.getvalue()


# --------------------------------------------------------------------------- the aligner


class Aligner:
    """An eflomal aligner: learns priors on a corpus, aligns new pairs with them.

    Attributes:
        settings: :class:`AlignerSettings`.
        info: free-form JSON-able metadata saved with the model (languages, level, ...).
        n_train: number of training sentence pairs (0 before :meth:`fit`).
        train_digest: :func:`corpus_digest` of the training corpus ("" before :meth:`fit`).
    """

    def __init__(self, settings: AlignerSettings | None = None, *, info: dict | None = None):
        self.settings = settings or AlignerSettings()
        self.info: dict = dict(info or {})
        self.n_train = 0
        self.train_digest = ""
        self._priors: str | None = None

    @property
    def trained(self) -> bool:
        return self._priors is not None

    @property
    def model_id(self) -> str:
        """SHA-256 (hex, 16 digits) of the learned priors: identifies one trained model ("" if untrained)."""
        if self._priors is None:
            return ""
        return hashlib.sha256(self._priors.encode("utf-8")).hexdigest()[:16]

    def symmetrize(self, fwd: list[LinkSet], rev: list[LinkSet]) -> list[LinkSet]:
        sym = get_method(self.settings.symmetrization)
        return [sym(f, r) for f, r in zip(fwd, rev)]

    # ---- training
    def fit_directional(self, src: Corpus, tgt: Corpus) -> tuple[list[LinkSet], list[LinkSet]]:
        """Align the training corpus, learn the priors; return the directional links."""
        s = as_token_lists(src, what="source corpus")
        t = as_token_lists(tgt, what="target corpus")
        _check_pair(s, t)
        if not s:
            raise DataError("cannot train an aligner on an empty corpus")
        n_tok = sum(map(len, s)) + sum(map(len, t))
        log.info(
            "eflomal: aligning %d training sentence pairs (%d tokens; model %d, %d samplers)...",
            len(s), n_tok, self.settings.model, self.settings.n_samplers,
        )
        t0 = time.perf_counter()
        fwd, rev = _run_eflomal(s, t, self.settings, None)
        log.info("eflomal: done in %.1f s; computing priors", time.perf_counter() - t0)
        self._priors = compute_priors(s, t, fwd, rev)
        self.n_train = len(s)
        self.train_digest = corpus_digest(s, t)
        return fwd, rev

    def fit(self, src: Corpus, tgt: Corpus) -> list[LinkSet]:
        """Train on ``src``/``tgt``; return the symmetrized training alignments."""
        fwd, rev = self.fit_directional(src, tgt)
        return self.symmetrize(fwd, rev)

    # ---- aligning new pairs
    def align_directional(self, src: Corpus, tgt: Corpus) -> tuple[list[LinkSet], list[LinkSet]]:
        """Directional ``(fwd, rev)`` links for new pairs, using the learned priors."""
        if self._priors is None:
            raise DataError("this aligner has not been trained: call fit() or Aligner.load() first")
        s = as_token_lists(src, what="source")
        t = as_token_lists(tgt, what="target")
        _check_pair(s, t)
        # seconds per call, and DROP may make several calls: a debug line, not an info line
        log.debug("eflomal: aligning %d new sentence pairs with the learned priors...", len(s))
        t0 = time.perf_counter()
        out = _run_eflomal(s, t, self.settings, self._priors)
        log.debug("eflomal: done in %.1f s", time.perf_counter() - t0)
        return out

    def align(self, src: Corpus, tgt: Corpus) -> list[LinkSet]:
        """Symmetrized links for new sentence pairs (one set of 0-based ``(i, j)`` per pair)."""
        return self.symmetrize(*self.align_directional(src, tgt))

    # ---- persistence
    def save(self, directory: str | Path) -> Path:
        """Write ``priors.gz`` and ``aligner.json`` (last, so its presence marks a complete model)."""
        if self._priors is None:
            raise DataError("cannot save an aligner that has not been trained")
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        with atomic_open(directory / PRIORS_FILE, "wb") as fh:
            fh.write(gzip.compress(self._priors.encode("utf-8"), mtime=0))
        meta = {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "settings": dataclasses.asdict(self.settings),
            "n_train": self.n_train,
            "train_digest": self.train_digest,
            "eflomal_version": _eflomal_version(),
            "info": self.info,
        }
        with atomic_open(directory / MODEL_FILE) as fh:
            json.dump(meta, fh, indent=2, sort_keys=True)
            fh.write("\n")
        return directory

    @staticmethod
    def read_meta(directory: str | Path) -> dict:
        """The parsed ``aligner.json`` of a saved model (checked)."""
        path = Path(directory) / MODEL_FILE
        meta = read_json(
            path, missing=f"{directory}: not a saved aligner (no {MODEL_FILE}); run `scanmt align --data ...` first"
        )
        if meta.get("format") != FORMAT:
            raise DataError(f"{path}: not a scanmt aligner file")
        if meta.get("version") != FORMAT_VERSION:
            raise DataError(f"{path}: aligner format version {meta.get('version')!r}, this scanmt reads {FORMAT_VERSION}")
        return meta

    @classmethod
    def load(cls, directory: str | Path) -> "Aligner":
        directory = Path(directory)
        meta = cls.read_meta(directory)
        settings = AlignerSettings.from_dict(meta.get("settings", {}), where=str(directory / MODEL_FILE))
        priors_path = directory / PRIORS_FILE
        if not priors_path.exists():
            raise DataError(f"{priors_path}: missing (the aligner in {directory} is incomplete)")
        try:
            priors = gzip.decompress(priors_path.read_bytes()).decode("utf-8")
        except (OSError, EOFError, UnicodeDecodeError) as exc:
            raise DataError(f"{priors_path}: unreadable priors ({exc})") from None
        self = cls(settings, info=meta.get("info") or {})
        self._priors = priors
        self.n_train = int(meta.get("n_train", 0))
        self.train_digest = str(meta.get("train_digest", ""))
        return self


# --------------------------------------------------------------------------- helpers


def project_to_words(links: LinkSet, src_pieces: Sequence[str], tgt_pieces: Sequence[str]) -> LinkSet:
    """Map subword links to word links: words are linked if any of their pieces are.

    Pieces carry sentencepiece's ``▁`` word-start marker
    (:func:`scanmt.data.subword.word_index`).
    """
    si, ti = word_index(src_pieces), word_index(tgt_pieces)
    out: LinkSet = set()
    for i, j in links:
        if not (0 <= i < len(si) and 0 <= j < len(ti)):
            raise DataError(
                f"link {i}-{j} outside a pair of {len(si)} source x {len(ti)} target pieces"
            )
        out.add((si[i], ti[j]))
    return out


def write_links(path: str | Path, links: Sequence[LinkSet]) -> None:
    """Write one Pharaoh line (0-based ``i-j``, sorted) per sentence pair, atomically."""
    with atomic_open(path) as fh:
        for ls in links:
            fh.write(format_links(ls) + "\n")


def link_stats(links: Sequence[LinkSet], src_lens: Sequence[int], tgt_lens: Sequence[int]) -> dict:
    """Summary numbers: pairs, links per source token, shares of unaligned source/target tokens."""
    n_links = sum(len(x) for x in links)
    n_src, n_tgt = sum(src_lens), sum(tgt_lens)
    src_un = sum(n - len({i for i, _ in ls}) for ls, n in zip(links, src_lens))
    tgt_un = sum(n - len({j for _, j in ls}) for ls, n in zip(links, tgt_lens))
    return {
        "pairs": len(links),
        "links": n_links,
        "links_per_src_token": n_links / n_src if n_src else 0.0,
        "src_unaligned": src_un / n_src if n_src else 0.0,
        "tgt_unaligned": tgt_un / n_tgt if n_tgt else 0.0,
    }
