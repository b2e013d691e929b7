#!/usr/bin/python3
"""The PyTorch side of bench/nn_step.c: forward + backward of the same two networks, batch 64,
one thread, training mode (dropout on), samples/s. Run with the Python whose torch to measure:
Debian's python3-torch (1.13), or PyPI's torch 2.x in bench/.venv-torch (README, "Benchmarks"):

    /usr/bin/python3 bench/torch_step.py
    bench/.venv-torch/bin/python bench/torch_step.py
"""
import os
import sys
import time

# One thread per process, as hogwild's workers have. torch.set_num_threads(1) does not reach the
# OpenBLAS that Debian's torch 1.13 calls, which then starts a thread per core; two such processes
# on two cores ran the MLP's step at 140k samples/s where one thread runs it at 300k (2-vCPU Zen 5).
# So the BLAS and OpenMP libraries are told before torch loads them (a caller's own setting stays).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import torch  # noqa: E402  (after the thread settings)
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
from torch_nets import MLP, Net  # noqa: E402  (the PyTorch twins of models/*.model)


def bench(name, net, batch=64, seconds=1.0):
    x = torch.randn(batch, 1, 28, 28)
    y = torch.randint(0, 10, (batch,))
    net.train()
    rates = []
    for rep in range(6):
        steps, t0 = 0, time.process_time()
        while time.process_time() - t0 < (0.3 if rep == 0 else seconds):
            net.zero_grad()
            F.nll_loss(net(x), y).backward()
            steps += 1
        if rep > 0:
            rates.append(steps * batch / (time.process_time() - t0))
    rates.sort()
    print("torch %s %-6s batch %d: %8.0f samples/s best, %8.0f median" % (torch.__version__, name, batch, rates[-1], rates[2]))


if __name__ == "__main__":
    config = torch.__config__.show()
    blas = config.split("BLAS_INFO=")[1].split(",")[0] if "BLAS_INFO=" in config else "?"
    print("torch %s (%s): BLAS %s, oneDNN available %s" % (torch.__version__, sys.executable, blas,
                                                         torch.backends.mkldnn.is_available()))
    torch.set_num_threads(1)
    torch.manual_seed(1)
    bench("lenet", Net())
    bench("mlp", MLP())
