"""How much of itself a test runs in each tier. The main tier (`pytest`) tests every behaviour
once, quickly enough to iterate on; the extended tier (`pytest -m slow`) runs the large counts:
property-test examples, fuzzed requests, crash-campaign jobs and kills. A tiered test is two
items, `[main]` and `[extended]`, the second marked ``slow``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import settings


def tiered(argname: str, main: object, extended: object) -> pytest.MarkDecorator:
    """Parametrize ``argname``: ``main`` in the main tier, ``extended`` in the extended one."""
    return pytest.mark.parametrize(
        argname,
        [
            pytest.param(main, id="main"),
            pytest.param(extended, id="extended", marks=pytest.mark.slow),
        ],
    )


def examples(
    main: int, extended: int, base: settings
) -> Callable[[Callable[..., None]], Callable[[int], None]]:
    """For a ``@given`` test (without ``@settings``): run it with ``base`` settings and
    ``main`` examples in the main tier, ``extended`` examples in the extended one."""

    def wrap(given_test: Callable[..., Any]) -> Callable[[int], None]:
        @tiered("examples", main, extended)
        def run(examples: int) -> None:
            settings(base, max_examples=examples)(given_test)()

        run.__name__ = run.__qualname__ = given_test.__name__
        run.__doc__ = given_test.__doc__
        run.__module__ = given_test.__module__
        return run

    return wrap
