"""Times as Slurm's ``sacct --starttime/--endtime`` spell them, in local time.

``2026-11-20``, ``2026-11-20T10:00[:SS]``, ``11/20[/26]``, ``10:00[:SS]`` (today), ``today``,
``tomorrow``, ``midnight``, ``noon``, ``fika`` (15:00), ``teatime`` (16:00), ``now``,
``now-1days``, ``now+2hours`` (units: seconds, the default, minutes, hours, days, weeks;
abbreviations work: ``now-90min``, ``now-1d``). Pure: the caller passes ``now``
(``datetime.now()``), so tests need no clock.

A time to wait for (sbatch's ``--begin``, ``--deadline``: ``future=True``) reads a time of day
already past as tomorrow's and a month and day already past as next year's, as Slurm's
``parse_time`` does for them; a time to look back to (sacct's ``-S``/``-E``) reads them as
today's and this year's.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

FORMATS = (
    "YYYY-MM-DD[THH:MM[:SS]], MM/DD[/YY], HH:MM[:SS], today, tomorrow, midnight, noon, "
    "now[+-N[days|hours|...]]"
)
_TIMES_OF_DAY = {"midnight": 0, "noon": 12, "fika": 15, "teatime": 16}
_RELATIVE = re.compile(r"^now(?:([+-])(\d+)([a-z]*))?$")
_UNITS = {"seconds": 1, "minutes": 60, "hours": 3600, "days": 86400, "weeks": 604800}
_ISO = re.compile(r"^(\d{4})-(\d{2})-(\d{2})(?:[t ](\d{1,2}):(\d{2})(?::(\d{2}))?)?$")
_US_DATE = re.compile(r"^(\d{1,2})/(\d{1,2})(?:/(\d{2}|\d{4}))?$")
_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?$")


def _unit_seconds(unit: str, text: str) -> int:
    if not unit:
        return 1
    if unit.startswith("m") and len(unit) == 1:  # Slurm reads a bare "m" as minutes
        return 60
    for name, seconds in _UNITS.items():
        if name.startswith(unit) or (unit.endswith("s") and name.startswith(unit[:-1])):
            return seconds
    raise ValueError(f"bad time {text!r}: unknown unit {unit!r} (hint: {FORMATS})")


def _ahead(at: datetime, now: datetime, future: bool) -> datetime:
    """A time of day: tomorrow's when waiting for it (``future``) and today's is past."""
    return at + timedelta(days=1) if future and at < now else at


def parse_time(text: str, now: datetime, *, future: bool = False) -> datetime:
    """The moment ``text`` names, as a naive local datetime like ``now`` (``.timestamp()``
    turns it into Unix time, daylight saving included); with ``future``, a time of day or a
    day of the year already past names its next one."""
    spec = text.strip().lower()
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    try:
        if spec in _TIMES_OF_DAY:
            return _ahead(midnight.replace(hour=_TIMES_OF_DAY[spec]), now, future)
        if spec == "today":
            return midnight
        if spec == "tomorrow":
            return midnight + timedelta(days=1)
        if match := _RELATIVE.match(spec):
            sign, count, unit = match.groups()
            if sign is None:
                return now
            delta = timedelta(seconds=int(count) * _unit_seconds(unit, text))
            return now - delta if sign == "-" else now + delta
        if match := _ISO.match(spec):
            y, mo, d, h, mi, s = (int(g) if g else 0 for g in match.groups())
            return now.replace(year=y, month=mo, day=d, hour=h, minute=mi, second=s, microsecond=0)
        if match := _US_DATE.match(spec):
            mo, d = int(match[1]), int(match[2])
            year = now.year if match[3] is None else int(match[3])
            year += 2000 if year < 100 else 0
            day = midnight.replace(year=year, month=mo, day=d)
            if future and match[3] is None and day < midnight:
                day = day.replace(year=year + 1)
            return day
        if match := _CLOCK.match(spec):
            h, mi, s = int(match[1]), int(match[2]), int(match[3] or 0)
            return _ahead(midnight.replace(hour=h, minute=mi, second=s), now, future)
    except ValueError as exc:  # a month 13, an hour 25, February 29th next year
        if str(exc).startswith("bad time"):
            raise
        raise ValueError(f"bad time {text!r}: {exc} (hint: {FORMATS})") from None
    except OverflowError:  # now+99999999999days
        raise ValueError(f"bad time {text!r}: out of range (hint: {FORMATS})") from None
    raise ValueError(f"bad time {text!r} (hint: {FORMATS})")
