"""``python -m vsp.vertex_emulator --state-dir D [--port P] [--set name=value ...]``."""

from __future__ import annotations

import argparse
import json

from vsp.vertex_emulator import config, server


def main(argv: list[str] | None = None) -> None:
    """Parses arguments and serves until Ctrl-C or SIGTERM."""
    parser = argparse.ArgumentParser(
        prog="python -m vsp.vertex_emulator",
        description="Serve the local Vertex AI emulator until Ctrl-C or SIGTERM.",
    )
    parser.add_argument("--state-dir", required=True, help="directory holding all state")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a setting, e.g. provisioning_delay_seconds=0.5 (JSON value)",
    )
    args = parser.parse_args(argv)
    settings = None
    if args.set:
        changes = {}
        for item in args.set:
            name, _, value = item.partition("=")
            try:
                changes[name.strip()] = json.loads(value)
            except json.JSONDecodeError:
                parser.error(f"--set {item}: the value must be JSON (a number, true or false)")
        base = config.load_settings(args.state_dir) or config.EmulatorSettings()
        try:
            settings = base.replace(**changes)
        except ValueError as exc:
            parser.error(str(exc))
    server.serve(args.state_dir, args.host, args.port, settings)


if __name__ == "__main__":
    main()
