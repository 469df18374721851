"""Paired bootstrap test of a corpus rate between two systems on the same inputs (REP, DROP).

A corpus rate is ``100 · Σ_i x_i / Σ_i n_i`` over inputs ``i``: REP has ``x_i`` = the input's σ (its
repeated n-grams, :func:`scanmt.metrics.rep.rep_sentence`) and ``n_i`` = its reference words; DROP has
``x_i`` = its dropped source words and ``n_i`` = its source words.  Two systems translating the same inputs
share ``n_i``, so the difference of their rates is ``δ = 100 · Σ (a_i - b_i) / Σ n_i``.

:func:`paired_bootstrap_rate` resamples the inputs with replacement ``samples`` times (the same indices for
both systems, as sacrebleu's paired bootstrap does for BLEU; Koehn 2004) and tests "a is lower than b"
one-sided with the shifted bootstrap distribution (Berg-Kirkpatrick, Burkett and Klein 2012): under the
null the resampled differences are centred at 0, so the p-value is the share of resamples with
``δ* - δ <= δ``, counted as ``(1 + #) / (1 + samples)``.  A small p says that a's rate is lower
than b's beyond what the choice of test inputs explains.  The two-sided p-value (no direction expected) counts
``|δ* - δ| >= |δ|`` instead.  It does not cover other noise: the training seed
(repeat over seeds) or, for DROP, the aligner's randomness (:mod:`scanmt.experiments.report.drop_noise`).

With fewer than :data:`MIN_INPUTS` inputs the test cannot be run: the resamples take a handful of distinct values
(one input: every resample is that input, ``δ* = δ``, and ``p`` would be ``1 / (1 + samples)``, 0.001, whatever
``δ``), so the p-values are None and the printers say so (:func:`format_p`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from scanmt.errors import DataError

#: the resampling seed (sacrebleu's default), so that a report is reproducible
SEED = 12345
#: the fewest inputs a paired bootstrap is run on (below it the p-values are None: module docstring)
MIN_INPUTS = 10
#: what a printer writes instead of a p-value that could not be computed
NO_TEST = f"n/a: fewer than {MIN_INPUTS} inputs"


@dataclass(frozen=True)
class PairedRate:
    """``a``'s and ``b``'s rates (percent), their difference ``delta = a - b``, the one-sided p-value of
    "a is lower than b" and the two-sided one of "a differs from b" (:func:`paired_bootstrap_rate`; None with
    fewer than :data:`MIN_INPUTS` inputs: print them with :func:`format_p`)."""

    a: float
    b: float
    delta: float
    p_lower: float | None
    inputs: int
    samples: int
    p_two_sided: float | None


def format_p(p: float | None, significant_below: float | None = None) -> str:
    """``p`` with three decimals (and `` †`` where it is below ``significant_below``), or :data:`NO_TEST` where
    there is none (fewer than :data:`MIN_INPUTS` inputs)."""
    if p is None:
        return NO_TEST
    return f"{p:.3f}" + (" †" if significant_below is not None and p < significant_below else "")


def paired_bootstrap_rate(a: Sequence[float], b: Sequence[float], n: Sequence[float], *, samples: int = 1000,
                          seed: int = SEED, min_inputs: int = MIN_INPUTS) -> PairedRate:
    """Test whether system a's corpus rate ``100 Σa/Σn`` is lower than b's ``100 Σb/Σn`` (module docstring).

    Args:
        a, b: per input, the two systems' counts (σ for REP, dropped words for DROP).
        n: per input, the shared denominator (reference words for REP, source words for DROP).
        min_inputs: with fewer inputs the p-values are None (the rates and ``delta`` are still computed); the
            tests of the estimator itself lower it.

    Raises:
        DataError: the three sequences differ in length, are empty, or ``n`` sums to 0; ``samples`` < 1.
    """
    if not len(a) == len(b) == len(n):
        raise DataError(f"paired bootstrap: {len(a)} and {len(b)} counts for {len(n)} inputs; the two systems must "
                        "score the same inputs")
    if not len(n) or sum(n) <= 0:
        raise DataError("paired bootstrap: no inputs, or their denominators sum to 0")
    if samples < 1:
        raise DataError(f"paired bootstrap: samples must be >= 1, got {samples}")
    diff = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    den = np.asarray(n, dtype=np.float64)
    delta = 100.0 * diff.sum() / den.sum()
    p: float | None = None
    p_two: float | None = None
    if len(den) >= min_inputs:
        idx = np.random.default_rng(seed).integers(0, len(den), size=(samples, len(den)))
        resampled = 100.0 * diff[idx].sum(axis=1) / np.maximum(den[idx].sum(axis=1), 1e-12)
        p = (1 + int(np.count_nonzero(resampled - delta <= delta))) / (1 + samples)
        p_two = (1 + int(np.count_nonzero(np.abs(resampled - delta) >= abs(delta)))) / (1 + samples)
    return PairedRate(a=100.0 * float(np.sum(a)) / den.sum(), b=100.0 * float(np.sum(b)) / den.sum(),
                      delta=float(delta), p_lower=p, inputs=len(den), samples=samples, p_two_sided=p_two)


#: the rates of :data:`scanmt.api.stress.PerInput` counts: name -> (numerator key, denominator key)
RATES = {"REP": ("rep_sigma", "ref_words"), "DROP": ("dropped", "source_words")}


def paired_rates(pairs: Sequence[tuple[dict[str, Sequence[float]], dict[str, Sequence[float]]]], *,
                 samples: int = 1000) -> dict[str, PairedRate]:
    """REP and DROP of system a against b, pooled over ``pairs``: ``(a's per-input counts, b's)`` of the same
    inputs, one pair per training seed, say (a stress test's ``per_input``).  The inputs of all pairs are
    resampled together.  A metric is left out when a pair lacks its counts (DROP without alignment counts)."""
    out = {}
    for metric, (num, den) in RATES.items():
        if not pairs or any(key not in c for a, b in pairs for c in (a, b) for key in (num, den)):
            continue
        for a, b in pairs:
            if list(a[den]) != list(b[den]):
                raise DataError(f"paired {metric}: the two systems scored different inputs ({den} differ)")
        out[metric] = paired_bootstrap_rate([x for a, _ in pairs for x in a[num]], [x for _, b in pairs for x in b[num]],
                                            [x for a, _ in pairs for x in a[den]], samples=samples)
    return out


def paired_means(pairs: Sequence[tuple[Sequence[float | None], Sequence[float | None]]], *,
                 samples: int = 1000) -> PairedRate | None:
    """A per-input probability of system a against b (``P(</s>)`` after a joined input's first sentence, say:
    :mod:`scanmt.decoding.boundary`), as means in percent over the inputs both measured (None: left out), pooled
    over ``pairs`` (one per training seed) and tested as :func:`paired_bootstrap_rate` tests a rate whose
    denominators are all 1.  None when no input has both.

    Raises:
        DataError: the two sides of a pair have different lengths (not the same inputs).
    """
    a: list[float] = []
    b: list[float] = []
    for pa, pb in pairs:
        if len(pa) != len(pb):
            raise DataError(f"paired means: {len(pa)} and {len(pb)} values; the two systems must score the same "
                            "inputs")
        both = [(x, y) for x, y in zip(pa, pb) if x is not None and y is not None]
        a += [x for x, _ in both]
        b += [y for _, y in both]
    return paired_bootstrap_rate(a, b, [1.0] * len(a), samples=samples) if a else None


#: one seed's four runs on the same inputs (per-input counts, as in :func:`paired_rates`): an arm, the arm's
#: baseline, the reference system and the reference's baseline
Quad = tuple[dict[str, Sequence[float]], dict[str, Sequence[float]], dict[str, Sequence[float]],
             dict[str, Sequence[float]]]


def difference_in_differences(quads: Sequence[Quad], *, samples: int = 1000) -> dict[str, PairedRate]:
    """REP and DROP: does a system's difference from its baseline change between two settings?  For an arm
    ``A`` with baseline ``A0`` (csparsemax and softmax under one recipe, say) and a reference ``R`` with baseline
    ``R0`` (the same two under another recipe), the rate of ``A - A0`` against that of ``R - R0``, pooled over
    ``quads`` (one per training seed) and resampled input by input as :func:`paired_bootstrap_rate` does.

    Returns per metric a :class:`PairedRate` with ``a`` = the arm's Δ, ``b`` = the reference's Δ and
    ``delta`` = their difference (negative: the arm cuts the rate more, or raises it less); its
    ``p_two_sided`` tests "the Δs differ".  DROP is left out when a run has no alignment counts.

    Raises:
        DataError: the four runs of a seed scored different inputs.
    """
    out = {}
    for metric, (num, den) in RATES.items():
        if not quads or any(num not in run for quad in quads for run in quad):
            continue
        arm, ref, n = [], [], []
        for a, a0, r, r0 in quads:
            if not list(a[den]) == list(a0[den]) == list(r[den]) == list(r0[den]):
                raise DataError(f"{metric} difference in differences: the four runs of a seed scored different "
                                f"inputs ({den} differ)")
            arm += [x - y for x, y in zip(a[num], a0[num])]
            ref += [x - y for x, y in zip(r[num], r0[num])]
            n += list(a[den])
        out[metric] = paired_bootstrap_rate(arm, ref, n, samples=samples)
    return out


def sign_flip_p(deltas: Sequence[float], *, two_sided: bool = False) -> float | None:
    """The exact sign-flip (randomization) test over training seeds: with one difference per seed (a system's REP
    minus its baseline's, say), the share of the ``2^n`` ways of flipping their signs whose mean is as low as the
    observed mean (``two_sided``: as far from 0).  Under the null "a seed is as likely to favour either system"
    every flip is equally likely; no distribution is assumed.  With ``n`` seeds no p-value falls below
    ``2^-n`` (one-sided; ``2^(1-n)`` two-sided): 0.125 with 3 seeds, so a p-value here says how consistent the
    seeds are, and a small one needs more seeds.  None with fewer than two seeds.
    """
    if len(deltas) < 2:
        return None
    d = np.asarray(deltas, dtype=np.float64)
    signs = np.array(np.meshgrid(*[[1.0, -1.0]] * len(d))).reshape(len(d), -1).T  # every flip, [2^n, n]
    means = (signs * d).mean(axis=1)
    observed = d.mean()
    tol = 1e-12 * max(1.0, float(np.abs(d).max()))
    hits = np.abs(means) >= abs(observed) - tol if two_sided else means <= observed + tol
    return float(hits.mean())
