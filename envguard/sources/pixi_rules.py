"""pixi's manifest schema as data: every table, the keys it may hold and the type of each value.

Written from pixi's published manifest schema (https://pixi.sh/latest/reference/pixi_manifest/, the
``schema.json`` pixi ships with each release) and pixi's own checks of platform names; the validator that
reads these rules is :mod:`envguard.sources.pixi_schema`.

A type is one of:

* a name: ``"str"`` (a non-empty string), ``"any-str"``, ``"version"`` (a non-empty version string),
  ``"marker"`` (a PEP 508 environment marker),
  ``"bool"``, ``"true"`` (only ``true``: inheritance from the workspace), ``"false"``, ``"int"``,
  ``"num"``, ``"any"``;
* ``("enum", (values...))``, ``("re", pattern, what it means)``;
* ``("list", item_type)`` (``("list", item_type, 1)``: at least one item);
* ``("map", value_type)`` (a table of free keys, none empty) or ``("map", value_type, key_rule)`` where
  ``key_rule`` is a ``("re", ...)`` rule the keys follow;
* ``("table", NAME)``: one of :data:`TABLES`;
* ``("or", type, type, ...)``: any of them.

A table is ``{"keys": {key: type}, "required": (keys...), "open": bool}``; a table that is not open
holds no key outside ``keys``, as in pixi's schema (``additionalProperties: false``).
"""

from __future__ import annotations

from typing import Any

PLATFORMS = ("emscripten-wasm32", "linux-32", "linux-64", "linux-aarch64", "linux-armv6l", "linux-armv7l",
             "linux-ppc64", "linux-ppc64le", "linux-riscv32", "linux-riscv64", "linux-s390x", "noarch", "osx-64",
             "osx-arm64", "unknown", "wasi-wasm32", "win-32", "win-64", "win-arm64", "zos-z")
# family selectors double as `target.<family>` keys: pixi refuses a platform named after one
RESERVED_PLATFORM_NAMES = ("linux", "unix", "win", "osx", "macos")
MAX_PLATFORM_NAME = 64  # bytes, pixi's cap

_PLATFORM_NAME = ("re", r"^[a-zA-Z]$|^[a-zA-Z][a-zA-Z0-9-]*[a-zA-Z0-9]$",
                  "a platform name (a letter, then letters, digits and dashes, not ending in a dash)")
_ENV_NAME = ("re", r"^[a-z\d\-]+$", "lower-case letters, digits and dashes")
_TASK_NAME = ("re", r"^[^\s\$]+$", "a task name without spaces or `$`")
_ARG_NAME = ("re", r"^[a-zA-Z_][a-zA-Z\d_]*$", "an argument name (letters, digits, `_`)")
_NO_BACKSLASH = ("re", r"^[^\\]+$", "a path written with `/`, not `\\`")
_DATE = ("re", r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})|\d{4}-\d{2}-\d{2}"
         r"|(\d+\s*[A-Za-z]+\s*)+)$",
         "a date (2025-01-31), an RFC 3339 time, or a duration (`7d`, `2 weeks`)")
_MD5 = ("re", r"^[a-fA-F0-9]{32}$", "32 hex digits")
_SHA256 = ("re", r"^[a-fA-F0-9]{64}$", "64 hex digits")
_STRS = ("list", "str")
_INHERIT = ("table", "WorkspaceInheritance")

_CHANNEL = ("or", "str", ("table", "ChannelTable"))
_CHANNELS = ("list", _CHANNEL)
_WHEN = ("or", "str", ("table", "WhenAll"), ("table", "WhenAny"), ("table", "WhenPackage"))
_SPEC_KEYS: dict[str, Any] = {
    "branch": "str", "build": "str", "build-number": "str", "channel": "str", "extras": _STRS, "file-name": "str",
    "flags": _STRS, "git": "str", "lfs": "bool", "license": "str", "license-family": "str", "md5": _MD5,
    "package": ("table", "Package"), "path": "str", "rev": "str", "sha256": _SHA256, "subdir": "str",
    "subdirectory": "str", "tag": "str", "track-features": _STRS, "url": "str", "version": "version",
    "when": _WHEN,
}
_CONDA_DEP = ("or", "version", ("table", "InheritableSpec"))
_CONDA_DEPS = ("map", _CONDA_DEP)
_PLAIN_DEPS = ("map", ("or", "version", ("table", "Spec")))
_PYPI_DEPS = ("map", ("or", "version", ("table", "PyPIRequirement")))
_PIN = ("table", "PinCompatible")
_PACKAGE_DEPS = ("map", ("or", "version", ("table", "InheritableSpec"), _PIN,
                         ("map", ("or", "version", ("table", "InheritableSpec"), _PIN))))
