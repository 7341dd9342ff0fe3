"""Weather helper of the weather-forecast skill: prints current weather or a forecast as JSON.

Usage:
    python scripts/weather_helper.py current --location Beijing
    python scripts/weather_helper.py forecast --location London --days 3

Reads data/weather.json next to the scripts folder, so it works offline.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

DATA_FILE = Path(__file__).resolve().parent.parent / "data" / "weather.json"


def load_cities() -> dict:
    with DATA_FILE.open(encoding="utf-8") as handle:
        return json.load(handle)["cities"]


def find_city(cities: dict, query: str) -> str | None:
    wanted = " ".join(query.split()).casefold()
    for name, info in cities.items():
        names = [name, *info.get("aliases", [])]
        if wanted in (n.casefold() for n in names):
            return name
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Offline weather for a few cities.")
    sub = parser.add_subparsers(dest="command", required=True)
    current = sub.add_parser("current", help="current weather")
    current.add_argument("--location", "-l", required=True, help="city name, e.g. Beijing")
    forecast = sub.add_parser("forecast", help="forecast for the coming days")
    forecast.add_argument("--location", "-l", required=True, help="city name, e.g. Beijing")
    forecast.add_argument("--days", "-d", type=int, default=3, help="number of days, 1-7")
    args = parser.parse_args(argv)

    cities = load_cities()
    name = find_city(cities, args.location)
    if name is None:
        supported = ", ".join(cities)
        print(f"unknown location {args.location!r}; supported: {supported}", file=sys.stderr)
        return 2
    info = cities[name]
    if args.command == "current":
        result = {"location": name, "country": info["country"], **info["current"]}
    else:
        if not 1 <= args.days <= len(info["forecast"]):
            print(f"--days must be between 1 and {len(info['forecast'])}", file=sys.stderr)
            return 2
        result = {
            "location": name,
            "country": info["country"],
            "days": args.days,
            "forecast": info["forecast"][: args.days],
        }
    print(json.dumps(result, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
