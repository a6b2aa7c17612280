"""Train a tiny regression model; the DataLoader follows envguard's smoke-probe advice.

    python train.py [--epochs N] [--samples N] [--workers N] [--spawn]

* The Dataset is defined at module level and the script runs under
  ``if __name__ == "__main__":`` so that worker processes started with spawn
  or forkserver (macOS's default, Linux's from Python 3.14) can import it.
* ``pin_memory=torch.cuda.is_available()``: pinning only when there is a GPU.
* ``persistent_workers=True`` keeps workers alive between epochs.
* ``timeout=`` turns a stalled worker into an error instead of a hang.
* Workers seed themselves and keep CUDA out of ``__getitem__``.
"""

from __future__ import annotations

import argparse

import torch
from torch.utils.data import DataLoader, Dataset


class LinearData(Dataset):
    """y = 3x - 1 with noise; everything computed on the CPU in the worker."""

    def __init__(self, samples: int, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        self.x = torch.rand(samples, 1, generator=g)
        self.y = 3 * self.x - 1 + 0.01 * torch.randn(samples, 1, generator=g)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[i], self.y[i]


def seed_worker(worker_id: int) -> None:
    torch.manual_seed(torch.initial_seed() % 2**32 + worker_id)


def make_loader(samples: int, workers: int, spawn: bool) -> DataLoader:
    return DataLoader(
        LinearData(samples),
        batch_size=16,
        shuffle=True,
        num_workers=workers,
        pin_memory=torch.cuda.is_available(),
        persistent_workers=workers > 0,
        timeout=60 if workers > 0 else 0,
        worker_init_fn=seed_worker,
        multiprocessing_context="spawn" if spawn and workers > 0 else None,
    )


def train(epochs: int, samples: int, workers: int, spawn: bool) -> float:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = torch.nn.Linear(1, 1).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    loader = make_loader(samples, workers, spawn)
    loss = torch.tensor(float("nan"))
    for epoch in range(1, epochs + 1):
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
        print(f"epoch {epoch} loss {loss.item():.4f} device {device.type}", flush=True)
    return float(loss.item())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--samples", type=int, default=1024)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--spawn", action="store_true", help="start workers with spawn (as on macOS)")
    a = p.parse_args()
    train(a.epochs, a.samples, a.workers, a.spawn)


if __name__ == "__main__":
    main()
