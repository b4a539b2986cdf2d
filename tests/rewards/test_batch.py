"""verify_batch: order, parallelism and errors."""

from __future__ import annotations

import pytest

from rewards import Verdict, get_verifier, verify_batch


def _inputs(count: int) -> tuple[list[str], list[str]]:
    responses = [f"#### {i if i % 3 else i + 1}" for i in range(count)]
    references = [str(i) for i in range(count)]
    return responses, references


def _expected(count: int) -> list[float]:
    return [0.0 if i % 3 == 0 else 1.0 for i in range(count)]


def test_small_batches_run_serially_in_order() -> None:
    responses, references = _inputs(10)
    verdicts = verify_batch("gsm8k", responses, references)
    assert [v.score for v in verdicts] == _expected(10)
    assert [v.extracted for v in verdicts] == [r.split()[-1] for r in responses]


@pytest.mark.parametrize("workers", [1, 2])
def test_pool_keeps_input_order(workers: int) -> None:
    responses, references = _inputs(203)
    verdicts = verify_batch(
        get_verifier("math"), responses, references, num_workers=workers, serial_below_s=0.0
    )
    assert [v.score for v in verdicts] == _expected(203)
    assert all(isinstance(v, Verdict) for v in verdicts)


def test_pool_with_symbolic_answers() -> None:
    responses = ["\\boxed{(x+1)^2}", "\\boxed{x^2+1}"] * 12
    references = ["x^2+2x+1"] * 24
    verdicts = verify_batch("math", responses, references, num_workers=2, serial_below_s=0.0)
    assert [v.score for v in verdicts] == [1.0, 0.0] * 12


def test_unpicklable_verifier_falls_back_to_serial() -> None:
    class Local:  # a local class cannot be pickled
        name = "local"

        def verify(self, response: str, reference: str) -> Verdict:
            return Verdict(float(response == reference))

    verdicts = verify_batch(Local(), ["a", "b"] * 30, ["a"] * 60, serial_below_s=0.0)
    assert [v.score for v in verdicts] == [1.0, 0.0] * 30


def test_errors() -> None:
    with pytest.raises(ValueError, match="2 responses but 1 references"):
        verify_batch("gsm8k", ["a", "b"], ["1"])
    with pytest.raises(ValueError, match="num_workers"):
        verify_batch("gsm8k", ["a"], ["1"], num_workers=0)
    with pytest.raises(ValueError, match="reference"):
        verify_batch("gsm8k", ["#### 1"], [""])


def test_empty_batch() -> None:
    assert verify_batch("gsm8k", [], []) == []


class _Pid:
    """Reports which process verified each item (module level, so it pickles)."""

    name = "pid"

    def verify(self, response: str, reference: str) -> Verdict:
        import os

        return Verdict(1.0, str(os.getpid()))


def test_pool_spreads_work_over_processes() -> None:
    import os

    verdicts = verify_batch(_Pid(), ["x"] * 100, ["y"] * 100, num_workers=2, serial_below_s=0.0)
    pids = [v.extracted for v in verdicts]
    assert set(pids[:16]) == {str(os.getpid())}  # the probe runs here
    assert str(os.getpid()) not in pids[16:]  # the rest in the pool
    assert len(set(pids[16:])) == 2  # on both workers
