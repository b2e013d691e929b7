#!/usr/bin/env python3
"""The peer: PyTorch's mnist_hogwild example, run the same way hogwild runs.

Same network (models/lenet.model = the example's Net; models/mlp.model = 784-128-10), same
defaults (batch 64, lr 0.01, momentum 0.5, seed 1), a process per worker with one thread each,
its own shard of the training set each epoch (DistributedSampler semantics), the data already
in memory as tensors, timed from the first fork (Process.start) to the last join.

    /usr/bin/python3 bench/peer_torch_hogwild.py --model lenet --workers 2 --data data/mnist
    bench/.venv-torch/bin/python bench/peer_torch_hogwild.py ...   (PyPI's torch 2.x: README, "Benchmarks")
    python3 bench/peer_torch_hogwild.py --device cuda --workers 4     (the example's --cuda)

Prints one line of key=value pairs: train_seconds, samples_per_second, test_accuracy, test_loss.
Exits 3 with a message when torch is not installed (the benchmark then skips the peer).

    PYTHON bench/peer_torch_hogwild.py --describe

prints which torch the Python runs instead: its version, the BLAS it was built with, whether
oneDNN is available, and whether oneDNN ran LeNet's convolutions (one forward and backward under
torch's profiler, one thread, looking for aten::mkldnn_convolution).

On a GPU (--device cuda) it runs as the example does with --cuda: the model on the GPU, shared
with the workers through torch.multiprocessing (CUDA IPC), which must be started with "spawn";
each batch is moved to the GPU as the example's DataLoader batches are, and the training
forward/backward/step run on the GPU. A spawned worker imports torch before it can train (seconds
that are not training), so train_seconds is then timed from the moment every worker is ready (a
barrier) to the last one's end, with the GPU's work waited for; wall_seconds is the whole run.
"""
import argparse
import gzip
import os
import struct
import sys
import time

# One thread per process, as hogwild's workers have. torch.set_num_threads(1) does not reach the
# OpenBLAS that Debian's torch 1.13 calls, which then starts a thread per core; two such processes
# on two cores ran the MLP's step at 140k samples/s where one thread runs it at 300k (2-vCPU Zen 5).
# So the BLAS and OpenMP libraries are told before torch loads them (a caller's own setting stays).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

try:
    import torch
    import torch.multiprocessing as mp
    import torch.nn.functional as F
except ImportError:
    print("peer skipped: torch is not installed (Debian: apt-get install python3-torch)", file=sys.stderr)
    sys.exit(3)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
from torch_nets import MLP, Net  # noqa: E402  (the PyTorch twins of models/*.model)


def read_idx(path):
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
        data = f.read()
    magic, count = struct.unpack(">II", data[:8])
    if magic == 0x803:
        rows, cols = struct.unpack(">II", data[8:16])
        return torch.frombuffer(bytearray(data[16:]), dtype=torch.uint8).view(count, 1, rows, cols)
    return torch.frombuffer(bytearray(data[8:]), dtype=torch.uint8).view(count)


def load(folder, prefix):
    def find(stem):
        for name in (stem + ".gz", stem):
            if os.path.exists(os.path.join(folder, name)):
                return os.path.join(folder, name)
        sys.exit(f"peer: {stem} not found in {folder}")

    images = read_idx(find(f"{prefix}-images-idx3-ubyte"))
    labels = read_idx(find(f"{prefix}-labels-idx1-ubyte")).long()
    x = (images.float() / 255.0 - 0.1307) / 0.3081
    return x, labels


