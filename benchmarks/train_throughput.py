"""Training throughput (target tokens/s) and beam decoding speed, side by side in one run.

    python benchmarks/train_throughput.py --preset paper --transforms softmax csparsemax
    python benchmarks/train_throughput.py --preset paper --precision fp32 bf16
    python benchmarks/train_throughput.py --preset cpu-small --steps 20
    python benchmarks/train_throughput.py --systems lstm=cpu-small transformer=transformer-small \
        "transformer-csparsemax=transformer-small:model.attention.transform=csparsemax"
    python benchmarks/train_throughput.py --device cuda --precision fp32 bf16 --systems ...
    python benchmarks/train_throughput.py --precision bf16 --checkpoints \
        softmax=runs/transformer/runs/softmax/seed1/best.pt csparsemax=runs/transformer/runs/csparsemax/seed1/best.pt

Uses real Multi30k De-En batches from a prepared directory (``--data``, default
runs/data/multi30k-de-en; prepared on the fly if missing).  The systems are
timed in interleaved rounds so machine noise hits them alike; ratios are
reported against the first system.  Constrained transforms use constant
fertility 2 (the bound computation is what is being timed, not the strategy).

A system is ``--transforms T`` of ``--preset P`` (the preset with its transform
replaced), or ``--systems NAME=PRESET[:KEY=VALUE,...]`` (a preset with ``--set``
overrides; any architecture).  Each system trains on batches of its own preset's
``data.batch_tokens`` (``--batch-tokens N``: the same size for all), the same
sentences in the same order, unless their ``data.batch_sort`` differs: then each
takes its own sort's batches of epoch 1, and tokens/s (real target tokens) says
which trains faster, padding included:

    python benchmarks/train_throughput.py --data runs/data/kftt-ja-en --no-reference --steps 30 \
        --systems source=kftt-lstm:data.batch_sort=source longest=kftt-lstm:data.batch_sort=longest

``--checkpoints NAME=CKPT`` times trained models instead of (or after) those: a run's
``best.pt`` with its own config, weights, prepared data and, for a constrained
transform, the fertilities it trained with (``benchmarks/trained.py``).  Trained
attention is peaked and takes code paths that random weights do not (capped entries,
recentred rows), and trained decoders end their hypotheses at a real length, so
these rows measure what a user's training and decoding cost.  Their optimizer is
SGD with learning rate 0: the update's work is timed and the weights stay trained.
No plain-PyTorch reference is timed for them (it would have random weights).

``--device cuda`` times on the GPU: models and batches live there, and every timed
interval ends with ``torch.cuda.synchronize()``, so it counts the kernels' time and
not only their launch.  ``--sdpa math flash ...`` also times every system with
``F.scaled_dot_product_attention`` restricted to each named backend
(``torch.nn.attention.sdpa_kernel``; rows ``NAME/sdpa=BACKEND``), to find which
kernel a slow configuration runs (docs/transformer.md, section 5: bf16 on a GPU).
``--compile`` also times every system (and reference) under ``torch.compile(model,
dynamic=True)`` (rows ``NAME/compiled``; TorchInductor, default mode), warmed up on
``--compile-warmup`` batches so that its compilations and recompilations fall outside
the timed rounds; its work per token is its eager twin's (the same arithmetic).

A textbook PyTorch implementation of each architecture (``plain_nmt.py``: for the
LSTM, nn.LSTM encoder and nn.LSTMCell decoder stepped in Python with
F.cross_entropy, the row ``plain-pytorch``; for the Transformer, ``torch.nn.Transformer``
of the same size, the row ``torch-transformer``) is timed in the same rounds, so
the comparison with plain PyTorch holds on any machine (``--no-reference`` leaves
them out).  With ``--precision fp32 bf16`` every system is also timed with its
forward pass under ``torch.autocast(bfloat16)``, which is what
``train.precision: bf16`` does.

The table also gives each system's work per target token: the floating-point
operations of one training step (forward and backward) on its first 4 batches,
counted by ``torch.utils.flop_counter.FlopCounterMode`` (matrix products; the
elementwise work is left out), and the rate they ran at (GFLOP/s).  A ratio of
tokens/s is then split into "more work per token" and "slower work".
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from plain_nmt import PlainNMT, PlainTransformer
from trained import Trained, load_trained

from scanmt.allocator import tune_malloc
from scanmt.config import Config
from scanmt.data.dataset import ParallelData
from scanmt.data.vocab import PAD_ID
from scanmt.decoding.search import SearchSettings, search
from scanmt.model.build import build_model
from scanmt.model.loss import nmt_loss
from scanmt.model.transforms import get_transform
from scanmt.presets import preset_path

#: the reference row of each architecture
REFERENCE = {"lstm": "plain-pytorch", "transformer": "torch-transformer"}

#: ``--sdpa`` names -> the scaled-dot-product-attention backend a row is restricted to
SDPA = {"math": SDPBackend.MATH, "flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
        "cudnn": SDPBackend.CUDNN_ATTENTION}


@dataclass
class Setup:
    model: torch.nn.Module
    opt: torch.optim.Optimizer
    constrained: bool  # needs fertility bounds
    reference: bool  # the plain PyTorch model (returns its own loss)
    bf16: bool  # forward under torch.autocast(bfloat16), as train.precision: bf16 does
    batches: list[list[int]]  # the training batches (positions) it is timed on
    train: ParallelData  # the split ``batches`` index
    valid: ParallelData  # the split it decodes
    settings: SearchSettings  # how it decodes: bare beam settings, or a --checkpoints model's own
    sdpa: str = ""  # a key of SDPA: the one backend F.scaled_dot_product_attention may use ("": any)
    trained: bool = False  # a --checkpoints model: its data's own fertilities
    eager: str = ""  # a --compile row: the label of its eager twin ("": this row is eager)


def label(system: str, precision: str, sdpa: str = "") -> str:
    return (system if precision == "fp32" else f"{system}/{precision}") + (f"/sdpa={sdpa}" if sdpa else "")


def compiled_twins(setups: dict[str, Setup]) -> dict[str, Setup]:
    """``NAME/compiled`` for every row: a copy of its model under ``torch.compile(dynamic=True)`` (the same
    initial weights, its own optimizer), on the same batches."""
    twins = {}
    for name, s in setups.items():
        model = copy.deepcopy(s.model)
        opt = type(s.opt)(model.parameters(), **s.opt.defaults)
        twins[f"{name}/compiled"] = dataclasses.replace(
            s, model=torch.compile(model, dynamic=True), opt=opt, eager=name)
    return twins


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="paper", help="config preset of --transforms (paper = 2x500 LSTM)")
    ap.add_argument("--data", default="runs/data/multi30k-de-en", help="prepared data directory")
    ap.add_argument("--transforms", nargs="+", default=None,
                    help="attention transforms of --preset to compare (default, unless --systems or --checkpoints "
                         "is given: softmax csparsemax)")
    ap.add_argument("--systems", nargs="+", default=[], metavar="NAME=PRESET[:KEY=VALUE,...]",
                    help="systems to compare instead: a preset with --set overrides (any architecture)")
    ap.add_argument("--checkpoints", nargs="+", default=[], metavar="NAME=CKPT",
                    help="trained models to time, after any --systems: a run's best.pt on its own data and "
                         "fertilities, weights kept (learning rate 0), decoded with its own decode settings")
    ap.add_argument("--steps", type=int, default=12, help="timed training steps per system per round")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    ap.add_argument("--decode-sentences", type=int, default=200,
                    help="validation sentences for beam decoding speed (0 = skip)")
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = default)")
    ap.add_argument("--no-reference", action="store_true", help="do not time the plain PyTorch reference models")
    ap.add_argument("--precision", nargs="+", choices=["fp32", "bf16"], default=["fp32"],
                    help="training precisions to time (bf16 = train.precision: bf16, mixed precision forward)")
    ap.add_argument("--sdpa", nargs="+", choices=sorted(SDPA), default=[],
                    help="also time every system (at every precision) with F.scaled_dot_product_attention "
                         "restricted to each of these backends (a row whose backend cannot serve its inputs, "
                         "for example flash with a padding mask, is left out with a note)")
    ap.add_argument("--compile", action="store_true",
                    help="also time every row under torch.compile(model, dynamic=True) (rows NAME/compiled)")
    ap.add_argument("--compile-warmup", type=int, default=8,
                    help="warm-up batches of a --compile row before its timed rounds (compilation happens there)")
    ap.add_argument("--device", default="cpu", help="cpu or cuda (the timed intervals end with a CUDA synchronize)")
    ap.add_argument("--batch-tokens", type=int, default=0,
                    help="source+target tokens per batch for every system (0 = each preset's data.batch_tokens; "
                         "docs/results.md 1b used 4000)")
    args = ap.parse_args()
    for spec in args.checkpoints:
        name, _, path = spec.partition("=")
        if not name or not path:
            ap.error(f"--checkpoints {spec!r}: expected NAME=CKPT")
        if not Path(path).is_file():
            ap.error(f"--checkpoints {spec!r}: no checkpoint file at {path}")
    if args.transforms is None and not args.systems and not args.checkpoints:
        args.transforms = ["softmax", "csparsemax"]
    return args


def system_configs(args: argparse.Namespace, data_dir: Path) -> dict[str, Config]:
    """The configs of the systems to time, by name."""
    common = [f"data.dir={data_dir}"] + ([f"data.batch_tokens={args.batch_tokens}"] if args.batch_tokens else [])
    if args.systems:
        out = {}
        for spec in args.systems:
            name, _, rest = spec.partition("=")
            preset, _, sets = rest.partition(":")
            if not name or not preset:
                raise SystemExit(f"--systems {spec!r}: expected NAME=PRESET[:KEY=VALUE,...]")
            out[name] = Config.load(preset_path(preset), common + [x for x in sets.split(",") if x])
        return out
    if not args.transforms:
        return {}
    base = Config.load(preset_path(args.preset), common)
    out = {}
    for name in args.transforms:
        cfg = Config.from_dict(base.to_dict())
        cfg.model.attention.transform = name
        out[name] = cfg
    return out


def reference_model(cfg: Config, vocab: int) -> torch.nn.Module:
    """The textbook PyTorch model of ``cfg``'s architecture and size."""
    m = cfg.model
    if m.arch == "transformer":
        t = m.transformer
        return PlainTransformer(vocab, m.hidden_size, t.heads, t.ff_size, t.encoder_layers, t.decoder_layers,
                                m.dropout, PAD_ID)
    plain = PlainNMT(vocab, m.emb_size, m.hidden_size, m.layers, m.dropout, PAD_ID, m.share_embeddings,
                     m.tie_generator)
    for p in plain.parameters():
        torch.nn.init.uniform_(p, -0.1, 0.1)
    return plain


