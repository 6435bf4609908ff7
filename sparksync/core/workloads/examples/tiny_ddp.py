"""A tiny data-parallel training run, to check a cluster's training path end to end.

    torchrun --nnodes 2 --nproc_per_node 1 --node_rank R --master_addr HEAD --master_port 29500 \\
        tiny_ddp.py --steps 100

Every rank trains a small next-token model on random tokens with
DistributedDataParallel (gloo on CPUs, NCCL where every rank has a GPU), so
each step all-reduces the gradients over the fabric. It logs in nanochat's
format, which SparkSync reads for tokens/s, loss and step::

    step 00009/00010 (90.00%) | loss: 7.620000 | dt: 110ms | tok/sec: 4,649

``tok/sec`` is this rank's own rate; SparkSync adds the ranks up.
It needs torch only; the model is random, so the loss says nothing.
"""

from __future__ import annotations

import argparse
import os
import time


def main() -> None:
    args = _arguments()
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    backend = "nccl" if torch.cuda.is_available() and args.backend == "auto" else args.backend
    backend = "gloo" if backend == "auto" else backend
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}" if backend == "nccl" else "cpu")
    _check_sync(dist, torch, rank, world, device)
    torch.manual_seed(1234)  # the same initial weights everywhere (DDP also broadcasts them)
    model = torch.nn.Sequential(
        torch.nn.Embedding(args.vocab, args.dim), torch.nn.Linear(args.dim, args.dim), torch.nn.GELU(),
        torch.nn.Linear(args.dim, args.vocab),
    ).to(device)  # fmt: skip
    ddp = DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(ddp.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(rank)
    tokens_per_step = args.batch * args.seq
    for step in range(args.steps):
        began = time.perf_counter()
        batch = torch.randint(0, args.vocab, (args.batch, args.seq + 1), generator=generator).to(device)
        logits = ddp(batch[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, args.vocab), batch[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()  # DDP all-reduces the gradients here
        optimizer.step()
        if args.pace_ms:
            time.sleep(args.pace_ms / 1000)
        dt = time.perf_counter() - began
        print(
            f"step {step:05d}/{args.steps:05d} ({100 * step / args.steps:.2f}%) | loss: {loss.item():.6f} | "
            f"dt: {dt * 1000:.0f}ms | tok/sec: {tokens_per_step / dt:,.0f}",
            flush=True,
        )
    dist.destroy_process_group()


def _check_sync(dist, torch, rank: int, world: int, device) -> None:
    """Every rank adds its rank number: the sum proves all of them joined and talk over the fabric."""
    total = torch.tensor([float(rank)], device=device)
    dist.all_reduce(total)
    expected = world * (world - 1) / 2
    if total.item() != expected:
        raise SystemExit(f"rank {rank}: all_reduce gave {total.item()}, expected {expected}")
    print(f"rank {rank}/{world} synchronised (all_reduce {total.item():g})", flush=True)


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--vocab", type=int, default=512)
    parser.add_argument(
        "--pace-ms", type=float, default=0.0, help="Sleep per step (keeps a short test visible)."
    )
    parser.add_argument("--backend", choices=["auto", "gloo", "nccl"], default="auto")
    return parser.parse_args()


if __name__ == "__main__":
    main()
