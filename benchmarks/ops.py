"""Benchmark scanmt.ops: forward + backward time per call, side by side in one run.

    python benchmarks/ops.py            # the full table (about a minute)
    python benchmarks/ops.py --quick    # fewer repetitions (a few seconds)
    python benchmarks/ops.py --device cuda   # on a GPU (every timed block ends with a synchronize)

For each shape (rows x J) and each transform it times ``p = op(z, u)`` followed by
``p.backward(g)`` in float32 on the CPU, with gradients to ``z`` and (for the
constrained ops) ``u``, and validation on (the default).  Reported: the median
over repetitions of the mean time of a block of calls, and the ratios to
``torch.softmax`` and to ``entmax.sparsemax`` measured in the same run (entmax is
an optional benchmark extra: ``pip install entmax``; without it that column is
skipped).  ``numpy-loop`` is a per-row NumPy implementation of csparsemax in the
style of the paper's original code: copy to NumPy, loop over rows, solve each
row, copy back, and the same for the backward pass.

Inputs: ``z ~ N(0, 1)``.  Bounds ``u`` come from one of two regimes:

* ``nmt`` (default): a decoder step, ``u = max(f - beta, 0)`` with fertilities
  ``f`` in {1, 2, 3} and cumulative attention ``beta = f * U(0, 1.05)`` (about
  5% of the words exhausted, ``u = 0``), and a ``<sink>`` column ``u = +inf``;
* ``tight``: ``u ~ U(0, 3 / J)``: the bounds sum to 1.5 on average and bind on
  most of the support (a hard case for the constrained ops).

By default PyTorch runs with one thread (``--threads``) so that the numbers do
not depend on what else runs on the machine.

On the CPU, sparsemax, csparsemax and csoftmax run their forward pass in the
native kernels of ``scanmt.ops`` when these are available (built on first use;
the script reports the build or load time and the path each op took);
``--no-native`` measures the pure PyTorch algorithms instead.

``--ops fy`` (not part of the default ``all``: several minutes) measures instead the training loss of a
sparse output layer, the Fenchel-Young loss of ``model.output`` sparsemax, entmax15 and entmax
(:func:`scanmt.model.output.output_loss`), against the ``entmax`` package's ``SparsemaxLoss``,
``Entmax15Loss`` and ``EntmaxBisectLoss`` (``reduction="sum"``, ``ignore_index=PAD_ID``, otherwise their
defaults) at vocabulary size: ``--rows`` target positions (B x T, default 4096) x ``--vocab`` words
(default 8000 and 32000), scores ``z ~ N(0, 1)``, uniform targets with every 16th position padding,
forward + backward (gradient to the scores), float32.  Before timing, each pair's summed loss and
gradient are compared (``fy_check``: gradients within ``FY_GRAD_ATOL``, the loss within
``FY_LOSS_RTOL`` of its size; an ``AssertionError`` otherwise).  Each loss is printed as a ratio to
its counterpart, with the issue's bar (at most 1.0x at V = 32000) met or not::

    python benchmarks/ops.py --ops fy --cpu-time            # 4096 x {8000, 32000}, 7 rounds
    python benchmarks/ops.py --ops fy --quick               # 256 rows, 3 rounds (about a minute)
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import torch

try:
    import scanmt.ops as sops
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
    import scanmt.ops as sops
from scanmt.data.vocab import PAD_ID  # noqa: E402
from scanmt.model.output import output_loss  # noqa: E402
from scanmt.ops import _checks, _native  # noqa: E402

#: the ops with a native forward pass
NATIVE_OPS = ("sparsemax", "csoftmax", "csparsemax")

try:
    import entmax  # type: ignore
    import entmax.losses  # type: ignore
except ImportError:  # optional benchmark extra
    entmax = None

SHAPES: Tuple[Tuple[int, int], ...] = ((64, 20), (2048, 50), (256, 512), (16, 4096))

#: where the inputs live (``--device``); the ops run where their inputs are
DEVICE = torch.device("cpu")


def device_clock() -> float:
    """``time.perf_counter`` after the GPU's queued kernels have finished (on the CPU: just the clock)."""
    if DEVICE.type == "cuda":
        torch.cuda.synchronize(DEVICE)
    return time.perf_counter()


# ----------------------------------------------------------------------------
# inputs
# ----------------------------------------------------------------------------