_PACKAGE_CONSTRAINTS = ("map", ("or", "version", ("table", "InheritableSpec"),
                                ("map", ("or", "version", ("table", "InheritableSpec")))))
_EXPORTS = ("map", ("or", "version", ("table", "InheritableSpec"), _PIN, ("table", "PinSubpackage"),
                    ("map", ("or", "version", ("table", "InheritableSpec"), _PIN, ("table", "PinSubpackage")))))
_TASK = ("or", "str", ("table", "Task"), ("list", ("table", "DependsOn")))
_TASKS = ("map", _TASK, _TASK_NAME)
_DEPENDS_ON = ("or", _TASK_NAME, ("table", "DependsOn"), ("list", ("or", _TASK_NAME, ("table", "DependsOn"))))
_PLATFORM_LIST = ("list", ("or", ("enum", PLATFORMS), _PLATFORM_NAME))
_PYPI_LIST_OR_BOOL = ("or", "bool", _STRS)
_SHARED = {  # the tables a feature, a target and the top level (the default feature) have in common
    "activation": ("table", "Activation"), "build-dependencies": _CONDA_DEPS, "constraints": _CONDA_DEPS,
    "dependencies": _CONDA_DEPS, "dev": ("map", ("table", "SourceSpec")), "host-dependencies": _CONDA_DEPS,
    "pypi-dependencies": _PYPI_DEPS, "tasks": _TASKS,
}

