"""The extraction child of envguard.create.unpack, run by path with envguard's own interpreter.

rattler only, no envguard import (a fast start). One JSON line in: budget, concurrency and the jobs, each
[file URL, destination, archive path]. One JSON line out per event: {"start": i} before an archive is opened,
{"done": i, "sha256": .., "md5": ..} or {"done": i, "error": ..} when it is extracted, {"names": i, "pkg": [..],
"info": [..]} or {"names": i, "names_error": ..} for its entry names. Every file it writes is capped at the
budget (RLIMIT_FSIZE: the kernel stops the write, SIGXFSZ ends this process).
"""

import asyncio
import json
import sys
from pathlib import Path


def die_with_parent():
    """Linux: killed with its parent (a SIGKILLed create leaves no extraction running into its staging folder)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - not Linux: the parent's finally kills it
        pass


def cap_file_size(budget):
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_FSIZE, (budget, budget))
    except (ImportError, ValueError, OSError):
        pass


def say(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def words(e):
    return " ".join(str(e).split())


async def main(spec):
    from rattler.networking import Client
    from rattler.package_streaming import PackageArchive, download_and_extract

    client = Client.default_client()
    gate = asyncio.Semaphore(spec["concurrency"])

    async def extract(i, url, dest):
        try:
            sha, md5 = await download_and_extract(client, url, Path(dest))
            say({"done": i, "sha256": bytes(sha).hex(), "md5": bytes(md5).hex()})
        except Exception as e:  # noqa: BLE001 - every failure is reported, named by its archive
            say({"done": i, "error": words(e)})

    async def names(i, path):
        try:
            archive = await PackageArchive.from_path(path)
            say({"names": i, "pkg": await archive.list_files("pkg"), "info": await archive.list_files("info")})
        except Exception as e:  # noqa: BLE001 - as above
            say({"names": i, "names_error": words(e)})

    async def one(i, url, dest, path):
        async with gate:
            say({"start": i})
            await asyncio.gather(extract(i, url, dest), names(i, path))

    await asyncio.gather(*(one(i, *job) for i, job in enumerate(spec["jobs"])))


if __name__ == "__main__":
    die_with_parent()
    job_spec = json.loads(sys.stdin.readline())
    cap_file_size(job_spec["budget"])
    asyncio.run(main(job_spec))
