"""A grid's finished runs packed small enough for git (``scanmt experiment archive``), and restored on a fresh
machine (``scanmt experiment restore``): see :mod:`.packing` for the archive's layout and guarantees.

By concept: :mod:`.manifest` (``manifest.json`` and a pack's or restore's summary), :mod:`.shared_work` (the
identity of the shared work: alignments, fertility predictor, mirrored data), :mod:`.packing`, :mod:`.restoring`,
:mod:`.unpack` (tarballs read so that nothing is written outside their folder), :mod:`.trimming` (an archive's
undrawn attention left out in place) and :mod:`.command` (the commands).
"""

from __future__ import annotations

from scanmt.experiments.archive.command import archive_command, restore_command, trim_command
from scanmt.experiments.archive.manifest import ArchiveSummary, read_manifest
from scanmt.experiments.archive.packing import figure_systems, finished_runs, pack
from scanmt.experiments.archive.restoring import check_archive, restore
from scanmt.experiments.archive.shared_work import PREDICTOR_TOLERANCE, shared_identity
from scanmt.experiments.archive.trimming import trim
from scanmt.experiments.layout import MANIFEST, PREDICTOR_FERTILITIES, SHARED_TAR

__all__ = ["MANIFEST", "PREDICTOR_FERTILITIES", "PREDICTOR_TOLERANCE", "SHARED_TAR", "ArchiveSummary",
           "archive_command", "check_archive", "figure_systems", "finished_runs", "pack", "read_manifest",
           "restore", "restore_command", "shared_identity", "trim", "trim_command"]
