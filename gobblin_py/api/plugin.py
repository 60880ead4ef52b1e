"""The base of every pluggable construct: a class with its own validated settings model."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict


class NoSettings(BaseModel):
    """Settings of a plugin that takes none; any key given is an error."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Settings(NoSettings):
    """Base for a plugin's settings: unknown keys are refused, values are immutable."""


class Plugin:
    """A construct named in the job file by `class:`; its sibling keys fill `Settings`."""

    Settings: ClassVar[type[BaseModel]] = NoSettings

    def __init__(self, settings: Any = None) -> None:
        self.settings = settings if settings is not None else type(self).Settings()
