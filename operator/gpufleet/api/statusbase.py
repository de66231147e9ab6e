"""The base of every status model: camelCase, tolerant of fields a newer operator wrote."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, StringConstraints
from pydantic.alias_generators import to_camel

Text = Annotated[str, StringConstraints(max_length=1024)]


class StatusModel(BaseModel):
    """Base for status models: camelCase, tolerant of fields a newer operator wrote."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")
