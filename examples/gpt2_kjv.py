#!/usr/bin/env python3
"""Trains a small HuggingFace GPT-2 (random init, no download) on the King
James Bible, with its parameters, gradients and Adam states in a strata
store whose device budget holds a fraction of them.

    PYTHONPATH=build/default/python build/venv/bin/python examples/gpt2_kjv.py

The text is Debian's bible-kjv (`bible`), tokenized as bytes (a vocabulary
of 256: nothing to download or train). Prints the loss and tokens/s as it
goes, then the validation loss next to the bigram baseline of the same
tokens, and what moved between the tiers. --plain trains the same model
without strata (for comparison); --json FILE writes the numbers.
"""

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402

import strata.torch as st  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=300, help="optimizer steps (default 300)")
    p.add_argument("--batch", type=int, default=16, help="sequences per micro-batch (default 16)")
    p.add_argument("--accumulate", type=int, default=1, help="micro-batches per step (default 1)")
    p.add_argument("--context", type=int, default=64, help="tokens per sequence (default 64)")
    p.add_argument("--layers", type=int, default=4, help="transformer blocks (default 4)")
    p.add_argument("--embd", type=int, default=128, help="embedding width (default 128)")
    p.add_argument("--lr", type=float, default=3e-3, help="peak learning rate (default 3e-3)")
    p.add_argument("--device-budget", default="3MiB", help="strata device budget (default 3MiB)")
    p.add_argument("--host-budget", default="8MiB", help="strata host budget (default 8MiB)")
    p.add_argument("--nvme-dir", default=None,
                   help="directory for the NVMe tier (default: a temporary one under /var/tmp)")
    p.add_argument("--plain", action="store_true", help="train without strata (torch memory, strata's Adam)")
    p.add_argument("--activations", action="store_true",
                   help="autograd's saved activations in the store too (the device budget then holds them)")
    p.add_argument("--log-every", type=int, default=50, help="steps between progress lines (default 50)")
    p.add_argument("--seed", type=int, default=0, help="model and batch seed (default 0)")
    p.add_argument("--json", default=None, help="write the results as JSON to this file")
    args = p.parse_args(argv)
    for name in ("steps", "batch", "accumulate", "context", "layers", "embd", "log_every"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.embd % 4:
        p.error("--embd must be a multiple of 4 (4 attention heads)")
    return args


def read_kjv():
    """The KJV's verses, one a line, without their references."""
    try:
        out = subprocess.run(["bible", "-f", "gen1:1-rev22:21"], check=True,
                             capture_output=True, text=True).stdout
    except FileNotFoundError:
        sys.exit("gpt2_kjv: the KJV needs Debian's bible-kjv package "
                 "(scripts/setup.sh installs it)")
    return "\n".join(line.split(" ", 1)[1] for line in out.splitlines() if " " in line)


def bigram_baseline(train, valid):
    """Cross-entropy (nats/token) on `valid` of add-one bigram counts from
    `train`: what a model that sees only the previous byte can reach."""
    counts = torch.ones(256, 256, dtype=torch.float64)
    pairs = train[:-1].long() * 256 + train[1:].long()
    counts.view(-1).index_add_(0, pairs, torch.ones(len(pairs), dtype=torch.float64))
    logp = (counts / counts.sum(1, keepdim=True)).log()
    return -logp[valid[:-1].long(), valid[1:].long()].mean().item()


def make_model(args):
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(args.seed)
    config = GPT2Config(vocab_size=256, n_positions=args.context, n_embd=args.embd,
                        n_layer=args.layers, n_head=4, resid_pdrop=0.0, embd_pdrop=0.0,
                        attn_pdrop=0.0, attn_implementation="eager")
    return GPT2LMHeadModel(config)


def batch_at(tokens, gen, args):
    starts = torch.randint(0, len(tokens) - args.context - 1, (args.batch,), generator=gen)
    return torch.stack([tokens[s:s + args.context] for s in starts.tolist()]).long()


@torch.no_grad()
def validation_loss(model, valid, args, batches=16):
    gen = torch.Generator().manual_seed(1234)
    losses = [model(input_ids=(ids := batch_at(valid, gen, args)), labels=ids).loss.item()
              for _ in range(batches)]
    return sum(losses) / len(losses)


def main():
    args = parse_args()
    made_dir = None
    if not args.plain and args.nvme_dir is None:
        made_dir = args.nvme_dir = tempfile.mkdtemp(prefix="strata-gpt2-", dir="/var/tmp")
    try:
        return train(args)
    except st.StrataError as e:  # bad budgets and the like: the store's words
        print(f"gpt2_kjv: {e.message}", file=sys.stderr)
        return 2 if isinstance(e, ValueError) else 1
    except ValueError as e:  # strata.torch refusing the budgets
        print(f"gpt2_kjv: {e}", file=sys.stderr)
        return 2
    finally:
        if made_dir is not None:
            shutil.rmtree(made_dir, ignore_errors=True)


def train(args):
    data = torch.frombuffer(bytearray(read_kjv().encode()), dtype=torch.uint8)
    split = len(data) * 9 // 10
    train, valid = data[:split], data[split:]
    baseline = bigram_baseline(train, valid)
    model = make_model(args)
    params = sum(p.numel() for p in model.parameters())
    state = 16 * params  # fp32 parameters, gradients, two Adam moments
    store = None
    if not args.plain:
        store = st.Store(device_budget=args.device_budget, host_budget=args.host_budget,
                         nvme_dirs=[args.nvme_dir],
                         nvme_budget=max(64 << 20, 2 * state) + (1 << 30 if args.activations else 0))
        device_budget = store.stats()["tiers"]["device"]["capacity_bytes"]
        print(f"gpt2_kjv: GPT-2 {args.layers} layers x 4 heads, embed {args.embd}, "
              f"context {args.context}, bytes as tokens; {params / 1e6:.2f}M parameters, "
              f"{state / 2**20:.1f} MiB of state ({state / device_budget:.1f}x the device "
              f"budget {args.device_budget}), host budget {args.host_budget}", file=sys.stderr)
        st.offload(model, store, activations=args.activations)
    else:
        print(f"gpt2_kjv: plain torch, {params / 1e6:.2f}M parameters", file=sys.stderr)
    opt = st.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)
    warmup = max(1, args.steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) *
        (0.1 + 0.45 * (1 + math.cos(math.pi * min(1.0, s / args.steps)))))
    gen = torch.Generator().manual_seed(args.seed + 1)
    tokens_per_step = args.batch * args.context * args.accumulate
    step_times, first_loss = [], None
    for step in range(1, args.steps + 1):
        start = time.perf_counter()
        total = 0.0
        for _ in range(args.accumulate):
            ids = batch_at(train, gen, args)
            loss = model(input_ids=ids, labels=ids).loss / args.accumulate
            loss.backward()
            total += loss.item()
        st.clip_grad_norm_(model, 1.0)
        opt.step()
        opt.zero_grad()
        sched.step()
        step_times.append(time.perf_counter() - start)
        first_loss = total if first_loss is None else first_loss
        if step % args.log_every == 0 or step == args.steps:
            recent = step_times[-args.log_every:]
            print(f"step {step}/{args.steps}  loss {total:.4f}  "
                  f"{tokens_per_step * len(recent) / sum(recent):.0f} tokens/s", file=sys.stderr)
    slots = None if args.plain else st._offload.state_of(model).activations
    stored = (slots.saved, slots.kept, len(slots.slots)) if slots else None
    valid_loss = validation_loss(model, valid, args)
    median = sorted(step_times)[len(step_times) // 2]
    result = {"parameters": params, "state_bytes": state, "steps": args.steps,
              "first_loss": first_loss, "last_loss": total,
              "validation_loss": valid_loss, "bigram_baseline": baseline,
              "step_median_seconds": median, "tokens_per_second": tokens_per_step / median,
              "offloaded": not args.plain}
    print(f"validation loss {valid_loss:.4f} (bigram baseline {baseline:.4f}: "
          f"{'below' if valid_loss < baseline else 'not below'})")
    print(f"step median {median * 1e3:.1f} ms, {tokens_per_step / median:.0f} tokens/s")
    if store is not None:
        s = store.stats()
        moved = {name: s["links"][name]["bytes"] for name in s["links"]}
        result["moved_bytes"] = moved
        result["device_peak_bytes"] = s["tiers"]["device"]["peak_used_bytes"]
        result["device_budget_bytes"] = s["tiers"]["device"]["capacity_bytes"]
        result["prefetch_hit"] = s["prefetch"]["hit"]
        result["stall_seconds"] = s["stall_seconds"]
        if stored is not None:  # counted over training, before validation
            result["activations"] = dict(zip(("saved", "kept", "slots"), stored))
            print(f"activations: {stored[0]} saved in the store, {stored[1]} "
                  f"kept in torch, {stored[2]} store tensors")
        print("moved (GB): " + "  ".join(f"{k} {v / 1e9:.2f}" for k, v in moved.items()))
        print(f"peak device {s['tiers']['device']['peak_used_bytes'] / 2**20:.2f} MiB of "
              f"{s['tiers']['device']['capacity_bytes'] / 2**20:.2f} MiB; stall "
              f"{s['stall_seconds']:.2f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
