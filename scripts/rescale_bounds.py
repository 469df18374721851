"""Translate with a constrained model's fertility bounds rescaled, its exhaustion bonus kept: what do the bounds
do inside a trained model? (docs/kftt.md, "Thirteenth session")

``scanmt translate`` computes each source subword's bound ``f`` (the checkpoint's fertility strategy, or
``--fertility FILE``) and the bounded attention caps the subword at ``u = max(0, f - attention_sum)``, after
adding the exhaustion bonus ``c · u`` to its score (``model.attention.exhaustion``; the paper's c = 0.2).  A
decode with other bounds through ``--fertility`` changes both at once: bounds × 1,000 raise every fresh word's
bonus from about 0.4 to 400, so the word with the largest predicted fertility takes every step.  This script
patches the recurrence so that only the cap changes::

    cap:    f' = max(scale · f + shift, min)          (real subwords; the sink stays inf, padding 0)
    bonus:  c · max(0, f - attention_sum)             (--bonus own, the default: the model's own bounds)
            c · max(0, f' - attention_sum)            (--bonus rescaled: as a --fertility file of f' would do)

``--scale 1000``: no bound binds, the scores as trained; ``--shift -1``: a ``fertility + 1`` model capped at
its predicted fertility.  ``--scale 1 --shift 0`` reproduces ``scanmt translate`` exactly.  A diagnostic: the
model was trained with its own bounds, so a decode with others measures what they do, not a remedy to ship.

    python scripts/rescale_bounds.py --scale 1000 -- --model RUN/best.pt --input valid.raw.ja \\
        --output loose.hyp.en --beam 5 --attention-out loose.attn.npz

``--head-stats FILE``: per attention head (a Transformer's bounded heads; the LSTM has one), over every row the
search computed (each beam hypothesis at each step, pruned ones included), the share of one-hot rows (largest
weight above 0.999), the mean support (non-zero weights, the sink included) and the mean largest weight, as JSON
and on stderr: the attention file holds the heads' mean only (`scripts/transformer_heads.py` gives the same
figures under forced decoding, for every layer).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import torch

from scanmt import ops
from scanmt.cli.main import main
from scanmt.io import atomic_open
from scanmt.metrics.attention_stats import one_hot_steps, support_sizes
from scanmt.model.bounds import BoundedTransform

BONUS = ("own", "rescaled")


def rescaled(fertility: torch.Tensor, scale: float, shift: float, floor: float) -> torch.Tensor:
    """``max(scale · f + shift, floor)`` where ``f`` is a real subword's bound (finite and > 0); the sink's
    ``inf`` and padding's 0 unchanged.  Any shape."""
    real = torch.isfinite(fertility) & (fertility > 0)
    return torch.where(real, (scale * fertility + shift).clamp_min(floor), fertility)


def rescale_the_bounds(scale: float, shift: float, floor: float, bonus: str = "own") -> None:
    """Patch :meth:`BoundedTransform.recurrence` (the LSTM's attention step and the Transformer's bounded heads
    both run it): the transform caps each source subword by the rescaled bounds (:func:`rescaled`), and the
    exhaustion bonus comes from the model's own bounds (``bonus="own"``) or from the rescaled ones."""
    if bonus not in BONUS:
        raise ValueError(f"bonus must be one of {', '.join(BONUS)}, not {bonus!r}")
    recurrence = BoundedTransform.recurrence

    def patched(self, z, mask, fertility, attention_sum, alpha=None, shared=False):
        if fertility is None or not self.constrained:
            return recurrence(self, z, mask, fertility, attention_sum, alpha, shared)
        cap = rescaled(fertility, scale, shift, floor)
        if bonus == "rescaled" or not self.exhaustion:
            return recurrence(self, z, mask, cap, attention_sum, alpha, shared)
        a = (self.alpha if alpha is None else alpha) if self.transform.alpha else None
        rows, s = [], attention_sum
        for z_t in z.unbind(-2):  # one position at a time: the bonus reads the cumulative attention before it
            u = (fertility - s).clamp_min(0.0)
            z_t = z_t + self.exhaustion * torch.where(torch.isfinite(u), u, torch.zeros_like(u))
            p_t, s = ops.bounded_recurrence(z_t.unsqueeze(-2), cap, self.transform.name, mask=mask, exhaustion=0.0,
                                            attention_sum=s, alpha=a, shared=shared)
            rows.append(p_t.squeeze(-2))
        return torch.stack(rows, dim=-2), s

    BoundedTransform.recurrence = patched


