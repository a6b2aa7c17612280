"""The user's dataset in the tune probe: loading the factory, describing what it returned, the wrappers the
DataLoader workers unpickle, and the serial sample of items (the demo dataset is the entry point's own).

Standalone like its entry point: the standard library and torch only, never envguard (the target
environment does not have it). The demo dataset and the wrappers live at module level of an
importable module: spawn and forkserver workers unpickle them by name (the probe's directory is on sys.path).
"""

from __future__ import annotations

import os
import sys
import time

from tune_probe_shared import _err, _tb, event, mp_temp_dir, tensors_in, torch


class ItemError(Exception):
    """``__getitem__`` raised: the message names the index and keeps the original error (chained)."""


class Indexed:
    """Wraps a map-style dataset so that an exception names the index it happened at.

    ``__getitems__`` (batched fetching, torch >= 2.1) is forwarded only when the dataset has one.
    """

    def __init__(self, dataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, i):
        try:
            return self.dataset[i]
        except Exception as e:
            raise ItemError(f"{type(e).__name__} in __getitem__({i}): {e}") from e

    @property
    def __getitems__(self):  # looked up by torch's fetcher as an attribute
        inner = getattr(self.dataset, "__getitems__", None)
        if not inner:
            return None

        def fetch(indices):
            try:
                return inner(indices)
            except Exception as e:
                raise ItemError(f"{type(e).__name__} in __getitems__({list(indices)[:8]}...): {e}") from e

        return fetch


class Prefix:
    """The first ``n`` indices of a sampler: a trial's epoch is a prefix of the real one and ends naturally."""

    def __init__(self, sampler, n: int) -> None:
        self.sampler, self.n = sampler, n

    def __iter__(self):
        for k, i in enumerate(self.sampler):
            if k >= self.n:
                return
            yield i

    def __len__(self) -> int:
        try:
            return min(self.n, len(self.sampler))
        except TypeError:
            return self.n


class _Chain:
    """The user's worker_init_fn, after reporting the worker's pid (for the runner's clean-up)."""

    def __init__(self, user) -> None:
        self.user = user

    def __call__(self, worker_id: int) -> None:
        event(worker_pid=os.getpid(), worker_id=worker_id, tmp=mp_temp_dir())
        if self.user is not None:
            self.user(worker_id)


def load_factory(spec: str | None, path: str | None) -> dict:
    """Import MODULE, call FACTORY. Raises _Stage(stage, error) on the first thing that fails."""
    if path and path not in sys.path:
        sys.path.insert(0, path)
    module_name, _, factory_name = (spec or "").rpartition(":")
    if not module_name or not factory_name:
        raise _Stage("spec", ValueError(f"--dataset {spec!r} is not MODULE:FACTORY"))
    import importlib

    try:
        if module_name.endswith(".py") or os.sep in module_name or "/" in module_name:
            file = os.path.abspath(os.path.join(path or os.getcwd(), module_name))
            folder, name = os.path.split(file)
            if folder not in sys.path:
                sys.path.insert(0, folder)  # so that spawn workers unpickle its classes by name
            module = importlib.import_module(name[:-3] if name.endswith(".py") else name)
        else:
            module = importlib.import_module(module_name)
    except BaseException as e:  # noqa: BLE001 - SyntaxError, ImportError, SystemExit, anything
        raise _Stage("import", e) from None
    factory = module
    try:
        for part in factory_name.split("."):
            factory = getattr(factory, part)
    except AttributeError as e:
        raise _Stage("factory", e) from None
    if not callable(factory):
        raise _Stage("factory", TypeError(f"{factory_name} in {module_name} is not callable"))
    try:
        made = factory()
    except BaseException as e:  # noqa: BLE001
        raise _Stage("factory", e) from None
    if isinstance(made, dict):
        if "dataset" not in made:
            raise _Stage("factory", TypeError(f"{factory_name}() returned a dict without a 'dataset' key"))
        out = dict(made)
    elif isinstance(made, tuple):
        keys = ("dataset", "collate_fn", "sampler")
        out = {k: v for k, v in zip(keys, made) if v is not None}
    else:
        out = {"dataset": made}
    unknown = set(out) - {"dataset", "collate_fn", "sampler", "worker_init_fn", "batch_size", "drop_last"}
    if unknown:
        raise _Stage("factory", TypeError(f"{factory_name}() returned unknown keys {sorted(unknown)}"))
    out["label"] = f"{module_name}:{factory_name}"
    return out