def make_inputs(rows: int, J: int, regime: str, seed: int = 0) -> Tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(rows, J, generator=g)
    if regime == "nmt":
        f = torch.randint(1, 4, (rows, J), generator=g).float()
        beta = f * torch.rand(rows, J, generator=g) * 1.05
        u = (f - beta).clamp(min=0.0)
        u[:, -1] = float("inf")
    elif regime == "tight":
        u = torch.rand(rows, J, generator=g) * (3.0 / J)
        # keep every row feasible: the bounds must sum to at least 1
        short = u.sum(-1, keepdim=True) < 1.05
        u = torch.where(short, u * (1.05 / u.sum(-1, keepdim=True)), u)
    else:
        raise ValueError(f"unknown regime {regime!r}")
    return z.to(DEVICE), u.to(DEVICE)


# ----------------------------------------------------------------------------
# per-row NumPy loop in the style of the original implementation
# ----------------------------------------------------------------------------


def _np_csparsemax_row(z: np.ndarray, u: np.ndarray) -> Tuple[np.ndarray, float]:
    """One row, as the original code does it: in float64, sort the lower and the
    upper breakpoints, merge them in a Python loop until the linear piece that
    holds the threshold is found, then set each entry.  O(J log J) plus O(J)
    Python steps."""
    z = z.astype(np.float64)
    u = np.minimum(u.astype(np.float64), 1.0)
    lower, upper = z - u, z  # p_j = u_j below z_j - u_j, z_j - tau in between, 0 above z_j
    order_l, order_u = np.argsort(lower), np.argsort(upper)
    J = z.size
    # sweep tau upwards: start with every entry at its bound u, free entries enter at
    # their lower breakpoint and leave at their upper one
    capped_sum, free_sum, n_free = float(u.sum()), 0.0, 0
    i = k = 0
    tau = float(lower[order_l[0]])
    while i < J or k < J:
        nxt_l = lower[order_l[i]] if i < J else np.inf
        nxt_u = upper[order_u[k]] if k < J else np.inf
        nxt = min(nxt_l, nxt_u)
        if n_free:
            # on this piece sum(p) = capped_sum + free_sum - n_free * tau
            root = (capped_sum + free_sum - 1.0) / n_free
            if root <= nxt:
                tau = root
                break
        elif capped_sum <= 1.0:
            tau = nxt if capped_sum < 1.0 else tau
            if capped_sum == 1.0:
                break
        tau = nxt
        if nxt_l <= nxt_u:
            j = order_l[i]
            capped_sum -= u[j]
            free_sum += z[j]
            n_free += 1
            i += 1
        else:
            j = order_u[k]
            free_sum -= z[j]
            n_free -= 1
            k += 1
    p = np.empty(J)
    for j in range(J):
        p[j] = min(max(z[j] - tau, 0.0), u[j])
    return p, tau


class NumpyLoopCSparsemax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, z, u):  # type: ignore[override]
        zn, un = z.detach().cpu().numpy(), u.detach().cpu().numpy()
        p = np.empty(zn.shape)
        taus = np.empty(zn.shape[0])
        for i in range(zn.shape[0]):
            p[i], taus[i] = _np_csparsemax_row(zn[i], un[i])
        ctx.save_for_backward(z, u)
        ctx.taus = taus
        return torch.from_numpy(p).to(z.dtype).to(z.device)

    @staticmethod
    def backward(ctx, g):  # type: ignore[override]
        z, u = ctx.saved_tensors
        zn, un, gn = (t.detach().cpu().numpy().astype(np.float64) for t in (z, u, g))
        dz, du = np.zeros_like(zn), np.zeros_like(un)
        for i in range(zn.shape[0]):
            x = zn[i] - ctx.taus[i]
            free = (x > 0) & (x < un[i])
            capped = (x > 0) & ~free
            m = gn[i][free].mean() if free.any() else 0.0
            dz[i][free] = gn[i][free] - m
            du[i][capped] = gn[i][capped] - m
        return torch.from_numpy(dz).to(z), torch.from_numpy(du).to(u)


# ----------------------------------------------------------------------------
# timing
# ----------------------------------------------------------------------------


