"""``experiment run --redecode``: a finished run's decode outputs moved aside, so that it translates and scores
its trained model again (after a change to decoding or scoring).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Sequence

from scanmt.errors import DataError
from scanmt.experiments.layout import DECODE_OUTPUTS, DONE, moved_marker_name, previous_decode_dir, stage_marker
from scanmt.experiments.spec import RunSpec
from scanmt.experiments.state import decoded, redecodable


def forget_decoding(spec: RunSpec) -> Path | None:
    """Make the run decode its trained model again (``experiment run --redecode``, after a change to
    decoding or scoring): its decode outputs (:data:`DECODE_OUTPUTS`), the markers of its decode steps
    and ``DONE`` move to a new ``previous-decode-N/`` folder of the run, nothing is deleted.

    The outputs move first and ``DONE`` last, each by a rename, so an interrupted call leaves a run
    that is either still done or resumes its decode steps.  Returns the folder, or None when no
    decode step had finished (training, and its markers, are never touched).  A decoded run whose model
    checkpoint is gone (:attr:`RunSpec.checkpoint`; archives keep none) is refused with a
    :class:`~scanmt.errors.DataError`, and nothing moves.
    """
    if not decoded(spec):
        return None
    if not spec.checkpoint.is_file():  # its outputs would move aside with nothing to make them again
        raise DataError(f"{spec.key}: its model {spec.checkpoint} is gone (a restored archive keeps no checkpoints), "
                        "so it cannot be decoded again; its outputs are kept as they are")
    run = spec.dir
    k = 1
    while previous_decode_dir(run, k).exists():
        k += 1
    dest = previous_decode_dir(run, k)
    dest.mkdir()
    for path in sorted({p for pattern in DECODE_OUTPUTS for p in run.glob(pattern) if p.is_file()}):
        os.replace(path, dest / path.name)
    for stage, request in spec.steps()[1:]:
        marker = stage_marker(run, stage)
        if request is not None and marker.exists():
            os.replace(marker, dest / moved_marker_name(marker))
    if (run / DONE).exists():
        os.replace(run / DONE, dest / DONE)
    return dest


def forget_decodings(specs: Sequence[RunSpec], say: Callable[[str], None]) -> None:
    """``--redecode``: move the finished decodes of ``specs`` aside so that the pool runs them again, and say so."""
    gone = [spec for spec in specs if decoded(spec) and not redecodable(spec)]
    moved = [(spec, forget_decoding(spec)) for spec in specs if redecodable(spec)]
    say(f"\nredecode: {len(moved)} run(s) will translate and score again"
        + "".join(f"\n  {spec.key}: earlier outputs moved to {dest}" for spec, dest in moved)
        + (f"\nredecode: {len(gone)} run(s) kept as they are, their model gone (a restored archive keeps no "
           "checkpoints; train them again in a new --out to decode them): "
           + ", ".join(f"{spec.key} ({spec.checkpoint})" for spec in gone) if gone else ""))
