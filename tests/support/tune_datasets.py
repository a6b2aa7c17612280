"""Small real datasets for the `envguard tune` tests (imported by the tuning probe in a real interpreter).

Module level on purpose: spawn and forkserver workers unpickle these classes by name.
"""

from __future__ import annotations

import os
import signal
import time

import torch
from torch.utils.data import Dataset, get_worker_info


class Tiny(Dataset):
    """48 samples of 16 floats, 1 ms each: a full trial takes well under a second."""

    def __init__(self, n: int = 48, sleep: float = 0.001) -> None:
        self.n, self.sleep = n, sleep

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        time.sleep(self.sleep)
        return torch.full((16,), float(i)), i


def tiny() -> Tiny:
    return Tiny()


class Flaky(Tiny):
    """Breaks by worker count, the way real loaders break: 1 worker: __getitem__(13) raises;
    2 workers: index 5 never returns (a hang); 3 workers: the worker loading index 7 is SIGKILLed."""

    def __getitem__(self, i: int):
        info = get_worker_info()
        workers = info.num_workers if info is not None else 0
        if workers == 1 and i == 13:
            raise ValueError("corrupt record 13")
        if workers == 2 and i == 5:
            time.sleep(3600)
        if workers == 3 and i == 7:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().__getitem__(i)


def flaky() -> dict:
    # A lambda collate_fn cannot be pickled: spawn and forkserver must be skipped, with the reason.
    from torch.utils.data import default_collate

    return {"dataset": Flaky(), "collate_fn": lambda items: default_collate(items), "batch_size": 8}  # noqa: PLW0108


def broken() -> Tiny:
    raise RuntimeError("cannot open /data/train.tar: no such file")


def empty() -> Tiny:
    return Tiny(n=0)


def not_a_dataset() -> int:
    return 42


def never_returns() -> Tiny:
    time.sleep(3600)
    return Tiny()


def with_sampler():
    """The tuple form, (dataset, collate_fn, sampler): a sampler over the 24 even indices."""
    from torch.utils.data import SubsetRandomSampler

    return Tiny(), None, SubsetRandomSampler(list(range(0, 48, 2)))