TABLES: dict[str, dict[str, Any]] = {
    "Top": {"keys": {
        **_SHARED, "$schema": "any-str", "environments": ("map", ("or", ("table", "Environment"), _STRS), _ENV_NAME),
        "exclude-newer": ("map", _DATE), "feature": ("map", ("table", "Feature")), "package": ("table", "Package"),
        "project": ("table", "Workspace"), "pypi-exclude-newer": ("map", _DATE),
        "pypi-options": ("table", "PyPIOptions"), "system-requirements": ("table", "SystemRequirements"),
        "target": ("map", ("table", "Target")), "tool": ("map", "any"), "workspace": ("table", "Workspace"),
    }},
    "Workspace": {"required": ("channels",), "keys": {
        "authors": _STRS, "build-variants": ("map", ("list", "any-str")),
        "build-variants-files": ("list", _NO_BACKSLASH), "channel-priority": ("enum", ("disabled", "flexible",
                                                                                        "strict")),
        "channels": _CHANNELS, "conda-pypi-map": ("or", "false", ("map", ("or", "str", "false",
                                                                           ("table", "CondaPypiMap")))),
        "dependencies": _PLAIN_DEPS, "description": "str", "documentation": "str", "exclude-newer": _DATE,
        "homepage": "str", "license": "str", "license-file": _NO_BACKSLASH, "name": "str",
        "platforms": ("list", ("or", ("enum", PLATFORMS), _PLATFORM_NAME, ("table", "WorkspacePlatform"))),
        "preview": ("or", "bool", ("list", "any-str")), "pypi-options": ("table", "PyPIOptions"),
        "readme": _NO_BACKSLASH, "repository": "str", "requires-pixi": "str",
        "s3-options": ("map", ("table", "S3Options")),
        "solve-strategy": ("enum", ("highest", "lowest", "lowest-direct")),
        "target": ("map", ("table", "WorkspaceTarget")), "version": "str",
    }},
    "WorkspaceTarget": {"keys": {"build-variants": ("map", ("list", "any-str"))}},
    "WorkspacePlatform": {"open": True, "keys": {
        "archspec": "str", "cuda": ("or", "str", ("table", "Cuda")), "glibc": "str", "linux": "str", "macos": "str",
        "name": _PLATFORM_NAME, "osx": "str", "platform": ("enum", PLATFORMS), "windows": "str",
    }},
    "Cuda": {"required": ("driver",), "keys": {"arch": "str", "driver": "str"}},
    "ChannelTable": {"required": ("channel",), "keys": {"channel": "str", "exclude-newer": _DATE,
                                                        "priority": "int"}},
    "CondaPypiMap": {"keys": {"location": "str", "mapping": ("map", ("or", "str", _STRS, "false")),
                              "mapping-mode": ("enum", ("overlay", "replace")), "same-name-heuristic": "bool"}},
    "S3Options": {"required": ("endpoint-url", "region", "force-path-style"),
                  "keys": {"endpoint-url": "str", "force-path-style": "bool", "region": "str"}},
    "Feature": {"keys": {
        **_SHARED, "channel-priority": ("enum", ("disabled", "flexible", "strict")), "channels": _CHANNELS,
        "platforms": _PLATFORM_LIST, "pypi-options": ("table", "PyPIOptions"),
        "solve-strategy": ("enum", ("highest", "lowest", "lowest-direct")),
        "system-requirements": ("table", "SystemRequirements"), "target": ("map", ("table", "Target")),
    }},
    "Target": {"keys": dict(_SHARED)},
    "Environment": {"keys": {
        "activation": ("table", "Activation"), "channel-priority": ("enum", ("disabled", "flexible", "strict")),
        "channels": _CHANNELS, "constraints": _PLAIN_DEPS, "dependencies": _PLAIN_DEPS,
        "dev": ("map", ("table", "SourceSpec")), "features": _STRS, "no-default-feature": "bool",
        "platforms": _PLATFORM_LIST, "pypi-dependencies": _PYPI_DEPS, "pypi-options": ("table", "PyPIOptions"),
        "solve-group": "str", "solve-strategy": ("enum", ("highest", "lowest", "lowest-direct")),
        "target": ("map", ("table", "Target")), "tasks": _TASKS,
    }},
    "Activation": {"keys": {"env": ("map", "str"), "scripts": _STRS}},
    "SystemRequirements": {"keys": {
        "archspec": "str", "cuda": ("or", "num", "str"), "libc": ("or", "num", "str", ("table", "Libc")),
        "linux": ("or", "num", "str"), "macos": ("or", "num", "str"), "unix": ("or", "bool", "str"),
    }},
    "Libc": {"keys": {"family": "str", "version": ("or", "num", "str")}},
    "Spec": {"keys": {k: v for k, v in _SPEC_KEYS.items()}},
    "InheritableSpec": {"keys": {**_SPEC_KEYS, "workspace": "true"}},
    "SourceSpec": {"keys": {k: _SPEC_KEYS[k] for k in ("branch", "git", "md5", "path", "rev", "sha256",
                                                        "subdirectory", "tag", "url")}},
    # env-markers: pixi's own reader takes it (crates/pixi_pypi_spec: a PEP 508 marker, refused when it names no
    # marker variable), though the published schema.json lags behind it
    "PyPIRequirement": {"keys": {"branch": "str", "editable": "bool", "env-markers": "marker", "extras": _STRS,
                                 "git": "str", "index": "str", "lfs": "bool", "path": "str", "rev": "str",
                                 "subdirectory": "str", "tag": "str", "url": "str", "version": "version"}},
    "PyPIOptions": {"keys": {
        "dependency-overrides": _PYPI_DEPS, "extra-index-urls": _STRS,
        "find-links": ("list", ("or", ("table", "FindLinksPath"), ("table", "FindLinksUrl"))),
        "index-strategy": ("enum", ("first-index", "unsafe-first-match", "unsafe-best-match")), "index-url": "str",
        "no-binary": _PYPI_LIST_OR_BOOL, "no-build": _PYPI_LIST_OR_BOOL, "no-build-isolation": _PYPI_LIST_OR_BOOL,
        "prerelease-mode": ("enum", ("disallow", "allow", "if-necessary", "explicit", "if-necessary-or-explicit")),
        "skip-wheel-filename-check": "bool",
    }},
    "FindLinksPath": {"keys": {"path": "str"}},
    "FindLinksUrl": {"keys": {"url": "str"}},
    "WhenAll": {"required": ("all",), "keys": {"all": ("list", _WHEN, 1)}},
    "WhenAny": {"required": ("any",), "keys": {"any": ("list", _WHEN, 1)}},
    "WhenPackage": {"required": ("package",), "keys": {
        k: "str" if k == "package" else _SPEC_KEYS.get(k, "str")
        for k in ("build", "build-number", "extras", "file-name", "flags", "license", "license-family", "package",
                  "subdir", "track-features", "version")}},
    "Package": {"required": ("build",), "keys": {
        "authors": ("or", _STRS, _INHERIT), "build": ("table", "Build"), "build-dependencies": _PACKAGE_CONSTRAINTS,
        "description": ("or", "str", _INHERIT), "documentation": ("or", "str", _INHERIT),
        "extra-dependencies": ("map", _PACKAGE_CONSTRAINTS, ("re", r"^[a-z0-9._+-]{1,64}$",
                                                              "an extra's name (lower-case, at most 64)")),
        "homepage": ("or", "str", _INHERIT), "host-dependencies": _PACKAGE_DEPS,
        "license": ("or", "str", _INHERIT), "license-file": ("or", _NO_BACKSLASH, _INHERIT),
        "name": ("or", "str", _INHERIT), "publish": "bool", "readme": ("or", _NO_BACKSLASH, _INHERIT),
        "repository": ("or", "str", _INHERIT), "run-constraints": _PACKAGE_CONSTRAINTS,
        "run-dependencies": _PACKAGE_DEPS, "run-exports": ("table", "RunExports"),
        "version": ("or", "str", _INHERIT),
    }},
    "WorkspaceInheritance": {"required": ("workspace",), "keys": {"workspace": "true"}},
    "PinCompatible": {"required": ("pin-compatible",), "keys": {"pin-compatible": ("or", "true", ("table", "Pin"))}},
    "PinSubpackage": {"required": ("pin-subpackage",), "keys": {"pin-subpackage": ("or", "true", ("table", "Pin"))}},
    "Pin": {"keys": {"build": "str", "exact": "bool", "lower-bound": "str", "upper-bound": "str"}},
    "RunExports": {"keys": {k: _EXPORTS for k in ("noarch", "strong", "strong-constraints", "weak",
                                                   "weak-constraints")}},
    "Build": {"required": ("backend",), "keys": {
        "additional-dependencies": _PLAIN_DEPS, "backend": ("table", "BuildBackend"), "build-number": "int",
        "build-string-prefix": "str", "channels": _CHANNELS, "config": ("map", "any"),
        "flags": ("list", ("re", r"^[a-z0-9_]+(:[a-z0-9_]+)?$", "a flag (lower-case, digits, `_`, one `:`)")),
        "secrets": _STRS, "source": ("table", "SourceLocation"), "target": ("map", ("table", "BuildTarget")),
    }},
    # pixi's reader takes a backend's whole spec (crates/pixi_manifest/src/toml/build_backend.rs: the keys left
    # after name, channels and additional-dependencies are a TomlSpec), a source location included; that the
    # location is a package file and not a source tree is pixi_inherit's to judge, as pixi does after reading
    "BuildBackend": {"keys": {**{k: _SPEC_KEYS[k] for k in ("branch", "build", "build-number", "channel", "extras",
                                                            "file-name", "flags", "git", "license", "license-family",
                                                            "md5", "path", "rev", "sha256", "subdir", "subdirectory",
                                                            "tag", "track-features", "url", "version", "when")},
                              "additional-dependencies": _PLAIN_DEPS, "channels": _CHANNELS, "name": "str",
                              "workspace": "true"}},
    "BuildTarget": {"keys": {"config": ("map", "any")}},
    "SourceLocation": {"keys": {k: "str" for k in ("branch", "git", "path", "rev", "subdirectory", "tag")}},
    "Task": {"keys": {
        "args": ("list", ("or", _ARG_NAME, ("table", "TaskArg"))), "clean-env": "bool",
        "cmd": ("or", "str", _STRS), "cwd": _NO_BACKSLASH, "default-environment": _ENV_NAME,
        "depends-on": _DEPENDS_ON, "depends_on": ("or", _TASK_NAME, ("list", _TASK_NAME)), "description": "str",
        "env": ("map", "str"), "inputs": _STRS, "outputs": _STRS,
    }},
    "TaskArg": {"required": ("arg",), "keys": {"arg": _ARG_NAME, "choices": ("list", "any-str", 1),
                                               "default": "any-str"}},
    "DependsOn": {"required": ("task",), "keys": {
        "args": ("list", ("or", "any-str", ("map", "any-str", _ARG_NAME))), "environment": _ENV_NAME,
        "task": _TASK_NAME}},
}
# argument names pixi keeps for itself (a task's `{{ pixi }}` is pixi's own)
RESERVED_ARG_NAMES = ("pixi",)

__all__ = ["MAX_PLATFORM_NAME", "PLATFORMS", "RESERVED_ARG_NAMES", "RESERVED_PLATFORM_NAMES", "TABLES"]
