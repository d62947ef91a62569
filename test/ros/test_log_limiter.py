"""LogLimiter: untrusted text reaches the log as bounded, escaped lines, at a capped rate."""

from __future__ import annotations

from vision_nodes.ros.process.log_limiter import LogLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _limiter(period: float = 5.0, burst: int = 10):
    lines: list[str] = []
    clock = Clock()
    return LogLimiter(lines.append, period_s=period, burst=burst, limit=300,
                      clock=clock), lines, clock


def test_a_repeated_message_goes_out_once_per_period():
    log, lines, clock = _limiter()
    assert log('skipping image: bad') and not log('skipping image: bad')
    clock.now = 4.9
    assert not log('skipping image: bad')
    clock.now = 5.0
    assert log('skipping image: bad')
    assert lines[-1] == 'skipping image: bad (2 similar or repeated messages suppressed ' \
                        'before this one)'


def test_many_distinct_messages_are_capped_overall():
    """1000 distinct encodings in one period: at most ``burst`` lines, the rest counted."""
    log, lines, clock = _limiter(burst=10)
    for i in range(1000):
        log(f"unsupported image encoding 'enc{i}'")
    assert len(lines) == 10
    clock.now = 5.0
    log('next')
    assert lines[-1] == 'next (990 similar or repeated messages suppressed before this one)'


def test_long_and_forging_text_becomes_one_bounded_escaped_line():
    log, lines, _ = _limiter()
    log('x' * 1_000_000)
    log("encoding 'bad\n[ERROR] [1.0] [vision_node]: forged\x1b[31m'")
    assert len(lines[0]) < 400 and lines[0].endswith('chars)')
    assert '\n' not in lines[1] and '\x1b' not in lines[1]
    assert '\\x0a[ERROR]' in lines[1] and '\\x1b[31m' in lines[1]
