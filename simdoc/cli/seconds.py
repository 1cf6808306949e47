"""A click type for a count of seconds or days: a float >= 0 that is a number.

click's FloatRange(0) lets ``nan`` through (``nan < 0`` is False too): ``--wait nan`` waited
for a writer without end, as ``inf`` does, though neither is a number of seconds one means.
"""

from __future__ import annotations

import math

import click


class NonNegative(click.FloatRange):
    """A float from 0 up to and including infinity (wait without end), never NaN."""

    def __init__(self) -> None:
        super().__init__(min=0)

    def convert(self, value, param, ctx) -> float:
        number = super().convert(value, param, ctx)
        if math.isnan(number):
            self.fail(f"{value!r} is not a number", param, ctx)
        return number


NON_NEGATIVE = NonNegative()
