"""Data and model for the workshop notebook ``10_one_change_at_a_time.ipynb``.

The dataset lives in a module file, not in the notebook, so that DataLoader worker processes can
import it whatever the multiprocessing start method: with ``fork`` (the Linux default up to Python
3.13) a worker inherits the kernel's memory and even a class defined in a cell works, but with
``spawn`` or ``forkserver`` (macOS, Windows, Python 3.14 on Linux) each worker unpickles the dataset
and must be able to import its class, which it cannot do from a notebook's ``__main__``.
"""

from __future__ import annotations

import time

import torch
from torch import nn
from torch.utils.data import Dataset

GROUPS = 64      # independent feature groups per sample
DIM = 32         # features per group
CLASSES = 10


class SlowSensorData(Dataset):
    """Synthetic samples that are slow to read: each item "reads from disk" for ``delay_s`` seconds.

    A sample is ``(x, y)``: ``x`` raw uint8 readings of shape ``(GROUPS, DIM)`` (like image pixels, to
    be normalised to float in the training step) and ``y`` a class in ``range(CLASSES)``. The data are
    generated once, in memory, from ``seed``; the delay is a ``time.sleep``, which stands in for I/O
    or decoding and, like real I/O, does not use the CPU while it waits.
    """

    def __init__(self, n: int = 1024, delay_s: float = 0.00025, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randint(0, 256, (n, GROUPS, DIM), dtype=torch.uint8, generator=g)
        self.y = torch.randint(0, CLASSES, (n,), generator=g)
        self.delay_s = delay_s

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.delay_s:
            time.sleep(self.delay_s)
        return self.x[i], self.y[i]

    def cached(self, n: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The first ``n`` samples as two tensors, without the read delay (the "infinitely fast data")."""
        n = len(self) if n is None else n
        return self.x[:n], self.y[:n]


class GroupedNet(nn.Module):
    """One small ``DIM × DIM`` linear map per feature group, a ReLU, then a linear classifier.

    ``batched=False`` runs the groups in a Python loop, one small matmul each (the planted
    inefficiency); ``batched=True`` runs them all in one ``torch.bmm``. Same parameters, same result.
    """

    def __init__(self, batched: bool = False, seed: int = 0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.w = nn.Parameter(torch.randn(GROUPS, DIM, DIM, generator=g) / DIM ** 0.5)
        self.head = nn.Linear(GROUPS * DIM, CLASSES)
        with torch.no_grad():
            self.head.weight.copy_(torch.randn(CLASSES, GROUPS * DIM, generator=g) / (GROUPS * DIM) ** 0.5)
            self.head.bias.zero_()
        self.batched = batched

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (batch, GROUPS, DIM) float
        if self.batched:
            # (GROUPS, batch, DIM) @ (GROUPS, DIM, DIM): every group's matmul in one call
            h = torch.bmm(x.transpose(0, 1), self.w).transpose(0, 1)
        else:
            h = torch.stack([x[:, k] @ self.w[k] for k in range(GROUPS)], dim=1)
        return self.head(torch.relu(h).flatten(1))


def forever(loader):
    """Batches from ``loader``, epoch after epoch, without end (for timing a few steps at a time)."""
    while True:
        yield from loader


_CHUNK: dict[bool, tuple] = {}


def training_chunk(batched: bool = True, batch_size: int = 32, n: int = 128) -> None:
    """The workshop's training step as module code, for a regression guard (a guard rebuilds the measured
    call from a module's functions, not from notebook cells): train on ``n`` cached samples in batches of
    ``batch_size`` with the loop model (``batched=False``) or the bmm model (``batched=True``), on the CPU.
    The model, its optimizer and the normalised data are built once per flag and reused."""
    if batched not in _CHUNK:
        model = GroupedNet(batched=batched)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        x, y = SlowSensorData(n, delay_s=0.0).cached()
        _CHUNK[batched] = (model, opt, (x.float() - 127.5) / 73.6, y)
    model, opt, x, y = _CHUNK[batched]
    for i in range(0, len(y), batch_size):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x[i:i + batch_size]), y[i:i + batch_size]).backward()
        opt.step()
