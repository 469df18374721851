"""Sparse and constrained attention transforms as exact, batched PyTorch ops.

This package maps a vector of scores ``z`` (and, for the constrained
transforms, a vector of upper bounds ``u``) to a probability distribution ``p``.
It depends only on PyTorch and can be used without the rest of scanmt.

The transforms
--------------
All four solve a problem over the probability simplex
``{p : p >= 0, sum(p) = 1}`` along one dimension ``dim``:

``softmax(z, u=None, dim=-1, mask=None)``
    ``p = exp(z) / sum(exp(z))``.  ``u`` is accepted and ignored, so that the four
    transforms share one signature.

``sparsemax(z, dim=-1, mask=None)``
    ``argmin_p ||p - z||^2``: the Euclidean projection of ``z`` onto the simplex
    (Martins and Astudillo, 2016).  ``p_j = max(0, z_j - tau)``; low scores get
    exactly 0.

``csoftmax(z, u, dim=-1, mask=None)``
    ``argmin_p KL(p || softmax(z))`` subject to ``p <= u`` (constrained softmax,
    Martins and Kreutzer, 2017).  ``p_j = min(u_j, exp(z_j) / Z)``: softmax with
    the mass above a bound handed on to the other entries.

``csparsemax(z, u, dim=-1, mask=None)``
    ``argmin_p ||p - z||^2`` subject to ``p <= u`` (constrained sparsemax, Malaviya,
    Ferreira and Martins, 2018).  ``p_j = clip(z_j - tau, 0, u_j)``: both sparse
    and bounded.

In neural machine translation the bounds are ``u = f - attention_sum``: a fertility ``f``
per source word minus the attention ``attention_sum`` it has received so far, so a word
cannot be attended to more than ``f`` times in total.

``entmax15(z, dim=-1, mask=None)``, ``entmax_bisect(z, alpha, dim=-1, mask=None)`` and ``centmax(z, u, alpha, dim=-1, mask=None)``
    alpha-entmax, ``argmax_p p.z + H_alpha(p)`` with the Tsallis entropy (Peters, Niculae and
    Martins, 2019), and its constrained form with ``p <= u``:
    ``p_j = min(u_j, [(alpha - 1)(z_j - t)]_+^(1/(alpha - 1)))``.  entmax15 is exact by sorting;
    the other two bisect on ``t`` in float64 for any ``alpha >= 1`` (a number, or a tensor with
    one value per row, which receives a gradient).  ``alpha = 1`` is softmax / csoftmax and
    ``alpha = 2`` sparsemax / csparsemax.  Masks, fully masked rows, bounds and errors as below;
    the derivation of the forward pass, the backward pass and the gradient to ``alpha`` is in
    :mod:`scanmt.ops.entmax`.  No native kernels (the PyTorch algorithms run everywhere).

``bounded_recurrence(z, fertility, transform, *, mask=None, exhaustion=0.0, attention_sum=None, alpha=None, shared=False, backend="auto")``
    fertility-bounded attention over ``T`` consecutive positions as one op: ``u = max(0, f - attention_sum)``,
    ``p_t = transform(z_t + c u, u)``, ``attention_sum += p_t``, for csoftmax, csparsemax and centmax;
    returns every ``p_t`` and the final ``attention_sum``.  ``backend="torch"`` loops over the positions with
    the ops above; ``"triton"`` (optional extra ``scanmt[gpu]``) runs one kernel program per row with the
    closed-form backward pass (:mod:`scanmt.ops.recurrence`).

``deferred_checks()``
    a ``with`` block in which the triton backend queues its input checks and runs them at the block's end
    with one host read, instead of one per call (the training loop runs each update's forward and backward
    passes in one; :mod:`scanmt.ops.deferred`).

``Sparsemax(dim)``, ``CSoftmax(dim)`` and ``CSparsemax(dim)`` (and ``Softmax``, ``Entmax15``,
``EntmaxBisect(alpha)``, ``CEntmax(alpha)``) are
``nn.Module`` wrappers: ``Sparsemax()(z, mask=None)``,
``CSoftmax()(z, u, mask=None)``, ``CSparsemax()(z, u, mask=None)``.

Shapes, dtypes and devices
--------------------------
* ``z`` and ``u`` may have any shape and broadcast together (``u`` may also be a
  Python number); the result has the broadcast shape.  The transform runs
  along ``dim``; every other index is an independent row.
* Computation is in at least float32: float16 and bfloat16 inputs are upcast
  internally and the result is cast back (to the promoted dtype of ``z`` and a
  floating ``u``).  This also holds under ``torch.autocast``.
* The code is device-agnostic.  On other devices than the CPU the forward
  passes use sort-based algorithms with no data-dependent control flow (no host
  round trip).  On the CPU, sparsemax, csparsemax and csoftmax run their
  forward pass in a small compiled kernel (``_kernels.cpp``, one call for all
  rows, in double precision; built with ``torch.utils.cpp_extension`` on first
  use, which takes 10-60 s once per machine and needs a C++ compiler and
  ``ninja``, then cached in ``$TORCH_EXTENSIONS_DIR``, by default
  ``~/.cache/torch_extensions``).  Without the kernel (no compiler, a build
  error, or ``SCANMT_OPS_NATIVE=0`` in the environment: one warning is logged)
  they use sort-free PyTorch algorithms: for small inputs, the threshold's
  equation evaluated at every breakpoint at once; for larger ones, Newton's
  method on the threshold (safeguarded by bisection for csparsemax; greedy
  capping for csoftmax), with converged rows leaving the working set.  All are
  exact: the result satisfies the KKT conditions up to floating-point rounding,
  and rows an iteration has not settled after a fixed number of steps are
  finished by a sort.  Inputs are never modified.

Gradients
---------
Custom ``torch.autograd.Function``\\ s implement the closed-form backward passes
(nothing is differentiated through a sort or a loop); gradients flow to ``z``
and ``u``, and can be differentiated again (``create_graph=True``, gradient
penalties, ``gradgradcheck`` passes in float64): softmax and csoftmax through the
saved output ``p``, while sparsemax and csparsemax, piecewise linear, have a
piecewise constant gradient whose derivative in ``z`` and ``u`` is 0:

* sparsemax: ``dz = 1[S] (dp - mean_S dp)`` with ``S`` the support;
* csoftmax (Martins and Kreutzer, 2017): with ``A`` the entries below their
  bound, ``m = sum_A p dp / sum_A p``, ``dz = 1[A] p (dp - m)``,
  ``du = 1[not A] (dp - m)``;
* csparsemax (Proposition 1 of the paper): with ``A = {0 < p < u}`` and
  ``A_R = {p = u}`` (entries pinned at their bound), ``m = mean_A dp``,
  ``dz = 1[A] (dp - m)``, ``du = 1[A_R] (dp - m)``.

Where a set in these formulas is empty (for instance ``sum(u) = 1``, so
``p = u`` and no entry is free), ``m = 0``.

Semantics
---------
mask
    A bool tensor broadcastable to ``z`` (to the broadcast shape of ``z`` and
    ``u``); **True means the position may receive attention**.  Masked positions
    get exactly 0 and a zero gradient (for ``z`` and ``u``); whatever ``z`` and
    ``u`` hold there (even NaN) is ignored.  A score of ``-inf`` acts like a
    masked position (but ``u`` there must still be a valid number).
fully masked rows
    A row with no unmasked position returns all zeros with zero gradients,
    never NaN, and is never reported as infeasible.
bounds ``u``
    ``u >= 1`` never binds (so ``u = 1`` everywhere gives softmax and sparsemax
    back) and ``u = +inf`` means unbounded (for example a ``<sink>`` column).
    ``u = 0`` means the position gets exactly 0.  Entries in ``[-1e-6, 0)`` are
    rounding noise and read as 0.  If the bounds over the unmasked positions
    sum to exactly 1, then ``p = u``; if they sum to at most 1 but within
    ``FEASIBILITY_TOL`` (1e-5) of it, again ``p = u`` (so ``sum(p)`` may fall
    short of 1 by that much).  Otherwise ``0 <= p <= u`` and ``sum(p) = 1`` hold to
    about 1e-6 in float32.
errors
    ``ValueError`` for NaN or +inf in ``z``, NaN or negative (below -1e-6)
    ``u`` at an unmasked position, infeasible rows (the sum of ``u`` over the
    unmasked positions below ``1 - FEASIBILITY_TOL``; the message says how many
    rows and by how much) and shapes that do not broadcast; ``TypeError`` for
    a non-floating ``z``, a non-bool ``mask``, or a
    constrained op called without ``u`` (``u=None``).
huge scores
    Every finite input (tested up to ``1e30`` in magnitude, float32 and float64, on the
    native and the PyTorch paths) gives a finite point of the (bounded) simplex, the
    same on both paths up to rounding: the transforms are invariant to adding a
    constant to ``z``, and the thresholds are found on ``z - max(z)`` (exact near the
    maximum, where the support of softmax and sparsemax lies).  Where the constrained
    ops' mass sits far below a capped maximum (``z = [1e30, 0.3, 0]`` with ``u_1 = 0.5``
    gives ``[0.5, 0.4, 0.1]``), ``z - max(z)`` has rounded it away: those rows are solved
    again in frames centred at the threshold (``_checks.recentre``), in double precision.
    Scores that the dtype cannot tell apart are equal: three float32 scores
    ``1e8 + [1.2, 0.8, -0.2]`` are one number, and get 1/3 each.
validation cost
    These checks cost a few reductions and one host synchronisation per call
    (on the CPU with the native kernel: nothing extra, the kernel checks).
    Pass ``validate=False`` (keyword only; or set ``module.validate = False`` on
    the wrappers) to skip them, e.g. in a training loop after the first batches
    have been checked.  Invalid input then gives unspecified (possibly NaN)
    output instead of an error.

Speed
-----
On the CPU (float32, one thread, forward + backward) the native kernels put
sparsemax at 0.06-0.45x the time of ``entmax.sparsemax`` (a sort) and csoftmax
and csparsemax at 0.1-0.75x, small decoder steps (64 x 20) included, where the
PyTorch algorithms take about 2x for the constrained ops (every tensor op
costs its fixed overhead there).  The backward passes are a few tensor ops.
``benchmarks/ops.py`` measures all of this (``--no-native`` for the PyTorch
algorithms); ``docs/ops-benchmark.md`` has the numbers.

Example
-------
>>> import torch
>>> from scanmt.ops import csparsemax, sparsemax
>>> z = torch.tensor([[1.2, 0.8, -0.2]])
>>> sparsemax(z)
tensor([[0.7000, 0.3000, 0.0000]])
>>> csparsemax(z, torch.tensor([[0.5, 1.0, 1.0]]))
tensor([[0.5000, 0.5000, 0.0000]])
>>> mask = torch.tensor([[True, False, True]])
>>> sparsemax(z, mask=mask)
tensor([[1., 0., 0.]])
"""

from ._checks import FEASIBILITY_TOL, NEGATIVE_TOL
from .csoftmax import csoftmax
from .csparsemax import csparsemax
from .deferred import deferred_checks
from .entmax import centmax, entmax15, entmax_bisect
from .modules import CEntmax, CSoftmax, CSparsemax, Entmax15, EntmaxBisect, Softmax, Sparsemax
from .recurrence import bounded_recurrence
from .softmax import softmax
from .sparsemax import sparsemax


def load_native_kernels() -> bool:
    """Build (on a machine's first use, about a minute) or load the compiled CPU kernels now, rather than
    inside the first forward pass; returns whether they are available (else the PyTorch algorithms run)."""
    from . import _native

    return _native.get() is not None


__all__ = [
    "load_native_kernels",
    "softmax",
    "sparsemax",
    "csoftmax",
    "csparsemax",
    "entmax15",
    "entmax_bisect",
    "centmax",
    "bounded_recurrence",
    "deferred_checks",
    "Softmax",
    "Sparsemax",
    "CSoftmax",
    "CSparsemax",
    "Entmax15",
    "EntmaxBisect",
    "CEntmax",
    "FEASIBILITY_TOL",
    "NEGATIVE_TOL",
]
