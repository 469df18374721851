"""Training throughput (target tokens/s) and beam decoding speed, side by side in one run.

    python benchmarks/train_throughput.py --preset paper --transforms softmax csparsemax
    python benchmarks/train_throughput.py --preset cpu-small --steps 20

Uses real Multi30k De-En batches from a prepared directory (``--data``, default
runs/data/multi30k-de-en; prepared on the fly if missing).  The transforms are
timed in interleaved rounds so machine noise hits them alike; ratios are
reported against the first transform.  Constrained transforms use constant
fertility 2 (the bound computation is what is being timed, not the strategy).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from scanmt.config import Config
from scanmt.decoding.search import beam_search
from scanmt.decoding.translator import build_model
from scanmt.model.nmt import nmt_loss
from scanmt.model.transforms import get_transform
from scanmt.presets import preset_path


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
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    data_dir = Path(args.data)
    if not (data_dir / "meta.json").exists():
        from scanmt.cli.main import main as cli

        cli(["prepare", "--corpus", "multi30k", "--pair", "de-en", "--out", str(data_dir)])
    from scanmt.training.trainer import load_train_data

    base = Config.load(preset_path(args.preset), [f"data.dir={data_dir}"])
    data = load_train_data(base)
    batches = data.train.token_batches(base.data.batch_tokens, seed=1, epoch=1)
    n_batches = args.steps * args.rounds + 2

    setups = {}
    for name in args.transforms:
        cfg = Config.from_dict(base.to_dict())
        cfg.model.attention.transform = name
        torch.manual_seed(0)
        model = build_model(cfg, len(data.pipeline.vocab))
        model.reset_parameters(0.1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        setups[name] = (model, opt, get_transform(name).constrained)

    def train_steps(name: str, chunk: list[list[int]]) -> tuple[int, float]:
        model, opt, constrained = setups[name]
        model.train()
        tok, t0 = 0, time.perf_counter()
        for positions in chunk:
            b = data.train.make_batch(positions)
            fert = torch.full(b.src.shape, 2.0) if constrained else None
            out = model(b.src, b.src_len, b.tgt_in, fert)
            loss = nmt_loss(out.logits, b.tgt_out)
            opt.zero_grad(set_to_none=True)
            (loss / b.n_tgt_tokens).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            opt.step()
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

    n_params = sum(p.numel() for p in setups[args.transforms[0]][0].parameters())
    m = base.model
    print(f"\ntraining throughput: preset {args.preset} ({m.layers}x{m.hidden_size} LSTM, emb {m.emb_size}, "
          f"{n_params / 1e6:.1f}M params), batch_tokens {base.data.batch_tokens}, {torch.get_num_threads()} threads")
    print(f"  {'transform':<12} {'median tok/s':>12} {'rounds':>28} {'vs ' + args.transforms[0]:>12}")
    ref = statistics.median(rates[args.transforms[0]])
    for name, rs in rates.items():
        med = statistics.median(rs)
        print(f"  {name:<12} {med:>12.0f} {' '.join(f'{x:.0f}' for x in rs):>28} {med / ref:>11.2f}x")

    if args.decode_sentences:
        test = data.valid
        pos = list(range(min(args.decode_sentences, len(test))))
        print(f"\nbeam decoding (beam {args.beam}, {len(pos)} validation sentences, batch 64, untrained weights)")
        for name, (model, _, constrained) in setups.items():
            model.eval()
            t0 = time.perf_counter()
            for i in range(0, len(pos), 64):
                b = test.make_batch(pos[i : i + 64])
                fert = torch.full(b.src.shape, 2.0) if constrained else None
                beam_search(model, b.src, b.src_len, fert, beam=args.beam)
            dt = time.perf_counter() - t0
            print(f"  {name:<12} {len(pos) / dt:8.1f} sentences/s")


if __name__ == "__main__":
    main()