def build_setups(args: argparse.Namespace, configs: dict[str, Config], data,
                 trained: dict[str, Trained]) -> dict[str, Setup]:
    """Every timed row: the configured systems (random weights) with their references, then the trained
    ones, at each precision (and ``--sdpa`` backend)."""
    setups: dict[str, Setup] = {}
    for sdpa in [""] + args.sdpa:
        for prec in args.precision:
            references: dict[str, Config] = {}
            for name, cfg in configs.items():
                torch.manual_seed(0)
                model = build_model(cfg, len(data.pipeline.vocab))
                model.reset_parameters(cfg.train.param_init if cfg.model.arch == "transformer" else 0.1)
                model.to(args.device)
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                batches = data.train.token_batches(cfg.data.batch_tokens, seed=1, epoch=1, sort=cfg.data.batch_sort)
                setups[label(name, prec, sdpa)] = Setup(
                    model, opt, get_transform(cfg.model.attention.transform).constrained, False, prec == "bf16",
                    batches, data.train, data.valid, SearchSettings(beam=args.beam), sdpa)
                references.setdefault(cfg.model.arch, cfg)
            for arch, cfg in ([] if args.no_reference else references.items()):
                torch.manual_seed(0)
                plain = reference_model(cfg, len(data.pipeline.vocab)).to(args.device)
                setups[label(REFERENCE[arch], prec, sdpa)] = Setup(
                    plain, torch.optim.SGD(plain.parameters(), lr=0.1), False, True, prec == "bf16",
                    data.train.token_batches(cfg.data.batch_tokens, seed=1, epoch=1), data.train, data.valid,
                    SearchSettings(beam=args.beam), sdpa)
            for name, t in trained.items():
                model = copy.deepcopy(t.model).to(args.device)
                tokens = args.batch_tokens or t.cfg.data.batch_tokens
                setups[label(name, prec, sdpa)] = Setup(
                    model, torch.optim.SGD(model.parameters(), lr=0.0),
                    get_transform(t.cfg.model.attention.transform).constrained, False, prec == "bf16",
                    t.train.token_batches(tokens, seed=1, epoch=1), t.train, t.valid,
                    SearchSettings.of(t.cfg.decode, beam=args.beam), sdpa, trained=True)
    return setups


