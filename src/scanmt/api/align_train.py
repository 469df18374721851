"""``align`` in train mode: aligners learned (or reused) per level, links written for every split.

``ALIGN_DIR/manifest.json`` records, per links file, digests of its text and of
the aligner; a links file whose digests match is reused.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from scanmt.api.align import AlignRequest, read_pair
from scanmt.data.align import MODEL_FILE, Aligner, AlignerSettings, corpus_digest, link_stats, write_links
from scanmt.data.prepare import read_meta
from scanmt.io import atomic_open, check_output_dir
from scanmt.metrics.links import read_links

log = logging.getLogger(__name__)

#: ALIGN_DIR/manifest.json: per links file, digests of its text and aligner (decides reuse)
MANIFEST = "manifest.json"
LEVEL_FILES = {"subword": "bpe", "word": "tok"}

Sentences = list[list[str]]


@dataclass
class AlignTrainResult:
    """Link statistics per level and split (:func:`scanmt.data.align.link_stats`), and where they are."""

    src_lang: str
    tgt_lang: str
    symmetrization: str
    seconds: float
    out: Path
    #: level -> split -> statistics of ``out/{split}.{level}.align``
    stats: dict[str, dict[str, dict]]


def split_files(data: Path, meta: dict, split: str, level: str) -> tuple[Path, Path]:
    kind = LEVEL_FILES[level]
    return data / f"{split}.{kind}.{meta['src_lang']}", data / f"{split}.{kind}.{meta['tgt_lang']}"


def _read_manifest(path: Path) -> dict:
    if not path.exists():
        return {}
    try:
        m = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        log.warning("%s is unreadable; all links will be recomputed", path)
        return {}
    return m if isinstance(m, dict) else {}


def _write_manifest(path: Path, manifest: dict) -> None:
    with atomic_open(path) as fh:
        json.dump(manifest, fh, indent=2, sort_keys=True)
        fh.write("\n")


def _is_align_dir(d: Path) -> bool:
    return (d / MANIFEST).exists() or any((d / level / MODEL_FILE).exists() for level in LEVEL_FILES)


@dataclass
class _Level:
    """One level's aligner and its training text (``links``: from training, None when reused)."""

    name: str
    aligner: Aligner
    src: Sentences
    tgt: Sentences
    digest: str
    links: list | None


def _aligner(request: AlignRequest, meta: dict, out: Path, level: str, settings: AlignerSettings) -> _Level:
    """The level's aligner: reused from ``out/LEVEL`` when trained on the same text and settings, else trained."""
    model_dir = out / level
    src_path, tgt_path = split_files(request.data, meta, "train", level)
    src, tgt = read_pair(src_path, tgt_path)
    digest = corpus_digest(src, tgt)
    if not request.force and (model_dir / MODEL_FILE).exists():
        old = Aligner.read_meta(model_dir)
        if old.get("train_digest") == digest and old.get("settings") == dataclasses.asdict(settings):
            log.info("%s: reusing the aligner in %s (same training text and settings)", level, model_dir)
            return _Level(level, Aligner.load(model_dir), src, tgt, digest, None)
    log.info("%s level: training on %s / %s", level, src_path.name, tgt_path.name)
    aligner = Aligner(settings, info={"level": level, "src_lang": meta["src_lang"],
                                      "tgt_lang": meta["tgt_lang"], "data": str(request.data)})
    links = aligner.fit(src, tgt)
    aligner.save(model_dir)
    return _Level(level, aligner, src, tgt, digest, links)


def _split_links(lv: _Level, split: str, s: Sentences, t: Sentences, out: Path, manifest: dict) -> list:
    """The links of one split: from training, reused (same text and aligner), or aligned with the priors."""
    name = f"{split}.{lv.name}.align"
    key = {"text": lv.digest if split == "train" else corpus_digest(s, t), "aligner": lv.aligner.model_id}
    if split == "train" and lv.links is not None:
        links = lv.links
        write_links(out / name, links)
    elif manifest.get(name) == key and (out / name).exists():
        log.info("%s: reusing %s", lv.name, out / name)
        links = [x for x, _ in read_links(out / name, src_lens=[len(x) for x in s], tgt_lens=[len(x) for x in t])]
    else:
        if split == "train":  # aligner reused but its training links are gone: realign with priors
            log.warning("%s: %s missing or stale; aligning the training text with the priors", lv.name, name)
        links = lv.aligner.align(s, t)
        write_links(out / name, links)
    manifest[name] = key
    _write_manifest(out / MANIFEST, manifest)
    return links


def train_aligner(request: AlignRequest) -> AlignTrainResult:
    """Learn (or reuse) the aligners of ``request.data`` and write the links of every split."""
    data = Path(request.data)
    meta = read_meta(data)
    out = check_output_dir(request.out or data / "align", ours=_is_align_dir, holds=f"scanmt align output ({MANIFEST})")
    levels = ("subword", "word") if request.level in (None, "both") else (request.level,)
    splits = list(request.splits or meta.get("splits") or ["train"])
    if "train" not in splits:
        splits.insert(0, "train")
    settings = request.settings()
    stats: dict[str, dict[str, dict]] = {}
    t_start = time.perf_counter()
    manifest = _read_manifest(out / MANIFEST)
    for level in levels:
        lv = _aligner(request, meta, out, level, settings)
        stats[level] = {}
        for split in splits:
            s_path, t_path = split_files(data, meta, split, level)
            if not s_path.exists() or not t_path.exists():
                log.warning("%s: split %r has no %s files, skipped", level, split, LEVEL_FILES[level])
                continue
            s, t = (lv.src, lv.tgt) if split == "train" else read_pair(s_path, t_path)
            links = _split_links(lv, split, s, t, out, manifest)
            stats[level][split] = link_stats(links, [len(x) for x in s], [len(x) for x in t])
    return AlignTrainResult(meta["src_lang"], meta["tgt_lang"], settings.symmetrization,
                            time.perf_counter() - t_start, out, stats)
