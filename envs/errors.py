"""Errors raised by the environment and task registries and by problem loading."""

from __future__ import annotations


class RegistryError(ValueError):
    """Base class for registry errors (a `ValueError`, so callers may catch either)."""


class UnknownEnvError(RegistryError):
    """An environment id that is not registered."""


class DuplicateEnvError(RegistryError):
    """Registering an id that is taken without `override=True`."""


class UnknownTaskError(RegistryError):
    """A task name that is not registered."""


class DuplicateTaskError(RegistryError):
    """Registering a task name that is taken without `override=True`."""


class DataLoadError(ValueError):
    """A problem source could not be read: names the file, line and field, and the fix."""