def checkpoint_systems(args: argparse.Namespace) -> dict[str, Trained]:
    """The ``--checkpoints`` models with their data, by name."""
    out = {}
    for spec in args.checkpoints:
        name, _, path = spec.partition("=")
        print(f"loading {name}: {path}")
        out[name] = load_trained(path)
    return out


def describe(cfg: Config, n_params: int) -> str:
    m = cfg.model
    if m.arch == "transformer":
        t = m.transformer
        size = (f"transformer {t.encoder_layers}+{t.decoder_layers} layers, d {m.hidden_size}, {t.heads} heads, "
                f"ff {t.ff_size}")
    else:
        size = f"{m.layers}x{m.hidden_size} LSTM, emb {m.emb_size}"
    return f"{size}, {n_params / 1e6:.1f}M params, batch_tokens {cfg.data.batch_tokens}"


def main() -> None:
    args = parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no CUDA device here")
    # what `scanmt train` runs with (scanmt.allocator); SCANMT_MALLOC=0 measures glibc's defaults
    args.malloc_tuned = tune_malloc()
    if args.threads:
        torch.set_num_threads(args.threads)
    data_dir = Path(args.data)
    configs = system_configs(args, data_dir)
    data = None
    if configs:
        if not (data_dir / "meta.json").exists():
            from scanmt.cli.main import main as cli

            cli(["prepare", "--corpus", "multi30k", "--pair", "de-en", "--out", str(data_dir)])
        from scanmt.training.trainer import load_train_data

        data = load_train_data(next(iter(configs.values())))
    trained = checkpoint_systems(args)
    setups = build_setups(args, configs, data, trained)
    if args.compile:
        setups.update(compiled_twins(setups))

    def forward_backward(s: Setup, b) -> None:
        restrict = sdpa_kernel([SDPA[s.sdpa]]) if s.sdpa else contextlib.nullcontext()
        with restrict, torch.autocast(device.type, dtype=torch.bfloat16, enabled=s.bf16):
            if s.reference:
                loss = s.model(b.src, b.src_len, b.tgt_in, b.tgt_out)
            else:
                out = s.model(b.src, b.src_len, b.tgt_in, fertility(s, b))
                loss = nmt_loss(out.logits, b.tgt_out)
        s.opt.zero_grad(set_to_none=True)
        (loss / b.n_tgt_tokens).backward()

    def train_steps(name: str, chunk: slice) -> tuple[int, float]:
        s = setups[name]
        s.model.train()
        tok, t0 = 0, time.perf_counter()
        for positions in s.batches[chunk]:
            b = s.train.make_batch(positions).to(device)
            forward_backward(s, b)
            torch.nn.utils.clip_grad_norm_(s.model.parameters(), 5.0)
            s.opt.step()
            tok += b.n_tgt_tokens
        synchronize(device)
        return tok, time.perf_counter() - t0

    def flops_per_token(name: str) -> float:
        """FLOPs of forward + backward per target token on the system's first 4 batches (no update)."""
        s, counter, tok = setups[name], FlopCounterMode(display=False), 0
        s.model.train()
        with counter:
            for positions in s.batches[:4]:
                b = s.train.make_batch(positions).to(device)
                forward_backward(s, b)
                tok += b.n_tgt_tokens
        s.opt.zero_grad(set_to_none=True)
        return counter.get_total_flops() / tok

    for name in list(setups):  # warm-up
        try:
            train_steps(name, slice(0, args.compile_warmup if setups[name].eager else 2))
        except RuntimeError as exc:
            if not setups[name].sdpa or "No available kernel" not in str(exc):
                raise
            print(f"  {name}: left out, the backend cannot serve these inputs ({str(exc).splitlines()[0]})")
            del setups[name]
    rates: dict[str, list[float]] = {n: [] for n in setups}
    for r in range(args.rounds):
        for name in setups:
            tok, dt = train_steps(name, slice(2 + r * args.steps, 2 + (r + 1) * args.steps))
            rates[name].append(tok / dt)
    work = {name: flops_per_token(name) for name in setups if not setups[name].eager}
    work.update({name: work[s.eager] for name, s in setups.items() if s.eager})
    report_training(rates, work, setups, {**configs, **{n: t.cfg for n, t in trained.items()}}, args)
    if args.decode_sentences:
        report_decoding(setups, args, device)


