"""DROP's spread split between the aligner and the model (issue 30): the report's section "DROP: aligner noise
against model differences" and the results JSON's ``drop_noise`` entries.

A run's DROP (``metrics.json`` ``drop``) is the mean over the K×K pairings of K source-reference and K
source-output alignments of the same outputs (``evaluate --drop-samples K``); ``drop_scores`` holds the K²
pairing scores, row by row (row i: the i-th source-reference alignment).  Write ``x_ij`` for them,
``r_i`` / ``c_j`` / ``m`` for the row, column and grand means.  The pairings share alignments, so they are not
K² independent draws: with ``x_ij = μ + a_i + b_j + e_ij`` (reference side, output side, interaction; the
ANOVA decomposition of any function of two independent alignments, terms uncorrelated) and the mean squares

    MS_ref = K Σ_i (r_i − m)² / (K − 1),   MS_out = K Σ_j (c_j − m)² / (K − 1),
    MS_int = Σ_ij (x_ij − r_i − c_j + m)² / (K − 1)²,

(expectations ``K σ_a² + σ_e²``, ``K σ_b² + σ_e²``, ``σ_e²``), the unbiased estimates are

- ``aligner_var_of_run`` = (MS_ref + MS_out − MS_int) / K², of ``Var(m) = σ_a²/K + σ_b²/K + σ_e²/K²``: the
  aligner's variance of the run's DROP (same outputs, realigned);
- ``aligner_var_one`` = (MS_ref + MS_out + (K − 2) MS_int) / K, of ``σ_a² + σ_b² + σ_e²``: the aligner's variance
  of a DROP from one alignment of each side (the K = 1 measurement).

``Var(m) ≈ aligner_var_one / K`` (equal without interaction).  Per system, over its n seeds with run DROPs
``d_1..d_n`` (:class:`DropNoise`):

- ``mean``, ``seed_sd``: mean and sample sd (ddof 1) of the ``d_r``;
- ``aligner_sd`` = sqrt(mean over runs of ``aligner_var_one``); ``aligner_se`` = sqrt(max(0, V)) with
  V = mean over runs of ``aligner_var_of_run``: the aligner's standard error of one run's DROP (pooled: the mean
  of the per-run variances);
- ``model_sd`` = sqrt(max(0, seed_sd² − V)): the seed-to-seed sd with the aligner's share removed
  (``E[seed_sd²] = σ_model² + V``);
- against the baseline B (system S): ``delta`` = mean_S − mean_B;
  ``delta_aligner_se`` = sqrt(V_S / n_S + V_B / n_B) (V clipped at 0), the aligner's standard error of ``delta``;
  ``delta_seed_se`` = sqrt(seed_sd_S² / n_S + seed_sd_B² / n_B), its standard error from the seeds' spread
  (which includes the aligner's share); ``beyond_aligner`` = |delta| > 2 delta_aligner_se and
  ``beyond_seeds`` = |delta| > 2 delta_seed_se.

Undefined values are None: no seed sd, model sd or seed test with one seed; no aligner numbers without a run
that has ``drop_scores`` for K ≥ 2 (K = 1, or a ``metrics.json`` from before they were kept); no delta for the
baseline itself.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from scanmt.experiments.baselines import as_baselines

Runs = Sequence[Mapping[str, Any]]

#: the tests' threshold: |delta| > Z standard errors
Z = 2.0


@dataclass(frozen=True)
class RunAligner:
    """One run's aligner variances, from its K×K pairing scores (see the module docstring).

    Attributes:
        k: alignments of each side.
        var_of_run: unbiased estimate of the aligner's variance of the run's DROP (the K×K mean); may be negative.
        var_one: unbiased estimate of the aligner's variance of a DROP from one alignment of each side.
    """

    k: int
    var_of_run: float
    var_one: float


def run_aligner(scores: Sequence[float] | None, k: int) -> RunAligner | None:
    """:class:`RunAligner` of ``scores`` (K² pairing scores, row i = source-reference alignment i), or None
    when they cannot give one (K < 2, no scores, or not K² of them)."""
    if k < 2 or scores is None or len(scores) != k * k:
        return None
    x = [[float(scores[i * k + j]) for j in range(k)] for i in range(k)]
    rows = [statistics.fmean(row) for row in x]
    cols = [statistics.fmean(col) for col in zip(*x)]
    m = statistics.fmean(rows)
    ms_ref = k * sum((r - m) ** 2 for r in rows) / (k - 1)
    ms_out = k * sum((c - m) ** 2 for c in cols) / (k - 1)
    ms_int = sum((x[i][j] - rows[i] - cols[j] + m) ** 2 for i in range(k) for j in range(k)) / (k - 1) ** 2
    return RunAligner(k, (ms_ref + ms_out - ms_int) / k ** 2, (ms_ref + ms_out + (k - 2) * ms_int) / k)


def samples_of(run: Mapping[str, Any]) -> int:
    """Alignments of each side behind a run's DROP (``drop_samples``; 1 for runs from before it was kept)."""
    return int(run.get("drop_samples") or 1)


