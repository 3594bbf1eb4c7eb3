"""Temperatures the host's sensors report: hwmon in sysfs as the probe read it, or pasted
`sensors` (lm-sensors).

hwmon (Documentation/hwmon/sysfs-interface.rst): /sys/class/hwmon/hwmonN/name, tempK_input,
tempK_max, tempK_crit, tempK_label, in millidegrees Celsius. `sensors` (lm-sensors
prog/sensors/chips.c print_chip_temp) prints a chip's name, "Adapter: ...", then per sensor
"Package id 0:  +45.0°C  (high = +80.0°C, crit = +100.0°C)", its limits sometimes on an
indented line of their own; -f prints °F.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from doctor.core.capture import Capture

HWMON = "/sys/class/hwmon"
# A reading no sensor gives: an unconnected input (127, -128) or a sentinel (-273.1).
PLAUSIBLE = (-60.0, 126.0)
MIN_LIMIT = 20.0  # a "high = +0.0°C" is a limit the chip does not set


@dataclass(frozen=True)
class Temperature:
    chip: str
    label: str
    celsius: float
    high: float | None  # the chip's warning limit (max, high)
    crit: float | None


def _limit(value: float | None) -> float | None:
    return value if value is not None and value >= MIN_LIMIT else None


def _plausible(value: float) -> bool:
    return PLAUSIBLE[0] <= value <= PLAUSIBLE[1]


def from_hwmon(cap: Capture) -> tuple[Temperature, ...]:
    out = []
    for path in cap.paths("files", HWMON + "/"):
        if not path.endswith("_input") or "/temp" not in path:
            continue
        base = path[: -len("_input")]
        folder = base.rsplit("/", 1)[0]

        def milli(suffix: str, base: str = base) -> float | None:
            text = cap.file(base + suffix)
            try:
                return int(str(text).strip()) / 1000.0 if isinstance(text, str) else None
            except ValueError:
                return None

        value = milli("_input")
        if value is None or not _plausible(value):
            continue
        chip = cap.file(folder + "/name")
        label = cap.file(base + "_label")
        out.append(
            Temperature(
                chip.strip() if isinstance(chip, str) else folder.rsplit("/", 1)[-1],
                label.strip() if isinstance(label, str) else base.rsplit("/", 1)[-1],
                value,
                _limit(milli("_max")),
                _limit(milli("_crit")),
            )
        )
    return tuple(out)


_READING = re.compile(
    r"^(?P<label>[^:()]{1,64}):\s+(?P<value>[+-]?\d+(?:\.\d+)?)\s*(?:Â?°|º)?\s?(?P<unit>[CF])\b(?P<rest>.*)$"
)
_LIMIT = re.compile(r"\b(?P<name>high|crit|max|emerg)\s*=\s*(?P<value>[+-]?\d+(?:\.\d+)?)")


def _celsius(value: str, fahrenheit: bool) -> float:
    return (float(value) - 32) * 5 / 9 if fahrenheit else float(value)


def parse_sensors(text: str) -> tuple[Temperature, ...]:
    out: list[Temperature] = []
    chip = "?"
    reading: Temperature | None = None
    fahrenheit = False
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.strip():
            continue
        m = _READING.match(line.strip())
        if m:
            if reading is not None:
                out.append(reading)
            fahrenheit = m.group("unit") == "F"
            limits = {
                lm.group("name"): _celsius(lm.group("value"), fahrenheit)
                for lm in _LIMIT.finditer(m.group("rest"))
            }
            value = _celsius(m.group("value"), fahrenheit)
            reading = None
            if _plausible(value):
                high = limits.get("high", limits.get("max"))
                crit = limits.get("crit", limits.get("emerg"))
                reading = Temperature(
                    chip, m.group("label").strip(), value, _limit(high), _limit(crit)
                )
        elif line.startswith((" ", "\t")) and "(" in line:
            if reading is None:
                continue
            for lm in _LIMIT.finditer(line):  # limits continued on an indented line
                limit = _limit(_celsius(lm.group("value"), fahrenheit))
                if lm.group("name") in ("crit", "emerg") and reading.crit is None:
                    reading = replace(reading, crit=limit)
                elif lm.group("name") in ("high", "max") and reading.high is None:
                    reading = replace(reading, high=limit)
        elif ":" not in line and not line.startswith((" ", "\t")):
            if reading is not None:
                out.append(reading)
            reading = None
            chip = line.strip()
    if reading is not None:
        out.append(reading)
    return tuple(out)
