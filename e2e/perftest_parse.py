#!/usr/bin/env python3
"""Reads perftest's printed results, from perftest itself (ib_send_lat, ib_write_bw, ...) or from
rdma-run, which prints the same lines: the banner (the test line and its `key : value` lines), the
address and GID lines, and the result blocks: latency (#bytes #iterations t_min t_max t_typical
t_avg t_stdev 99% 99.9%) and bandwidth (#bytes #iterations BW peak BW average MsgRate).

    e2e/perftest_parse.py [FILE ...]            JSON of every test in the files (standard input without)
    e2e/perftest_parse.py --get KIND.FIELD [FILE ...]
                                                one figure, of the last row of that kind:
                                                latency.t_typical, bandwidth.bw_average, ...

The JSON: {"tests": [{"title", "banner", "addresses", "latency", "bandwidth", "latency_duration"}]},
one test per banner (a `... Test` line; what comes before any banner is a test without a title).
Rows: latency {bytes, iterations, t_min, t_max, t_typical, t_avg, t_stdev, p99, p99_9} in usec;
bandwidth {bytes, iterations, bw_peak, bw_average, msg_rate, unit} with unit MB/sec, MiB/sec
(perftest 24.07 on) or Gb/sec; latency_duration (-D) {bytes, iterations, t_avg, tps}. Addresses:
{side, lid, qpn, psn, rkey, vaddr, gid} (rkey and vaddr null when the line has none).

Written from perftest's formats (RESULT_LINE, RESULT_FMT*, REPORT_FMT*, BASIC_ADDR_FMT, RDMA_FMT,
PERF_GID_FMT in src/perftest_parameters.h and src/perftest_communication.h), as a parser keys on
them: a block starts at its header line (` #bytes ...`) and takes the rows under it until the
dashed line or the first line that is not a row. Standard library only.
"""

import json
import re
import sys

RULE = re.compile(r"^-{20,}\s*$")
TITLE = re.compile(r"^\s{8,}(\S.*\b(?:BW|Latency) Test)\s*$")
PAIR = re.compile(r"([A-Za-z][A-Za-z0-9_*.()/ -]*?)\s*:\s*([^\t]*?)\s*(?=\t|$)")
ADDRESS = re.compile(r"^\s*(local|remote) address:\s*LID (\S+) QPN (\S+) PSN (\S+)(?: OUT \S+)?(?: RKey (\S+) VAddr (\S+))?")
GID = re.compile(r"^\s*M?GID:\s*(\S+)")
LATENCY_HEADER = re.compile(r"^\s*#bytes\s+#iterations\s+t_min\[usec\]")
DURATION_HEADER = re.compile(r"^\s*#bytes\s+#iterations\s+t_avg\[usec\]\s+tps average")
BANDWIDTH_HEADER = re.compile(r"^\s*#bytes\s+#iterations\s+BW peak\[(MB|MiB|Gb)/sec\]\s+BW average\[(?:MB|MiB|Gb)/sec\]\s+MsgRate\[Mpps\]")

LATENCY_FIELDS = ["t_min", "t_max", "t_typical", "t_avg", "t_stdev", "p99", "p99_9"]
BANDWIDTH_FIELDS = ["bw_peak", "bw_average", "msg_rate"]
DURATION_FIELDS = ["t_avg", "tps"]


def number(text):
    """perftest's hex (0x..., or 0000 for zero) or decimal."""
    return int(text, 16)


def row(line, fields):
    """#bytes and #iterations, then the float [fields] (extra columns, CPU_Util, ignored); None when the line is not a row."""
    words = line.split()
    if len(words) < 2 + len(fields):
        return None
    try:
        r = {"bytes": int(words[0]), "iterations": int(words[1])}
        for name, word in zip(fields, words[2:]):
            r[name] = float(word)
    except ValueError:
        return None
    return r


def new_test(title=None):
    return {"title": title, "banner": {}, "addresses": [], "latency": [], "bandwidth": [], "latency_duration": []}


def parse(lines):
    tests = []
    test = None
    in_banner = False
    block = None  # (kind, fields, unit) while reading a block's rows

    def current():
        nonlocal test
        if test is None:
            test = new_test()
            tests.append(test)
        return test

    for raw in lines:
        line = raw.rstrip("\r\n")
        if block is not None:
            kind, fields, unit = block
            r = row(line, fields)
            if r is not None:
                if unit is not None:
                    r["unit"] = unit
                current()[kind].append(r)
                continue
            block = None
        if RULE.match(line):
            in_banner = False
            continue
        m = TITLE.match(line)
        if m:
            test = new_test(m.group(1))
            tests.append(test)
            in_banner = True
            continue
        if in_banner:
            for key, value in PAIR.findall(line):
                test["banner"][key.strip()] = value
            continue
        m = ADDRESS.match(line)
        if m:
            side, lid, qpn, psn, rkey, vaddr = m.groups()
            current()["addresses"].append({
                "side": side, "lid": number(lid), "qpn": number(qpn), "psn": number(psn),
                "rkey": number(rkey) if rkey else None, "vaddr": number(vaddr) if vaddr else None, "gid": None,
            })
            continue
        m = GID.match(line)
        if m and test is not None and test["addresses"] and test["addresses"][-1]["gid"] is None:
            test["addresses"][-1]["gid"] = m.group(1)
            continue
        if LATENCY_HEADER.match(line):
            block = ("latency", LATENCY_FIELDS, None)
        elif DURATION_HEADER.match(line):
            block = ("latency_duration", DURATION_FIELDS, None)
        else:
            m = BANDWIDTH_HEADER.match(line)
            if m:
                block = ("bandwidth", BANDWIDTH_FIELDS, m.group(1) + "/sec")
    return {"tests": tests}


def main(argv):
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__.strip())
        return 0
    get = None
    if argv[:1] == ["--get"]:
        if len(argv) < 2 or "." not in argv[1]:
            print("usage: perftest_parse.py [--get KIND.FIELD] [FILE ...]", file=sys.stderr)
            return 2
        get = argv[1]
        argv = argv[2:]
    lines = []
    if argv:
        for name in argv:
            try:
                with open(name, encoding="utf-8", errors="replace") as f:
                    lines.extend(f.readlines())
            except OSError as e:
                print(f"perftest_parse.py: cannot read {name}: {e.strerror}", file=sys.stderr)
                return 2
    else:
        lines = sys.stdin.readlines()
    parsed = parse(lines)
    if get is None:
        json.dump(parsed, sys.stdout, indent=1)
        print()
        return 0
    kind, field = get.split(".", 1)
    rows = [r for t in parsed["tests"] for r in t.get(kind, [])]
    if not rows or field not in rows[-1]:
        print(f"perftest_parse.py: no {kind} row with {field}", file=sys.stderr)
        return 1
    print(rows[-1][field])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