@dataclass(frozen=True)
class DropNoise:
    """One system's DROP spread, split between the aligner and the model (fields: the module docstring)."""

    seeds: int
    samples: tuple[int, ...]  #: the distinct K of its runs
    aligner_runs: int  #: runs with K×K pairing scores for K ≥ 2
    mean: float | None
    seed_sd: float | None
    aligner_sd: float | None
    aligner_se: float | None
    model_sd: float | None
    #: pooled ``aligner_var_of_run`` before clipping at 0 (for the delta's aligner standard error)
    aligner_var: float | None = None
    baseline: str | None = None
    delta: float | None = None
    delta_aligner_se: float | None = None
    delta_seed_se: float | None = None
    beyond_aligner: bool | None = None
    beyond_seeds: bool | None = None

    def to_json(self) -> dict[str, Any]:
        """The results JSON's ``drop_noise`` entry (every field but ``aligner_var``; ``samples`` as a list)."""
        doc = dataclasses.asdict(self)
        del doc["aligner_var"]
        doc["samples"] = list(self.samples)
        return doc


def system_noise(runs: Runs) -> DropNoise:
    """A system's :class:`DropNoise` without the comparison to the baseline, from its finished runs."""
    drops = [float(r["drop"]) for r in runs if r.get("drop") is not None]
    aligned = [a for r in runs if (a := run_aligner(r.get("drop_scores"), samples_of(r))) is not None]
    mean = statistics.fmean(drops) if drops else None
    seed_sd = statistics.stdev(drops) if len(drops) > 1 else None
    var = statistics.fmean(a.var_of_run for a in aligned) if aligned else None
    return DropNoise(
        seeds=len(drops), samples=tuple(sorted({samples_of(r) for r in runs})), aligner_runs=len(aligned),
        mean=mean, seed_sd=seed_sd,
        aligner_sd=math.sqrt(statistics.fmean(a.var_one for a in aligned)) if aligned else None,
        aligner_se=math.sqrt(max(0.0, var)) if var is not None else None,
        model_sd=math.sqrt(max(0.0, seed_sd ** 2 - var)) if seed_sd is not None and var is not None else None,
        aligner_var=var,
    )


def _se_of_difference(a: float | None, n_a: int, b: float | None, n_b: int) -> float | None:
    """sqrt(a / n_a + b / n_b) for per-run variances a and b over n_a and n_b runs (None when one is unknown)."""
    if a is None or b is None:
        return None
    return math.sqrt(max(0.0, a) / n_a + max(0.0, b) / n_b)


def versus(s: DropNoise, base: DropNoise, baseline: str) -> DropNoise:
    """``s`` with its delta to the baseline's DROP and the two tests (``s`` is not the baseline)."""
    if s.mean is None or base.mean is None:
        return dataclasses.replace(s, baseline=baseline)
    delta = s.mean - base.mean
    aligner_se = _se_of_difference(s.aligner_var, s.seeds, base.aligner_var, base.seeds)
    seed_se = _se_of_difference(None if s.seed_sd is None else s.seed_sd ** 2, s.seeds,
                                None if base.seed_sd is None else base.seed_sd ** 2, base.seeds)
    return dataclasses.replace(
        s, baseline=baseline, delta=delta, delta_aligner_se=aligner_se, delta_seed_se=seed_se,
        beyond_aligner=None if aligner_se is None else abs(delta) > Z * aligner_se,
        beyond_seeds=None if seed_se is None else abs(delta) > Z * seed_se,
    )


def drop_noise(systems: Mapping[str, Runs], baseline: str | Mapping[str, str] | None) -> dict[str, DropNoise]:
    """Per system (in order), its :class:`DropNoise`, compared with its baseline when that is one of them.

    ``baseline``: one system every other one is compared with, or each system's own
    (:data:`scanmt.experiments.baselines.Baselines`; the grid's baseline maps to itself), or None.
    """
    own = {name: system_noise(runs) for name, runs in systems.items()}
    baselines = as_baselines(list(own), baseline)
    out = {}
    for name, n in own.items():
        base = baselines.get(name)
        if base == name:
            n = dataclasses.replace(n, baseline=base)
        elif base in own:
            n = versus(n, own[base], base)
        out[name] = n
    return out


def has_aligner_samples(systems: Sequence[Runs]) -> bool:
    """Whether some run's DROP averages more than one alignment of each side."""
    return any(samples_of(r) > 1 for runs in systems for r in runs)


