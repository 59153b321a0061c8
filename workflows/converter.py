"""The payload converter shared by clients and workers: pydantic's, so dataclasses with
datetimes and nested records round-trip exactly."""

from temporalio.contrib.pydantic import pydantic_data_converter

DATA_CONVERTER = pydantic_data_converter
