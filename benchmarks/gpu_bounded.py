"""The fertility-bounded attention recurrence on a GPU: the torch loop against the Triton kernels (issue 55).

    python benchmarks/gpu_bounded.py                    # on CUDA: every table below, in under 5 minutes
    python benchmarks/gpu_bounded.py --device cpu       # the torch backend only, small sizes (checks the script)

Prints, side by side in one run (times are medians of ``--repeats`` timed calls, or of as many as fit in
``--budget`` seconds but at least 3, after ``--warmup`` calls; each call ends with ``torch.cuda.synchronize()``):

1. ``scanmt.ops.bounded_recurrence`` forward and forward + backward (a linear loss on the probabilities),
   ``backend="torch"`` (one transform call per target position) against ``backend="triton"`` (one kernel
   over all positions, one backward kernel), for csoftmax and csparsemax at NMT shapes (batch 64, 4 and 8
   heads, T = S in 30, 60, 100) and at one long shape (T = S = 512; torch forward only past ``--long-torch``).
2. A training update (forward, backward, Adam) of the Transformer preset ``transformer-small`` on a synthetic
   batch (64 sentences, source and target lengths drawn around Multi30k's), softmax cross-attention against
   csparsemax heads bounded in the last layer (constant fertility 2, exhaustion 0.2) with each backend, in
   fp32 and bf16 (``torch.autocast``, as ``train.precision: bf16``); in bf16 also with the fused attention
   restricted to cuDNN's backend (``sdpa=cudnn``), the check docs/transformer.md section 5 lists as pending:
   the default bf16 row runs SDPA without cuDNN (scanmt.model.transformer.fused_attention).
3. The same update of the LSTM ``cpu-small``: csparsemax (each step one ``bounded_recurrence`` call with
   T = 1) against softmax, each backend.

On the CPU (``--device cpu``) only the torch backend runs, at small sizes; Triton's kernels need CUDA.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import statistics
import time
from typing import Callable

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from scanmt.config import Config
from scanmt.data.vocab import PAD_ID
from scanmt.model.build import build_model
from scanmt.model.loss import nmt_loss
from scanmt.ops import _triton, bounded_recurrence
from scanmt.ops.recurrence import use_backend
from scanmt.presets import preset_path

VOCAB = 8000


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--repeats", type=int, default=None, help="timed calls per row (default 20 on CUDA, 3 on the CPU)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed calls per row first (compilation, caches)")
    ap.add_argument("--budget", type=float, default=1.5, help="seconds of timed calls per row, at least 3 calls")
    ap.add_argument("--long-torch", type=int, default=128,
                    help="T above which the torch loop's forward + backward is not timed (seconds per call)")
    ap.add_argument("--sections", nargs="+", default=["op", "transformer", "lstm"],
                    choices=["op", "transformer", "lstm"])
    return ap.parse_args()


def timer(device: torch.device, warmup: int, repeats: int, budget_s: float) -> Callable[[Callable[[], object]], float]:
    """A function that times a call: the median over ``repeats`` calls after ``warmup`` ones, in ms (fewer
    calls, at least 3, where they take more than ``budget_s`` seconds: the torch loop at long T)."""

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    def measure(fn: Callable[[], object]) -> float:
        for _ in range(warmup):
            fn()
        sync()
        times: list[float] = []
        while len(times) < repeats and (len(times) < 3 or sum(times) < budget_s * 1e3):
            t0 = time.perf_counter()
            fn()
            sync()
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)

    return measure


def backends(device: torch.device) -> list[str]:
    return ["torch", "triton"] if device.type == "cuda" and _triton.available() else ["torch"]


def row(label: str, cells: list[str]) -> str:
    return f"| {label} | " + " | ".join(cells) + " |"


# ---------------------------------------------------------------------------------------------------- the op
def op_inputs(B: int, H: int, T: int, S: int, device: torch.device) -> dict:
    g = torch.Generator().manual_seed(0)
    z = torch.randn(B, H, T, S, generator=g) * 2.0
    f = torch.rand(B, 1, S, generator=g) * 1.5 + 0.5
    f[..., -1] = float("inf")  # the sink
    return dict(z=z.to(device), fertility=f.to(device))


def op_section(device: torch.device, measure, args: argparse.Namespace) -> None:
    if device.type == "cuda":
        shapes = [(64, H, n, n) for H in (4, 8) for n in (30, 60, 100)] + [(64, 8, 512, 512)]
    else:
        shapes = [(8, 4, 12, 12), (8, 4, 24, 24)]
    names = backends(device)
    print("\n## 1. bounded_recurrence: forward | forward + backward, ms per call\n")
    head = [f"{b} fwd" for b in names] + [f"{b} fwd+bwd" for b in names]
    if len(names) == 2:
        head += ["speed-up fwd", "speed-up fwd+bwd"]
    print(row("transform, B x H x T x S", head))
    print("| --- |" + " ---: |" * len(head))
    for transform in ("csoftmax", "csparsemax"):
        for B, H, T, S in shapes:
            x = op_inputs(B, H, T, S, device)
            fwd, both = {}, {}
            for backend in names:
                def forward(backend=backend) -> None:
                    with torch.no_grad():
                        bounded_recurrence(x["z"], x["fertility"], transform, exhaustion=0.2, backend=backend,
                                           validate=False)

                def forward_backward(backend=backend) -> None:
                    z = x["z"].detach().requires_grad_()
                    p, _ = bounded_recurrence(z, x["fertility"], transform, exhaustion=0.2, backend=backend,
                                              validate=False)
                    p.sum().backward()

                long = backend == "torch" and T > args.long_torch
                fwd[backend] = measure(forward) if not (long and T > 4 * args.long_torch) else float("nan")
                both[backend] = float("nan") if long else measure(forward_backward)
            cells = [ms(fwd[b]) for b in names] + [ms(both[b]) for b in names]
            if len(names) == 2:
                cells += [ratio(fwd["torch"], fwd["triton"]), ratio(both["torch"], both["triton"])]
            print(row(f"{transform}, {B} x {H} x {T} x {S}", cells))


def ms(t: float) -> str:
    """A time in ms for a table cell; "–" for one not timed (NaN)."""
    return "–" if math.isnan(t) else f"{t:.2f}"


def ratio(a: float, b: float) -> str:
    """``a / b`` as "N.Nx"; "–" when either was not timed."""
    return "–" if math.isnan(a) or math.isnan(b) else f"{a / b:.1f}x"


# ---------------------------------------------------------------------------------------------------- updates
def synthetic_batch(device: torch.device, sentences: int = 64, seed: int = 0) -> dict:
    """A batch like Multi30k's BPE batches: source lengths 8-30, target lengths within 4 of the source's."""
    g = torch.Generator().manual_seed(seed)
    src_len = torch.randint(8, 31, (sentences,), generator=g)
    tgt_len = (src_len + torch.randint(-4, 5, (sentences,), generator=g)).clamp(min=4)
    S, T = int(src_len.max()), int(tgt_len.max()) + 1
    src = torch.randint(4, VOCAB, (sentences, S), generator=g)
    src[torch.arange(S)[None, :] >= src_len[:, None]] = PAD_ID
    tgt = torch.randint(4, VOCAB, (sentences, T), generator=g)
    tgt[torch.arange(T)[None, :] >= tgt_len[:, None] + 1] = PAD_ID
    order = src_len.argsort(descending=True)  # the LSTM's packed encoder wants them sorted
    b = dict(src=src[order], src_len=src_len[order], tgt_in=tgt[order], tgt_out=tgt.roll(-1, 1)[order],
             fertility=torch.full((sentences, S), 2.0))
    return {k: v.to(device) for k, v in b.items()}


def model(preset: str, transform: str, device: torch.device) -> torch.nn.Module:
    sets = [f"model.attention.transform={transform}"]
    if transform != "softmax":
        sets += ["model.attention.fertility.strategy=constant", "model.attention.fertility.value=2",
                 "model.attention.exhaustion=0.2"]
    cfg = Config.load(preset_path(preset), sets)
    torch.manual_seed(0)
    return build_model(cfg, VOCAB).to(device).train()


def update_ms(m: torch.nn.Module, batch: dict, device: torch.device, measure, bf16: bool, backend: str,
              sdpa: str = "") -> float:
    opt = torch.optim.Adam(m.parameters(), lr=1e-4)
    fert = batch["fertility"] if m.constrained else None
    n_tok = int((batch["tgt_out"] != PAD_ID).sum())

    def step() -> None:
        restrict = sdpa_kernel([SDPBackend.CUDNN_ATTENTION]) if sdpa == "cudnn" else contextlib.nullcontext()
        with use_backend(backend), restrict, torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            out = m(batch["src"], batch["src_len"], batch["tgt_in"], fert)
            loss = nmt_loss(out.logits, batch["tgt_out"]) / n_tok
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    try:
        return measure(step)
    except RuntimeError as exc:  # an SDPA backend that cannot serve these inputs
        if sdpa and "No available kernel" in str(exc):
            return float("nan")
        raise


def update_section(arch: str, device: torch.device, measure) -> None:
    preset = "transformer-small" if arch == "transformer" else "cpu-small"
    batch = synthetic_batch(device, sentences=64 if device.type == "cuda" else 16)
    precisions = ["fp32", "bf16"] if device.type == "cuda" else ["fp32"]
    names = backends(device)
    what = "bounded last-layer heads" if arch == "transformer" else "csparsemax attention"
    print(f"\n## {2 if arch == 'transformer' else 3}. {preset} training update, ms "
          f"({batch['src'].shape[0]} sentences, {int((batch['tgt_out'] != PAD_ID).sum())} target tokens): "
          f"softmax against {what}\n")
    cols = ["softmax"] + [f"csparsemax {b}" for b in names] + [f"csparsemax {b} / softmax" for b in names]
    print(row("precision", cols))
    print("| --- |" + " ---: |" * len(cols))
    models = {t: model(preset, t, device) for t in ("softmax", "csparsemax")}
    rows = [(p, "") for p in precisions]
    if arch == "transformer" and device.type == "cuda":
        rows.append(("bf16", "cudnn"))
    for precision, sdpa in rows:
        bf16 = precision == "bf16"
        soft = update_ms(models["softmax"], batch, device, measure, bf16, "torch", sdpa)
        bounded = {b: update_ms(models["csparsemax"], batch, device, measure, bf16, b, sdpa) for b in names}
        cells = [f"{soft:.1f}"] + [f"{bounded[b]:.1f}" for b in names] + [f"{bounded[b] / soft:.2f}x" for b in names]
        print(row(precision + (f" sdpa={sdpa}" if sdpa else ""), cells))


def main() -> None:
    args = parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no CUDA device here (use --device cpu to check the script)")
    repeats = args.repeats or (20 if device.type == "cuda" else 3)
    measure = timer(device, args.warmup if device.type == "cuda" else 1, repeats, args.budget)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"# bounded attention on {where}: torch {torch.__version__}, backends {', '.join(backends(device))}")
    t0 = time.perf_counter()
    if "op" in args.sections:
        op_section(device, measure, args)
    if "transformer" in args.sections:
        update_section("transformer", device, measure)
    if "lstm" in args.sections:
        update_section("lstm", device, measure)
    print(f"\n(total {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