class HeadStats:
    """Per-head statistics of the bounded transform's rows, gathered by :meth:`watch`, counted as training logs
    and ``scanmt evaluate --attention`` count them (:mod:`scanmt.metrics.attention_stats`)."""

    def __init__(self) -> None:
        self.sums: torch.Tensor | None = None  # [4, h]: rows, one-hot rows, support, largest weight, summed

    def add(self, p: torch.Tensor) -> None:
        """``p [..., T, S]`` attention rows, heads at dimension -3 when ``p`` has four or more dimensions.  Rows
        that are all zero (no real token: padding) are left out; every other row of a bounded transform sums to 1."""
        p = p.detach().double()
        p = p.unsqueeze(-3) if p.dim() < 4 else p
        rows = p.movedim(-3, 0).reshape(p.shape[-3], -1, p.shape[-1])  # [h, rows, S]
        real = rows.sum(-1) > 0.5
        sums = torch.stack([real.sum(1), (one_hot_steps(rows) & real).sum(1), (support_sizes(rows) * real).sum(1),
                            (rows.amax(-1) * real).sum(1)]).double()  # [4, h]
        self.sums = sums if self.sums is None else self.sums + sums

    def summary(self) -> dict:
        """``{"rows": [...], "one_hot_share": [...], "mean_support": [...], "mean_largest": [...]}``, one entry
        per head."""
        if self.sums is None:
            return {"rows": [], "one_hot_share": [], "mean_support": [], "mean_largest": []}
        rows, one_hot, support, largest = self.sums
        n = rows.clamp_min(1)
        return {"rows": [int(x) for x in rows], "one_hot_share": (one_hot / n).tolist(),
                "mean_support": (support / n).tolist(), "mean_largest": (largest / n).tolist()}

    def watch(self) -> None:
        """Wrap :meth:`BoundedTransform.recurrence` (as it is now, patched or not) so that its rows are added."""
        recurrence = BoundedTransform.recurrence

        def watched(transform, z, mask, fertility, attention_sum, alpha=None, shared=False):
            p, s = recurrence(transform, z, mask, fertility, attention_sum, alpha, shared)
            self.add(p)
            return p, s

        BoundedTransform.recurrence = watched


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], allow_abbrev=False,
        usage="python scripts/rescale_bounds.py [--scale K] [--shift D] [--min M] [--bonus own|rescaled] "
              "[--head-stats FILE] -- TRANSLATE-OPTIONS...")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every real subword's bound by this "
                        "(default 1; 1000: no bound binds)")
    parser.add_argument("--shift", type=float, default=0.0, help="then add this (default 0; -1 takes a "
                        "'fertility + 1' model back to its predicted fertility)")
    parser.add_argument("--min", type=float, default=0.1, dest="floor",
                        help="no bound below this; must be > 0 (default 0.1)")
    parser.add_argument("--bonus", choices=BONUS, default="own",
                        help="the exhaustion bonus from the model's own bounds (default) or from the rescaled ones")
    parser.add_argument("--head-stats", type=Path, metavar="FILE",
                        help="write each head's one-hot share, mean support and mean largest weight (JSON)")
    args, rest = parser.parse_known_args(argv)
    for name, value in (("--scale", args.scale), ("--min", args.floor)):
        if not math.isfinite(value) or value <= 0:
            parser.error(f"{name} must be a finite number > 0, not {value:g}")
    if not math.isfinite(args.shift):
        parser.error(f"--shift must be finite, not {args.shift:g}")
    rescale_the_bounds(args.scale, args.shift, args.floor, args.bonus)
    stats = HeadStats()
    if args.head_stats:
        stats.watch()
    code = main(["translate", *[a for a in rest if a != "--"]])
    if args.head_stats and code == 0:
        summary = stats.summary()
        with atomic_open(args.head_stats) as fh:
            fh.write(json.dumps(summary, indent=1) + "\n")
        for h, (rows, share, support, largest) in enumerate(zip(*summary.values())):
            print(f"head {h + 1}: {rows:,} rows, one-hot {100 * share:.1f} %, support {support:.2f}, "
                  f"largest weight {largest:.3f}", file=sys.stderr)
    return code


if __name__ == "__main__":
    raise SystemExit(run(sys.argv[1:]))
