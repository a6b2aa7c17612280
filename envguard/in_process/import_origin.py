"""Report where ``import <module>`` resolves, without importing it.

Standalone (stdlib only), run by path with the target environment's
interpreter: ``<prefix>/bin/python -I import_origin.py torch numpy``.
Prints one JSON line: {module: {"origin", "search_path", "dist", "version"}}.
"""

import importlib.util
import json
import sys


def _dist_for(module: str):
    try:
        from importlib.metadata import packages_distributions, version
    except ImportError:  # Python < 3.10
        return None, None
    names = packages_distributions().get(module) or []
    if not names:
        return None, None
    name = names[0]
    try:
        return name, version(name)
    except Exception:  # noqa: BLE001 - a dist with broken metadata still names its module
        return name, None


def main(modules):
    out: dict = {}  # module name -> what find_spec says about it (JSON)
    for m in modules:
        try:
            spec = importlib.util.find_spec(m)
        except (ImportError, ValueError) as e:
            out[m] = {"origin": None, "error": f"{type(e).__name__}: {e}"}
            continue
        if spec is None:
            out[m] = {"origin": None}
            continue
        locs = list(spec.submodule_search_locations or [])
        dist, ver = _dist_for(m)
        out[m] = {"origin": spec.origin, "search_path": locs, "dist": dist, "version": ver}
    out["_python"] = {"executable": sys.executable, "prefix": sys.prefix,
                      "version": ".".join(map(str, sys.version_info[:3]))}
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:] or ["torch", "numpy"])