def _runner(fn: Callable, z: torch.Tensor, u: Optional[torch.Tensor], loss: bool = False) -> Callable[[], None]:
    """One call: ``fn(z, u)`` and its backward pass, with gradients to ``z`` (and ``u``).

    ``loss``: ``fn`` returns a scalar loss, backpropagated as it is, and ``z`` itself is the leaf
    (not a copy: the losses at vocabulary size share one input, a copy each would not fit in memory).
    """
    if loss:
        grad, zz, uu = None, z.requires_grad_(), None
    else:
        grad = torch.randn_like(z)
        zz = z.clone().requires_grad_()
        uu = None if u is None else u.clone().requires_grad_()

    def call() -> None:
        zz.grad = None
        if uu is not None:
            uu.grad = None
        fn(zz, uu).backward(grad)

    return call


def time_interleaved(calls: Dict[str, Callable[[], None]], reps: int, budget: float,
                     clock: Callable[[], float] = time.perf_counter) -> Dict[str, float]:
    """Median seconds per call for each entry, measured in interleaved rounds.

    Every round times one block of calls of each candidate in turn, so a change
    in machine load affects all of them alike; the ratios come from the same run.
    ``clock``: wall time (default), or ``time.process_time`` (this process's CPU time:
    on a busy machine it leaves out the time the benchmark waited for a core).
    """
    blocks: Dict[str, int] = {}
    for name, call in calls.items():
        for _ in range(2):
            call()
        t0 = clock()
        call()
        blocks[name] = max(1, int(budget / max(clock() - t0, 1e-7)))
    samples: Dict[str, List[float]] = {name: [] for name in calls}
    for _ in range(reps):
        for name, call in calls.items():
            n = blocks[name]
            t0 = clock()
            for _ in range(n):
                call()
            samples[name].append((clock() - t0) / n)
    return {name: statistics.median(v) for name, v in samples.items()}


def candidates() -> Dict[str, Tuple[Callable, bool]]:
    """name -> (fn(z, u), uses_u)."""
    c: Dict[str, Tuple[Callable, bool]] = {
        "torch.softmax": (lambda z, u: torch.softmax(z, -1), False),
    }
    if entmax is not None:
        c["entmax.sparsemax"] = (lambda z, u: entmax.sparsemax(z, -1), False)
    c.update(
        {
            "softmax": (lambda z, u: sops.softmax(z), False),
            "sparsemax": (lambda z, u: sops.sparsemax(z), False),
            "csoftmax": (lambda z, u: sops.csoftmax(z, u), True),
            "csparsemax": (lambda z, u: sops.csparsemax(z, u), True),
            "numpy-loop": (lambda z, u: NumpyLoopCSparsemax.apply(z, u), True),
        }
    )
    return c


