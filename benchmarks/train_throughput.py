"""Training throughput (target tokens/s) and beam decoding speed, side by side in one run.

    python benchmarks/train_throughput.py --preset paper --transforms softmax csparsemax
    python benchmarks/train_throughput.py --preset paper --precision fp32 bf16
    python benchmarks/train_throughput.py --preset cpu-small --steps 20

Uses real Multi30k De-En batches from a prepared directory (``--data``, default
runs/data/multi30k-de-en; prepared on the fly if missing).  The transforms are
timed in interleaved rounds so machine noise hits them alike; ratios are
reported against the first transform.  Constrained transforms use constant
fertility 2 (the bound computation is what is being timed, not the strategy).

A textbook PyTorch implementation of the same model (``plain_nmt.py``: nn.LSTM
encoder, nn.LSTMCell decoder stepped in Python, F.cross_entropy) is timed in
the same rounds as the row ``plain-pytorch``, so the comparison with plain
PyTorch holds on any machine (``--no-reference`` leaves it out).  With
``--precision fp32 bf16`` every system is also timed with its forward pass under
``torch.autocast(bfloat16)``, which is what ``train.precision: bf16`` does.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from plain_nmt import PlainNMT

from scanmt.config import Config
from scanmt.data.vocab import PAD_ID
from scanmt.decoding.search import SearchSettings, search
from scanmt.model.build import build_model
from scanmt.model.loss import nmt_loss
from scanmt.model.transforms import get_transform
from scanmt.presets import preset_path

REFERENCE = "plain-pytorch"


@dataclass
class Setup:
    model: torch.nn.Module
    opt: torch.optim.Optimizer
    constrained: bool  # needs fertility bounds
    reference: bool  # the plain PyTorch model (returns its own loss)
    bf16: bool  # forward under torch.autocast(bfloat16), as train.precision: bf16 does


def label(system: str, precision: str) -> str:
    return system if precision == "fp32" else f"{system}/{precision}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="paper", help="config preset (paper = 2x500 LSTM)")
    ap.add_argument("--data", default="runs/data/multi30k-de-en", help="prepared data directory")
    ap.add_argument("--transforms", nargs="+", default=["softmax", "csparsemax"], help="attention transforms to compare")
    ap.add_argument("--steps", type=int, default=12, help="timed training steps per transform per round")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    ap.add_argument("--decode-sentences", type=int, default=200, help="test sentences for beam decoding speed (0 = skip)")
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = default)")
    ap.add_argument("--no-reference", action="store_true", help="do not time the plain PyTorch reference model")
    ap.add_argument("--precision", nargs="+", choices=["fp32", "bf16"], default=["fp32"],
                    help="training precisions to time (bf16 = train.precision: bf16, mixed precision forward)")
    ap.add_argument("--batch-tokens", type=int, default=0,
                    help="source+target tokens per batch (0 = the preset's data.batch_tokens; docs/results.md 1b used 4000)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    data_dir = Path(args.data)
    if not (data_dir / "meta.json").exists():
        from scanmt.cli.main import main as cli

        cli(["prepare", "--corpus", "multi30k", "--pair", "de-en", "--out", str(data_dir)])
    from scanmt.training.trainer import load_train_data

    overrides = [f"data.dir={data_dir}"] + ([f"data.batch_tokens={args.batch_tokens}"] if args.batch_tokens else [])
    base = Config.load(preset_path(args.preset), overrides)
    data = load_train_data(base)
    batches = data.train.token_batches(base.data.batch_tokens, seed=1, epoch=1)

    precisions = args.precision

    setups: dict[str, Setup] = {}
    for prec in precisions:
        for name in args.transforms:
            cfg = Config.from_dict(base.to_dict())
            cfg.model.attention.transform = name
            torch.manual_seed(0)
            model = build_model(cfg, len(data.pipeline.vocab))
            model.reset_parameters(0.1)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            setups[label(name, prec)] = Setup(model, opt, get_transform(name).constrained, False, prec == "bf16")
        if not args.no_reference:
            m = base.model
            torch.manual_seed(0)
            plain = PlainNMT(len(data.pipeline.vocab), m.emb_size, m.hidden_size, m.layers, m.dropout, PAD_ID,
                             m.share_embeddings, m.tie_generator)
            for p in plain.parameters():
                torch.nn.init.uniform_(p, -0.1, 0.1)
            opt = torch.optim.SGD(plain.parameters(), lr=0.1)
            setups[label(REFERENCE, prec)] = Setup(plain, opt, False, True, prec == "bf16")

    def train_steps(name: str, chunk: list[list[int]]) -> tuple[int, float]:
        s = setups[name]
        s.model.train()
        tok, t0 = 0, time.perf_counter()
        for positions in chunk:
            b = data.train.make_batch(positions)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=s.bf16):
                if s.reference:
                    loss = s.model(b.src, b.src_len, b.tgt_in, b.tgt_out)
                else:
                    fert = torch.full(b.src.shape, 2.0) if s.constrained else None
                    out = s.model(b.src, b.src_len, b.tgt_in, fert)
                    loss = nmt_loss(out.logits, b.tgt_out)
            s.opt.zero_grad(set_to_none=True)
            (loss / b.n_tgt_tokens).backward()
            torch.nn.utils.clip_grad_norm_(s.model.parameters(), 5.0)
            s.opt.step()
            tok += b.n_tgt_tokens
        return tok, time.perf_counter() - t0

    for name in setups:  # warm-up
        train_steps(name, batches[:2])
    rates: dict[str, list[float]] = {n: [] for n in setups}
    for r in range(args.rounds):
        chunk = batches[2 + r * args.steps : 2 + (r + 1) * args.steps]
        for name in setups:
            tok, dt = train_steps(name, chunk)
            rates[name].append(tok / dt)

    first = label(args.transforms[0], precisions[0])
    n_params = sum(p.numel() for p in setups[first].model.parameters())
    m = base.model
    print(f"\ntraining throughput: preset {args.preset} ({m.layers}x{m.hidden_size} LSTM, emb {m.emb_size}, "
          f"{n_params / 1e6:.1f}M params), batch_tokens {base.data.batch_tokens}, {torch.get_num_threads()} threads")
    if not args.no_reference:  # nn.LSTMCell keeps two bias vectors per layer, hence a few more parameters
        n_ref = sum(p.numel() for p in setups[label(REFERENCE, precisions[0])].model.parameters())
        print(f"  ({REFERENCE}: the same model in textbook PyTorch, {n_ref / 1e6:.2f}M params; "
              f"/bf16: forward under torch.autocast bfloat16)")
    print(f"  {'system':<20} {'median tok/s':>12} {'rounds':>24} {'vs ' + first:>14}")
    ref = statistics.median(rates[first])
    for name, rs in rates.items():
        med = statistics.median(rs)
        print(f"  {name:<20} {med:>12.0f} {' '.join(f'{x:.0f}' for x in rs):>24} {med / ref:>13.2f}x")

    if args.decode_sentences:
        test = data.valid
        pos = list(range(min(args.decode_sentences, len(test))))
        print(f"\nbeam decoding (beam {args.beam}, {len(pos)} validation sentences, batch 64, untrained weights)")
        for name, s in setups.items():
            if s.reference or s.bf16:
                continue
            model, constrained = s.model, s.constrained
            model.eval()
            t0 = time.perf_counter()
            for i in range(0, len(pos), 64):
                b = test.make_batch(pos[i : i + 64])
                fert = torch.full(b.src.shape, 2.0) if constrained else None
                search(model, b.src, b.src_len, fert, settings=SearchSettings(beam=args.beam))
            dt = time.perf_counter() - t0
            print(f"  {name:<12} {len(pos) / dt:8.1f} sentences/s")


if __name__ == "__main__":
    main()
