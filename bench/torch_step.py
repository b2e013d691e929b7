#!/usr/bin/python3
"""The PyTorch side of bench/nn_step.c: forward + backward of the same two networks, batch 64,
one thread, training mode (dropout on), samples/s. Run with Debian's python3, which has torch:

    /usr/bin/python3 bench/torch_step.py
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):  # examples/mnist_hogwild's Net = models/lenet.model
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        return F.log_softmax(self.fc2(x), dim=1)


class MLP(nn.Module):  # models/mlp.model
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        return F.log_softmax(self.fc2(F.relu(self.fc1(x.view(-1, 784)))), dim=1)


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
    torch.set_num_threads(1)
    torch.manual_seed(1)
    bench("lenet", Net())
    bench("mlp", MLP())
