"""envguard: declared, locked, verified and explainable PyTorch environments."""

__version__ = "0.1.0"

import os as _os

# conda-lock's vendored conda sets CONDA_ROOT to sys.prefix when it is first imported (a lock, a freshness test):
# envguard.envs reads the value the user's shell gave, taken here, before anything can import conda-lock.
CONDA_ROOT_AT_START = _os.environ.get("CONDA_ROOT")

# The signals whoever started envguard ignored (SIGINT and SIGQUIT for a `cmd &` of a script, SIGHUP under
# nohup), taken before envguard.__main__ installs its own handlers: `envguard run` hands them on to the
# command it execs still ignored, as a shell would have started it.
def _ignored_at_start() -> frozenset[int]:
    import signal

    names = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT")
    sigs = [getattr(signal, n) for n in names if hasattr(signal, n)]
    return frozenset(int(s) for s in sigs if signal.getsignal(s) == signal.SIG_IGN)


SIGNALS_IGNORED_AT_START = _ignored_at_start()