def train(rank, args, model, x, y, ready=None, times=None):
    torch.set_num_threads(1)
    torch.manual_seed(args.seed + rank)
    device = torch.device(args.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    model.train()
    n = x.shape[0]
    if ready is not None:
        ready.wait()
        times[2 * rank] = time.time()
    for epoch in range(args.epochs):
        # DistributedSampler without padding: one permutation per epoch, dealt out by rank.
        g = torch.Generator()
        g.manual_seed(args.seed + epoch)
        shard = torch.randperm(n, generator=g)[rank :: args.workers]
        for start in range(0, shard.numel(), args.batch_size):
            idx = shard[start : start + args.batch_size]
            data, target = x[idx].to(device), y[idx].to(device)
            optimizer.zero_grad()
            loss = F.nll_loss(model(data), target)
            loss.backward()
            optimizer.step()
    if times is not None:
        if device.type == "cuda":
            torch.cuda.synchronize()
        times[2 * rank + 1] = time.time()


def describe():
    config = torch.__config__.show()
    blas = config.split("BLAS_INFO=")[1].split(",")[0] if "BLAS_INFO=" in config else "?"
    torch.set_num_threads(1)
    net, x = Net(), torch.randn(64, 1, 28, 28)
    with torch.autograd.profiler.profile() as prof:
        F.nll_loss(net(x), torch.randint(0, 10, (64,))).backward()
    ops = {e.name for e in prof.function_events}
    ran = "aten::mkldnn_convolution" in ops
    conv = sorted(op for op in ops if "conv" in op and op != "aten::conv2d")
    print(f"torch={torch.__version__} python={sys.executable} blas={blas} "
          f"onednn_available={torch.backends.mkldnn.is_available()} onednn_ran_lenet_convs={ran} "
          f"conv_ops={','.join(conv)}")


def main():
    if "--describe" in sys.argv[1:]:
        describe()
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=["lenet", "mlp"], default="lenet")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--data", default="data/mnist")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--momentum", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--limit", type=int, default=0, help="train on the first N samples only")
    parser.add_argument("--device", default="cpu", help="cpu, or cuda (cuda:N) as the example's --cuda")
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("peer skipped: this torch sees no GPU", file=sys.stderr)
        sys.exit(3)

    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    x, y = load(args.data, "train")
    if args.limit:
        x, y = x[: args.limit], y[: args.limit]
    xt, yt = load(args.data, "t10k")
    model = (Net() if args.model == "lenet" else MLP()).to(device)
    model.share_memory()
    x.share_memory_()
    y.share_memory_()
    # torch 2.x's first optimizer imports torch._dynamo (about 0.9 s on a Zen 5). Each worker builds
    # its own, as the example's do; made once here, the forked workers inherit the import and the
    # timed epoch is training, not a module load per process (torch 2.15, MLP, 2 processes: 47k
    # samples/s with the import in each worker, 170-185k without). With "spawn" (CUDA) the workers
    # import afresh, before the barrier that starts the clock.
    torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)

    # CUDA cannot be used in a forked child once the parent has started it: the example spawns.
    mp.set_start_method("spawn" if device.type == "cuda" else "fork")
    ready = mp.Barrier(args.workers) if device.type == "cuda" else None
    times = mp.Array("d", 2 * args.workers) if device.type == "cuda" else None
    started = time.monotonic()
    processes = [mp.Process(target=train, args=(rank, args, model, x, y, ready, times)) for rank in range(args.workers)]
    for p in processes:
        p.start()
    for p in processes:
        p.join()
    wall = time.monotonic() - started
    seconds = wall if times is None else max(times[1::2]) - min(times[0::2])
    if any(p.exitcode != 0 for p in processes):
        sys.exit("peer: a worker failed")

    model.eval()
    with torch.no_grad():
        out = torch.cat([model(xt[i : i + 1000].to(device)) for i in range(0, xt.shape[0], 1000)]).cpu()
        test_loss = F.nll_loss(out, yt, reduction="sum").item() / xt.shape[0]
        accuracy = 100.0 * (out.argmax(1) == yt).sum().item() / xt.shape[0]
    samples = x.shape[0] * args.epochs
    print(f"peer model={args.model} workers={args.workers} device={args.device} torch={torch.__version__} "
          f"wall_seconds={wall:.3f} train_seconds={seconds:.3f} "
          f"samples_per_second={samples / seconds:.0f} test_accuracy={accuracy:.2f} test_loss={test_loss:.4f}")


if __name__ == "__main__":
    main()
