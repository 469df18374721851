"""The fertility-bounded attention recurrence on a GPU: the torch loop against the Triton kernels (issue 55).

    python benchmarks/gpu_bounded.py                    # on CUDA: every table below, in under 5 minutes
    python benchmarks/gpu_bounded.py --device cpu       # the torch backend only, small sizes (checks the script)

Prints, side by side in one run (times are medians of ``--repeats`` timed calls, or of as many as fit in
``--budget`` seconds but at least 3, after ``--warmup`` calls; each call ends with ``torch.cuda.synchronize()``):

1. ``scanmt.ops.bounded_recurrence`` forward and forward + backward (a linear loss on the probabilities),
   ``backend="torch"`` (one transform call per target position) against ``backend="triton"`` (one kernel
   over all positions, one backward kernel), for csoftmax and csparsemax at NMT shapes (batch 64, 4 and 8
   heads, T = S in 30, 60, 100) and at one long shape (T = S = 512; torch forward only past ``--long-torch``).
2. A training update (forward, backward, gradient norm, Adam) of the Transformer preset ``transformer-small``
   on a synthetic batch (64 sentences, source and target lengths drawn around Multi30k's), timed in
   alternation with softmax's update (the median of the pairs' ratios: the machine's drift hits both), for:
   csparsemax heads bounded in the last layer (constant fertility 2, exhaustion 0.2) with softmax below
   (``transform_layers=last_layer``: the model differs from softmax's by the bounded heads alone); the same
   with sparsemax below (the preset's csparsemax, ``transform_layers: all``); sparsemax in every layer (no
   bounds).  Bounded rows run each backend, triton with its input checks deferred to one host read per
   update (``scanmt.ops.deferred_checks``, as the training loop runs them) and read at each call.  In fp32,
   bf16 (``torch.autocast``, as ``train.precision: bf16``) and bf16 with the fused attention restricted to
   cuDNN's backend (``sdpa=cudnn``; the default bf16 row runs SDPA without cuDNN,
   scanmt.model.transformer.fused_attention).
3. The same for the LSTM ``cpu-small``: csparsemax (each step one ``bounded_recurrence`` call with T = 1)
   against softmax.
4. A profile of one update of softmax and of csparsemax (triton, deferred checks; the Transformer's bounded
   last layer with softmax below): the GPU's kernel time and launches, host reads, the bounded kernels'
   time per launch, the kernels and the Python functions (cProfile) whose time differs most, and the lines
   at which each update synchronises (CUDA's sync debug mode).

On the CPU (``--device cpu``) only the torch backend runs, at small sizes; Triton's kernels need CUDA.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import math
import statistics
import time
from pathlib import Path
from typing import Callable

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from scanmt.config import Config
from scanmt.data.vocab import PAD_ID
from scanmt.model.build import build_model
from scanmt.model.loss import nmt_loss
from scanmt.ops import _triton, bounded_recurrence, deferred_checks
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
    ap.add_argument("--sections", nargs="+", default=["op", "transformer", "lstm", "profile"],
                    choices=["op", "transformer", "lstm", "profile"])
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


def paired(device: torch.device, warmup: int, repeats: int, budget_s: float, a: Callable[[], object],
           b: Callable[[], object]) -> tuple[float, float, float]:
    """``a`` and ``b`` timed in alternation (a, b, a, b, ...: the machine's drift hits both alike): the
    median time of each in ms and the median of the ratios ``b / a`` of the pairs."""
    def once(fn: Callable[[], object]) -> float:
        t0 = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return (time.perf_counter() - t0) * 1e3

    for _ in range(warmup):
        once(a), once(b)
    ta: list[float] = []
    tb: list[float] = []
    while len(ta) < repeats and (len(ta) < 3 or sum(ta) + sum(tb) < budget_s * 2e3):
        ta.append(once(a))
        tb.append(once(b))
    return statistics.median(ta), statistics.median(tb), statistics.median(y / x for x, y in zip(ta, tb))


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


def model(preset: str, transform: str, device: torch.device, below: str = "") -> torch.nn.Module:
    """``preset`` with cross-attention ``transform`` (constant fertility 2 and exhaustion 0.2 when
    constrained); ``below="softmax"``: a Transformer whose layers below the last keep softmax
    (``transform_layers=last_layer``), else every layer uses ``transform`` (the preset's
    ``transform_layers: all``; the constrained transforms' free layers are then sparse)."""
    sets = [f"model.attention.transform={transform}"]
    if transform.startswith("c"):
        sets += ["model.attention.fertility.strategy=constant", "model.attention.fertility.value=2",
                 "model.attention.exhaustion=0.2"]
    if below == "softmax":
        sets += ["model.transformer.transform_layers=last_layer"]
    cfg = Config.load(preset_path(preset), sets)
    torch.manual_seed(0)
    return build_model(cfg, VOCAB).to(device).train()


def update_fn(m: torch.nn.Module, batch: dict, device: torch.device, bf16: bool, backend: str, sdpa: str = "",
              checks: str = "deferred") -> Callable[[], None]:
    """A function that makes one training update (forward, backward, gradient norm as the loop clips it,
    Adam)."""
    opt = torch.optim.Adam(m.parameters(), lr=1e-4)
    fert = batch["fertility"] if m.constrained else None
    n_tok = int((batch["tgt_out"] != PAD_ID).sum())

    def step() -> None:
        restrict = sdpa_kernel([SDPBackend.CUDNN_ATTENTION]) if sdpa == "cudnn" else contextlib.nullcontext()
        block = deferred_checks() if checks == "deferred" else contextlib.nullcontext()
        with block:
            with use_backend(backend), restrict, torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                out = m(batch["src"], batch["src_len"], batch["tgt_in"], fert)
                loss = nmt_loss(out.logits, batch["tgt_out"]) / n_tok
            opt.zero_grad(set_to_none=True)
            loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        float(norm)  # the loop's one read per update
        opt.step()

    return step


def variants(device: torch.device) -> list[tuple[str, str]]:
    """(backend, checks) of the bounded rows: the torch loop, triton with its checks deferred to the end of
    the backward pass (as the training loop runs it) and triton checked at each call."""
    names = backends(device)
    return [("torch", "eager")] + ([("triton", "deferred"), ("triton", "eager")] if "triton" in names else [])


def variant_name(backend: str, checks: str) -> str:
    return backend if backend == "torch" else f"{backend} ({'per call' if checks == 'eager' else 'deferred'})"


#: the Transformer systems timed against softmax: (label, transform, transform below the last layer)
TRANSFORMER_SYSTEMS = [
    ("csparsemax bounded last layer, softmax below", "csparsemax", "softmax"),
    ("csparsemax bounded last layer, sparsemax below (the preset's csparsemax)", "csparsemax", ""),
    ("sparsemax, every layer (no bounds)", "sparsemax", ""),
]
LSTM_SYSTEMS = [("csparsemax", "csparsemax", "")]


def update_section(arch: str, device: torch.device, args: argparse.Namespace) -> None:
    """A training update of each system against softmax's, timed in alternation with it (:func:`paired`)."""
    preset = "transformer-small" if arch == "transformer" else "cpu-small"
    batch = synthetic_batch(device, sentences=64 if device.type == "cuda" else 16)
    precisions = [("fp32", ""), ("bf16", "")] if device.type == "cuda" else [("fp32", "")]
    if arch == "transformer" and device.type == "cuda":
        precisions.append(("bf16", "cudnn"))
    print(f"\n## {2 if arch == 'transformer' else 3}. {preset} training update, ms "
          f"({batch['src'].shape[0]} sentences, {int((batch['tgt_out'] != PAD_ID).sum())} target tokens), against "
          f"softmax's; bounded attention with each backend, triton's checks deferred to one read per update "
          f"(as the training loop runs them) or read at each call\n")
    print(row("precision", ["system", "backend", "ms", "softmax ms", "/ softmax (median of the pairs)"]))
    print("| --- | --- | --- |" + " ---: |" * 3)
    systems = TRANSFORMER_SYSTEMS if arch == "transformer" else LSTM_SYSTEMS
    soft_model = model(preset, "softmax", device)
    models = {label: model(preset, t, device, below) for label, t, below in systems}
    for precision, sdpa in precisions:
        bf16 = precision == "bf16"
        name = precision + (f" sdpa={sdpa}" if sdpa else "")
        for label, transform, _ in systems:
            vs = variants(device) if transform.startswith("c") else [("torch", "eager")]
            for backend, checks in vs:
                soft_step = update_fn(soft_model, batch, device, bf16, "torch", sdpa)
                step = update_fn(models[label], batch, device, bf16, backend, sdpa, checks)
                try:
                    soft, t, r = paired(device, args.warmup, args.repeats, args.budget, soft_step, step)
                except RuntimeError as exc:  # an SDPA backend that cannot serve these inputs
                    if not (sdpa and "No available kernel" in str(exc)):
                        raise
                    soft = t = r = float("nan")
                print(row(name, [label, variant_name(backend, checks) if transform.startswith("c") else "–",
                                 ms(t), ms(soft), "–" if math.isnan(r) else f"{r:.2f}x"]))


# ---------------------------------------------------------------------------------------------------- profile
def profile_section(device: torch.device) -> None:
    """Where a bounded update's extra time goes: one profiled update (after warm-up) of softmax and of
    csparsemax (triton, deferred checks) for each architecture and precision; the GPU's kernel time, the
    number of kernel launches and of host reads, the bounded kernels' time per launch, and the kernels
    whose total time differs most between the two."""
    from torch.profiler import ProfilerActivity, profile

    cuda = device.type == "cuda"
    bounded_backend = "triton" if "triton" in backends(device) else "torch"
    print(f"\n## 4. profile of one update (after 3 warm-up updates): softmax against csparsemax "
          f"({bounded_backend}, deferred checks)\n")
    batch = synthetic_batch(device, sentences=64 if cuda else 8)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    for arch, preset in (("transformer", "transformer-small"), ("lstm", "cpu-small")):
        below = "softmax" if arch == "transformer" else ""
        models = {t: model(preset, t, device, below) for t in ("softmax", "csparsemax")}
        for precision in ("fp32", "bf16") if cuda else ("fp32",):
            kernels: dict[str, dict[str, tuple[int, float]]] = {}
            sites: dict[str, collections.Counter] = {}
            python: dict[str, dict[str, tuple[int, float]]] = {}
            print(f"### {preset}, {precision}\n")
            print(row("system", ["wall ms", "GPU kernel ms", "kernel launches", "host reads",
                                 "bounded kernels: launches, ms per launch"]))
            print("| --- |" + " ---: |" * 5)
            for t in ("softmax", "csparsemax"):
                step = update_fn(models[t], batch, device, precision == "bf16",
                                 bounded_backend if t != "softmax" else "torch")
                for _ in range(3):
                    step()
                if cuda:
                    torch.cuda.synchronize(device)
                with profile(activities=activities) as prof:
                    t0 = time.perf_counter()
                    step()
                    if cuda:
                        torch.cuda.synchronize(device)
                    wall = (time.perf_counter() - t0) * 1e3
                events = [e for e in prof.events() if e.device_type.name == "CUDA"]
                gpu_ms = sum(e.time_range.elapsed_us() for e in events) / 1e3
                names: dict[str, tuple[int, float]] = {}
                for e in events:
                    n, d = names.get(e.name, (0, 0.0))
                    names[e.name] = (n + 1, d + e.time_range.elapsed_us() / 1e3)
                kernels[t] = names
                reads = sum(1 for e in prof.events() if e.name == "aten::_local_scalar_dense")
                if cuda:
                    sites[t] = sync_sites(step)
                python[t] = python_time(step)
                bk = [(n, d) for k, (n, d) in names.items() if "bounded_" in k]
                b_cell = ", ".join(f"{n}, {d / max(n, 1):.3f}" for n, d in bk) or "–"
                print(row(t, [f"{wall:.1f}", f"{gpu_ms:.1f}", str(len(events)), str(reads), b_cell]))
            diff = sorted(set(kernels["softmax"]) | set(kernels["csparsemax"]),
                          key=lambda k: -abs(kernels["csparsemax"].get(k, (0, 0.0))[1]
                                             - kernels["softmax"].get(k, (0, 0.0))[1]))[:8]
            print("\nkernels whose time differs most (csparsemax − softmax): launches, ms")
            for k in diff:
                a, b = kernels["softmax"].get(k, (0, 0.0)), kernels["csparsemax"].get(k, (0, 0.0))
                print(f"  {b[0] - a[0]:+5d} {b[1] - a[1]:+8.3f}  {k[:110]}")
            print("\nPython functions whose own time differs most (csparsemax − softmax; cProfile): calls, ms")
            keys = set(python["softmax"]) | set(python["csparsemax"])
            for k in sorted(keys, key=lambda k: -abs(python["csparsemax"].get(k, (0, 0.0))[1]
                                                     - python["softmax"].get(k, (0, 0.0))[1]))[:12]:
                a, b = python["softmax"].get(k, (0, 0.0)), python["csparsemax"].get(k, (0, 0.0))
                print(f"  {b[0] - a[0]:+6d} {b[1] - a[1]:+8.3f}  {k}")
            for t, c in sites.items():
                print(f"\nwhere the {t} update synchronises ({sum(c.values())} times; CUDA sync debug mode):")
                for where, n in c.most_common(6):
                    print(f"  {n:4d}  {where}")
            print()


def python_time(step: Callable[[], None]) -> dict[str, tuple[int, float]]:
    """Each function's calls and own time (ms) in one call of ``step``, by cProfile (which slows Python
    down: compare the two systems, not the absolute times)."""
    import cProfile
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    step()
    prof.disable()
    out = {}
    for (file, line, fn), (_, calls, tottime, _, _) in pstats.Stats(prof).stats.items():  # type: ignore[attr-defined]
        where = file.split("/src/")[-1].split("site-packages/")[-1]
        out[f"{where}:{line} {fn}"] = (calls, tottime * 1e3)
    return out


def sync_sites(step: Callable[[], None]) -> "collections.Counter[str]":
    """The source lines at which one call of ``step`` synchronises with the GPU, counted
    (``torch.cuda.set_sync_debug_mode("warn")``; the warning names the Python line that made the call)."""
    import warnings

    counts: collections.Counter = collections.Counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    for w in caught:
        if "called a synchronizing" in str(w.message):
            counts[f"{Path(w.filename).name}:{w.lineno}"] += 1
    return counts


def main() -> None:
    args = parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no CUDA device here (use --device cpu to check the script)")
    repeats = args.repeats or (20 if device.type == "cuda" else 3)
    args.repeats, args.warmup = repeats, args.warmup if device.type == "cuda" else 1
    measure = timer(device, args.warmup, repeats, args.budget)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"# bounded attention on {where}: torch {torch.__version__}, backends {', '.join(backends(device))}")
    t0 = time.perf_counter()
    if "op" in args.sections:
        op_section(device, measure, args)
    if "transformer" in args.sections:
        update_section("transformer", device, args)
    if "lstm" in args.sections:
        update_section("lstm", device, args)
    if "profile" in args.sections:
        profile_section(device)
    print(f"\n(total {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
