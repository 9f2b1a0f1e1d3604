"""Stand-in systemctl: restart|start|stop|is-active [--quiet] UNIT, units from units.json beside it."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
STATE = HERE / "state"


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, IndexError):
        return False


def pid_of(unit):
    p = STATE / f"{unit}.pid"
    try:
        return int(p.read_text())
    except (FileNotFoundError, ValueError):
        return None


def stop(unit):
    pid = pid_of(unit)
    if pid and alive(pid):
        os.kill(pid, signal.SIGTERM)
        end = time.monotonic() + 5
        while alive(pid) and time.monotonic() < end:
            time.sleep(0.02)
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
    (STATE / f"{unit}.pid").unlink(missing_ok=True)


def start(unit, units):
    if unit not in units:
        print(f"Failed to start {unit}.service: Unit {unit}.service not found.", file=sys.stderr)
        sys.exit(5)
    out = open(STATE / f"{unit}.out", "ab")
    p = subprocess.Popen(units[unit], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                         start_new_session=True, close_fds=True)
    (STATE / f"{unit}.pid").write_text(str(p.pid))


def reload():
    """daemon-reload: units written into the directory named by ``unit_dir`` (beside this file) join the known
    ones, run by their ExecStart= as systemd would."""
    with open(STATE / "calls.log", "a") as f:
        f.write("daemon-reload -\n")
    where = HERE / "unit_dir"
    units = json.loads((HERE / "units.json").read_text())
    if where.exists():
        for p in Path(where.read_text().strip()).glob("*.service"):
            for line in p.read_text().splitlines():
                if line.startswith("ExecStart="):
                    units[p.stem] = line.split("=", 1)[1].split()
    (HERE / "units.json").write_text(json.dumps(units, indent=1))


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if args == ["daemon-reload"]:
        reload()
        return
    verb, unit = args[0], args[1]
    units = json.loads((HERE / "units.json").read_text())
    with open(STATE / "calls.log", "a") as f:
        f.write(f"{verb} {unit}\n")
    if verb == "restart":
        stop(unit)
        start(unit, units)
    elif verb == "start":
        if not (pid_of(unit) and alive(pid_of(unit))):
            start(unit, units)
    elif verb == "stop":
        stop(unit)
    elif verb == "is-active":
        ok = bool(pid_of(unit) and alive(pid_of(unit)))
        if "--quiet" not in sys.argv:
            print("active" if ok else "inactive")
        sys.exit(0 if ok else 3)
    else:
        print(f"stand-in systemctl: unknown verb {verb}", file=sys.stderr)
        sys.exit(1)


main()
