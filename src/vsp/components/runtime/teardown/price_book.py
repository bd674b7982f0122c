"""Unit prices of node pools: the shipped price table with a user's price file merged over it.

A price file is JSON (``.json``) or YAML (any other name), a local path or ``gs://BUCKET/PATH``
(read through the Cloud Storage FUSE mount, ``gcs_paths.to_local_path``). It maps machine types
to USD per node-hour by provisioning model::

    a3-ultragpu-8g: {SPOT: 30.5, ON_DEMAND: 84.8}
    n2-standard-8: {ON_DEMAND: 0.42}

Its entries replace the table's figure for the same machine type and model; the table's other
figures stay. ``STANDARD`` means ``ON_DEMAND``; model names are case-insensitive.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from typing import Any

import yaml

from vsp.components.runtime.core import errors, gcs_paths
from vsp.components.runtime.teardown import prices

Prices = Mapping[str, Mapping[str, float]]


def canonical_model(model: str) -> str:
    """A provisioning model's table name (``STANDARD`` -> ``ON_DEMAND``), upper-cased."""
    upper = str(model).strip().upper()
    return prices.MODEL_ALIASES.get(upper, upper)


def _bad_file(path: str, problem: str) -> errors.UserError:
    return errors.UserError(
        f"price file {path!r}: {problem}. Fix: write a mapping of machine types to USD per "
        'node-hour by provisioning model, e.g. {"a3-highgpu-8g": {"SPOT": 35.4, '
        '"ON_DEMAND": 88.49}}.'
    )


def parse_prices(data: Any, path: str) -> dict[str, dict[str, float]]:
    """Checks a decoded price file and returns it with canonical model names.

    Args:
        data: The decoded JSON or YAML document (None, from an empty file, is no entries).
        path: The file's name, for messages.

    Raises:
        errors.UserError: Not a mapping of machine types to mappings of models to prices
            (USD per node-hour, finite and >= 0).
    """
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise _bad_file(path, f"the document is a {type(data).__name__}, not a mapping")
    parsed: dict[str, dict[str, float]] = {}
    for machine, entry in data.items():
        if not isinstance(entry, Mapping):
            raise _bad_file(path, f"{machine!r} maps to {entry!r}, not to a mapping of models")
        row = parsed.setdefault(str(machine).strip(), {})
        for model, price in entry.items():
            name = canonical_model(model)
            if name not in prices.MODELS:
                raise _bad_file(
                    path,
                    f"{machine}.{model} is not a provisioning model "
                    f"(use {', '.join(prices.MODELS)} or STANDARD)",
                )
            if (
                isinstance(price, bool)
                or not isinstance(price, (int, float))
                or not math.isfinite(price)
                or price < 0
            ):
                raise _bad_file(path, f"{machine}.{model} = {price!r} is not a price >= 0")
            row[name] = float(price)
    return parsed


def load_price_file(path: str) -> dict[str, dict[str, float]]:
    """Reads and checks a price file (see the module docstring).

    Args:
        path: Local path, ``/gcs/BUCKET/PATH`` or ``gs://BUCKET/PATH``.

    Returns:
        Machine type -> provisioning model -> USD per node-hour.

    Raises:
        errors.UserError: The file cannot be read or parsed, or an entry is invalid.
    """
    local = gcs_paths.to_local_path(path)
    try:
        text = local.read_text()
    except OSError as exc:
        raise errors.UserError(
            f"price file {path!r} cannot be read ({exc.strerror or exc}). Fix: pass an existing "
            "local path or gs://BUCKET/PATH, or '' to use the price table alone."
        ) from None
    try:
        data = json.loads(text) if local.suffix.lower() == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise _bad_file(path, f"it does not parse ({str(exc).splitlines()[0]})") from None
    return parse_prices(data, path)


@dataclasses.dataclass(frozen=True)
class Quote:
    """A unit price and where it came from.

    Attributes:
        price_per_hour: USD per node-hour.
        source: ``price table``, ``price file PATH`` or ``reservation``.
        note: Why the figure may not fit (another region, a stand-in region), or ''.
    """

    price_per_hour: float
    source: str
    note: str = ""


@dataclasses.dataclass(frozen=True)
class PriceBook:
    """The price table, a price file's entries over it, and the region priced.

    Attributes:
        overrides: Entries of the price file (machine type -> model -> USD per node-hour).
        price_file: Its path ('' for none).
        region: Region of the cluster's nodes, e.g. ``europe-west4`` ('' = the table's).
    """

    overrides: Prices = dataclasses.field(default_factory=dict)
    price_file: str = ""
    region: str = ""

    @classmethod
    def load(cls, price_file: str = "", region: str = "") -> PriceBook:
        """The table with ``price_file`` (if any) merged over it, for ``region``."""
        overrides = load_price_file(price_file) if price_file else {}
        return cls(overrides=overrides, price_file=price_file, region=region)

    def quote(self, machine_type: str, model: str) -> Quote | None:
        """The unit price of one node, or None when neither the file nor the table has one.

        A price file entry wins; then a RESERVATION node is free (the reservation is paid
        anyway); then the table, with a note when the region or the figure's region differs.
        """
        model = canonical_model(model)
        own = self.overrides.get(machine_type, {})
        if model in own:
            return Quote(own[model], f"price file {self.price_file}")
        if model == prices.RESERVATION:
            return Quote(prices.RESERVATION_PRICE, "reservation (paid anyway)")
        figure = prices.HOURLY_USD.get(machine_type, {}).get(model)
        if figure is None:
            return None
        notes = [prices.NOTES.get(machine_type, "")]
        if self.region and self.region not in prices.SAME_PRICE_REGIONS:
            notes.append(f"{prices.REGION} figure used for {self.region}, whose prices may differ")
        return Quote(figure, "price table", "; ".join(n for n in notes if n))

    def missing(self, machine_type: str, model: str) -> str:
        """Why there is no price for a machine type and model (for error messages)."""
        model = canonical_model(model)
        if model in prices.MODEL_NOTES:
            return prices.MODEL_NOTES[model]
        if machine_type in prices.NOTES and not prices.HOURLY_USD.get(machine_type):
            return f"{machine_type}: {prices.NOTES[machine_type]}"
        if machine_type in prices.HOURLY_USD:
            return f"the price table has no {model} figure for {machine_type}"
        return f"{machine_type} is not in the price table"
