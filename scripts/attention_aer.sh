#!/usr/bin/env bash
# AER/SAER of each model's reported attention on the RWTH De-En gold alignments (508 Europarl sentence
# pairs, out of domain for Multi30k), by forced decoding of the gold English sentences.
#   bash scripts/attention_aer.sh OUT_DIR CHECKPOINT [CHECKPOINT ...]
# Writes OUT_DIR/NAME.attn.npz and OUT_DIR/NAME.aer.json (NAME: the checkpoint's run folder) and prints
# one line per checkpoint. Needs ../shared/data/alignments/deen-rwth beside the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
GOLD=${GOLD:-../shared/data/alignments/deen-rwth}
SCANMT=${SCANMT:-.venv/bin/scanmt}
out=$1; shift
mkdir -p "$out"
for ckpt in "$@"; do
    name=$(basename "$(dirname "$(dirname "$ckpt")")")-$(basename "$(dirname "$ckpt")")
    $SCANMT translate --model "$ckpt" --input "$GOLD/test.de" --force-target "$GOLD/test.en" \
        --output "$out/$name.logprob" --attention-out "$out/$name.attn.npz" >/dev/null
    $SCANMT evaluate --attention "$out/$name.attn.npz" --gold-align "$GOLD/test.talp" --gold-one-indexed \
        --json "$out/$name.aer.json" >/dev/null
    python3 -c "import json,sys; r=json.load(open(sys.argv[1])); \
print(sys.argv[2], 'AER %.2f' % r['aer']['score'], 'SAER %.2f' % r['saer']['score'])" "$out/$name.aer.json" "$name"
done
