"""The tests' one way to wait: for a condition, never for a fixed time (issue 56).

:func:`wait_until` polls a function (tenacity's retry on its result) until it returns a value
that is not falsy (or, with ``until``, one that ``until`` accepts), and returns that value; when
``timeout_s`` passes first it fails the test with an AssertionError naming what was awaited
and the last value seen (or the last error, with ``errors``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import tenacity

T = TypeVar("T")


def wait_until(check: Callable[[], T], timeout_s: float = 30.0, what: str = "", interval_s: float = 0.1,
               until: Callable[[T], bool] = bool, errors: tuple[type[BaseException], ...] = ()) -> T:
    """``check()`` again every ``interval_s`` seconds until ``until`` accepts its value (default:
    a truthy value), at most ``timeout_s`` seconds; returns that value. ``errors``: exception
    types ``check`` may raise meanwhile (a server not up yet), retried like a refused value.
    Raises AssertionError ``"<what> not reached after N s (last: ...)"``."""
    retry = tenacity.retry_if_result(lambda value: not until(value))
    if errors:
        retry = retry | tenacity.retry_if_exception_type(errors)

    def failed(state: tenacity.RetryCallState):
        outcome = state.outcome
        last = repr(outcome.exception()) if outcome is not None and outcome.failed else \
            repr(outcome.result() if outcome is not None else None)
        raise AssertionError(f"{what or getattr(check, '__name__', 'the condition')} not reached after "
                             f"{timeout_s:.0f} s (last: {last[:500]})")

    return tenacity.Retrying(stop=tenacity.stop_after_delay(timeout_s), wait=tenacity.wait_fixed(interval_s),
                             retry=retry, retry_error_callback=failed, reraise=False)(check)
