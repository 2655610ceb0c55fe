#!/usr/bin/env python3
"""strata.torch's overhead, against plain torch measured in the same run.

1. Per module: a stack of small Linear layers whose state all fits the
   device budget (after the first step nothing moves), forward and
   forward+backward, offloaded and plain; the difference per module is
   what the hooks, leases and DLPack cost in Python. Target: <= 50 us per
   module acquire and release.
2. The GPT-2 example's model and budgets (examples/gpt2_kjv.py; state 4.2x
   the device budget) offloaded over plain, their steps alternated in one
   process, median step of each; every loss compared bitwise. Target:
   <= 1.3x at a step of >= 100 ms.

    PYTHONPATH=build/default/python build/venv/bin/python bench/torch_offload_bench.py [--json FILE]
"""

import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time

import torch

import strata.torch as st

HERE = os.path.dirname(os.path.abspath(__file__))


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def time_it(fn, reps):
    fn()  # warm-up (the offloaded model's first step learns its order)
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return median(samples)


def per_module(layers, reps):
    def make():
        torch.manual_seed(0)
        return torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(layers)])

    x = torch.randn(4, 16)
    plain, offloaded = make(), make()
    nvme_dir = tempfile.mkdtemp(prefix="strata-bench-", dir="/var/tmp")
    store = st.Store(device_budget="16MiB", host_budget="32MiB",
                     nvme_dirs=[nvme_dir], nvme_budget="64MiB")
    st.offload(offloaded, store)
    out = {}
    for name, model in (("plain", plain), ("offloaded", offloaded)):
        def forward():
            with torch.no_grad():
                model(x)

        def forward_backward():
            model(x).sum().backward()
            model.zero_grad(set_to_none=True)

        out[name] = {"forward": time_it(forward, reps),
                     "forward_backward": time_it(forward_backward, reps)}
    store.close()
    del offloaded
    shutil.rmtree(nvme_dir, ignore_errors=True)
    return {
        "layers": layers,
        "forward_us_per_module": (out["offloaded"]["forward"] - out["plain"]["forward"])
        / layers * 1e6,
        "forward_backward_us_per_module":
            (out["offloaded"]["forward_backward"] - out["plain"]["forward_backward"])
            / layers * 1e6,
        "seconds": out,
    }


def example(steps):
    """The example's model plain and offloaded in this process, their steps
    alternated (which goes first alternates too), so both see the same
    machine; median step of each, and every loss compared."""
    spec = importlib.util.spec_from_file_location(
        "gpt2_kjv", os.path.join(HERE, "..", "examples", "gpt2_kjv.py"))
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    args = ex.parse_args([])
    data = torch.frombuffer(bytearray(ex.read_kjv().encode()), dtype=torch.uint8)
    nvme_dir = tempfile.mkdtemp(prefix="strata-bench-", dir="/var/tmp")
    runs = {}
    for mode in ("plain", "offloaded"):
        model = ex.make_model(args)
        state = 16 * sum(p.numel() for p in model.parameters())
        store = None
        if mode == "offloaded":
            store = st.Store(device_budget=args.device_budget,
                             host_budget=args.host_budget, nvme_dirs=[nvme_dir],
                             nvme_budget=max(64 << 20, 2 * state))
            st.offload(model, store)
        opt = st.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95),
                       weight_decay=0.1)
        runs[mode] = dict(model=model, opt=opt, store=store, times=[], losses=[],
                          gen=torch.Generator().manual_seed(args.seed + 1))

    def one_step(run):
        start = time.perf_counter()
        ids = ex.batch_at(data, run["gen"], args)
        loss = run["model"](input_ids=ids, labels=ids).loss
        loss.backward()
        st.clip_grad_norm_(run["model"], 1.0)
        run["opt"].step()
        run["opt"].zero_grad()
        run["times"].append(time.perf_counter() - start)
        run["losses"].append(loss.item())

    for step in range(steps):
        order = ("plain", "offloaded") if step % 2 == 0 else ("offloaded", "plain")
        for mode in order:
            one_step(runs[mode])
    result = {mode: {"step_median_seconds": median(run["times"][steps // 10:])}
              for mode, run in runs.items()}
    stats = runs["offloaded"]["store"].stats()
    result["offloaded"]["moved_bytes"] = {k: v["bytes"] for k, v in stats["links"].items()}
    result["offloaded"]["stall_seconds"] = stats["stall_seconds"]
    result["step_ratio"] = (result["offloaded"]["step_median_seconds"] /
                            result["plain"]["step_median_seconds"])
    result["losses_equal"] = runs["plain"]["losses"] == runs["offloaded"]["losses"]
    runs["offloaded"]["store"].close()
    runs.clear()
    shutil.rmtree(nvme_dir, ignore_errors=True)
    return result


def main():
    p = argparse.ArgumentParser(description="strata.torch overhead vs plain torch")
    p.add_argument("--layers", type=int, default=200,
                   help="Linear layers of the per-module stack (default 200)")
    p.add_argument("--reps", type=int, default=20,
                   help="timed repetitions per measurement (default 20)")
    p.add_argument("--example-steps", type=int, default=60,
                   help="steps of each of the example's models (default 60)")
    p.add_argument("--json", default=None, help="write every number to this file")
    args = p.parse_args()
    hooks = per_module(args.layers, args.reps)
    ex = example(args.example_steps)
    print(f"{'what':<44} {'measured':>12} {'target':>10}")
    print(f"{'forward, per module (us)':<44} {hooks['forward_us_per_module']:>12.1f} {'<= 50':>10}")
    print(f"{'forward+backward, per module (us)':<44} "
          f"{hooks['forward_backward_us_per_module']:>12.1f} {'':>10}")
    print(f"{'GPT-2 example step, plain (ms)':<44} "
          f"{ex['plain']['step_median_seconds'] * 1e3:>12.1f} {'>= 100':>10}")
    print(f"{'GPT-2 example step, offloaded (ms)':<44} "
          f"{ex['offloaded']['step_median_seconds'] * 1e3:>12.1f}")
    print(f"{'offloaded / plain':<44} {ex['step_ratio']:>12.3f} {'<= 1.3':>10}")
    print(f"{'every loss equal (bitwise)':<44} {str(ex['losses_equal']):>12}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"per_module": hooks, "example": ex}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