def fertility(s: Setup, b) -> torch.Tensor | None:
    """The bounds a system trains and decodes with: a trained model's own fertilities (None when
    unconstrained), else constant 2 for a constrained transform."""
    if s.trained:
        return b.fertility
    return torch.full(b.src.shape, 2.0, device=b.src.device) if s.constrained else None


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued kernels (a timed interval must include them)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def report_training(rates: dict[str, list[float]], work: dict[str, float], setups: dict[str, Setup],
                    configs: dict[str, Config], args: argparse.Namespace) -> None:
    """``rates``: tokens/s per round; ``work``: FLOPs per target token (forward + backward)."""
    where = (torch.cuda.get_device_name() if args.device.startswith("cuda") else f"{torch.get_num_threads()} threads")
    print(f"\ntraining throughput (target tokens/s), {where}, "
          f"malloc {'tuned as scanmt does' if args.malloc_tuned else 'as the environment leaves it'}")
    for name, cfg in configs.items():
        s = setups[label(name, args.precision[0])]
        n_params = sum(p.numel() for p in s.model.parameters())
        print(f"  {name}: {describe(cfg, n_params)}{', trained (lr 0)' if s.trained else ''}")
    references = sorted({name.split("/")[0] for name, s in setups.items() if s.reference})
    if references:
        print(f"  ({', '.join(references)}: the same model in textbook PyTorch, random weights)")
    if "bf16" in args.precision:
        print("  (/bf16: forward under torch.autocast bfloat16, as train.precision: bf16)")
    first = next(iter(rates))
    print("  (MFLOP/tok: matrix-product FLOPs of forward + backward per target token; GFLOP/s: MFLOP/tok x tok/s)")
    print(f"  {'system':<28} {'median tok/s':>12} {'rounds':>24} {'vs ' + first:>14} {'MFLOP/tok':>10} "
          f"{'vs ' + first:>14} {'GFLOP/s':>8} {'vs ' + first:>14}")
    ref = statistics.median(rates[first])
    ref_rate = ref * work[first]
    for name, rs in rates.items():
        med = statistics.median(rs)
        rate = med * work[name]
        print(f"  {name:<28} {med:>12.0f} {' '.join(f'{x:.0f}' for x in rs):>24} {med / ref:>13.2f}x "
              f"{work[name] / 1e6:>10.1f} {work[name] / work[first]:>13.2f}x {rate / 1e9:>8.1f} "
              f"{rate / ref_rate:>13.2f}x")