def run(regime: str, reps: int, budget: float, shapes=SHAPES,
        clock: Callable[[], float] = time.perf_counter) -> List[Dict[str, object]]:
    results = []
    for rows, J in shapes:
        z, u = make_inputs(rows, J, regime)
        calls = {name: _runner(fn, z, u if uses_u else None) for name, (fn, uses_u) in candidates().items()}
        loop = calls.pop("numpy-loop")
        times = time_interleaved(calls, reps, budget, clock)
        times["numpy-loop"] = time_interleaved({"numpy-loop": loop}, max(3, reps // 3), budget, clock)["numpy-loop"]
        results.append({"shape": (rows, J), "times": times})
    return results


def op_path(name: str) -> str:
    """Which implementation ``name`` runs on an input on ``DEVICE`` in this process."""
    if name in NATIVE_OPS and DEVICE.type == "cpu":
        return "native" if _checks.native_kernels(torch.zeros(1)) is not None else "pytorch"
    if name in ("softmax", "sparsemax", "csoftmax", "csparsemax"):
        return "pytorch"
    return ""


def table(results: List[Dict[str, object]], regime: str) -> str:
    ours = ["softmax", "sparsemax", "csoftmax", "csparsemax"]
    lines = [
        f"u regime: {regime}",
        "",
        "| shape (rows x J) | op | path | fwd+bwd (us) | / torch.softmax | / entmax.sparsemax | numpy-loop / op |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for res in results:
        t = res["times"]  # type: ignore[index]
        rows, J = res["shape"]  # type: ignore[misc]
        shape = f"{rows} x {J}"
        names = ["torch.softmax"] + (["entmax.sparsemax"] if "entmax.sparsemax" in t else []) + ours + ["numpy-loop"]
        for name in names:
            sec = t[name]
            r_sm = sec / t["torch.softmax"]
            r_em = f"{sec / t['entmax.sparsemax']:.2f}" if "entmax.sparsemax" in t else "n/a"
            speedup = f"{t['numpy-loop'] / sec:.0f}x" if name in ours else ""
            lines.append(f"| {shape} | {name} | {op_path(name)} | {sec * 1e6:.1f} | {r_sm:.2f} | {r_em} | {speedup} |")
    return "\n".join(lines)


def bars(results: List[Dict[str, object]]) -> str:
    """The issue's speed bars, checked against this run."""
    lines = []
    for res in results:
        t = res["times"]  # type: ignore[index]
        rows, J = res["shape"]  # type: ignore[misc]
        if "entmax.sparsemax" in t:
            em = t["entmax.sparsemax"]
            for op, bar in (("sparsemax", 1.0), ("csoftmax", 1.5), ("csparsemax", 1.5)):
                r = t[op] / em
                lines.append(f"{'ok  ' if r <= bar else 'MISS'} {rows} x {J}: {op} / entmax.sparsemax = {r:.2f} (bar {bar})")
        if (rows, J) == (2048, 50):
            for op in ("softmax", "sparsemax", "csoftmax", "csparsemax"):
                r = t["numpy-loop"] / t[op]
                lines.append(f"{'ok  ' if r >= 100 else 'MISS'} {rows} x {J}: numpy-loop / {op} = {r:.0f}x (bar 100x)")
    return "\n".join(lines)


# ----------------------------------------------------------------------------
# alpha-entmax: entmax15, entmax_bisect, centmax against the entmax package
# ----------------------------------------------------------------------------


def entmax_candidates(rows: int) -> Dict[str, Tuple[Callable, bool]]:
    """name -> (fn(z, u), uses_u); alpha = 1.5 throughout, as one number (``a=1.5``) and as a
    learned per-row tensor (``a[rows]``: the gradient to alpha is computed too)."""
    a_ours = torch.full((rows, 1), 1.5, device=DEVICE, requires_grad=True)
    a_ref = torch.full((rows, 1), 1.5, device=DEVICE, requires_grad=True)
    c: Dict[str, Tuple[Callable, bool]] = {
        "entmax15": (lambda z, u: sops.entmax15(z), False),
        "entmax_bisect a=1.3": (lambda z, u: sops.entmax_bisect(z, 1.3), False),
        "entmax_bisect a[rows]": (lambda z, u: sops.entmax_bisect(z, a_ours), False),
        "centmax a=1.3": (lambda z, u: sops.centmax(z, u, 1.3), True),
        "centmax a[rows]": (lambda z, u: sops.centmax(z, u, a_ours), True),
    }
    if entmax is not None:
        c["entmax.entmax15"] = (lambda z, u: entmax.entmax15(z, -1), False)
        c["entmax.entmax_bisect a=1.3"] = (lambda z, u: entmax.entmax_bisect(z, 1.3, -1), False)
        c["entmax.entmax_bisect a[rows]"] = (lambda z, u: entmax.entmax_bisect(z, a_ref, -1), False)
    return c


#: op -> the entmax package's function it is compared with
ENTMAX_REFERENCE = {
    "entmax15": "entmax.entmax15",
    "entmax_bisect a=1.3": "entmax.entmax_bisect a=1.3",
    "entmax_bisect a[rows]": "entmax.entmax_bisect a[rows]",
    "centmax a=1.3": "entmax.entmax_bisect a=1.3",
    "centmax a[rows]": "entmax.entmax_bisect a[rows]",
}


def run_entmax(regime: str, reps: int, budget: float, shapes=SHAPES,
               clock: Callable[[], float] = time.perf_counter) -> List[Dict[str, object]]:
    results = []
    for rows, J in shapes:
        z, u = make_inputs(rows, J, regime)
        calls = {name: _runner(fn, z, u if uses_u else None) for name, (fn, uses_u) in entmax_candidates(rows).items()}
        results.append({"shape": (rows, J), "times": time_interleaved(calls, reps, budget, clock)})
    return results


def table_entmax(results: List[Dict[str, object]], regime: str) -> str:
    lines = [
        f"alpha-entmax, u regime: {regime} (centmax is compared with the unconstrained entmax.entmax_bisect)",
        "",
        "| shape (rows x J) | op | fwd+bwd (us) | reference | reference (us) | op / reference |",
        "| --- | --- | ---: | --- | ---: | ---: |",
    ]
    for res in results:
        t = res["times"]  # type: ignore[index]
        rows, J = res["shape"]  # type: ignore[misc]
        for name, ref in ENTMAX_REFERENCE.items():
            sec = t[name]
            if ref in t:
                lines.append(f"| {rows} x {J} | {name} | {sec * 1e6:.1f} | {ref} | {t[ref] * 1e6:.1f} | "
                             f"{sec / t[ref]:.2f} |")
            else:
                lines.append(f"| {rows} x {J} | {name} | {sec * 1e6:.1f} | n/a | | |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------
# Fenchel-Young losses (the sparse output layer) against entmax.losses
# ----------------------------------------------------------------------------

#: target positions (B x T) and vocabulary sizes of the loss benchmark
FY_ROWS = 4096
FY_VOCABS = (8000, 32000)
#: rows in ``--quick`` mode (unless ``--rows`` is given)
FY_QUICK_ROWS = 256
#: the agreement the check requires of our losses with the package's (float32, the same scores and
#: targets, no label smoothing): every gradient entry within FY_GRAD_ATOL, the summed loss within
#: FY_LOSS_RTOL of its size
FY_GRAD_ATOL = 1e-5
FY_LOSS_RTOL = 1e-5
#: the issue's bar: our loss (forward + backward) at most this times the package's at V = FY_BAR_VOCAB
FY_BAR, FY_BAR_VOCAB = 1.0, 32000


def fy_inputs(rows: int, V: int, seed: int = 0) -> Tuple[torch.Tensor, torch.Tensor]:
    """Scores ``z ~ N(0, 1)`` ``[rows, V]`` and targets: uniform over the words, with every 16th
    position padding (``PAD_ID``: no target, ignored by both losses, as in a batch)."""
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(rows, V, generator=g)
    y = torch.randint(PAD_ID + 1, V, (rows,), generator=g)
    y[15::16] = PAD_ID
    return z.to(DEVICE), y.to(DEVICE)


def fy_pairs(alpha: float) -> List[Tuple[str, Callable, str, Callable]]:
    """``(name, loss(z, y), reference name, reference loss(z, y))`` for each sparse ``model.output``:
    ours is the training loss (:func:`scanmt.model.output.output_loss`: summed over non-pad targets),
    the reference the ``entmax`` package's loss module with its defaults (``SparsemaxLoss``: full sort,
    ``Entmax15Loss``: partial sort from ``k=100``, ``EntmaxBisectLoss``: 50 halvings in the input
    dtype) except ``reduction="sum"`` and ``ignore_index=PAD_ID``, which make it the same quantity."""
    assert entmax is not None
    L = entmax.losses
    ref = dict(ignore_index=PAD_ID, reduction="sum")
    a = f"a={alpha:g}"
    return [
        ("FY sparsemax", lambda z, y: output_loss(z, y, "sparsemax"),
         "entmax.SparsemaxLoss", L.SparsemaxLoss(**ref)),
        ("FY entmax15", lambda z, y: output_loss(z, y, "entmax15"),
         "entmax.Entmax15Loss", L.Entmax15Loss(**ref)),
        (f"FY entmax {a}", lambda z, y: output_loss(z, y, "entmax", alpha),
         f"entmax.EntmaxBisectLoss {a}", L.EntmaxBisectLoss(alpha=alpha, **ref)),
    ]


def _loss_and_grad(fn: Callable, z: torch.Tensor, y: torch.Tensor) -> Tuple[float, torch.Tensor]:
    x = z.detach().requires_grad_()
    loss = fn(x, y)
    loss.backward()
    return float(loss.detach()), x.grad  # type: ignore[return-value]


def fy_check(z: torch.Tensor, y: torch.Tensor, pairs, grad_atol: float = FY_GRAD_ATOL,
             loss_rtol: float = FY_LOSS_RTOL) -> List[Dict[str, object]]:
    """Each pair's loss values and gradients on the same ``z`` and ``y``; ``AssertionError`` naming
    the pair and the numbers where they differ beyond the tolerances.  Returns per pair the losses,
    ``dloss`` (absolute difference of the summed losses) and ``dgrad`` (largest absolute difference
    of a gradient entry)."""
    out, bad = [], []
    for name, fn, ref, ref_fn in pairs:
        l_ours, g = _loss_and_grad(fn, z, y)
        l_ref, g_ref = _loss_and_grad(ref_fn, z, y)
        dgrad = float(g.sub_(g_ref).abs_().max())
        del g, g_ref
        dloss = abs(l_ours - l_ref)
        res = {"name": name, "ref": ref, "loss": l_ours, "ref_loss": l_ref, "dloss": dloss, "dgrad": dgrad}
        out.append(res)
        if not (dgrad <= grad_atol and dloss <= loss_rtol * max(1.0, abs(l_ref))):
            bad.append(f"{name} vs {ref}: loss {l_ours!r} vs {l_ref!r} (|diff| {dloss:.3g}, allowed "
                       f"{loss_rtol * max(1.0, abs(l_ref)):.3g}), gradient max |diff| {dgrad:.3g} (allowed {grad_atol:g})")
    if bad:
        raise AssertionError(f"FY losses disagree with the entmax package on {tuple(z.shape)}:\n  " + "\n  ".join(bad))
    return out


def run_fy(rows: int, vocabs, alpha: float, reps: int, budget: float,
           clock: Callable[[], float] = time.perf_counter) -> List[Dict[str, object]]:
    """For each vocabulary size: the correctness check (:func:`fy_check`), then our losses and the
    package's timed in interleaved rounds (forward + backward, gradient to the scores)."""
    results = []
    pairs = fy_pairs(alpha)
    for V in vocabs:
        z, y = fy_inputs(rows, V)
        checks = fy_check(z, y, pairs)
        calls = {}
        for name, fn, ref, ref_fn in pairs:
            for n, f in ((name, fn), (ref, ref_fn)):
                calls[n] = _runner(lambda zz, uu, f=f: f(zz, y), z, None, loss=True)
        times = time_interleaved(calls, reps, budget, clock)
        z.grad = None
        results.append({"shape": (rows, V), "times": times, "checks": checks})
    return results


def table_fy(results: List[Dict[str, object]]) -> str:
    lines = [
        "Fenchel-Young losses against entmax.losses (forward + backward, summed over non-pad targets)",
        "",
        "| rows x V | loss | fwd+bwd (ms) | reference | reference (ms) | loss / reference | max abs diff: loss, grad |",
        "| --- | --- | ---: | --- | ---: | ---: | --- |",
    ]
    for res in results:
        t = res["times"]  # type: ignore[index]
        rows, V = res["shape"]  # type: ignore[misc]
        for c in res["checks"]:  # type: ignore[union-attr]
            sec, ref = t[c["name"]], t[c["ref"]]
            lines.append(f"| {rows} x {V} | {c['name']} | {sec * 1e3:.1f} | {c['ref']} | {ref * 1e3:.1f} | "
                         f"{sec / ref:.2f} | {c['dloss']:.2g}, {c['dgrad']:.2g} |")
    return "\n".join(lines)


def _vocab(V: int) -> str:
    return f"{V // 1000}k" if V % 1000 == 0 else str(V)


def bars_fy(results: List[Dict[str, object]]) -> str:
    """One line per loss and size, and the issue's bar where V is FY_BAR_VOCAB."""
    lines = []
    for res in results:
        t = res["times"]  # type: ignore[index]
        rows, V = res["shape"]  # type: ignore[misc]
        for c in res["checks"]:  # type: ignore[union-attr]
            r = t[c["name"]] / t[c["ref"]]
            line = f"{c['name']} loss fwd+bwd at V={_vocab(V)} = {r:.2f}x {c['ref']}"
            if V == FY_BAR_VOCAB:
                line += f": bar (<= {FY_BAR:g}x) {'met' if r <= FY_BAR else 'NOT met'}"
            lines.append(line)
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer and shorter repetitions")
    ap.add_argument("--regime", choices=["nmt", "tight", "both"], default="both")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    ap.add_argument("--no-native", action="store_true", help="the pure PyTorch algorithms (no native kernels)")
    ap.add_argument("--ops", choices=["all", "classic", "entmax", "fy"], default="all",
                    help="classic: softmax, sparsemax, csoftmax, csparsemax; entmax: entmax15, entmax_bisect, "
                         "centmax against the entmax package; all: both of these.  fy (not part of all: minutes "
                         "per vocabulary size): the Fenchel-Young losses of model.output sparsemax, entmax15 and "
                         "entmax against entmax.losses' SparsemaxLoss, Entmax15Loss and EntmaxBisectLoss at "
                         "--rows x --vocab, after checking that their values and gradients agree")
    ap.add_argument(
        "--shapes", default=None, help="comma-separated RxJ shapes (default: " + ",".join(f"{r}x{j}" for r, j in SHAPES) + ")"
    )
    ap.add_argument("--rows", type=int, default=None,
                    help=f"--ops fy: target positions B x T (default {FY_ROWS}, {FY_QUICK_ROWS} with --quick)")
    ap.add_argument("--vocab", type=int, nargs="+", default=list(FY_VOCABS),
                    help="--ops fy: vocabulary sizes (default " + " ".join(map(str, FY_VOCABS)) + ")")
    ap.add_argument("--alpha", type=float, default=1.5,
                    help="--ops fy: alpha of model.output entmax and EntmaxBisectLoss (default 1.5, the default of "
                         "model.output_alpha)")
    ap.add_argument("--reps", type=int, default=None,
                    help="timed rounds (default 15, 5 with --quick; --ops fy: 7, 3 with --quick)")
    ap.add_argument("--device", default="cpu",
                    help="where the inputs live and the ops run: cpu (default) or cuda; on cuda every timed block "
                         "ends with torch.cuda.synchronize(), the native CPU kernels are not involved, and "
                         "--cpu-time is refused")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time with this process's CPU time instead of wall time (a busy machine: leaves out the "
                         "time spent waiting for a core; meaningful with --threads 1)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    reps, budget = (5, 0.01) if args.quick else (15, 0.03)
    if args.reps:
        reps = args.reps
    global DEVICE
    DEVICE = torch.device(args.device)
    if DEVICE.type == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: torch sees no CUDA device here")
    if DEVICE.type == "cuda" and args.cpu_time:
        ap.error("--cpu-time measures this process's CPU time, which says nothing about GPU kernels")
    clock = time.process_time if args.cpu_time else device_clock
    shapes = SHAPES
    if args.shapes:
        shapes = tuple(tuple(int(v) for v in s.lower().split("x")) for s in args.shapes.split(","))  # type: ignore[misc]
    print(
        f"# torch {torch.__version__}, numpy {np.__version__}, "
        f"entmax {getattr(entmax, '__version__', 'not installed')}, threads {torch.get_num_threads()}, "
        f"{platform.processor() or platform.machine()}, python {platform.python_version()}"
        + (f", device {torch.cuda.get_device_name(DEVICE)}" if DEVICE.type == "cuda" else "")
    )
    if entmax is None:
        print("# entmax is not installed (pip install entmax): skipping the entmax.sparsemax column")
    if DEVICE.type != "cpu":
        print(f"# native kernels: not involved (the inputs are on {DEVICE})")
    elif args.no_native:
        _checks._NATIVE_ALLOWED = False
        print("# native kernels: not used (--no-native)")
    else:
        mod = _native.get()
        inf = _native.info()
        if mod is None:
            print(f"# native kernels: unavailable ({inf['reason']}); the PyTorch algorithms are measured")
        else:
            how = "built" if inf["built"] else "loaded"
            print(f"# native kernels: {how} in {inf['seconds']:.1f} s ({inf['path']})")
    if args.ops == "fy":
        if entmax is None:
            print("# entmax is not installed (pip install entmax): nothing to compare the losses with")
            return 1
        rows = args.rows or (FY_QUICK_ROWS if args.quick else FY_ROWS)
        fy_reps = args.reps or (3 if args.quick else 7)
        print(f"# {'CPU' if args.cpu_time else 'wall'} time, median of {fy_reps} interleaved rounds; check: "
              f"gradients within {FY_GRAD_ATOL:g}, summed loss within {FY_LOSS_RTOL:g} relative")
        results = run_fy(rows, args.vocab, args.alpha, fy_reps, budget, clock)
        print()
        print(table_fy(results))
        print()
        print(bars_fy(results))
        return 0
    regimes = ["nmt", "tight"] if args.regime == "both" else [args.regime]
    for regime in regimes:
        if args.ops in ("all", "classic"):
            results = run(regime, reps, budget, shapes, clock)
            print()
            print(table(results, regime))
            print()
            print(bars(results))
        if args.ops in ("all", "entmax"):
            if entmax is None:
                print("# entmax is not installed (pip install entmax): the reference columns are skipped")
            print()
            print(table_entmax(run_entmax(regime, reps, budget, shapes, clock), regime))
    return 0


if __name__ == "__main__":
    sys.exit(main())
