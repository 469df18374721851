"""An archive's manifest (``DEST/manifest.json``: its format, the folder it came from, its shared work's
identity, each run's digest) and what a pack or restore did (:class:`ArchiveSummary`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from scanmt.data.fertility import file_digest
from scanmt.errors import DataError
from scanmt.experiments.figure_window import FigureWindow
from scanmt.experiments.layout import MANIFEST, MANIFEST_RUNS_ONLY, METRICS, archived_run
from scanmt.io import atomic_open


FORMAT = 3
#: the format of an archive of runs only (``archive --runs-only``: format 3 without ``shared.tar.gz``, each run
#: with the shared work it trained on): a number of its own, so that code older than it refuses such an archive
#: by its format rather than failing on the shared work it lacks
RUNS_ONLY_FORMAT = 4


#: format 1 (session 19) recorded one digest of the alignments and the predictor's weights; format 2 packed the
#: corpus text with the runs (format 3 leaves it out: :mod:`scanmt.experiments.archive.corpus`).  Both are read,
#: and upgraded by the next pack of the same shared work
READ_FORMATS = (1, 2, FORMAT, RUNS_ONLY_FORMAT)


@dataclass
class ArchiveSummary:
    """What one pack or restore did."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    unfinished: list[str] = field(default_factory=list)
    shared: str = ""
    #: a pack's figure window (None: every sentence's attention is kept)
    window: FigureWindow | None = None
    #: the runs packed with a partial attention file: ``{run: (sentences kept, sentences)}``
    attention: dict[str, tuple[int, int]] = field(default_factory=dict)


def partial_attention(left_out: dict) -> tuple[int, int] | None:
    """``(sentences kept, sentences)`` of the attention file a run's ``left_out`` record stripped to a figure
    window (:mod:`scanmt.experiments.archive.corpus`); None when it keeps every sentence's, or has none."""
    for how in left_out.values():
        sources = how.get("attention_sources") if isinstance(how, dict) else None
        if isinstance(sources, dict) and "rows" in sources:
            return int(sources["rows"]), int(sources["sentences"])
    return None


def read_manifest(dest: Path) -> dict | None:
    p = dest / MANIFEST
    if not p.exists():
        return None
    try:
        m = json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{p}: not a readable archive manifest ({exc})") from None
    if not isinstance(m, dict) or m.get("format") not in READ_FORMATS:
        raise DataError(f"{p}: not a scanmt experiment archive of format {' or '.join(map(str, READ_FORMATS))}")
    if (m["format"] == RUNS_ONLY_FORMAT) != (m.get(MANIFEST_RUNS_ONLY) is True):
        raise DataError(f"{p}: format {m['format']} with runs_only {m.get(MANIFEST_RUNS_ONLY)!r}, where an archive of "
                        f"runs only, and it alone, is format {RUNS_ONLY_FORMAT} (a damaged manifest)")
    return m


def _write_manifest(dest: Path, manifest: dict) -> None:
    with atomic_open(dest / MANIFEST) as fh:
        json.dump(manifest, fh, indent=1, sort_keys=True)
        fh.write("\n")


def _metrics_digest(run: Path) -> str:
    """The digest of a run folder's ``metrics.json`` ("" when it has none), as the manifest records it."""
    return file_digest(run / METRICS) if (run / METRICS).exists() else ""


def _run_tar(dest: Path, key: str) -> Path:
    """The tarball of run ``key`` (``SYSTEM/seedK``) in the archive ``dest``."""
    return archived_run(dest, key)