def report_decoding(setups: dict[str, Setup], args: argparse.Namespace, device: torch.device) -> None:
    """Beam search over the first ``--decode-sentences`` validation sentences, batches of 64, fp32: configured
    systems with bare settings (random weights: most hypotheses run to the length limit), trained ones with
    their checkpoint's decode settings and fertilities."""
    print(f"\nbeam decoding, fp32 (beam {args.beam}, the first {args.decode_sentences} validation sentences, batch 64; "
          "untrained weights with bare settings, --checkpoints with their own)")
    print(f"  {'system':<28} {'sentences/s':>11} {'output tokens/sentence':>23}")
    for name, s in setups.items():
        # each model once, in fp32 (as `scanmt translate`), from its bf16 row when fp32 was not timed
        if s.reference or s.sdpa or s.eager or (s.bf16 and "fp32" in args.precision):
            continue
        name = name.removesuffix("/bf16")
        pos = list(range(min(args.decode_sentences, len(s.valid))))
        s.model.eval()
        n_out, t0 = 0, time.perf_counter()
        with torch.no_grad():
            for i in range(0, len(pos), 64):
                b = s.valid.make_batch(pos[i : i + 64]).to(device)
                hyps = search(s.model, b.src, b.src_len, fertility(s, b), settings=s.settings)
                n_out += sum(len(h.tokens) for h in hyps)
        synchronize(device)
        dt = time.perf_counter() - t0
        print(f"  {name:<28} {len(pos) / dt:11.1f} {n_out / len(pos):23.1f}")


if __name__ == "__main__":
    main()