# --------------------------------------------------------------------------- the report's section

TITLE = "## DROP: aligner noise against model differences"
HEAD = ("system", "seeds", "K", "DROP", "aligner sd", "aligner SE", "model sd", "Δ DROP", r"\|Δ\| > 2 SE, aligner",
        r"\|Δ\| > 2 SE, seeds")
TEXT = (
    "Each run's DROP is the mean over the K×K pairings of K source-reference and K source-output alignments of its "
    "outputs (`--drop-samples K`). DROP: mean ± s over the seeds. Aligner sd: DROP's sd with one alignment of each "
    "side; aligner SE: the sd of a run's DROP over realignments, V = SE² = (MS_ref + MS_out − MS_int) / K² ≈ aligner "
    "sd² / K (two-way ANOVA of the run's K×K scores), pooled as the mean of the runs' variances. Model sd = "
    'sqrt(max(0, s² − V)): the spread of the outputs themselves, from training alone, since decoding adds none (on '
    'the CPU a checkpoint translates to the same bytes every time: `scripts/decode_digest.py`). Δ DROP = mean − the '
    "baseline's; beyond the aligner when |Δ| > 2 sqrt(V/n + V_b/n_b), beyond the seeds when |Δ| > 2 sqrt(s²/n + "
    's_b²/n_b) (n seeds, two or more each). Runs without K×K scores (K = 1, or an older `metrics.json`) are left out '
    'of the aligner columns; – where undefined (`scanmt.experiments.report.drop_noise`).'
)
ONE_ALIGNMENT = ("Every run's DROP comes from one alignment of each side, so its spread cannot be split between the "
                 "aligner and the model; score the outputs with `--drop-samples K` (K ≥ 2; `scanmt evaluate` or "
                 "`scanmt experiment run`) for the split.")

NO_RUN = "No run has finished yet, so no DROP to split between the aligner and the model."


def _num(x: float | None, digits: int, sign: bool = False) -> str:
    return "–" if x is None else f"{x:{'+' if sign else ''}.{digits}f}"


def _test(beyond: bool | None, se: float | None) -> str:
    return "–" if beyond is None or se is None else f"{'yes' if beyond else 'no'} (2 SE {Z * se:.3f})"


def _row(label: str, n: DropNoise, is_baseline: bool, compared_with: str | None) -> str:
    """One system's Markdown row (``label`` already escaped; ``compared_with``: its baseline's escaped label, for
    the *compared with* column of a table whose systems have different baselines, else None)."""
    without = n.seeds - n.aligner_runs
    seeds = str(n.seeds) + (f" ({without} without scores)" if without else "")
    drop = "–" if n.mean is None else _num(n.mean, 2) + ("" if n.seed_sd is None else f" ± {n.seed_sd:.2f}")
    ks = ", ".join(str(k) for k in n.samples) or "–"
    cells = [label, seeds, ks, drop, _num(n.aligner_sd, 3), _num(n.aligner_se, 3), _num(n.model_sd, 3)]
    if is_baseline:
        cells += ["baseline", "", ""]
    else:
        cells += [_num(n.delta, 2, sign=True), _test(n.beyond_aligner, n.delta_aligner_se),
                  _test(n.beyond_seeds, n.delta_seed_se)]
    if compared_with is not None:
        cells.append(compared_with)
    return "| " + " | ".join(cells) + " |"


def drop_noise_section(tables: Sequence[tuple[str, Mapping[str, DropNoise]]], labels: Mapping[str, str],
                       sampled: bool) -> list[str]:
    """Markdown lines of the section: one table per test set, each system's Δ against its ``DropNoise.baseline``
    (named in a *compared with* column when the systems' baselines differ).

    Args:
        tables: (heading of the test set, already Markdown; :func:`drop_noise` of its runs) per test set.
        labels: system name -> its escaped label.
        sampled: :func:`has_aligner_samples` of the grid's runs; False gives the one-line note instead.
    """
    if not any(n.seeds for _, noise in tables for n in noise.values()):
        return [TITLE, "", NO_RUN, ""]
    if not sampled:
        return [TITLE, "", ONE_ALIGNMENT, ""]
    L = [TITLE, "", TEXT, ""]
    for heading, noise in tables:
        mixed = len({n.baseline for n in noise.values() if n.baseline is not None}) > 1
        head = [*HEAD, "compared with"] if mixed else list(HEAD)
        L += [f"### {heading}", "", "| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(HEAD) - 1)
              + ("---|" if mixed else "")]
        for name, n in noise.items():
            base = n.baseline if n.baseline != name else None
            L.append(_row(labels[name], n, n.baseline == name,
                          (labels.get(base, base) if base else "") if mixed else None))
        L.append("")
    return L
