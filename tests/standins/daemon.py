"""Stand-in for open5gs-{hss,pcrf,sgwu,upf,sgwc,smf,mme}d, srsepc and srsenb: daemon.py KIND CONFIG."""
import configparser
import re
import signal
import socket
import sys
import time

import yaml

kind, config = sys.argv[1], sys.argv[2]


def fail(msg):
    print(f"[{kind}] FATAL: {msg}", flush=True)
    sys.exit(1)


def dig(doc, *path):
    for p in path:
        if isinstance(p, int):
            if not isinstance(doc, list) or len(doc) <= p:
                fail(f"{config}: missing {'.'.join(map(str, path))}")
        elif not isinstance(doc, dict) or p not in doc:
            fail(f"{config}: missing {'.'.join(map(str, path))}")
        doc = doc[p]
    return doc


running = True


def s1_listener(addr, error):
    """A TCP listener on addr:36412 (standing in for the MME's SCTP socket); ``error`` words a bind failure."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        srv.bind((addr, 36412))
    except OSError as exc:
        fail(error.format(addr=addr, exc=exc))
    srv.listen(8)
    srv.settimeout(0.1)
    return srv


def _term(*_):
    global running
    running = False


signal.signal(signal.SIGTERM, _term)
signal.signal(signal.SIGINT, _term)

if kind in ("hostapd", "wpa_supplicant"):
    text = open(config).read()
    keys = dict(line.strip().split("=", 1) for line in text.splitlines()
                if "=" in line and not line.lstrip().startswith("#"))
    need = (("interface", "ssid", "channel", "hw_mode", "wpa_passphrase", "country_code") if kind == "hostapd"
            else ("ctrl_interface", "ssid", "psk", "key_mgmt"))
    for key in need:
        if key not in keys:
            fail(f"{config}: {key} missing")
    print(f"[{kind}] started with ssid {keys['ssid']}", flush=True)
    while running:
        time.sleep(0.1)
    sys.exit(0)

if kind == "srsenb":
    cp = configparser.ConfigParser(inline_comment_prefixes=("#", ";"))
    if not cp.read(config):
        fail(f"cannot read {config}")
    for key in ("mcc", "mnc", "mme_addr", "s1c_bind_addr", "n_prb"):
        if not cp.has_option("enb", key):
            fail(f"{config}: [enb] {key} missing")
    for key in ("rr_config", "sib_config", "rb_config"):
        try:
            open(cp.get("enb_files", key)).close()
        except OSError as exc:
            fail(f"{key}: {exc}")
    logpath = cp.get("log", "filename")
    log = open(logpath, "w", buffering=1)            # srslog truncates its file at start
    print("---  Software Radio Systems LTE eNodeB  ---", flush=True)
    log.write("==== eNodeB started ===\n")
    # The S1 Setup Request carries the eNB's PLMN and TAC (rr.conf's tac, in hex there).
    tac = int(re.search(r"tac = (0x[0-9A-Fa-f]+)", open(cp.get("enb_files", "rr_config")).read()).group(1), 16)
    mme, bind = cp.get("enb", "mme_addr"), cp.get("enb", "s1c_bind_addr")
    s = None
    end = time.monotonic() + 10
    while running and s is None:
        try:
            s = socket.create_connection((mme, 36412), timeout=1, source_address=(bind, 0))
        except OSError as exc:
            if time.monotonic() > end:
                fail(f"S1 connection to {mme}:36412 failed: {exc}")
            time.sleep(0.1)
    log.write(f"S1 connected to {mme}\n")
    print(f"[srsenb] S1 connected to {mme}", flush=True)
    s.sendall(f"S1SETUP {cp.get('enb', 'mcc')}{cp.get('enb', 'mnc')} {tac}\n".encode())
    s.settimeout(5)
    reply = s.recv(200).decode().strip()
    # srsenb/src/stack/s1ap/s1ap.cc's lines for each outcome
    if reply == "OK":
        log.write('[S1AP   ] [I] Proc "S1Setup" - S1Setup procedure completed successfully\n')
    else:
        log.write(f"[S1AP   ] [E] S1 Setup Failure. Cause: {reply.removeprefix('FAIL ')}\n")
        print(f"S1 Setup Failure. Cause: {reply.removeprefix('FAIL ')}", flush=True)
    while running:
        time.sleep(0.1)
    sys.exit(0)

if kind == "srsepc":
    # What srsepc does that mplab relies on: read epc.conf and user_db.csv (10 columns), accept the eNB on
    # mme_bind_addr:36412 (TCP here, SCTP in srsepc) and log the S1 Setup exchange, and on exit write the
    # CSV back with each subscriber's SQN advanced (srsepc/src/hss/hss.cc write_db_file).
    cp = configparser.ConfigParser()
    if not cp.read(config):
        fail(f"cannot read {config}")
    db = cp.get("hss", "db_file")
    lines = open(db).read().splitlines()
    rows = [ln.split(",") for ln in lines if ln and not ln.startswith("#")]
    if any(len(r) != 10 for r in rows):
        fail("Error parsing UE database. Wrong number of columns in user database CSV.")
    log = open(cp.get("log", "filename"), "a", buffering=1)
    log.write("HSS Initialized.\n")
    srv = s1_listener(cp.get("mme", "mme_bind_addr"), "Error binding SCTP socket {addr}: {exc}")
    print("[srsepc] SP-GW Initialized.", flush=True)
    peers = []
    while running:
        try:
            c, _ = srv.accept()
        except TimeoutError:
            continue
        peers.append(c)
        c.settimeout(5)
        c.recv(200)
        log.write("[MME ] [I] Received S1 Setup Request.\n[MME ] [I] Sending S1 Setup Response\n")
        c.sendall(b"OK\n")
    with open(db, "w") as f:
        f.write("# written by srsepc on exit\n")
        for r in rows:
            r[7] = "%012x" % (int(r[7], 16) + 32)
            f.write(",".join(r) + "\n")
    sys.exit(0)

with open(config) as f:
    doc = yaml.safe_load(f)
section = {"hss": "hss", "pcrf": "pcrf", "sgwu": "sgwu", "upf": "upf", "sgwc": "sgwc", "smf": "smf",
           "mme": "mme"}[kind]
dig(doc, section)
logger = dig(doc, "logger", "file")
logpath = logger["path"] if isinstance(logger, dict) else logger
log = open(logpath, "a", buffering=1)
log.write(f"[app] INFO: Configuration: '{config}'\n")
srv = None
if kind == "mme":
    s1ap = dig(doc, "mme", "s1ap")
    addr = s1ap["server"][0]["address"] if isinstance(s1ap, dict) else s1ap[0]["addr"]
    dig(doc, "mme", "tai")
    dig(doc, "mme", "gummei")
    srv = s1_listener(addr, "s1ap_server() [{addr}]:36412 bind failed: {exc}")
    log.write(f"[mme] INFO: s1ap_server() [{addr}]:36412\n")
print(f"[{kind}] started", flush=True)
peers = []
while running:
    if srv is None:
        time.sleep(0.1)
        continue
    for p, pip in list(peers):              # an eNB that went away is removed, as Open5GS logs it
        try:
            p.settimeout(0)
            gone = p.recv(1) == b""
        except (TimeoutError, BlockingIOError):
            gone = False
        except OSError:
            gone = True
        if gone:
            peers.remove((p, pip))
            log.write(f"[mme] INFO: eNB-S1[{pip}] connection refused!!!\n")
            log.write(f"[mme] INFO: [Removed] Number of eNBs is now {len(peers)}\n")
    try:
        c, (ip, port) = srv.accept()
    except TimeoutError:
        continue
    peers.append((c, ip))
    log.write(f"[mme] INFO: eNB-S1 accepted[{ip}]:{port} in s1_path module\n")
    log.write(f"[mme] INFO: [Added] Number of eNBs is now {len(peers)}\n")
    # S1 Setup: Open5GS answers when a served TAI has the eNB's TAC, else logs the failure
    # (src/mme/s1ap-handler.c) and refuses with cause unknown-PLMN.
    c.settimeout(5)
    _, _plmn, enb_tac = c.recv(200).decode().split()
    tais = dig(doc, "mme", "tai")
    tais = tais if isinstance(tais, list) else [tais]
    served = set()
    for t in tais:
        served |= set(t["tac"] if isinstance(t["tac"], list) else [t["tac"]])
    if int(enb_tac) in served:
        c.sendall(b"OK\n")
    else:
        log.write("[mme] WARNING: S1-Setup failure: (../src/mme/s1ap-handler.c:245)\n"
                  "[mme] WARNING:     Cannot find Served TAI. Check 'mme.tai' configuration "
                  "(../src/mme/s1ap-handler.c:246)\n")
        c.sendall(b"FAIL unknown-PLMN\n")
sys.exit(0)
