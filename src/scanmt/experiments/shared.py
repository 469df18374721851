"""Work shared by every run of a grid, done once under ``OUT/shared/`` and reused.

- ``OUT/shared/data``: the prepared corpus. ``--data multi30k`` prepares it there
  (:func:`scanmt.api.prepare`); ``--data PATH`` mirrors an already prepared directory
  with symbolic links to its files, so that alignments and fertility caches are
  written under ``OUT`` and never into ``PATH``.
- ``OUT/shared/data/align``: :func:`scanmt.api.align` at level ``both`` (subword links
  for guided/predicted fertility, the word-level aligner for DROP).
- ``OUT/shared/predictor``: the fertility predictor (:func:`scanmt.api.fertility` with
  ``train_predictor``), only when a system uses predicted fertility.
- ``OUT/shared/data/fertility``: the fertility caches of train and valid for
  every strategy the systems use, so parallel runs only read them.

Each step writes ``OUT/shared/.done/STEP.json`` (atomically, last) holding its
parameters (for the API steps, the request's command line as ``argv``); a step whose
marker holds the same parameters is skipped, any other is (re)run, and the functions
underneath reuse or resume what they can.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from scanmt import api
from scanmt.api.prepare import parse_pair
from scanmt.errors import ConfigError, DataError, ScanmtError
from scanmt.experiments.fertility_hooks import fertility_options, fertility_step_label, fertility_step_params
from scanmt.experiments.layout import MIRROR_ORIGIN, SharedPaths
from scanmt.io import LOCK_FILE, atomic_open

log = logging.getLogger(__name__)


def _done(paths: SharedPaths, step: str, params: dict) -> bool:
    m = paths.marker(step)
    if not m.exists():
        return False
    try:
        return json.loads(m.read_text(encoding="utf-8")).get("params") == params
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        return False


def _mark(paths: SharedPaths, step: str, params: dict, seconds: float) -> None:
    with atomic_open(paths.marker(step)) as fh:
        json.dump({"params": params, "seconds": round(seconds, 1), "finished": time.strftime("%Y-%m-%d %H:%M:%S")},
                  fh, indent=2)
        fh.write("\n")


def _run(request: api.AlignRequest | api.FertilityRequest, what: str) -> None:
    """Run an align or fertility request; a failure names the step and its command line."""
    run = api.align if isinstance(request, api.AlignRequest) else api.fertility
    try:
        run(request)
    except (ScanmtError, OSError) as exc:
        raise DataError(f"shared step {what} failed: `{request.command_line()}`: {exc}") from None


def _step(paths: SharedPaths, step: str, params: dict, say: Callable[[str], None], work: Callable[[], None]) -> None:
    if _done(paths, step, params):
        say(f"[shared] {step}: done before, reused")
        return
    say(f"[shared] {step}: running")
    t0 = time.time()
    work()
    _mark(paths, step, params, time.time() - t0)
    say(f"[shared] {step}: finished in {time.time() - t0:.0f} s")


# --------------------------------------------------------------------------- data


def mirror_prepared(src: Path, dst: Path) -> None:
    """Make ``dst`` a directory of symbolic links to the files of the prepared directory ``src``."""
    from scanmt.data.prepare import read_meta

    src = src.resolve()
    read_meta(src)  # a clear error if src is not a prepared directory
    dst.mkdir(parents=True, exist_ok=True)
    origin = dst / MIRROR_ORIGIN
    if origin.exists() and origin.read_text(encoding="utf-8").strip() != str(src):
        raise ConfigError(
            f"{dst} mirrors {origin.read_text(encoding='utf-8').strip()}, not {src}: use another --out for other data"
        )
    for f in sorted(src.iterdir()):
        if not f.is_file() or f.name == LOCK_FILE:
            continue  # align/, fertility/ of the source are not used: ours are built under OUT; nor is its lock
        link = dst / f.name
        if link.is_symlink() or link.exists():
            if link.is_symlink() and Path(os.readlink(link)) == f:
                continue
            link.unlink()
        link.symlink_to(f)
    with atomic_open(origin) as fh:
        fh.write(f"{src}\n")


#: the corpora ``--data NAME`` prepares by name, and the pair each prepares without ``--pair``
CORPORA: dict[str, str] = {"multi30k": "de-en", "kftt": "ja-en"}


def corpus_vocab_size(corpus: str) -> int:
    """The joint subword vocabulary ``scanmt prepare --corpus CORPUS`` learns without ``--vocab-size``."""
    from scanmt.api.prepare import DEFAULT_VOCAB_SIZE
    from scanmt.data import kftt

    return kftt.VOCAB_SIZE if corpus == "kftt" else DEFAULT_VOCAB_SIZE


def prepare_data(paths: SharedPaths, data: str, pair: str | None, *, mirror: str | None, vocab_size: int | None,
                 say: Callable[[str], None]) -> tuple[str, str]:
    """Prepare (or mirror) the data into ``paths.data``; returns ``(src_lang, tgt_lang)``.  ``data`` names a corpus
    of :data:`CORPORA` (prepared with ``vocab_size``, or the corpus's own default when None) or a prepared folder."""
    from scanmt.data.prepare import read_meta

    if data in CORPORA:
        src, tgt = parse_pair(pair or CORPORA[data])
        size = corpus_vocab_size(data) if vocab_size is None else vocab_size
        params = {"data": data, "pair": f"{src}-{tgt}", "vocab_size": size, "mirror": mirror}
        request = api.PrepareRequest(pair=f"{src}-{tgt}", out=str(paths.data), corpus=data, mirror=mirror,
                                     vocab_size=size)
        _step(paths, "prepare", params, say, lambda: api.prepare(request))
        return src, tgt
    source = Path(data)
    if not source.is_dir():
        raise ConfigError(f"--data {data}: neither a corpus name ({', '.join(CORPORA)}) nor a prepared data directory")
    meta = read_meta(source)
    src, tgt = meta["src_lang"], meta["tgt_lang"]
    if pair and parse_pair(pair) != (src, tgt):
        raise ConfigError(f"--pair {pair}: {data} was prepared for {src}-{tgt}")
    # the splits too: a preparation that gained one (test2017) since it was mirrored is mirrored again
    params = {"data": str(source.resolve()), "pair": f"{src}-{tgt}", "splits": list(meta.get("splits") or [])}
    _step(paths, "prepare", params, say, lambda: mirror_prepared(source, paths.data))
    read_meta(paths.data)
    return src, tgt


# --------------------------------------------------------------------------- alignment, predictor, fertility


@contextmanager
def _openmp_threads(n: int) -> Iterator[None]:
    """``OMP_NUM_THREADS=n`` for the child processes started inside (then the old value, or none, again)."""
    old = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = str(n)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = old


def align(paths: SharedPaths, settings: dict[str, Any], say: Callable[[str], None], cpus: int = 1) -> None:
    """:func:`scanmt.api.align` of ``OUT/shared/data`` at level ``both`` (its own manifest reuses what it can).

    ``settings``: eflomal settings, :class:`~scanmt.api.AlignRequest` fields (a grid's ``align:``).
    ``cpus``: the CPUs the step may use. The shared steps run alone, before the runs, so eflomal's samplers
    (OpenMP threads) get up to one CPU each, whatever ``OMP_NUM_THREADS`` a queue exported for its training
    runs (at 1, the two alignments of KFTT took 1,203 s on two cores, one of them idle). The thread count is
    not a parameter of the step: an alignment done before is reused.
    """
    request = api.AlignRequest(data=paths.data, level="both", **settings)

    def work() -> None:
        with _openmp_threads(max(1, min(cpus, request.samplers))):
            _run(request, "align")

    _step(paths, "align", {"argv": request.to_argv()}, say, work)
    from scanmt.data.align import MODEL_FILE

    if not (paths.word_aligner / MODEL_FILE).exists():
        raise DataError(f"{paths.word_aligner}: `scanmt align` left no word-level aligner ({MODEL_FILE})")


def train_predictor(paths: SharedPaths, overrides: Sequence[str], say: Callable[[str], None]) -> Path:
    """Train (or resume, or reuse) the fertility predictor; returns its ``best.pt``."""
    request = api.FertilityRequest(data=paths.data, train_predictor=paths.predictor_dir, set=tuple(overrides))

    def work() -> None:
        resume = paths.predictor_last.exists()
        _run(dataclasses.replace(request, resume=resume), "fertility predictor")

    _step(paths, "predictor", {"argv": request.to_argv()}, say, work)
    if not paths.predictor.exists():
        raise DataError(f"{paths.predictor}: the fertility predictor was not written")
    return paths.predictor


def fertility_request(paths: SharedPaths, fert: dict[str, Any]) -> api.FertilityRequest | None:
    """The fertility request caching train/valid fertilities for one fertility config (None: nothing to cache)."""
    options = fertility_options(fert)
    if options is None:
        return None
    return api.FertilityRequest(data=paths.data, strategy=fert["strategy"], splits=("train", "valid"),
                                align_dir=fert.get("align_dir") or None, **options)


def cache_fertility(paths: SharedPaths, ferts: Sequence[dict[str, Any]], say: Callable[[str], None]) -> None:
    """Compute the fertility caches of every distinct fertility config once, before the runs start."""
    seen: list[api.FertilityRequest] = []
    for fert in ferts:
        request = fertility_request(paths, fert)
        if request is None or request in seen:
            continue
        seen.append(request)
        label = fertility_step_label(fert)
        params = fertility_step_params(fert, request.to_argv())
        _step(paths, label, params, say, lambda request=request: _run(request, "fertility cache"))