class _Stage(Exception):
    def __init__(self, stage: str, error: BaseException) -> None:
        super().__init__(stage)
        self.stage, self.error = stage, error


def describe(user: dict) -> dict:
    """Kind, length and picklability of what the factory returned. Raises _Stage on an unusable dataset."""
    ds = user["dataset"]
    iterable = torch is not None and isinstance(ds, torch.utils.data.IterableDataset)
    info: dict = {"label": user["label"], "class": f"{type(ds).__module__}.{type(ds).__qualname__}",
                  "kind": "iterable" if iterable else "map"}
    if not iterable and not hasattr(ds, "__getitem__"):
        raise _Stage("dataset", TypeError(f"the factory returned a {info['class']}, not a Dataset "
                                          "(it has no __getitem__ and is not an IterableDataset)"))
    try:
        info["length"] = len(ds)
    except TypeError:
        if not iterable:
            raise _Stage("dataset", TypeError(f"{info['class']} has no __len__")) from None
        info["length"] = None
    except BaseException as e:  # noqa: BLE001
        raise _Stage("dataset", e) from None
    if info["length"] == 0:
        raise _Stage("empty", ValueError(f"{info['class']} has length 0: there is nothing to load"))
    for k in ("collate_fn", "sampler", "worker_init_fn"):
        v = user.get(k)
        info[k] = None if v is None else getattr(v, "__qualname__", type(v).__qualname__)
    # spawn and forkserver pickle the dataset (and collate_fn, worker_init_fn) into every worker.
    import io
    import pickle

    class _Count(io.RawIOBase):
        n = 0

        def writable(self) -> bool:
            return True

        def write(self, b) -> int:
            self.n += len(b)
            return len(b)

    sink = _Count()
    try:
        for k in ("dataset", "collate_fn", "worker_init_fn"):
            if user.get(k) is not None:
                pickle.Pickler(sink, protocol=pickle.HIGHEST_PROTOCOL).dump(user[k])
        info["picklable"], info["pickled_bytes"], info["pickle_error"] = True, sink.n, None
    except BaseException as e:  # noqa: BLE001 - PicklingError, AttributeError, TypeError...
        info["picklable"], info["pickled_bytes"], info["pickle_error"] = False, None, _err(e)
    return info


def sample_items(user: dict, info: dict, opts: dict, limit_s: float = 1.0) -> dict:
    """Fetch items one by one in this process: time per item (wall and CPU) and the bytes of a batch."""
    from torch.utils.data import default_collate

    b = opts["batch_size"]
    ds = user["dataset"]
    items: list = []
    out: dict = {"items": 0}
    t0, c0 = time.perf_counter(), time.process_time()
    src = iter(ds) if info["kind"] == "iterable" else iter(user.get("sampler") or range(info["length"]))
    idx = None
    try:
        for _ in range(b):
            if info["kind"] == "iterable":
                items.append(next(src))
            else:
                idx = next(src)
                items.append(ds[idx])
            if time.perf_counter() - t0 > limit_s:
                break
    except StopIteration:
        pass
    except BaseException as e:  # noqa: BLE001
        out.update(status="failed", error=_err(e), traceback=_tb(e)[-3000:], index=idx)
        return out
    n = len(items)
    out.update(items=n, item_s=(time.perf_counter() - t0) / max(n, 1),
               item_cpu_s=(time.process_time() - c0) / max(n, 1))
    try:
        batch = (user.get("collate_fn") or default_collate)(items)
        ts = tensors_in(batch, [])
        out["batch_bytes"] = int(sum(t.numel() * t.element_size() for t in ts) * b / max(n, 1))
        out["tensors_per_batch"] = len(ts)
    except BaseException as e:  # noqa: BLE001
        out.update(collate_error=_err(e))
    return out
