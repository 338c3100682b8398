"""Import paths that moved, kept working for one more release with a ``DeprecationWarning``.

The reorganisation that grouped curaflow's loose modules by concern (``jobs/``,
``temporal/``, ``process/``, ``observability/``), and the one that made the layers strict,
moved import paths users' code relies on — ``from curaflow.submit import start_job`` (the typed Temporal start) and
``from curaflow.temporal import connect`` above all. Every module path it moved still
imports here and *is* the module at its new path (the same object, so a monkeypatch or an
``isinstance`` sees one thing), with a ``DeprecationWarning`` that names the new path:

* :data:`MOVED_MODULES` — old module path → new module path, served by a finder on
  ``sys.meta_path`` (:class:`MovedModuleFinder`, installed by ``curaflow/__init__.py``);
* :data:`MOVED_NAMES` — names of a module that became a package (``curaflow.temporal``):
  ``from curaflow.temporal import connect`` is answered by the package's ``__getattr__``
  through :func:`moved_attribute`.

The old paths go in the release after :data:`REMOVED_IN`; docs/http-api.md ("Public Python
API") lists the public paths and these aliases. Imports nothing of curaflow at import
time (the finder imports a new path only when an old one is asked for): part of the
``curaflow`` unit of the layers (DESIGN.md, "Layers").
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType
from typing import Any

#: The release after which the old paths are removed.
REMOVED_IN = "0.2"

#: Old module path → its new path (moved when the loose modules were grouped by concern).
MOVED_MODULES: dict[str, str] = {
    "curaflow.submit": "curaflow.jobs.submit",
    "curaflow.admission": "curaflow.jobs.admission",
    "curaflow.cancellation": "curaflow.jobs.cancellation",
    "curaflow.pushes": "curaflow.jobs.pushes",
    "curaflow.ledger.pushes": "curaflow.ledger.event_pushes",
    "curaflow.ledger_gauges": "curaflow.ledger.gauges",
    "curaflow.logs": "curaflow.observability.logs",
    "curaflow.metrics": "curaflow.observability.metrics",
    "curaflow.telemetry": "curaflow.process.telemetry",
    "curaflow.health_server": "curaflow.process.health_server",
    "curaflow.httpserver": "curaflow.process.httpserver",
    "curaflow.readiness": "curaflow.process.readiness",
    "curaflow.source_workers": "curaflow.process.source_queues",
    "curaflow.supervision": "curaflow.observability.supervision",
    "curaflow.worker": "curaflow.process.worker",
    "curaflow.temporal_setup": "curaflow.temporal.namespace",
    "curaflow.temporal_profile": "curaflow.temporal.profile",
    "curaflow.upgrades": "curaflow.temporal.upgrades",
    # moved again when the layers were made strict (imports only go down)
    "curaflow.process.supervision": "curaflow.observability.supervision",
    "curaflow.observability.telemetry": "curaflow.process.telemetry",
    "curaflow.observability.ledger_gauges": "curaflow.ledger.gauges",
    # moved behind the source seam (the scan frontier's walk is Pixiv's)
    "curaflow.sources.frontier": "curaflow.sources.pixiv.frontier",
}

#: Package → {old name: the module that holds it now}: ``curaflow.temporal`` was the module
#: ``curaflow/temporal.py`` before it became a package.
MOVED_NAMES: dict[str, dict[str, str]] = {
    "curaflow.temporal": {
        name: "curaflow.temporal.connection"
        for name in (
            "DATA_CONVERTER",
            "DEV_SERVER_FLAGS",
            "InputPayloadConverter",
            "JOB_ID_REUSE_POLICY",
            "SEARCH_ATTRIBUTES",
            "TemporalConnectError",
            "connect",
            "connect_configured",
            "dev_server_search_attribute_args",
            "ensure_search_attributes",
            "start_job_workflow",
        )
    },
}


def _warn(old: str, new: str) -> None:
    """A ``DeprecationWarning`` attributed to the code that imported ``old`` (the import
    machinery's frames, this module's and a package's ``__getattr__`` are skipped)."""
    # ``warnings`` skips the import machinery's frames itself when it counts ``stacklevel``;
    # count the others up to the first that is neither this module nor a ``__getattr__``.
    frame: Any = sys._getframe(1)
    level = 1
    while frame is not None:
        filename = frame.f_code.co_filename
        if not (filename.startswith("<frozen importlib") or "importlib/_bootstrap" in filename):
            level += 1
            if filename != __file__ and frame.f_code.co_name != "__getattr__":
                break
        frame = frame.f_back
    warnings.warn(
        f"{old} is deprecated: import {new} instead ({old} is removed after curaflow {REMOVED_IN})",
        DeprecationWarning,
        stacklevel=level,
    )


class MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers an old module path of :data:`MOVED_MODULES` with the module at its new path."""

    def find_spec(self, fullname: str, path: Any = None, target: ModuleType | None = None) -> Any:
        """A spec for ``fullname`` when it is an old path, else None (the next finder looks)."""
        if fullname not in MOVED_MODULES:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: Any) -> ModuleType:
        """The module at the new path (imported if needed), after the warning."""
        new = MOVED_MODULES[spec.name]
        _warn(spec.name, new)
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module at the new path is already executed."""


def moved_attribute(package: str, name: str) -> Any:
    """``package.name`` for a name :data:`MOVED_NAMES` lists, after the warning.

    Raises:
        AttributeError: ``name`` is no moved name of ``package`` (the usual answer).
    """
    module = MOVED_NAMES.get(package, {}).get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    _warn(f"{package}.{name}", f"{module}.{name}")
    value = getattr(importlib.import_module(module), name)
    # Kept on the package: ``from package import name`` asks twice (once to see whether it
    # is a submodule), and one warning per first use is enough.
    setattr(sys.modules[package], name, value)
    return value


def install() -> None:
    """Put :class:`MovedModuleFinder` on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, MovedModuleFinder())
