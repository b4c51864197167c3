"""Record the real training traces kept under tests/data/traces/ (the traces/
readers' test data): a small job trained with torch.distributed on CPU, gloo
over loopback, one process per rank, profiled with torch.profiler.

Not part of the test suite, and not run by it: the project's environment has
no PyTorch and needs none to read a trace. Run it with a PyTorch of its own,
outside the repository:

    python3 -m venv /tmp/w/torchvenv
    /tmp/w/torchvenv/bin/pip install torch==2.13.0     # the CPU wheel
    /tmp/w/torchvenv/bin/python scripts/make_traces.py [--ranks 4] [--out DIR]

Each rank writes, for the same profiled iterations, the profiler's trace
(Kineto JSON: rank-R.kineto.json.gz) and PyTorch's execution trace
(rank-R.et.json.gz). The profiler waits one step, warms up one, and records
two (ProfilerStep#2 and #3), so the readers have a last complete iteration
and an earlier one to choose.

The job, per step (ranks in "tp" pairs {0,1}, {2,3}, ...; the world group
"default_pg" holds every rank):
  - forward through an MLP whose first layer's output is all-gathered in the
    rank's tp pair (a tensor-parallel-like activation gather);
  - the first half of the ranks sends a slice of its output to rank
    r + world/2 over the world group (a pipeline-like send/recv);
  - backward, with DDP all-reducing the gradients over every rank in buckets;
  - a reduce-scatter and an all-to-all with uneven splits in the tp pair;
  - an all-gather of every rank's loss over the world group (for logging);
  - an SGD step.

PyTorch 2.13 writes no record_param_comms for gloo, so nothing in the traces
names an operation's process group: the world all-gather gives the world
group's worker thread an operation whose shapes say its group, and
traces/placing.py says how the readers settle the rest.
"""

import argparse
import gzip
import os
import shutil
import sys
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import ExecutionTraceObserver, ProfilerActivity, profile, schedule

BATCH = 64
WIDTHS = (512, 1024, 1024, 512, 256)        # the MLP's layer widths, input first
BUCKET_MB = 1                               # DDP's bucket cap: several buckets
SEND_ROWS = 16                              # rows of the output sent to rank r + world/2
A2A_ROWS = ((8, 24), (16, 40))              # tp place p sends A2A_ROWS[p][q] rows to place q
A2A_WIDTH = 256
STEPS = 5
WAIT, WARMUP, ACTIVE = 1, 1, 2


def tp_groups(world: int):
    """Every rank creates every group, in the same order (torch requires it)."""
    return [dist.new_group([r, r + 1], group_desc=f"tp{r // 2}")
            for r in range(0, world, 2)]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(WIDTHS, WIDTHS[1:]))

    def forward(self, x, gathered_hook):
        h = torch.relu(self.layers[0](x))
        h = h + gathered_hook(h)
        for layer in self.layers[1:]:
            h = torch.relu(layer(h))
        return h


def train_step(rank, world, model, opt, tp):
    me_tp, place = tp[rank // 2], rank % 2
    x = torch.randn(BATCH, WIDTHS[0])

    def gather(h):
        out = torch.empty(2 * BATCH, h.shape[1])
        dist.all_gather_into_tensor(out, h.detach().contiguous(), group=me_tp)
        return out.view(2, BATCH, -1).mean(0)

    h = model(x, gather)
    partner = (rank + world // 2) % world
    piece = torch.empty(SEND_ROWS, WIDTHS[-1])
    if rank < world // 2:
        dist.send(h.detach()[:SEND_ROWS].contiguous(), dst=partner)
    else:
        dist.recv(piece, src=partner)
    loss = (h ** 2).mean() + piece.sum() * 0.0
    opt.zero_grad()
    loss.backward()
    scattered = torch.empty(BATCH, WIDTHS[1] // 2)
    dist.reduce_scatter_tensor(scattered, torch.randn(2 * BATCH, WIDTHS[1] // 2), group=me_tp)
    send_rows = A2A_ROWS[place]
    recv_rows = tuple(A2A_ROWS[q][place] for q in range(2))
    out = torch.empty(sum(recv_rows), A2A_WIDTH)
    dist.all_to_all_single(out, torch.randn(sum(send_rows), A2A_WIDTH), list(recv_rows),
                           list(send_rows), group=me_tp)
    losses = torch.empty(world)
    dist.all_gather_into_tensor(losses, loss.detach().reshape(1))
    opt.step()


def run_rank(rank, world, port, out_dir):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    torch.set_num_threads(1)
    torch.manual_seed(rank)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    tp = tp_groups(world)
    model = DDP(Net(), bucket_cap_mb=BUCKET_MB)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    work = Path(tempfile.mkdtemp(prefix=f"trace-rank{rank}-"))
    et = ExecutionTraceObserver().register_callback(str(work / "et.json"))
    kineto = work / "kineto.json"
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1),
                 execution_trace_observer=et,
                 on_trace_ready=lambda p: p.export_chrome_trace(str(kineto))) as prof:
        for _ in range(STEPS):
            train_step(rank, world, model, opt, tp)
            prof.step()
    et.unregister_callback()
    dist.barrier()
    for name, path in (("kineto", kineto), ("et", work / "et.json")):
        with open(path, "rb") as src, gzip.open(out_dir / f"rank-{rank}.{name}.json.gz",
                                                 "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)
    shutil.rmtree(work)
    dist.destroy_process_group()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=4, help="processes (an even number)")
    parser.add_argument("--out", type=Path, default=None,
                        help="where the files go (default tests/data/traces/gloo-mlp-<ranks>)")
    parser.add_argument("--port", type=int, default=29531)
    args = parser.parse_args(argv)
    if args.ranks < 4 or args.ranks % 2:
        sys.exit("make_traces: --ranks must be an even number of at least 4.")
    out = args.out or Path(__file__).resolve().parent.parent / (
        f"tests/data/traces/gloo-mlp-{args.ranks}")
    out.mkdir(parents=True, exist_ok=True)
    mp.spawn(run_rank, args=(args.ranks, args.port, out), nprocs=args.ranks, join=True)
    print(f"make_traces: wrote {2 * args.ranks} files to {out}")


if __name__ == "__main__":
    main()
