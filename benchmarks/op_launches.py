"""What an op call costs on a GPU, counted on the CPU: kernel launches and host synchronisations.

    python benchmarks/op_launches.py                 # the ops, then one training step of each model
    python benchmarks/op_launches.py --path cpu      # the CPU's own algorithms instead of the GPU's
    python benchmarks/op_launches.py --model RUN/best.pt --batches 3   # a trained model on its own data

At the sizes of attention (rows x J of a few thousand entries) an op on a GPU costs its kernel launches
and its host synchronisations, not its arithmetic (docs/ops-benchmark.md, GPU section).  Both can be
counted without a GPU, on the code path a GPU input takes: the PyTorch algorithms (native kernels off)
with the method ``choose_method`` picks off the CPU (the sort), and csoftmax's bisection testing its
bracket every ``BISECT_CHECK_EVERY`` halvings as off the CPU (``--path cpu``: the CPU's dense and
iterative methods, whose loops test convergence on the host, and a test after every halving).

* aten operations: every operation dispatched to PyTorch's kernels (views and detach left out), counted
  with a ``TorchDispatchMode``; on a GPU each is about one kernel launch;
* host reads: every read of a tensor's value into Python (``bool()``, ``int()``, ``float()``,
  ``.item()``, ``.tolist()``) made by scanmt's code; on a GPU each waits for the queued kernels.

Reported per forward and backward call of each op on ``--rows x --cols`` scores (``u`` of the ``nmt``
regime of benchmarks/ops.py), and per training step (forward and backward) of the LSTM ``cpu-small``
and the Transformer preset with each attention transform on a batch of B x S source and B x T target
tokens, with the places in scanmt that read most.  ``--model``: instead of the random models, the training
steps of a checkpoint on the first ``--batches`` batches of its own training data (with its fertility):
trained attention is peaked, and sends rows down paths (recentring, bisection) that random scores do not.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import importlib
import os
import sys
import traceback
import unittest.mock
from typing import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
from ops import make_inputs  # noqa: E402  (benchmarks/ops.py)
from trained import load_trained  # noqa: E402  (benchmarks/trained.py)

import scanmt.ops as sops  # noqa: E402
from scanmt.config import Config  # noqa: E402
from scanmt.model.build import build_model  # noqa: E402
from scanmt.model.loss import nmt_loss  # noqa: E402
from scanmt.ops import _checks  # noqa: E402
from scanmt.presets import preset_path  # noqa: E402

csoftmax_module = importlib.import_module("scanmt.ops.csoftmax")

HOST_READS = ("__bool__", "__int__", "__float__", "item", "tolist")


class Counter(TorchDispatchMode):
    """Counts aten operations, and (with :func:`count_host_reads` installed) host reads by place."""

    def __init__(self) -> None:
        super().__init__()
        self.ops = 0
        self.reads: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        name = func.__name__
        if "view" not in name and not name.startswith(("detach", "alias", "_unsafe_view")):
            self.ops += 1
        return func(*args, **(kwargs or {}))


ACTIVE: list[Counter] = []


def count_host_reads() -> None:
    """Wrap ``torch.Tensor``'s value reads so that the innermost active :class:`Counter` records the place
    in scanmt that made each one."""
    for name in HOST_READS:
        original = getattr(torch.Tensor, name)

        def wrapped(self, *a, _original=original, **k):
            if ACTIVE:
                here = [f for f in traceback.extract_stack()[:-1] if f"{os.sep}scanmt{os.sep}" in f.filename]
                if here:
                    f = here[-1]
                    ACTIVE[-1].reads[f"{os.path.basename(f.filename)}:{f.lineno}"] += 1
            return _original(self, *a, **k)

        setattr(torch.Tensor, name, wrapped)


def counted(fn: Callable[[], object]) -> tuple[object, Counter]:
    c = Counter()
    ACTIVE.append(c)
    try:
        with c:
            out = fn()
    finally:
        ACTIVE.pop()
    return out, c


def op_table(rows: int, cols: int) -> None:
    z, u = make_inputs(rows, cols, "nmt")
    z.requires_grad_()
    u.requires_grad_()
    calls: dict[str, Callable[[], torch.Tensor]] = {
        "torch.softmax": lambda: torch.softmax(z, -1),
        "softmax": lambda: sops.softmax(z),
        "sparsemax": lambda: sops.sparsemax(z),
        "csoftmax": lambda: sops.csoftmax(z, u),
        "csparsemax": lambda: sops.csparsemax(z, u),
        "entmax15": lambda: sops.entmax15(z),
        "entmax_bisect a=1.5": lambda: sops.entmax_bisect(z, 1.5),
        "centmax a=1.5": lambda: sops.centmax(z, u, 1.5),
    }
    g = torch.randn(rows, cols)
    print(f"\none call on {rows} x {cols} scores (u: nmt regime)")
    print(f"  {'op':<22} {'aten ops fwd':>12} {'bwd':>5} {'host reads fwd':>15} {'bwd':>5}")
    for name, fn in calls.items():
        p, fwd = counted(fn)
        _, bwd = counted(lambda: p.backward(g))  # type: ignore[union-attr]
        print(f"  {name:<22} {fwd.ops:>12} {bwd.ops:>5} {sum(fwd.reads.values()):>15} {sum(bwd.reads.values()):>5}")


def step_table(B: int, S: int, T: int, vocab: int) -> None:
    torch.manual_seed(0)
    src = torch.randint(4, vocab, (B, S))
    n = torch.full((B,), S)
    tgt_in, tgt_out = torch.randint(4, vocab, (B, T)), torch.randint(4, vocab, (B, T))
    fert = torch.randint(1, 3, (B, S)).float()
    print(f"\none training step (forward + backward), B {B}, S {S}, T {T}, vocabulary {vocab}; constrained "
          "transforms: fertility 1-2, exhaustion 0.2")
    print(f"  {'model':<12} {'attention':<11} {'aten ops':>9} {'host reads':>11}  most reads at")
    for arch, preset in (("lstm", "cpu-small"), ("transformer", "transformer-small")):
        for transform in ("softmax", "sparsemax", "csoftmax", "csparsemax"):
            sets = [f"model.attention.transform={transform}"]
            if transform.startswith("c"):
                sets += ["model.attention.fertility.strategy=constant", "model.attention.fertility.value=2",
                         "model.attention.exhaustion=0.2"]
            if arch == "transformer" and transform != "softmax":
                sets.append("model.transformer.transform_layers=last_layer")
            cfg = Config.load(preset_path(preset), sets)
            model = build_model(cfg, vocab).train()
            f = fert if transform.startswith("c") else None
            _, c = counted(lambda: nmt_loss(model(src, n, tgt_in, f).logits, tgt_out).backward())
            top = ", ".join(f"{k} x{v}" for k, v in c.reads.most_common(3))
            print(f"  {arch:<12} {transform:<11} {c.ops:>9} {sum(c.reads.values()):>11}  {top}")


def model_table(path: str, batches: int) -> None:
    t = load_trained(path)
    cfg, model, train = t.cfg, t.model, t.train
    torch.manual_seed(0)
    print(f"\n{path}: {cfg.model.arch}, attention {cfg.model.attention.transform}; training steps (forward + "
          f"backward) on the first {batches} batches of {cfg.data.dir}")
    print(f"  {'batch':<6} {'target positions':>16} {'aten ops':>9} {'host reads':>11}  most reads at")
    for i, positions in enumerate(train.token_batches(cfg.data.batch_tokens, seed=1, epoch=1)[:batches]):
        b = train.make_batch(positions)
        _, c = counted(lambda: nmt_loss(model(b.src, b.src_len, b.tgt_in, b.fertility).logits, b.tgt_out).backward())
        top = ", ".join(f"{k} x{v}" for k, v in c.reads.most_common(3))
        print(f"  {i + 1:<6} {b.tgt_in.shape[1]:>16} {c.ops:>9} {sum(c.reads.values()):>11}  {top}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--path", choices=["gpu", "cpu"], default="gpu",
                    help="gpu (default): the algorithms a GPU input runs (the sort); cpu: the CPU's own choice "
                         "(dense or iterative); the native kernels are off either way")
    ap.add_argument("--rows", type=int, default=256, help="rows of the op table's scores")
    ap.add_argument("--cols", type=int, default=20, help="columns (J) of the op table's scores")
    ap.add_argument("--batch", type=int, nargs=3, default=[64, 16, 18], metavar=("B", "S", "T"),
                    help="the training step's batch: sentences, source length, target length")
    ap.add_argument("--vocab", type=int, default=8000, help="the training step's vocabulary size")
    ap.add_argument("--no-steps", action="store_true", help="only the op table")
    ap.add_argument("--model", help="a checkpoint: count its training steps on its own data instead")
    ap.add_argument("--batches", type=int, default=3, help="--model: training batches to count")
    args = ap.parse_args()
    torch.set_num_threads(1)
    count_host_reads()
    print(f"# torch {torch.__version__}; code path: {args.path} (native kernels off"
          f"{', the sort as off the CPU' if args.path == 'gpu' else ''})")
    with contextlib.ExitStack() as path:
        path.enter_context(_checks.use_native(False))
        if args.path == "gpu":
            path.enter_context(_checks.use_method("sort"))
            # the interval csoftmax's bisection takes off the CPU (it takes 1 for a CPU tensor)
            path.enter_context(unittest.mock.patch.object(
                csoftmax_module, "_logz_bisect",
                functools.partial(csoftmax_module._logz_bisect, check_every=csoftmax_module.BISECT_CHECK_EVERY)))
        if args.model:
            model_table(args.model, args.batches)
            return
        op_table(args.rows, args.cols)
        if not args.no_steps:
            step_table(*args.batch, args.vocab)


if __name__ == "__main__":
    main()
