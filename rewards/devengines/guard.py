"""Run one engine and take it down with us: `python -m rewards.devengines.guard --grace S -- COMMAND...`.

The launching process keeps the write end of our stdin and never writes to it, so EOF on stdin means it
is gone, however it died (even SIGKILL). EOF, SIGTERM or SIGINT stop the engine: SIGTERM first, SIGKILL
to the whole process group once the grace period is over. We lead our own process group, so the
engine and anything it spawns are in it.
"""

import argparse
import os
import signal
import subprocess
import sys
import threading


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m rewards.devengines.guard")
    parser.add_argument("--grace", type=float, default=30.0)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    args.command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not args.command:
        parser.error("no command given")
    return args


def _on_eof(stop: threading.Event) -> None:
    while os.read(sys.stdin.fileno(), 4096):
        pass
    stop.set()


def _on_exit(child: subprocess.Popen, stop: threading.Event) -> None:
    child.wait()
    stop.set()


def _shut_down(child: subprocess.Popen, grace: float) -> None:
    child.terminate()
    try:
        child.wait(grace)
    except subprocess.TimeoutExpired:
        os.killpg(0, signal.SIGKILL)


def main(argv: list[str]) -> int:
    args = _parse(argv)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    child = subprocess.Popen(args.command, stdin=subprocess.DEVNULL)
    threading.Thread(target=_on_eof, args=(stop,), daemon=True).start()
    threading.Thread(target=_on_exit, args=(child, stop), daemon=True).start()
    stop.wait()
    if child.poll() is None:
        _shut_down(child, args.grace)
    code = child.wait()
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
