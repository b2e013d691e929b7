"""The PyTorch twins of the model files, for the scripts that compare hogwild with PyTorch.

    Net  = models/lenet.model: the network of pytorch/examples mnist_hogwild/main.py, verbatim
    MLP  = models/mlp.model: 784-128-10 with ReLU

Their state_dict names and shapes are the ones hogwild's checkpoints use. A script elsewhere in
the repository imports them with:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "<up>", "models"))
    from torch_nets import Net, MLP
"""
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
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
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        return F.log_softmax(self.fc2(F.relu(self.fc1(x.view(-1, 784)))), dim=1)
