"""How much of a rate difference between two systems their output lengths explain (direct standardization).

REP (and DROP) move with how much a system writes: an output that stops early has few chances to repeat,
one that keeps writing has many. Comparing a system A with a baseline B at equal length separates the two.
The inputs are split into strata by their output/reference length ratio; B's rate within each stratum,
weighted by how much of A's denominator falls in that stratum, is the rate B would have *with A's lengths*::

    R_B|A = 100 · Σ_s (Σ_{i∈B_s} x_i / Σ_{i∈B_s} n_i) · N_A(s) / Σ_{s covered} N_A(s)

(strata where B has no input are left out of the sum, and their share of A's denominator is reported as
``uncovered``). Then ``R_B|A − R_B`` is the part of the difference ``R_A − R_B`` that A's lengths explain at B's
behaviour, and ``R_A − R_B|A`` what A does beyond it at the same lengths.  This is the epidemiologists' direct
standardization, with the output length in place of age.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from scanmt.errors import DataError

#: the default strata of the output/reference length ratio: [0, 0.5), [0.5, 0.6), ..., [1.2, inf)
RATIO_EDGES: tuple[float, ...] = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2)


@dataclass(frozen=True)
class StandardizedRate:
    """Rates in percent: A's, B's, and B's at A's lengths (module docstring)."""

    system: float  #: R_A = 100 Σx_A / Σn_A
    baseline: float  #: R_B
    baseline_at_system_lengths: float  #: R_B|A
    uncovered: float  #: share of A's denominator in strata where B has no input (0..1)

    @property
    def explained(self) -> float | None:
        """The share of R_A − R_B that A's lengths explain, (R_B|A − R_B) / (R_A − R_B); None when R_A = R_B or
        when R_B|A is undefined (NaN: B has no input in any stratum of A's)."""
        gap = self.system - self.baseline
        if gap == 0 or math.isnan(self.baseline_at_system_lengths):
            return None
        return (self.baseline_at_system_lengths - self.baseline) / gap


def length_strata(out_words: Sequence[float], ref_words: Sequence[float],
                  edges: Sequence[float] = RATIO_EDGES) -> list[int]:
    """Each input's stratum: the index of its output/reference word ratio among ``edges`` (sorted; an input
    without reference words counts as ratio 0)."""
    if list(edges) != sorted(edges):
        raise DataError(f"length strata: the edges must be sorted, got {list(edges)}")
    if len(out_words) != len(ref_words):
        raise DataError(f"length strata: {len(out_words)} output lengths for {len(ref_words)} references")
    return [bisect.bisect_right(edges, (o / r) if r else 0.0) for o, r in zip(out_words, ref_words)]


def _check(x: Sequence[float], n: Sequence[float], strata: Sequence[int], who: str) -> None:
    if not len(x) == len(n) == len(strata):
        raise DataError(f"length standardization: {who} has {len(x)} counts, {len(n)} denominators and "
                        f"{len(strata)} strata; one of each per input")
    if not len(n) or sum(n) <= 0:
        raise DataError(f"length standardization: {who} has no inputs, or its denominators sum to 0")


def standardize(a_x: Sequence[float], a_n: Sequence[float], a_strata: Sequence[int],
                b_x: Sequence[float], b_n: Sequence[float], b_strata: Sequence[int]) -> StandardizedRate:
    """System A's rate, baseline B's, and B's at A's lengths (module docstring).

    Args:
        a_x, a_n, a_strata: per input of A, the count (σ for REP), the denominator (reference words) and the
            stratum (:func:`length_strata`); A and B may have scored different inputs, or several seeds each.
        b_x, b_n, b_strata: the same for B.

    Raises:
        DataError: the sequences of one system differ in length, are empty, or its denominators sum to 0.
    """
    _check(a_x, a_n, a_strata, "the system")
    _check(b_x, b_n, b_strata, "the baseline")
    b_num: dict[int, float] = {}
    b_den: dict[int, float] = {}
    for x, n, s in zip(b_x, b_n, b_strata):
        b_num[s] = b_num.get(s, 0.0) + x
        b_den[s] = b_den.get(s, 0.0) + n
    a_den: dict[int, float] = {}
    for n, s in zip(a_n, a_strata):
        a_den[s] = a_den.get(s, 0.0) + n
    covered = {s: w for s, w in a_den.items() if b_den.get(s, 0.0) > 0}
    total = sum(a_den.values())
    weight = sum(covered.values())
    at_a = sum(b_num[s] / b_den[s] * w for s, w in covered.items()) / weight if weight > 0 else float("nan")
    return StandardizedRate(system=100.0 * sum(a_x) / sum(a_n), baseline=100.0 * sum(b_x) / sum(b_n),
                            baseline_at_system_lengths=100.0 * at_a, uncovered=1.0 - weight / total)


def standardize_counts(system: Sequence[Mapping[str, Sequence[float]]],
                       baseline: Sequence[Mapping[str, Sequence[float]]], count: str, denominator: str, what: str,
                       edges: Sequence[float] = RATIO_EDGES) -> StandardizedRate:
    """A rate of a system, of a baseline, and of the baseline at the system's lengths, from per-input counts
    (``count`` over ``denominator``, with ``ref_words`` and ``hyp_words`` for the length groups: a stress test's
    :data:`scanmt.api.stress.PerInput`), the inputs of every element (one per seed, say) pooled.

    Raises:
        DataError: an element lacks ``hyp_words`` (a stress test from before they were counted), or its lists
            differ in length.
    """
    pooled = []
    for who, parts in (("system", system), ("baseline", baseline)):
        x: list[float] = []
        n: list[float] = []
        strata: list[int] = []
        for counts in parts:
            if "hyp_words" not in counts:
                raise DataError(f"{what} at equal length: the {who}'s counts have no hyp_words (a stress test from "
                                "before they were counted; run it again)")
            x += counts[count]
            n += counts[denominator]
            strata += length_strata(counts["hyp_words"], counts["ref_words"], edges)
        pooled.append((x, n, strata))
    (a_x, a_n, a_s), (b_x, b_n, b_s) = pooled
    return standardize(a_x, a_n, a_s, b_x, b_n, b_s)


def standardize_rep(system: Sequence[Mapping[str, Sequence[float]]], baseline: Sequence[Mapping[str, Sequence[float]]],
                    edges: Sequence[float] = RATIO_EDGES) -> StandardizedRate:
    """REP (``rep_sigma`` per 100 reference words) of a system, of a baseline, and of the baseline at the
    system's lengths (:func:`standardize_counts`)."""
    return standardize_counts(system, baseline, "rep_sigma", "ref_words", "REP", edges)


def standardize_drop(system: Sequence[Mapping[str, Sequence[float]]], baseline: Sequence[Mapping[str, Sequence[float]]],
                     edges: Sequence[float] = RATIO_EDGES) -> StandardizedRate:
    """DROP (``dropped`` per 100 ``source_words``) of a system, of a baseline, and of the baseline at the
    system's lengths (:func:`standardize_counts`): how much of a DROP difference writing shorter or longer
    explains."""
    return standardize_counts(system, baseline, "dropped", "source_words", "DROP", edges)
