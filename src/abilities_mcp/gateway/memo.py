"""Functions of an unhashable value (an upstream's tool list, a tool's input schema) memoized by the value's identity:
what a call needs from them is worked out once per listing, not on every call."""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")


def by_identity(kept: int) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Memoize a function by the identity of its first argument (and the value of the rest, which must hash), the
    argument itself held with the answer so its id is never reused while the answer is kept; at most `kept`
    answers, the oldest dropped first. The argument must not be changed afterwards: the listings it serves are
    never changed, only replaced."""

    def decorate(function: Callable[..., T]) -> Callable[..., T]:
        answers: dict[tuple[int, tuple[Hashable, ...]], tuple[Any, T]] = {}

        @functools.wraps(function)
        def memoized(value: Any, *rest: Hashable) -> T:
            key = (id(value), rest)
            found = answers.get(key)
            if found is not None and found[0] is value:
                return found[1]
            answer = function(value, *rest)
            if len(answers) >= kept:
                del answers[next(iter(answers))]
            answers[key] = (value, answer)
            return answer

        return memoized

    return decorate
