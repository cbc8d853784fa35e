"""Models, data and training steps of ``bench_training_loop.py`` (a module, so DataLoader workers can import it).

Plain torch, random init from a seed, synthetic data; nothing here imports perfmagic. The pieces a
notebook user would write in cells: a small CNN on 32×32 images, a small transformer encoder over
sequences, a Dataset whose ``__getitem__`` does real per-item work in NumPy (so ``num_workers``
matters), and one training step.

- :class:`SmallCNN`: three 3×3 convolutions (3→16→32→64 channels, the last two with stride 2), global
  average pool, a linear head; 32×32 RGB inputs.
- :class:`TinyTransformer`: a linear embedding, ``nn.TransformerEncoder`` (2 layers, d_model 64, 4 heads,
  feed-forward 128, batch first), mean pool, a linear head.
- :class:`HeadLoopTransformer`: one transformer block whose self-attention is written by hand, with
  ``fused=False`` a Python loop over the 8 heads (one small matmul pair each, the planted inefficiency)
  and ``fused=True`` all heads in one batched matmul; same parameters, same result.
- :class:`AugmentedImages`: ``n`` synthetic uint8 images; an item is flipped (by its index), normalised
  per channel, blurred by a 3×3 box filter ``BLUR_PASSES`` times and returned as a float32 CHW tensor
  with its class.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset

CLASSES = 10
IMG = 32
SEQ, FEAT, D_MODEL = 32, 16, 64
BLUR_PASSES = 6
_MEAN = np.array([125.3, 123.0, 113.9], dtype=np.float32)
_STD = np.array([63.0, 62.1, 66.7], dtype=np.float32)


class SmallCNN(nn.Module):
    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.body = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(64, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


class TinyTransformer(nn.Module):
    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.embed = nn.Linear(FEAT, D_MODEL)
        layer = nn.TransformerEncoderLayer(D_MODEL, nhead=4, dim_feedforward=128, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.head = nn.Linear(D_MODEL, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (batch, SEQ, FEAT)
        return self.head(self.encoder(self.embed(x)).mean(dim=1))


class HeadLoopTransformer(nn.Module):
    """One pre-norm transformer block with hand-written attention over ``heads`` heads.

    ``fused=False``: a Python loop over the heads, each head's q·kᵀ, softmax and ·v on its own slice;
    ``fused=True``: the same arithmetic for all heads at once (one reshape, batched matmuls)."""

    def __init__(self, fused: bool = False, heads: int = 8, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.fused, self.heads = fused, heads
        self.embed = nn.Linear(FEAT, D_MODEL)
        self.norm1, self.norm2 = nn.LayerNorm(D_MODEL), nn.LayerNorm(D_MODEL)
        self.qkv = nn.Linear(D_MODEL, 3 * D_MODEL)
        self.proj = nn.Linear(D_MODEL, D_MODEL)
        self.ff = nn.Sequential(nn.Linear(D_MODEL, 128), nn.GELU(), nn.Linear(128, D_MODEL))
        self.head = nn.Linear(D_MODEL, CLASSES)

    def attend(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        h, dh = self.heads, d // self.heads
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        if self.fused:
            q, k, v = (t.view(b, s, h, dh).transpose(1, 2) for t in (q, k, v))
            w = torch.softmax(q @ k.transpose(-2, -1) / dh ** 0.5, dim=-1)
            out = (w @ v).transpose(1, 2).reshape(b, s, d)
        else:
            outs = []
            for i in range(h):
                sl = slice(i * dh, (i + 1) * dh)
                w = torch.softmax(q[..., sl] @ k[..., sl].transpose(-2, -1) / dh ** 0.5, dim=-1)
                outs.append(w @ v[..., sl])
            out = torch.cat(outs, dim=-1)
        return self.proj(out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        x = x + self.attend(self.norm1(x))
        x = x + self.ff(self.norm2(x))
        return self.head(x.mean(dim=1))


def _blur(img: np.ndarray) -> np.ndarray:
    """3×3 box filter with edge padding (H, W, C float32)."""
    p = np.pad(img, ((1, 1), (1, 1), (0, 0)), mode="edge")
    h, w = img.shape[:2]
    out = np.zeros_like(img)
    for dy in range(3):
        for dx in range(3):
            out += p[dy:dy + h, dx:dx + w]
    return out / 9.0


class AugmentedImages(Dataset):
    """Synthetic 32×32 RGB images whose items cost real CPU work (NumPy flip, normalise, box blur)."""

    def __init__(self, n: int = 4096, seed: int = 0, passes: int = BLUR_PASSES) -> None:
        rng = np.random.default_rng(seed)
        self.x = rng.integers(0, 256, (n, IMG, IMG, 3), dtype=np.uint8)
        self.y = rng.integers(0, CLASSES, n).astype(np.int64)
        self.passes = passes

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        img = self.x[i].astype(np.float32)
        if i % 2:
            img = img[:, ::-1]
        img = (img - _MEAN) / _STD
        for _ in range(self.passes):
            img = _blur(img)
        return torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1))), torch.tensor(self.y[i])


def image_batch(batch: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, 3, IMG, IMG, generator=g), torch.randint(0, CLASSES, (batch,), generator=g)


def seq_batch(batch: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, SEQ, FEAT, generator=g), torch.randint(0, CLASSES, (batch,), generator=g)


def train_step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor,
               set_to_none: bool = True) -> float:
    """One optimisation step: zero the gradients, forward, cross-entropy, backward, update."""
    opt.zero_grad(set_to_none=set_to_none)
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()


def predict(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Inference: the class of every input, without autograd."""
    with torch.no_grad():
        return model(x).argmax(dim=1)
