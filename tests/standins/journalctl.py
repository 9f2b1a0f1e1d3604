"""Stand-in journalctl: -n N -u UNIT prints the last N lines the unit wrote."""
import sys
from pathlib import Path

STATE = Path(__file__).resolve().parent / "state"
args = sys.argv[1:]
n = int(args[args.index("-n") + 1])
unit = args[args.index("-u") + 1]
p = STATE / f"{unit}.out"
lines = p.read_text(errors="replace").splitlines() if p.exists() else []
print("\n".join(lines[-n:]) if lines else "-- No entries --")
