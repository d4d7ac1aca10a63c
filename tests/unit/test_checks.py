"""core/checks.py: a chain runs its named checks in order."""

from __future__ import annotations

import pytest

from tenant_platform.core.checks import Chain, Check, Found


def positive(n: int) -> str | None:
    return None if n > 0 else "not positive"


def even(n: int) -> str | None:
    return None if n % 2 == 0 else "odd"


CHAIN = Chain[int, str](Check("positive", positive), Check("even", even))


@pytest.mark.parametrize(
    ("subject", "first", "every"),
    [
        (2, None, []),
        (3, Found("even", "odd"), [Found("even", "odd")]),
        (-2, Found("positive", "not positive"), [Found("positive", "not positive")]),
        (-3, Found("positive", "not positive"), [Found("positive", "not positive"), Found("even", "odd")]),
    ],
)
def test_the_first_finding_is_the_first_check_in_order(
    subject: int, first: Found[str] | None, every: list[Found[str]]
) -> None:
    assert CHAIN.first(subject) == first
    assert CHAIN.every(subject) == every


def test_names_are_the_order_and_unique() -> None:
    assert CHAIN.names == ("positive", "even")
    with pytest.raises(ValueError, match="repeat"):
        Chain[int, str](Check("a", even), Check("a", positive))
